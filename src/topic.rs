//! Whether the text a later article adds to an earlier one is about the same story: what tells an
//! update (the earlier report whole, plus a reaction, a new figure, background) from a digest (the
//! earlier item among other, unrelated items).
//!
//! The decision has the later article (A) and the earlier one's content sketch (B), not B's text.
//! B's sampled 4-grams (its bins' minima) found in A's text mark where B sits in A; the rest of A
//! is what it adds. A's heaviest words (TF-IDF, computed with the fingerprint) then say whether
//! the added text speaks of what B's part speaks of: an update repeats the story's names, places
//! and figures, a digest's other items do not.

use crate::sketch::{self, Sketch};
use serde::Serialize;

/// A's heaviest words kept for the topic check.
pub const OUTLINE_TERMS: usize = 24;

/// What the decision may need of an article's text for the topic check, made with its
/// fingerprint (in parallel) so that the single writer only reads it, and only for a candidate
/// that needs it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outline {
    /// The cleaned content, as sketched.
    content: String,
    /// The heaviest words (TF-IDF), heaviest first, one after the other (one allocation per
    /// article, not one per word)...
    words: String,
    /// ...each word's end in `words` and its weight.
    terms: Vec<(usize, f64)>,
}

/// The topic check of A against an earlier B that A holds (see the module).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Topic {
    /// B's sampled 4-grams (bins) found in A's text within the part taken as B's...
    pub located: u32,
    /// ...of this many (B's bins that sampled a 4-gram): B whole inside A places nearly all.
    pub sampled: u32,
    /// The share of A's text (bytes) outside B's part: what A adds.
    pub added_share: f64,
    /// The weight share of A's heavy words in B's part that A's added text repeats: about 1 for
    /// an update of the same story, about 0 for a digest of other stories.
    pub coherence: f64,
}

/// Sentence ends: where B's part is widened to, so that it holds B's whole sentences.
fn is_sentence_end(c: char) -> bool {
    matches!(c, '。' | '！' | '？' | '!' | '?' | '\n' | '；' | ';')
}

impl Outline {
    /// The outline of cleaned `content` with its heaviest words (`(word, weight)`, heaviest
    /// first).
    pub fn new<'w>(content: String, heavy: impl IntoIterator<Item = (&'w str, f64)>) -> Outline {
        let mut words = String::new();
        let mut terms = Vec::with_capacity(OUTLINE_TERMS);
        for (word, weight) in heavy {
            words.push_str(word);
            terms.push((words.len(), weight));
        }
        Outline {
            content,
            words,
            terms,
        }
    }

    /// The heaviest words and their weights, heaviest first.
    pub fn terms(&self) -> impl Iterator<Item = (&str, f64)> + '_ {
        let mut start = 0;
        self.terms.iter().map(move |&(end, weight)| {
            let word = self.words.get(start..end).unwrap_or_default();
            start = end;
            (word, weight)
        })
    }

    /// The topic check against the earlier article's sketch, or None when none of B's sampled
    /// 4-grams is in A's text or A adds nothing to B's part.
    pub fn topic(&self, earlier: &Sketch) -> Option<Topic> {
        let found = sketch::locate(&self.content, earlier);
        // B's part: the stretch of A as long as B (with room for the 4-grams B's sampling missed
        // at either end) holding the most of B's sampled 4-grams. A chance hit on a common 4-gram
        // elsewhere in A stays out of it.
        let span = u64::from(earlier.shingles) * 5 / 4 + 16;
        let mut best = (0usize, 0usize);
        let mut first = 0usize;
        for last in 0..found.len() {
            while u64::from(found[last].shingle - found[first].shingle) > span {
                first += 1;
            }
            if last + 1 - first > best.1 - best.0 {
                best = (first, last + 1);
            }
        }
        // Bins, not hits: a 4-gram B sampled may recur in A (an update repeats the story's
        // phrases), so the stretch is narrowed to the shortest one that holds every located bin.
        let mut hits = [0u32; sketch::BINS];
        for f in &found[best.0..best.1] {
            hits[f.bin] += 1;
        }
        while best.1 - best.0 > 1 && hits[found[best.0].bin] > 1 {
            hits[found[best.0].bin] -= 1;
            best.0 += 1;
        }
        while best.1 - best.0 > 1 && hits[found[best.1 - 1].bin] > 1 {
            hits[found[best.1 - 1].bin] -= 1;
            best.1 -= 1;
        }
        let all = found[best.0..best.1]
            .iter()
            .fold(0u32, |bins, f| bins | 1 << f.bin);
        let located = all.count_ones();
        if located == 0 {
            return None;
        }
        let text = self.content.as_str();
        // From the sentence before the first located 4-gram to the end of the last one's.
        let first_end = found[best.0].end;
        let last_end = found[best.1 - 1].end;
        let start = text[..first_end]
            .char_indices()
            .rev()
            .find(|&(_, c)| is_sentence_end(c))
            .map_or(0, |(i, c)| i + c.len_utf8());
        let end = text[last_end..]
            .char_indices()
            .find(|&(_, c)| is_sentence_end(c))
            .map_or(text.len(), |(i, c)| last_end + i + c.len_utf8());
        let (before, part, after) = (&text[..start], &text[start..end], &text[end..]);
        let added = before.len() + after.len();
        if added == 0 {
            return None;
        }
        let (mut in_part, mut repeated) = (0.0, 0.0);
        for (word, weight) in self.terms().filter(|(word, _)| !word.is_empty()) {
            if part.contains(word) {
                in_part += weight;
                if before.contains(word) || after.contains(word) {
                    repeated += weight;
                }
            }
        }
        Some(Topic {
            located,
            sampled: earlier.sampled_bins(),
            added_share: added as f64 / text.len() as f64,
            coherence: if in_part > 0.0 {
                repeated / in_part
            } else {
                0.0
            },
        })
    }
}
