//! Page chrome under a headline. An article's text normally repeats words of its title (the lede
//! restates the headline). A page whose text holds almost nothing of its title, a portal's
//! disclaimer, a sign-in wall or a redirect notice published under an article's title, carries no
//! report in that text, and two such pages sharing it (one disclaimer under many titles) are not
//! one report. So a match is refused when the new article's text holds less than
//! [`MIN_TITLE_IN_TEXT`] of its own title's character bigrams *and* of the candidate's title's,
//! and the two titles share less than [`MIN_TITLE_AGREEMENT`] of theirs: nothing in the shared
//! text is about either headline. A repost with a new title is untouched as long as its text
//! carries one of the two titles (it does: the text is the report).
//!
//! Titles are compared as normalised, Traditional-folded text (as the cleaned content is); a
//! bigram is two adjacent word characters. Pure: no index, no configuration but the thresholds.

use crate::text::clean::{is_word_char, normalize_and_fold};

/// Below this share of a title's bigrams found in the text, the text is not about that title.
pub const MIN_TITLE_IN_TEXT: f64 = 0.1;

/// Two titles sharing at least this share of the shorter one's bigrams agree: the pages may be
/// one report even when their text is chrome (the same item under two portals' chrome).
pub const MIN_TITLE_AGREEMENT: f64 = 0.2;

/// The distinct character bigrams of a title (sorted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TitleBigrams(Vec<[char; 2]>);

impl TitleBigrams {
    /// The bigrams of `title` after width/case normalisation and Traditional folding.
    pub fn of(title: &str) -> TitleBigrams {
        let normal = normalize_and_fold(title);
        let mut grams = Vec::new();
        let mut previous: Option<char> = None;
        for c in normal.chars() {
            if is_word_char(c) {
                if let Some(p) = previous {
                    grams.push([p, c]);
                }
                previous = Some(c);
            } else {
                previous = None;
            }
        }
        grams.sort_unstable();
        grams.dedup();
        TitleBigrams(grams)
    }

    /// The share of these bigrams that occur in `text` (None without bigrams: nothing to tell).
    pub fn share_in(&self, text: &str) -> Option<f64> {
        let n = self.0.len();
        (n > 0).then(|| self.count_in(text, n) as f64 / n as f64)
    }

    /// How many of these bigrams occur in `text`, counting no further than `enough`.
    fn count_in(&self, text: &str, enough: usize) -> usize {
        let mut found = vec![false; self.0.len()];
        let mut count = 0;
        let mut previous: Option<char> = None;
        for c in text.chars() {
            if count >= enough {
                break;
            }
            if let Some(p) = previous {
                if let Ok(i) = self.0.binary_search(&[p, c]) {
                    if let Some(seen) = found.get_mut(i).filter(|seen| !**seen) {
                        *seen = true;
                        count += 1;
                    }
                }
            }
            previous = Some(c);
        }
        count
    }

    /// The share of the smaller set found in the other (None if either is empty).
    pub fn agreement(&self, other: &TitleBigrams) -> Option<f64> {
        let smaller = self.0.len().min(other.0.len());
        if smaller == 0 {
            return None;
        }
        let shared = self
            .0
            .iter()
            .filter(|g| other.0.binary_search(g).is_ok())
            .count();
        Some(shared as f64 / smaller as f64)
    }
}

/// Whether `text` (the cleaned content) holds less than [`MIN_TITLE_IN_TEXT`] of `title`: the
/// only case in which [`ChromeCheck`] can refuse a match, so the decision keeps an article's
/// text for it only then.
pub fn off_title(title: &str, text: &str) -> bool {
    let title = TitleBigrams::of(title);
    let n = title.0.len();
    // The count stops once the title is known to be in the text (usually within the lede).
    let enough = (MIN_TITLE_IN_TEXT * n as f64).ceil() as usize;
    n > 0 && (title.count_in(text, enough) as f64) < MIN_TITLE_IN_TEXT * n as f64
}

/// The page-chrome check of a pair: A the new article, B the candidate, both titles against A's
/// text (the text the two share when they match).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChromeCheck {
    /// Share of A's title bigrams in A's text.
    pub a_title_in_text: f64,
    /// Share of B's title bigrams in A's text.
    pub b_title_in_text: f64,
    /// Share of the shorter title's bigrams in the other title.
    pub titles_agree: f64,
}

impl ChromeCheck {
    /// The check of A (`a_title`, cleaned text `a_text`) against B's title; None when either
    /// title has no bigrams (nothing to tell: never refused).
    pub fn of(a_title: &str, b_title: &str, a_text: &str) -> Option<ChromeCheck> {
        let a = TitleBigrams::of(a_title);
        let b = TitleBigrams::of(b_title);
        Some(ChromeCheck {
            a_title_in_text: a.share_in(a_text)?,
            b_title_in_text: b.share_in(a_text)?,
            titles_agree: a.agreement(&b)?,
        })
    }

    /// The check as the decision makes it: only for an A whose text is off its title
    /// (`off_title_text`, [`off_title`]; None otherwise: the check cannot refuse).
    pub fn for_pair(
        a_title: &str,
        b_title: &str,
        off_title_text: Option<&str>,
    ) -> Option<ChromeCheck> {
        off_title_text.and_then(|text| ChromeCheck::of(a_title, b_title, text))
    }

    /// Neither title is in the text and the titles disagree: the shared text is page chrome.
    pub fn is_chrome(&self) -> bool {
        self.a_title_in_text < MIN_TITLE_IN_TEXT
            && self.b_title_in_text < MIN_TITLE_IN_TEXT
            && self.titles_agree < MIN_TITLE_AGREEMENT
    }

    /// One line for `compare` and the audit.
    pub fn explain(&self) -> String {
        format!(
            "A's text holds {:.0}% of A's title and {:.0}% of B's (page chrome below {:.0}% each), \
             the titles share {:.0}% (agree from {:.0}%)",
            100.0 * self.a_title_in_text,
            100.0 * self.b_title_in_text,
            100.0 * MIN_TITLE_IN_TEXT,
            100.0 * self.titles_agree,
            100.0 * MIN_TITLE_AGREEMENT
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DISCLAIMER: &str = "本网站所刊载信息不代表本站观点如有侵权请联系删除转载请注明出处";

    #[test]
    fn bigrams_stop_at_punctuation_and_fold() {
        let t = TitleBigrams::of("中國，新聞");
        assert_eq!(t.0, vec![['中', '国'], ['新', '闻']]);
        assert!(TitleBigrams::of("，。").0.is_empty());
    }

    #[test]
    fn share_counts_each_bigram_once() {
        let t = TitleBigrams::of("大风预警");
        assert_eq!(t.share_in("今天大风大风"), Some(1.0 / 3.0));
        assert_eq!(t.share_in("气象台发布大风蓝色预警"), Some(2.0 / 3.0));
        assert_eq!(TitleBigrams::of("").share_in("大风"), None);
    }

    #[test]
    fn chrome_only_pages_under_unrelated_titles() {
        let check = ChromeCheck::of("中东盛产美女", "全球最佳国家排名", DISCLAIMER).unwrap();
        assert!(check.is_chrome(), "{check:?}");
    }

    #[test]
    fn a_title_in_the_text_or_agreeing_titles_keep_the_match() {
        let text = format!("全球最佳国家排名公布，{DISCLAIMER}");
        // B's title is in A's text: a repost of B under another title.
        let retitled = ChromeCheck::of("中东盛产美女", "全球最佳国家排名", &text).unwrap();
        assert!(!retitled.is_chrome(), "{retitled:?}");
        // The titles agree: the same item under two portals' chrome.
        let same = ChromeCheck::of("中东盛产美女王妃", "中东盛产美女", DISCLAIMER).unwrap();
        assert!(!same.is_chrome(), "{same:?}");
        // A's own title is in its text.
        assert!(!off_title("国家排名", &text));
        assert!(off_title("中东盛产美女", DISCLAIMER));
        // No title: nothing to tell.
        assert_eq!(ChromeCheck::of("", "全球最佳国家排名", DISCLAIMER), None);
    }
}
