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
use crate::text::clean::is_word_char;
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

/// Whether `text` holds the word `term` as a word: a term that starts (ends) with a Latin letter
/// or a digit must not continue one there, so "4" is not found in "1942", nor "nba" in
/// "wnba". Short figures are among an article's heaviest words (its title's scores and dates),
/// and every digit string of an unrelated text would otherwise repeat them.
fn holds_term(text: &str, term: &str) -> bool {
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    let (first, last) = (term.chars().next(), term.chars().next_back());
    text.match_indices(term).any(|(at, _)| {
        let joins_before = alnum(first) && alnum(text[..at].chars().next_back());
        let joins_after = alnum(last) && alnum(text[at + term.len()..].chars().next());
        !joins_before && !joins_after
    })
}

/// The byte range `part` of `text` widened over the rest of `toward` (a byte range around it),
/// as evenly on both sides as it allows, until it holds `shingled` word characters (those the
/// sketch's 4-grams are made of) or all of `toward`.
fn widen_to(
    text: &str,
    part: (usize, usize),
    toward: (usize, usize),
    shingled: usize,
) -> (usize, usize) {
    let words = |from: usize, to: usize| {
        text.get(from..to)
            .map_or(0, |t| t.chars().filter(|&c| is_word_char(c)).count())
    };
    let (start, end) = part;
    let missing = shingled.saturating_sub(words(start, end));
    let (room_before, room_after) = (
        words(toward.0.min(start), start),
        words(end, toward.1.max(end)),
    );
    // Half each, the rest of one side's share to the other.
    let after = (missing - (missing / 2).min(room_before)).min(room_after);
    let before = (missing - after).min(room_before);
    let word = |&(_, c): &(usize, char)| is_word_char(c);
    let start = match before {
        0 => start,
        n => text[..start]
            .char_indices()
            .rev()
            .filter(word)
            .nth(n - 1)
            .map_or(start, |(i, _)| i),
    };
    let end = match after {
        0 => end,
        n => text[end..]
            .char_indices()
            .filter(word)
            .nth(n - 1)
            .map_or(end, |(i, c)| end + i + c.len_utf8()),
    };
    (start, end)
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
        if found.is_empty() {
            return None;
        }
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
        // Where B's sampled 4-grams occur at all (the stretch before it is narrowed below).
        let occurs = (found[best.0].end, found[best.1 - 1].end);
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
        // At least one: `found` is not empty, so neither is the stretch.
        let located = all.count_ones();
        let text = self.content.as_str();
        // Widened up to B's length (its 4-gram windows + 3 word characters) over where B's
        // sampled 4-grams occur: where B repeats itself (its opening line quoted again, one
        // sentence said over and over) every located bin fits in a shorter stretch, and the rest
        // of B must not count as text A adds to it. Not beyond: B's length is more than its part
        // when A holds B only in part, and the rest is what A adds.
        let (first_end, last_end) = widen_to(
            text,
            (found[best.0].end, found[best.1 - 1].end),
            occurs,
            earlier.shingles as usize + 3,
        );
        // From the sentence before the first located 4-gram to the end of the last one's.
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
            if holds_term(part, word) {
                in_part += weight;
                if holds_term(before, word) || holds_term(after, word) {
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

#[cfg(test)]
mod tests {
    use super::*;

    const ITEM: &str = "青山县云溪水库扩建工程三日正式开工，工程总投资约十二亿元，计划新增库容三千八百万立方米，建成后可为下游五个乡镇提供稳定的饮用水源。";
    const SAME_STORY: &str = "青山县水利局局长周明远表示，云溪水库始建于七十年代，库容不足，此次扩建将加高大坝六米，下游五个乡镇的饮用水源从此更有保障。";
    const OTHER_STORY: &str = "市图书馆新馆本周六起试运行，馆内设有少儿阅览区和二十四小时自助借阅区，市民凭身份证即可免费办理借书证。";

    fn outline(text: &str) -> Outline {
        // The heavy words an update repeats (the story's names) and the digest's other item's.
        let heavy = [
            ("云溪水库", 9.0),
            ("青山县", 8.0),
            ("扩建", 7.0),
            ("乡镇", 5.0),
            ("图书馆", 8.5),
            ("借书证", 6.0),
        ];
        Outline::new(
            text.to_owned(),
            heavy.into_iter().filter(|(w, _)| text.contains(w)),
        )
    }

    #[test]
    fn an_update_repeats_the_earlier_items_heavy_words_a_digest_does_not() {
        let item = Sketch::of(ITEM);
        let update = outline(&format!("{ITEM}{SAME_STORY}"))
            .topic(&item)
            .unwrap();
        let digest = outline(&format!("{ITEM}{OTHER_STORY}"))
            .topic(&item)
            .unwrap();
        for t in [update, digest] {
            // The item is whole in both: every one of its samples in one stretch.
            assert_eq!(t.located, t.sampled, "{t:?}");
            assert!(t.added_share > 0.4 && t.added_share < 0.6, "{t:?}");
        }
        assert!(update.coherence >= 0.9, "{update:?}");
        assert!(digest.coherence <= 0.1, "{digest:?}");
        // Heaviest first, as given.
        let item_outline = outline(ITEM);
        let words: Vec<&str> = item_outline.terms().map(|(w, _)| w).collect();
        assert_eq!(words, ["云溪水库", "青山县", "扩建", "乡镇"]);
    }

    #[test]
    fn figures_and_latin_words_are_found_whole_only() {
        assert!(holds_term("比分111-134，", "111-134"));
        assert!(holds_term("第4名", "4"));
        assert!(holds_term("nba常规赛", "nba"));
        assert!(!holds_term("1942年", "4"));
        assert!(!holds_term("2018-12-27", "12-2"));
        assert!(!holds_term("wnba球员", "nba"));
        assert!(
            holds_term("1942年和4年", "4"),
            "a later whole occurrence counts"
        );
        assert!(
            holds_term("云溪水库扩建", "水库"),
            "Chinese words have no such boundary"
        );
    }

    /// A digest's other items mention other figures (years, dates, amounts): the earlier
    /// item's short figures inside them are no repetition of its story.
    #[test]
    fn other_figures_do_not_repeat_the_items_figures() {
        let item = "火箭4胜6负排名第12，勇士10胜2负领跑西部。";
        let other = "该公司1946年成立，2018年员工规模达到12万人，营收增长46%。";
        let heavy = [
            ("火箭", 9.0),
            ("勇士", 9.0),
            ("4", 8.0),
            ("6", 8.0),
            ("12", 8.0),
            ("10", 8.0),
            ("2", 8.0),
        ];
        let text = format!("{item}{other}");
        let t = Outline::new(
            text.clone(),
            heavy.into_iter().filter(|(w, _)| text.contains(w)),
        )
        .topic(&Sketch::of(item))
        .unwrap();
        assert!(t.coherence <= 0.2, "{t:?}");
    }

    /// An item that repeats itself (a sentence said twice, its opening line quoted again) is
    /// B's part whole: its second saying is not text the digest adds.
    #[test]
    fn an_item_that_repeats_itself_is_not_its_own_update() {
        for (item, at_start) in [
            (format!("{ITEM}{ITEM}{ITEM}"), true),
            (format!("{ITEM}{ITEM}"), false),
        ] {
            let digest = if at_start {
                format!("{item}{OTHER_STORY}")
            } else {
                format!("{OTHER_STORY}{item}")
            };
            let t = outline(&digest).topic(&Sketch::of(&item)).unwrap();
            assert!(t.coherence <= 0.1, "{t:?}");
            assert!(t.added_share < 0.5, "{t:?}");
        }
    }

    #[test]
    fn no_topic_when_the_earlier_text_is_not_in_the_later_or_nothing_is_added() {
        let item = Sketch::of(ITEM);
        assert_eq!(outline(OTHER_STORY).topic(&item), None);
        assert_eq!(outline(ITEM).topic(&item), None);
        assert_eq!(Outline::default().topic(&item), None);
    }
}
