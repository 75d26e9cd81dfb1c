//! Shared passages of two texts, for the side-by-side view: maximal runs of characters covered
//! by a character n-gram that also occurs in the other text.
//!
//! Only letters and digits count (full-width forms folded, ASCII lowercased), so a repost that
//! changed punctuation, spacing or width still lines up; a run covers the punctuation between
//! its first and last character. n is 8 for mostly-CJK text (about two to four words) and 12
//! otherwise. Linear time: a rolling hash of every n-gram, one hash set per text.

use rustc_hash::FxHashSet;
use serde::Serialize;
use std::ops::Range;

/// n-gram length (characters that count) for mostly-CJK text.
pub const CJK_NGRAM: usize = 8;
/// n-gram length for other text.
pub const OTHER_NGRAM: usize = 12;

/// What two texts share.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Shared {
    /// Shared passages of the first text, as character ranges, in order, disjoint.
    pub spans_a: Vec<Range<usize>>,
    /// Shared passages of the second text.
    pub spans_b: Vec<Range<usize>>,
    /// Share of the first text's letters and digits inside a shared passage (0 for no text).
    pub share_a: f64,
    /// Share of the second text's letters and digits inside a shared passage.
    pub share_b: f64,
    /// The n-gram length used.
    pub n: usize,
}

/// The letters and digits of a text, folded, with the character index of each.
struct Keys {
    codes: Vec<u64>,
    at: Vec<usize>,
    cjk: usize,
}

fn keys(text: &str) -> Keys {
    let mut k = Keys {
        codes: Vec::new(),
        at: Vec::new(),
        cjk: 0,
    };
    for (i, c) in text.chars().enumerate() {
        if !c.is_alphanumeric() {
            continue;
        }
        let mut code = u32::from(c);
        // Full-width ASCII forms -> ASCII.
        if (0xff01..=0xff5e).contains(&code) {
            code -= 0xfee0;
        }
        if let Some(a) = char::from_u32(code).filter(char::is_ascii_uppercase) {
            code = u32::from(a.to_ascii_lowercase());
        }
        if (0x3400..=0x9fff).contains(&code) || (0xf900..=0xfaff).contains(&code) {
            k.cjk += 1;
        }
        k.codes.push(mix(u64::from(code)));
        k.at.push(i);
    }
    k
}

/// SplitMix64 finaliser: spreads a code point over 64 bits before the polynomial hash.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

const BASE: u64 = 0x0100_0000_01b3;

/// Rolling hash of every n-gram of `codes` (empty if shorter than n).
fn ngram_hashes(codes: &[u64], n: usize) -> Vec<u64> {
    if n == 0 || codes.len() < n {
        return Vec::new();
    }
    let top = (1..n).fold(1u64, |p, _| p.wrapping_mul(BASE));
    let mut h = codes[..n]
        .iter()
        .fold(0u64, |h, &c| h.wrapping_mul(BASE).wrapping_add(c));
    let mut out = Vec::with_capacity(codes.len() - n + 1);
    out.push(h);
    for i in n..codes.len() {
        h = h
            .wrapping_sub(codes[i - n].wrapping_mul(top))
            .wrapping_mul(BASE)
            .wrapping_add(codes[i]);
        out.push(h);
    }
    out
}

/// Marks the keys of `own` covered by an n-gram found in `other`; returns the character spans
/// and the share of keys marked.
fn marked(
    own: &Keys,
    hashes: &[u64],
    other: &FxHashSet<u64>,
    n: usize,
) -> (Vec<Range<usize>>, f64) {
    // Difference array: +1 where a shared n-gram starts, -1 where it ends.
    let mut delta = vec![0i32; own.codes.len() + 1];
    for (i, h) in hashes.iter().enumerate() {
        if other.contains(h) {
            delta[i] += 1;
            delta[i + n] -= 1;
        }
    }
    let mut spans: Vec<Range<usize>> = Vec::new();
    let mut depth = 0i32;
    let mut run: Option<usize> = None;
    let mut covered = 0usize;
    for (k, d) in delta.iter().take(own.codes.len()).enumerate() {
        depth += d;
        match (depth > 0, run) {
            (true, None) => run = Some(k),
            (false, Some(first)) => {
                spans.push(own.at[first]..own.at[k - 1] + 1);
                run = None;
            }
            _ => {}
        }
        if depth > 0 {
            covered += 1;
        }
    }
    if let Some(first) = run {
        if let Some(&last) = own.at.last() {
            spans.push(own.at[first]..last + 1);
        }
    }
    let share = if own.codes.is_empty() {
        0.0
    } else {
        covered as f64 / own.codes.len() as f64
    };
    (spans, share)
}

/// The shared passages of `a` and `b`.
pub fn shared_passages(a: &str, b: &str) -> Shared {
    let (ka, kb) = (keys(a), keys(b));
    let total = ka.codes.len() + kb.codes.len();
    let n = if total > 0 && (ka.cjk + kb.cjk) * 2 >= total {
        CJK_NGRAM
    } else {
        OTHER_NGRAM
    };
    let (ha, hb) = (ngram_hashes(&ka.codes, n), ngram_hashes(&kb.codes, n));
    let set_a: FxHashSet<u64> = ha.iter().copied().collect();
    let set_b: FxHashSet<u64> = hb.iter().copied().collect();
    let (spans_a, share_a) = marked(&ka, &ha, &set_b, n);
    let (spans_b, share_b) = marked(&kb, &hb, &set_a, n);
    Shared {
        spans_a,
        spans_b,
        share_a,
        share_b,
        n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut(text: &str, spans: &[Range<usize>]) -> Vec<String> {
        let chars: Vec<char> = text.chars().collect();
        spans
            .iter()
            .map(|r| chars[r.clone()].iter().collect())
            .collect()
    }

    #[test]
    fn marks_the_shared_passage_across_punctuation_and_width() {
        let a = "今天天气很好。北京市政府宣布地铁十号线将于明年全面开通运营，市民出行更方便。完";
        let b = "据报道，北京市政府宣布：地铁十号线将于明年全面开通运营！另有消息称票价不变。";
        let s = shared_passages(a, b);
        assert_eq!(s.n, CJK_NGRAM);
        assert_eq!(
            cut(a, &s.spans_a),
            ["北京市政府宣布地铁十号线将于明年全面开通运营"]
        );
        assert_eq!(
            cut(b, &s.spans_b),
            ["北京市政府宣布：地铁十号线将于明年全面开通运营"]
        );
        assert!(s.share_a > 0.4 && s.share_a < 0.7, "{}", s.share_a);

        let wide = "ＡＢＣ　Ｄｅｆｇｈｉｊｋｌｍｎ";
        let s = shared_passages("xx abc defghijklmn yy", wide);
        assert_eq!(s.n, OTHER_NGRAM);
        assert_eq!(cut(wide, &s.spans_b), ["ＡＢＣ　Ｄｅｆｇｈｉｊｋｌｍｎ"]);
        assert_eq!(s.share_b, 1.0);
    }

    #[test]
    fn nothing_shared_or_nothing_to_share() {
        let s = shared_passages(
            "完全不同的一段文字内容在这里",
            "另外一篇毫无关系的新闻报道正文",
        );
        assert!(s.spans_a.is_empty() && s.spans_b.is_empty());
        assert_eq!(s.share_a, 0.0);
        let s = shared_passages("", "短");
        assert!(s.spans_a.is_empty() && s.spans_b.is_empty());
        assert_eq!((s.share_a, s.share_b), (0.0, 0.0));
    }

    #[test]
    fn identical_texts_are_one_passage() {
        let t = "国家统计局今天发布数据显示，一季度国内生产总值同比增长百分之五点三。";
        let s = shared_passages(t, t);
        assert_eq!(s.spans_a, vec![0..t.chars().count() - 1]);
        assert_eq!(s.share_a, 1.0);
        assert_eq!(s.share_b, 1.0);
    }
}
