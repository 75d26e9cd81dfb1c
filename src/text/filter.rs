//! The token filter: which of jieba's tokens can become features (token classes, stop words).

use crate::simhash::feature_hash;
use rustc_hash::FxHashSet;

/// What kind of token jieba produced; decides whether it can be a feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenClass {
    /// Whitespace, punctuation, symbols, emoji: never a feature.
    Punct,
    /// Digits (with `.`, `,`, `%`): dates, amounts, counts.
    Number,
    /// Latin-script word (ASCII letters, maybe digits).
    Latin,
    /// Anything of one character that is not a number or Latin (mostly a CJK character).
    SingleChar,
    /// A multi-character word.
    Word,
}

/// True if `b` is one or more CJK unified ideographs of U+4E00..U+9FFF (UTF-8 `E4 B8 80` to
/// `E9 BF BF`): most tokens of Chinese text, classified without decoding characters.
#[inline]
fn all_common_cjk(b: &[u8]) -> bool {
    !b.is_empty()
        && b.len().is_multiple_of(3)
        && b.chunks_exact(3).all(|c| super::is_common_cjk(c[0], c[1]))
}

/// Classifies one token.
#[inline]
pub fn classify(token: &str) -> TokenClass {
    // One ASCII byte: jieba emits punctuation and spaces one character at a time.
    if let [b] = token.as_bytes() {
        return if b.is_ascii_digit() {
            TokenClass::Number
        } else if b.is_ascii_alphabetic() {
            TokenClass::Latin
        } else {
            TokenClass::Punct
        };
    }
    // Each chunk that passes is exactly one 3-byte character, so chunks stay on char boundaries.
    if all_common_cjk(token.as_bytes()) {
        return if token.len() == 3 {
            TokenClass::SingleChar
        } else {
            TokenClass::Word
        };
    }
    let mut chars = 0usize;
    let mut alnum = false;
    let mut all_number = true;
    let mut has_digit = false;
    let mut all_ascii_word = true;
    let mut has_alpha = false;
    for c in token.chars() {
        chars += 1;
        if super::clean::is_word_char(c) {
            alnum = true;
        }
        if c.is_ascii_digit() {
            has_digit = true;
        } else if !matches!(c, '.' | ',' | '%') {
            all_number = false;
        }
        if c.is_ascii_alphabetic() {
            has_alpha = true;
        } else if !(c.is_ascii_digit() || matches!(c, '-' | '_' | '.' | '\'')) {
            all_ascii_word = false;
        }
    }
    if !alnum {
        TokenClass::Punct
    } else if all_number && has_digit {
        TokenClass::Number
    } else if all_ascii_word && has_alpha {
        TokenClass::Latin
    } else if chars == 1 {
        TokenClass::SingleChar
    } else {
        TokenClass::Word
    }
}

/// Which token classes are kept, plus the stop-word list.
#[derive(Debug, Clone)]
pub struct TokenFilter {
    /// Feature hashes of the stop words (hash lookups avoid string compares on the hot path).
    stopwords: FxHashSet<u64>,
    keep_single_chars: bool,
    keep_numbers: bool,
    keep_latin: bool,
}

impl TokenFilter {
    pub fn new(
        stopwords: FxHashSet<String>,
        keep_single_chars: bool,
        keep_numbers: bool,
        keep_latin: bool,
    ) -> Self {
        TokenFilter {
            stopwords: stopwords.iter().map(|w| feature_hash(w)).collect(),
            keep_single_chars,
            keep_numbers,
            keep_latin,
        }
    }

    /// True if `token` (already cleaned and lowercased; `hash` = its feature hash) is a feature.
    #[inline]
    pub fn keep(&self, token: &str, hash: u64) -> bool {
        self.keep_class(token) && !self.is_stopword(hash)
    }

    /// True if the class of `token` is kept (the stop-word check aside). Checked before hashing:
    /// punctuation and single characters, about half of all tokens, are never hashed.
    #[inline]
    pub fn keep_class(&self, token: &str) -> bool {
        match classify(token) {
            TokenClass::Punct => false,
            TokenClass::Number => self.keep_numbers,
            // Scraped forum text carries anti-copy junk like "l5", "h9": two-character mixed tokens
            // are dropped with single letters.
            TokenClass::Latin => {
                self.keep_latin
                    && token.len() >= 2
                    && !(token.len() <= 2 && token.bytes().any(|b| b.is_ascii_digit()))
            }
            TokenClass::SingleChar => self.keep_single_chars,
            TokenClass::Word => true,
        }
    }

    /// True if `hash` is the feature hash of a stop word.
    #[inline]
    pub fn is_stopword(&self, hash: u64) -> bool {
        self.stopwords.contains(&hash)
    }

    pub fn stopword_count(&self) -> usize {
        self.stopwords.len()
    }
}

/// Parses a stop-word list: one word per line, `#` comments, blank lines ignored. Words are
/// normalised like text (NFKC, lowercase) so that they match cleaned tokens.
pub fn parse_stopwords(text: &str) -> FxHashSet<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(super::clean::normalize_width_case)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        assert_eq!(classify("，"), TokenClass::Punct);
        assert_eq!(classify(" "), TokenClass::Punct);
        assert_eq!(classify("😀"), TokenClass::Punct);
        assert_eq!(classify("2019"), TokenClass::Number);
        assert_eq!(classify("3.5%"), TokenClass::Number);
        assert_eq!(classify("iphone"), TokenClass::Latin);
        assert_eq!(classify("5g"), TokenClass::Latin);
        assert_eq!(classify("中"), TokenClass::SingleChar);
        assert_eq!(classify("中国"), TokenClass::Word);
        assert_eq!(classify("a股"), TokenClass::Word);
        // Edges of the fast path: U+4DFF (a hexagram symbol, not a letter) sits just below it.
        assert_eq!(classify("\u{4dff}"), TokenClass::Punct);
        assert_eq!(classify("\u{4e00}"), TokenClass::SingleChar);
        assert_eq!(classify("\u{9fff}\u{4e00}"), TokenClass::Word);
        assert_eq!(classify("中。"), TokenClass::Word);
        assert_eq!(classify("。"), TokenClass::Punct);
        assert_eq!(classify("7"), TokenClass::Number);
        assert_eq!(classify("x"), TokenClass::Latin);
        assert_eq!(classify(","), TokenClass::Punct);
    }

    #[test]
    fn filter_drops_stopwords_punct_and_junk() {
        let sw = parse_stopwords("# comment\n的\n我们\n\nＡＢＣ\n");
        assert!(sw.contains("abc"));
        let f = TokenFilter::new(sw, false, true, true);
        assert!(!f.keep("的", feature_hash("的")));
        assert!(!f.keep("我们", feature_hash("我们")));
        assert!(!f.keep("abc", feature_hash("abc")));
        assert!(!f.keep("。", feature_hash("。")));
        assert!(!f.keep("国", feature_hash("国")));
        assert!(!f.keep("l5", feature_hash("l5")));
        assert!(!f.keep("x", feature_hash("x")));
        assert!(f.keep("5g网络", feature_hash("5g网络")));
        assert!(f.keep("2019", feature_hash("2019")));
        assert!(f.keep("nba", feature_hash("nba")));
        assert!(f.keep("新闻", feature_hash("新闻")));
    }
}
