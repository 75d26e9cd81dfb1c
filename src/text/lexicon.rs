//! Per-dictionary-word facts the token loop needs, indexed by jieba's word id.
//!
//! Most tokens of Chinese news are dictionary words, and jieba already knows which one it cut
//! (`Jieba::cut_with_ids`). Deciding "is this a feature, and what is its hash" from the id is one
//! bit test and, for features, one load — instead of classifying the token's characters, hashing
//! its bytes and probing the stop-word set for every token. Everything here is derived from the
//! very same functions the string path uses (`TokenFilter::keep`, `feature_hash`), so both paths
//! give identical features; `tests::matches_string_path` checks that for every dictionary word.

use super::filter::TokenFilter;
use super::image::{ImageError, ImageReader, ImageWriter};
use crate::simhash::feature_hash;
use jieba_rs::Jieba;
use rustc_hash::FxHashSet;

/// What the weight step needs of one dictionary word that is a feature.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WordFacts {
    /// `feature_hash(word)`.
    pub hash: u64,
    /// The word's IDF, exactly as the IDF table (or its fallback for absent words) gives it.
    pub idf: f64,
}

/// Feature facts of every dictionary word.
#[derive(Debug, Clone, Default)]
pub struct Lexicon {
    /// Bit `id` is set when word `id` is a feature (its class is kept, it is not a stop word).
    /// ~45 KB for jieba's 350k words: stays in cache while the token loop runs, which only needs
    /// this bit; `facts` is read once per distinct word of an article, by the weight step.
    keep: Vec<u64>,
    /// Bit `id` is set when the tables know word `id` (always, unless jieba and the dictionary
    /// text disagree).
    known: Vec<u64>,
    /// Hash and IDF of word `id` (zero for words that are not features; never read for them).
    facts: Vec<WordFacts>,
    /// Bit `id` is set when word `id` is a feature the dictionary tags as a proper name (an
    /// entity of [`crate::slots`]).
    entity: Vec<u64>,
}

impl Lexicon {
    /// Builds the tables for the words of `dict` (jieba's `word freq [tag]` lines), which must be
    /// the dictionary `jieba` was loaded from. A word id the tables do not cover makes
    /// `is_feature` answer `None`, and its tokens take the string path.
    pub fn build(
        jieba: &Jieba,
        dict: &str,
        filter: &TokenFilter,
        idf: impl Fn(u64) -> f64,
    ) -> Lexicon {
        let words = words_by_id(jieba, dict);
        let mut lexicon = Lexicon {
            keep: vec![0; words.len().div_ceil(64)],
            known: vec![0; words.len().div_ceil(64)],
            facts: vec![WordFacts::default(); words.len()],
            entity: vec![0; words.len().div_ceil(64)],
        };
        for (id, word) in words.iter().enumerate() {
            let Some(word) = word else {
                continue;
            };
            lexicon.known[id / 64] |= 1 << (id % 64);
            let hash = feature_hash(word);
            if filter.keep(word, hash) {
                lexicon.keep[id / 64] |= 1 << (id % 64);
                lexicon.facts[id] = WordFacts {
                    hash,
                    idf: idf(hash),
                };
                let tagged = u32::try_from(id)
                    .ok()
                    .and_then(|id| jieba.word_tag(id))
                    .is_some_and(crate::slots::is_entity_tag);
                if tagged && word.chars().nth(1).is_some() {
                    lexicon.entity[id / 64] |= 1 << (id % 64);
                }
            }
        }
        lexicon
    }

    /// For word `id`: `Some(true)` if it is a feature, `Some(false)` if it is not, `None` if the
    /// tables do not know the id (the caller then decides from the string).
    #[inline]
    pub fn is_feature(&self, id: u32) -> Option<bool> {
        let id = id as usize;
        let bits = *self.keep.get(id / 64)?;
        if bits & (1 << (id % 64)) != 0 {
            return Some(true);
        }
        let known = self.known.get(id / 64)? & (1 << (id % 64)) != 0;
        known.then_some(false)
    }

    /// True if word `id` is a feature tagged as a proper name.
    #[inline]
    pub fn is_entity(&self, id: u32) -> bool {
        let id = id as usize;
        self.entity
            .get(id / 64)
            .is_some_and(|bits| bits & (1 << (id % 64)) != 0)
    }

    /// Hash and IDF of word `id` (meaningful for features only).
    #[inline]
    pub fn facts(&self, id: u32) -> Option<&WordFacts> {
        self.facts.get(id as usize)
    }

    /// Hints the CPU to start loading the facts of word `id` (read later by the weight step).
    #[inline]
    pub fn prefetch(&self, id: u32) {
        if let Some(facts) = self.facts.get(id as usize) {
            super::prefetch(facts);
        }
    }

    /// Number of dictionary words that are features.
    pub fn feature_count(&self) -> usize {
        self.keep.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Appends the tables' image to `w` (read back by [`Lexicon::read_image`]).
    pub fn write_image(&self, w: &mut ImageWriter<'_>) {
        w.u64(self.facts.len() as u64);
        for bits in self.keep.iter().chain(&self.known).chain(&self.entity) {
            w.u64(*bits);
        }
        for facts in &self.facts {
            w.u64(facts.hash);
            w.f64(facts.idf);
        }
    }

    /// The tables `r` holds, as [`Lexicon::write_image`] wrote them.
    pub fn read_image(r: &mut ImageReader<'_>) -> Result<Lexicon, ImageError> {
        let words = r.count(16)?;
        let bitmap_words = words.div_ceil(64);
        let mut bitmap =
            || -> Result<Vec<u64>, ImageError> { (0..bitmap_words).map(|_| r.u64()).collect() };
        let keep = bitmap()?;
        let known = bitmap()?;
        let entity = bitmap()?;
        let facts = (0..words)
            .map(|_| {
                Ok(WordFacts {
                    hash: r.u64()?,
                    idf: r.f64()?,
                })
            })
            .collect::<Result<Vec<_>, ImageError>>()?;
        Ok(Lexicon {
            keep,
            known,
            facts,
            entity,
        })
    }
}

/// The word of each jieba id, for the dictionary `jieba` was loaded from.
///
/// jieba numbers words 0, 1, 2... as it first meets them while loading (a repeated word only
/// updates its frequency), so the k-th distinct word of `dict` has id k: that costs one hash-set
/// insert per line instead of one trie walk (~0.15 s at start-up for 350k words). The order is
/// jieba's internal behaviour, so it is checked (word count, and the ids of a sample of words);
/// if anything disagrees, every word's id is looked up instead.
fn words_by_id<'d>(jieba: &Jieba, dict: &'d str) -> Vec<Option<&'d str>> {
    let count = jieba.word_count();
    let lines = || dict.lines().filter_map(|l| l.split_whitespace().next());
    let mut seen: FxHashSet<&str> = FxHashSet::default();
    seen.reserve(count);
    let in_order: Vec<&str> = lines().filter(|w| seen.insert(w)).collect();
    let agrees = in_order.len() == count
        && (0..count)
            .step_by(997)
            .chain(count.checked_sub(1))
            .all(|id| jieba.word_id(in_order[id]) == u32::try_from(id).ok());
    if agrees {
        return in_order.into_iter().map(Some).collect();
    }
    let mut by_id = vec![None; count];
    for word in lines() {
        if let Some(slot) = jieba
            .word_id(word)
            .and_then(|id| by_id.get_mut(id as usize))
        {
            *slot = Some(word);
        }
    }
    by_id
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jieba(dict: &str) -> Jieba {
        Jieba::with_dict(&mut dict.as_bytes()).unwrap()
    }

    #[test]
    fn ids_follow_first_appearance_and_repeats_keep_their_id() {
        let dict = "中国 10 ns\n人民 8 n\n中国 12 ns\n\n银行 5 n\n";
        let words = words_by_id(&jieba(dict), dict);
        assert_eq!(words, [Some("中国"), Some("人民"), Some("银行")]);
    }

    #[test]
    fn a_dictionary_text_in_another_order_falls_back_to_lookups() {
        let j = jieba("中国 10\n人民 8\n银行 5\n");
        // Same words, other order: the order rule would give wrong ids; the check catches it.
        let words = words_by_id(&j, "银行 5\n人民 8\n中国 10\n");
        for (id, word) in words.iter().enumerate() {
            assert_eq!(j.word_id(word.unwrap()), Some(id as u32));
        }
        // A text missing a word: that id stays unknown, and `is_feature` says so.
        let text = "中国 10\n银行 5\n";
        let words = words_by_id(&j, text);
        assert_eq!(words, [Some("中国"), None, Some("银行")]);
        let filter = TokenFilter::new(Default::default(), false, true, true);
        let lexicon = Lexicon::build(&j, text, &filter, |_| 1.0);
        assert_eq!(lexicon.is_feature(0), Some(true));
        assert_eq!(lexicon.is_feature(1), None);
        assert_eq!(lexicon.is_feature(2), Some(true));
        assert_eq!(lexicon.is_feature(3), None);
    }
}
