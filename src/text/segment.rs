//! Segmentation: jieba-rs cuts a text into words, and the token filter keeps those that can
//! become features ([`Segmenter`]).

use super::filter::TokenFilter;
use super::lexicon::Lexicon;
use crate::simhash::feature_hash;
use jieba_rs::Jieba;

/// How the token loop identifies a feature: dictionary words by jieba's word id (their hash and
/// IDF come from the lexicon), other words by their feature hash.
#[derive(Debug, Clone, Copy)]
pub enum WordKey {
    Dict(u32),
    Other(u64),
}

/// jieba-rs segmentation followed by the token filter: the words of a text that can become
/// features, in order, each with its [`WordKey`]. Without a part-of-speech filter, dictionary
/// words come with their jieba word id and one bit of the [`Lexicon`] says whether each is a
/// feature, so the hot path neither classifies nor hashes them.
pub struct Segmenter {
    jieba: Jieba,
    filter: TokenFilter,
    /// The filter's verdict, feature hash and IDF of every dictionary word, by jieba word id.
    lexicon: Lexicon,
    hmm: bool,
    pos_filter: Vec<String>,
}

impl Segmenter {
    pub fn new(
        jieba: Jieba,
        filter: TokenFilter,
        lexicon: Lexicon,
        hmm: bool,
        pos_filter: Vec<String>,
    ) -> Self {
        Segmenter {
            jieba,
            filter,
            lexicon,
            hmm,
            pos_filter,
        }
    }

    pub fn jieba(&self) -> &Jieba {
        &self.jieba
    }

    pub fn lexicon(&self) -> &Lexicon {
        &self.lexicon
    }

    pub fn filter(&self) -> &TokenFilter {
        &self.filter
    }

    /// Forgets the lexicon: every token is then decided from its string (the reference path).
    pub fn without_word_ids(&mut self) {
        self.lexicon = Lexicon::default();
    }

    /// Calls `emit(word, key)` with every kept word of `text`, in order.
    #[inline]
    pub fn for_each_word<'a>(&'a self, text: &'a str, mut emit: impl FnMut(&'a str, WordKey)) {
        // The key of `word` if it is a feature, decided from the string. It may be a dictionary
        // word (jieba's HMM can produce those too): `term_stats` merges such terms into their
        // dictionary entry, once per distinct word.
        let from_string = |word: &str| {
            if !self.filter.keep_class(word) {
                return None;
            }
            let hash = feature_hash(word);
            (!self.filter.is_stopword(hash)).then_some(WordKey::Other(hash))
        };
        if self.pos_filter.is_empty() {
            // Dictionary words come with their id, and one bit of the lexicon says whether each
            // is a feature. The rest (HMM words, numbers, Latin, punctuation) are classified and
            // hashed from the string.
            self.jieba.cut_with_ids(text, self.hmm, |word, id| {
                let key = match id.map(|id| (id, self.lexicon.is_feature(id))) {
                    Some((id, Some(true))) => Some(WordKey::Dict(id)),
                    Some((_, Some(false))) => None,
                    // No id, or one the lexicon does not know.
                    _ => from_string(word),
                };
                if let Some(key) = key {
                    emit(word, key);
                }
            });
        } else {
            for tag in self.jieba.tag(text, self.hmm) {
                if self
                    .pos_filter
                    .iter()
                    .any(|p| tag.tag.starts_with(p.as_str()))
                {
                    if let Some(key) = from_string(tag.word) {
                        emit(tag.word, key);
                    }
                }
            }
        }
    }
}
