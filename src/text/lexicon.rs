//! Per-dictionary-word facts the token loop needs, indexed by jieba's word id.
//!
//! Most tokens of Chinese news are dictionary words, and jieba already knows which one it cut
//! (`Jieba::cut_with_ids`). Deciding "is this a feature, and what is its hash" from the id is one
//! bit test and, for features, one load — instead of classifying the token's characters, hashing
//! its bytes and probing the stop-word set for every token. Everything here is derived from the
//! very same functions the string path uses (`TokenFilter::keep`, `feature_hash`), so both paths
//! give identical features; `tests::matches_string_path` checks that for every dictionary word.

use super::segment::TokenFilter;
use crate::simhash::feature_hash;
use jieba_rs::Jieba;

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
    /// Hash and IDF of word `id` (zero for words that are not features; never read for them).
    facts: Vec<WordFacts>,
}

impl Lexicon {
    /// Builds the tables for the words of `dict` (jieba's `word freq [tag]` lines), which must be
    /// the dictionary `jieba` was loaded from. Ids jieba reports for words not listed here are
    /// simply absent, and such tokens take the string path.
    pub fn build(
        jieba: &Jieba,
        dict: &str,
        filter: &TokenFilter,
        idf: impl Fn(u64) -> f64,
    ) -> Lexicon {
        let words = jieba.word_count();
        let mut lexicon = Lexicon {
            keep: vec![0; words.div_ceil(64)],
            facts: vec![WordFacts::default(); words],
        };
        for word in dict.lines().filter_map(|l| l.split_whitespace().next()) {
            let Some(id) = jieba.word_id(word) else {
                continue;
            };
            let id = id as usize;
            if id >= words {
                continue;
            }
            let hash = feature_hash(word);
            if filter.keep(word, hash) {
                lexicon.keep[id / 64] |= 1 << (id % 64);
                lexicon.facts[id] = WordFacts {
                    hash,
                    idf: idf(hash),
                };
            }
        }
        lexicon
    }

    /// For word `id`: `Some(true)` if it is a feature, `Some(false)` if it is not, `None` if the
    /// id is past the tables (the caller then decides from the string).
    #[inline]
    pub fn is_feature(&self, id: u32) -> Option<bool> {
        let id = id as usize;
        let bits = *self.keep.get(id / 64)?;
        (id < self.facts.len()).then_some(bits & (1 << (id % 64)) != 0)
    }

    /// Hash and IDF of word `id` (meaningful for features only).
    #[inline]
    pub fn facts(&self, id: u32) -> Option<&WordFacts> {
        self.facts.get(id as usize)
    }

    /// Hints the CPU to start loading the facts of word `id` (read later by the weight step).
    #[inline]
    pub fn prefetch(&self, id: u32) {
        #[cfg(target_arch = "x86_64")]
        if let Some(facts) = self.facts.get(id as usize) {
            // SAFETY: prefetch has no observable effect, and the pointer is to a live element.
            unsafe {
                core::arch::x86_64::_mm_prefetch(
                    (facts as *const WordFacts).cast::<i8>(),
                    core::arch::x86_64::_MM_HINT_T0,
                );
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = id;
    }

    /// Number of dictionary words that are features.
    pub fn feature_count(&self) -> usize {
        self.keep.iter().map(|w| w.count_ones() as usize).sum()
    }
}
