//! Text to features: `clean` (markup, width, boilerplate), `segment` (jieba words, stop words and
//! token classes), `weigh` (TF-IDF with title weighting).

pub mod clean;
pub mod lexicon;
pub mod segment;
pub mod weigh;
