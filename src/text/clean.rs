//! Text cleaning: everything that differs between two copies of one article but says nothing about
//! its story — markup, entities, width and case, URLs, whitespace, and the source/editor/ad lines
//! reposting sites add — is removed here, before segmentation.

use regex::Regex;
use std::borrow::Cow;
use std::sync::OnceLock;
use unicode_normalization::UnicodeNormalization;

/// Reusable cleaner (holds compiled patterns). Cheap to share across threads.
#[derive(Debug, Clone)]
pub struct Cleaner {
    attribute: Regex,
    url: Regex,
    boilerplate_line: Regex,
    /// Literals one of which every boilerplate line contains: checked first (a SIMD literal
    /// search), so most lines never run the full pattern.
    boilerplate_hint: Regex,
    read_more: Regex,
    strip_boilerplate: bool,
    fold_traditional: bool,
}

/// Traditional -> Simplified character table (OpenCC TSCharacters, see the file's header).
pub const TS_CHARACTERS: &str = include_str!("../../config/ts_characters.txt");

const FOLD_BASE: u32 = 0x3400;
const FOLD_END: u32 = 0xa000;

/// Traditional -> Simplified folding over U+3400..U+9FFF: a direct-lookup table (55 KB) and a bitset
/// of the characters that fold at all (3.4 KB). The hot loop tests the bit, which stays in the L1
/// cache, for every ideograph, and reads the table only for the few that fold.
pub(crate) struct FoldTable {
    /// Simplified form by `code - FOLD_BASE`; 0 = no folding.
    simplified: Vec<u16>,
    /// Bit `i` set iff `simplified[i] != 0`.
    folds: Vec<u64>,
}

impl FoldTable {
    /// `fold_char` on a code point.
    #[inline]
    fn fold_code(&self, code: u32) -> u32 {
        let i = code.wrapping_sub(FOLD_BASE) as usize;
        match self.folds.get(i / 64) {
            Some(word) if word >> (i % 64) & 1 != 0 => {
                self.simplified.get(i).map_or(code, |&s| u32::from(s))
            }
            _ => code,
        }
    }

    /// The Simplified form of a Traditional character (itself for anything else).
    #[inline]
    fn fold_char(&self, c: char) -> char {
        let code = u32::from(c);
        char::from_u32(self.fold_code(code)).unwrap_or(c)
    }
}

fn fold_table() -> &'static FoldTable {
    static TABLE: OnceLock<FoldTable> = OnceLock::new();
    TABLE.get_or_init(|| {
        let len = (FOLD_END - FOLD_BASE) as usize;
        let mut simplified = vec![0u16; len];
        let mut folds = vec![0u64; len.div_ceil(64)];
        for line in TS_CHARACTERS.lines().filter(|l| !l.starts_with('#')) {
            let mut chars = line.chars();
            if let (Some(t), Some('\t'), Some(s)) = (chars.next(), chars.next(), chars.next()) {
                let (t, s) = (u32::from(t), u32::from(s));
                if (FOLD_BASE..FOLD_END).contains(&t) && s <= 0xffff && s != 0 {
                    let i = (t - FOLD_BASE) as usize;
                    simplified[i] = s as u16;
                    folds[i / 64] |= 1 << (i % 64);
                }
            }
        }
        FoldTable { simplified, folds }
    })
}

/// Length of the leading run of `bytes` that `normalize` leaves unchanged and that needs no
/// look at its neighbours: ASCII other than capitals, U+4E00..U+9FFF ideographs that do not
/// fold, and the CJK and general punctuation `normalize` keeps. Stops early at anything else (the
/// caller then takes the general path).
#[inline]
fn unchanged_prefix_len(bytes: &[u8], fold: Option<&FoldTable>) -> usize {
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b < 0x80 {
            if b.is_ascii_uppercase() {
                break;
            }
            i += 1;
        } else if let (0xe4..=0xe9, Some(&b1), Some(&b2)) = (b, bytes.get(i + 1), bytes.get(i + 2))
        {
            // An ideograph is known from its first two bytes: no need to decode unless the
            // character may fold.
            if !super::is_common_cjk(b, b1) {
                break;
            }
            if let Some(t) = fold {
                let code = super::decode_three_byte(b, b1, b2);
                if t.fold_code(code) != code {
                    break;
                }
            }
            i += 3;
        } else if let (0xe2 | 0xe3, Some(&0x80), Some(&b2)) =
            (b, bytes.get(i + 1), bytes.get(i + 2))
        {
            // CJK punctuation U+3001..U+303F (E3 80 81..BF) and general punctuation
            // U+2010..U+2027 (E2 80 90..A7), which `normalize` keeps as they are: 。、“” etc.
            let kept = if b == 0xe3 {
                b2 != 0x80
            } else {
                (0x90..=0xa7).contains(&b2)
            };
            if !kept {
                break;
            }
            i += 3;
        } else {
            break;
        }
    }
    i
}

/// A necessary condition for `boilerplate_line`: each of its alternatives contains one of these
/// literals (a source label, `【`, or the start of a call-to-action phrase; "来源" covers
/// "新闻来源" and the like). Literal alternatives compile to a SIMD search, where the full
/// pattern (anchored, with `.*`) walks every byte of the line through a DFA.
const BOILERPLATE_HINT: &str = "来源|稿源|出处|转自|编辑|责编|原标题|原文标题|原题|作者|图源|摄影|声明|【|阅读|查看|展开全文|关注|长按|本文|转载请注明|未经授权|侵删|广告|更多精彩|下载";

/// Lines longer than this (in bytes) are story text, never boilerplate.
const MAX_BOILERPLATE_LINE: usize = 240;

impl Cleaner {
    pub fn new(strip_boilerplate: bool) -> Cleaner {
        Self::with_options(strip_boilerplate, false)
    }

    /// `fold_traditional`: map Traditional Chinese characters to Simplified, so a repost converted
    /// to 繁體 fingerprints like its original.
    pub fn with_options(strip_boilerplate: bool, fold_traditional: bool) -> Cleaner {
        Cleaner {
            // Leftover markup attributes without their tag (`style="..."`, `w:st="on"`,
            // `style=max-width:100%;/>`), common in scraped text.
            attribute: Regex::new(
                r#"[A-Za-z][A-Za-z0-9_:-]*\s*=\s*(?:\\?"[^"\n]*?\\?"|'[^'\n]*?'|[^\s"'<>]*)\s*/?>?"#,
            )
            .expect("static regex"),
            url: Regex::new(r"(?:https?://|www\.)[A-Za-z0-9._~:/?#\[\]@!$&'()*+,;=%-]+")
                .expect("static regex"),
            // Short lines that reposting sites add around a story: source, editor, original-title,
            // copyright/disclaimer and call-to-action lines. Matched against one short line at a
            // time, so a sentence of the story that happens to contain such a word survives.
            boilerplate_line: Regex::new(concat!(
                r"^[ \t]*(?:",
                // "来源：…", "(编辑：…)", "【责任编辑：…】", "原标题：…"
                r"[(\[【]?(?:来源|稿源|出处|新闻来源|文章来源|本文来源|信息来源|转自|责任编辑|责编|编辑|原标题|原文标题|原题|作者|图片来源|图源|摄影|免责声明|声明|版权声明|转载声明|特别声明)[ \t]*[:|].*",
                // a line that is only a bracketed dateline/source tag: "【环球网报道】"
                r"|【[^】]{1,24}】",
                // call-to-action / copyright lines
                r"|.*(?:阅读全文|查看原文|点击查看|阅读原文|展开全文|查看全文|关注(?:我们|公众号|微信)|扫码关注|长按(?:识别|二维码)|本文来自|本文转载自|转载请注明|未经授权|侵删|广告|更多精彩|下载.*客户端).*",
                r")$"
            ))
            .expect("static regex"),
            boilerplate_hint: Regex::new(BOILERPLATE_HINT).expect("static regex"),
            // The same call-to-action phrases glued to the end of a truncated body. Literal
            // alternatives only, so the regex engine can skip through text with a prefilter.
            read_more: Regex::new("阅读全文|点击查看原文|查看原文|查看全文|展开全文|阅读原文")
                .expect("static regex"),
            strip_boilerplate,
            fold_traditional,
        }
    }

    /// Cleans `text` into a normalised string: NFKC (full-width to half-width), lowercase, no markup,
    /// no entities, no URLs, no boilerplate lines, whitespace collapsed to single spaces except
    /// newlines, which are kept (one per paragraph) because later stages look at lines.
    /// Only the passes that keep every character of the text: width, case, Traditional folding
    /// (as configured), markup and entities. For a text that `clean` empties (a one-line alert
    /// in brackets is a "dateline tag" to it), what is left to fingerprint from its characters.
    pub fn normalize_only(&self, text: &str) -> String {
        let mut out = String::new();
        normalize_into(text, self.fold_traditional.then(fold_table), &mut out);
        if memchr::memchr2(b'<', b'&', out.as_bytes()).is_some() {
            out = strip_tags_and_entities(&out);
        }
        out
    }

    pub fn clean(&self, text: &str) -> String {
        let mut out = String::new();
        self.clean_into(text, &mut String::new(), &mut out);
        out
    }

    /// `clean`, writing into `out` (cleared first) with `spare` as working space: a caller that
    /// cleans many texts reuses both buffers instead of allocating two strings per text.
    pub fn clean_into(&self, text: &str, spare: &mut String, out: &mut String) {
        spare.clear();
        normalize_into(text, self.fold_traditional.then(fold_table), spare);
        // The rare passes below make a new string when they change something.
        let mut changed: Option<String> = None;
        // A byte search: a char-set `contains` would decode every character.
        if memchr::memchr2(b'<', b'&', spare.as_bytes()).is_some() {
            changed = Some(strip_tags_and_entities(spare));
        }
        // Each pass runs only when its trigger is present (memchr's SIMD searches: most articles
        // have no markup left), and a pass that replaced nothing hands its input back uncopied.
        let text_now = changed.as_deref().unwrap_or(spare.as_str());
        if memchr::memchr(b'=', text_now.as_bytes()).is_some() {
            if let Cow::Owned(t) = self.attribute.replace_all(text_now, " ") {
                changed = Some(t);
            }
        }
        let text_now = changed.as_deref().unwrap_or(spare.as_str());
        if memchr::memmem::find(text_now.as_bytes(), b"http").is_some()
            || memchr::memmem::find(text_now.as_bytes(), b"www.").is_some()
        {
            if let Cow::Owned(t) = self.url.replace_all(text_now, " ") {
                changed = Some(t);
            }
        }
        if self.strip_boilerplate {
            // "Read more" glued to a body first, so that the line rule cannot take the body with it.
            let text_now = changed.as_deref().unwrap_or(spare.as_str());
            if let Cow::Owned(t) = self.read_more.replace_all(text_now, "") {
                changed = Some(t);
            }
        }
        out.clear();
        self.finish_into(changed.as_deref().unwrap_or(spare.as_str()), out);
    }

    /// Last pass: drops boilerplate lines (short ones only: long lines are story text) and
    /// collapses whitespace, in one walk over the text.
    fn finish_into(&self, text: &str, out: &mut String) {
        out.reserve(text.len());
        // `text.split('\n')`, with memchr's SIMD search for the newlines.
        let mut start = 0;
        let ends = memchr::memchr_iter(b'\n', text.as_bytes()).chain([text.len()]);
        for line in ends.map(|end| {
            // Newlines are ASCII: both ends are char boundaries.
            let line = text.get(start..end).unwrap_or_default();
            start = end + 1;
            line
        }) {
            let boilerplate = self.strip_boilerplate
                && line.len() <= MAX_BOILERPLATE_LINE
                && self.boilerplate_hint.is_match(line)
                && self.boilerplate_line.is_match(line.trim_end_matches('\r'));
            if !boilerplate {
                push_collapsed(line, out);
            }
        }
    }
}

/// Appends `line` with whitespace runs collapsed to one space, as a new line of `out` (lines with
/// no visible character are dropped). Copies each run of visible characters whole.
fn push_collapsed(line: &str, out: &mut String) {
    let bytes = line.as_bytes();
    let mut i = 0;
    let mut started = false;
    while i < bytes.len() {
        let space_start = i;
        while let Some(n) = whitespace_len(line, i) {
            i += n;
        }
        if i >= bytes.len() {
            break; // trailing whitespace
        }
        let word_start = i;
        // Bytes that cannot start a whitespace character (continuation bytes included) are
        // skipped without decoding.
        while i < bytes.len() {
            match VISIBLE_STEP[usize::from(bytes[i])] {
                0 => {
                    if whitespace_len(line, i).is_some() {
                        break;
                    }
                    i += utf8_len(bytes[i]);
                }
                step => i += usize::from(step),
            }
        }
        if !started {
            if !out.is_empty() {
                out.push('\n');
            }
            started = true;
        } else if space_start < word_start {
            out.push(' ');
        }
        out.push_str(&line[word_start..i]);
    }
}

/// Bytes that can start a whitespace character: ASCII whitespace and the lead bytes of U+0085,
/// U+00A0, U+1680, U+2000..U+205F and U+3000.
const WHITESPACE_STARTS: [u8; 10] = [
    b'\t', b'\n', 0x0b, 0x0c, b'\r', b' ', 0xc2, 0xe1, 0xe2, 0xe3,
];

/// Per first byte of a character: 0 if it may start a whitespace character, else the length of a
/// character it starts, to step over it without decoding.
static VISIBLE_STEP: [u8; 256] = {
    let mut t = [1u8; 256];
    let mut b = 0xc0;
    while b < 256 {
        t[b] = if b < 0xe0 {
            2
        } else if b < 0xf0 {
            3
        } else {
            4
        };
        b += 1;
    }
    let mut k = 0;
    while k < WHITESPACE_STARTS.len() {
        t[WHITESPACE_STARTS[k] as usize] = 0;
        k += 1;
    }
    t
};

/// Byte length of the whitespace character (`char::is_whitespace`) starting at byte `i` of `s`, or
/// None if there is none. Only lead bytes that can start a non-ASCII whitespace character
/// (U+0085, U+00A0, U+1680, U+2000..U+205F, U+3000) are decoded.
#[inline]
fn whitespace_len(s: &str, i: usize) -> Option<usize> {
    let b = *s.as_bytes().get(i)?;
    if VISIBLE_STEP[usize::from(b)] != 0 {
        return None;
    }
    match b {
        b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ' => Some(1),
        0xc2 | 0xe1 | 0xe2 | 0xe3 => {
            let c = s.get(i..)?.chars().next()?;
            c.is_whitespace().then(|| c.len_utf8())
        }
        _ => None,
    }
}

/// Length of the UTF-8 sequence a lead byte starts.
#[inline]
fn utf8_len(lead: u8) -> usize {
    match lead {
        0x00..=0x7f => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        _ => 4,
    }
}

/// `char::is_alphanumeric` with a fast path for ASCII and common CJK ideographs (the Unicode table
/// lookup is a measurable share of fingerprinting time otherwise).
#[inline]
pub fn is_word_char(c: char) -> bool {
    match c {
        'a'..='z' | 'A'..='Z' | '0'..='9' | '\u{4e00}'..='\u{9fff}' => true,
        // ASCII, general punctuation and CJK punctuation/brackets (the rest of U+3000..U+303F holds
        // letters such as 々 and 〇).
        '\0'..='\x7f'
        | '\u{2010}'..='\u{2027}'
        | '\u{3000}'..='\u{3004}'
        | '\u{3008}'..='\u{3020}' => false,
        _ => c.is_alphanumeric(),
    }
}

/// `normalize_width_case`, then Traditional -> Simplified folding of CJK characters, in the same
/// single pass over the text.
pub fn normalize_and_fold(text: &str) -> String {
    normalize(text, Some(fold_table()))
}

/// NFKC + lowercase with a fast path: ASCII, CJK ideographs and CJK punctuation are NFKC-stable, and
/// the full-width ASCII block maps by subtraction; only other runs go through the full algorithm.
pub fn normalize_width_case(text: &str) -> String {
    normalize(text, None)
}

fn normalize(text: &str, fold: Option<&FoldTable>) -> String {
    let mut out = String::new();
    normalize_into(text, fold, &mut out);
    out
}

/// `normalize`, appending to `out`.
fn normalize_into(text: &str, fold: Option<&FoldTable>, out: &mut String) {
    /// What the fast path makes of one character.
    enum Step {
        /// Unchanged: stays in the pending run, copied in one go later.
        Keep,
        /// Replaced by this character.
        Replace(char),
        /// Needs full NFKC (with its neighbours: composition looks across characters).
        Slow,
    }
    out.reserve(text.len());
    // Invariant: outside a slow run, text[copied..i] is unchanged output not yet copied; inside one
    // (slow_start = Some(s)), everything before s has been written.
    let mut copied = 0;
    let mut slow_start: Option<usize> = None;
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if slow_start.is_none() {
            // The common case, unchanged characters (lowercase ASCII, CJK ideographs that do not
            // fold) in a tight loop: they only extend the pending run.
            i += unchanged_prefix_len(&bytes[i..], fold);
            if i >= bytes.len() {
                break;
            }
        }
        // Every fast-path character is ASCII or a three-byte sequence: decode those by hand, and
        // send anything else (2- and 4-byte sequences) to the slow path undecoded.
        let (step, len) = match bytes[i] {
            b @ b'A'..=b'Z' => (Step::Replace(char::from(b.to_ascii_lowercase())), 1),
            0x00..=0x7f => (Step::Keep, 1),
            b0 @ 0xe0..=0xef if i + 2 < bytes.len() => {
                let code = super::decode_three_byte(b0, bytes[i + 1], bytes[i + 2]);
                let step = match code {
                    0x4e00..=0x9fff => match fold.map(|t| t.fold_code(code)) {
                        Some(f) if f != code => char::from_u32(f).map_or(Step::Slow, Step::Replace),
                        _ => Step::Keep,
                    },
                    0x3001..=0x303f | 0x2010..=0x2027 => Step::Keep,
                    0x3000 => Step::Replace(' '),
                    0xff01..=0xff5e => match char::from_u32(code - 0xfee0) {
                        Some(h) => Step::Replace(h.to_ascii_lowercase()),
                        None => Step::Slow,
                    },
                    _ => Step::Slow,
                };
                (step, 3)
            }
            b => (Step::Slow, utf8_len(b)),
        };
        match step {
            Step::Keep => {
                if let Some(start) = slow_start.take() {
                    push_nfkc_lower(&text[start..i], fold, out);
                    copied = i;
                }
            }
            Step::Replace(f) => {
                match slow_start.take() {
                    Some(start) => push_nfkc_lower(&text[start..i], fold, out),
                    None => out.push_str(&text[copied..i]),
                }
                out.push(f);
                copied = i + len;
            }
            Step::Slow => {
                if slow_start.is_none() {
                    out.push_str(&text[copied..i]);
                    slow_start = Some(i);
                }
            }
        }
        i += len;
    }
    match slow_start {
        Some(start) => push_nfkc_lower(&text[start..], fold, out),
        None => out.push_str(&text[copied..]),
    }
}

fn push_nfkc_lower(run: &str, fold: Option<&FoldTable>, out: &mut String) {
    for c in run.nfkc() {
        for l in c.to_lowercase() {
            out.push(fold.map_or(l, |t| t.fold_char(l)));
        }
    }
}

/// Removes HTML/XML tags and comments and decodes character entities. A `<` that does not open a
/// tag (e.g. "a < b") is kept. Block-level tags become newlines so paragraphs stay apart.
///
/// Linear in the input whatever it holds: the positions of the next `>` and the next `-->` are
/// remembered and only searched for again once the walk has passed them, so a text of unclosed
/// `<!--` or `<a` is scanned once, not once per opener.
pub fn strip_tags_and_entities(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let bytes = text.as_bytes();
    let mut next_gt = NextMatch::default();
    let mut next_comment_close = NextMatch::default();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'<' if opens_tag(&bytes[i + 1..]) => {
                let rest = &text[i..];
                let end = if rest.starts_with("<!--") {
                    next_comment_close
                        .at_or_after(bytes, i, |hay| memchr::memmem::find(hay, b"-->"))
                        .map(|e| e - i + 3)
                } else {
                    // Tags longer than this are not tags.
                    next_gt
                        .at_or_after(bytes, i, |hay| memchr::memchr(b'>', hay))
                        .map(|e| e - i + 1)
                        .filter(|&len| len <= MAX_TAG_BYTES)
                };
                match end {
                    Some(len) => {
                        out.push(if is_block_tag(&rest[..len]) {
                            '\n'
                        } else {
                            ' '
                        });
                        i += len;
                    }
                    None => {
                        out.push('<');
                        i += 1;
                    }
                }
            }
            b'&' => match decode_entity(&text[i..]) {
                Some((decoded, len)) => {
                    out.push(decoded);
                    i += len;
                }
                None => {
                    out.push('&');
                    i += 1;
                }
            },
            _ => {
                // Copy the run up to the next special byte in one go (both are ASCII, so the cut is
                // always on a char boundary).
                let run_end =
                    memchr::memchr2(b'<', b'&', &bytes[i..]).map_or(bytes.len(), |p| i + p);
                let run_end = if run_end == i { i + 1 } else { run_end };
                out.push_str(&text[i..run_end]);
                i = run_end;
            }
        }
    }
    out
}

/// The longest tag `strip_tags_and_entities` removes; a longer `<...>` is text.
const MAX_TAG_BYTES: usize = 4096;

/// The position of the next occurrence of a pattern, remembered across a forward walk (`from`
/// never decreases): searched again only when the walk has gone past it, and never again once
/// the pattern is absent from the rest of the text. Every byte is searched at most once.
#[derive(Default)]
struct NextMatch {
    /// The last match found (possibly behind the walk by now).
    found: Option<usize>,
    /// The rest of the text holds no match.
    exhausted: bool,
}

impl NextMatch {
    /// The first match at or after `from` (`find` returns a position relative to its haystack).
    fn at_or_after(
        &mut self,
        bytes: &[u8],
        from: usize,
        find: impl Fn(&[u8]) -> Option<usize>,
    ) -> Option<usize> {
        if self.exhausted {
            return None;
        }
        if let Some(at) = self.found.filter(|&at| at >= from) {
            return Some(at);
        }
        self.found = find(bytes.get(from..).unwrap_or_default()).map(|p| from + p);
        self.exhausted = self.found.is_none();
        self.found
    }
}

fn opens_tag(after_lt: &[u8]) -> bool {
    matches!(after_lt.first(), Some(b) if b.is_ascii_alphabetic() || *b == b'/' || *b == b'!' || *b == b'?')
}

fn is_block_tag(tag: &str) -> bool {
    let name: String = tag
        .trim_start_matches('<')
        .trim_start_matches('/')
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    matches!(
        name.as_str(),
        "p" | "br"
            | "div"
            | "li"
            | "tr"
            | "h1"
            | "h2"
            | "h3"
            | "h4"
            | "h5"
            | "h6"
            | "section"
            | "article"
            | "blockquote"
            | "table"
            | "ul"
            | "ol"
    )
}

/// Decodes one entity at the start of `s` (`&amp;`, `&#20013;`, `&#x4e2d;`). Returns the char and the
/// entity's byte length, or None if `s` does not start with a known entity.
fn decode_entity(s: &str) -> Option<(char, usize)> {
    let end = s.bytes().take(12).position(|b| b == b';')?;
    let body = &s[1..end];
    let c = if let Some(num) = body.strip_prefix('#') {
        let code = match num.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => num.parse::<u32>().ok()?,
        };
        char::from_u32(code)?
    } else {
        match body {
            "nbsp" | "ensp" | "emsp" | "thinsp" => ' ',
            "amp" => '&',
            "lt" => '<',
            "gt" => '>',
            "quot" => '"',
            "apos" => '\'',
            "ldquo" => '“',
            "rdquo" => '”',
            "lsquo" => '‘',
            "rsquo" => '’',
            "mdash" => '—',
            "ndash" => '–',
            "hellip" => '…',
            "middot" => '·',
            "times" => '×',
            "copy" => '©',
            "reg" => '®',
            _ => return None,
        }
    };
    Some((c, end + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clean(s: &str) -> String {
        Cleaner::new(true).clean(s)
    }

    #[test]
    fn width_and_case_are_normalised() {
        assert_eq!(
            normalize_width_case("ＡＢＣ１２３，Ｈｅｌｌｏ　世界"),
            "abc123,hello 世界"
        );
        // Compatibility characters outside the fast path still go through NFKC.
        assert_eq!(normalize_width_case("①ﬁ"), "1fi");
    }

    /// The fast paths of `is_word_char` agree with `char::is_alphanumeric` on every character.
    #[test]
    fn is_word_char_is_is_alphanumeric() {
        for c in (0..=0x10ffffu32).filter_map(char::from_u32) {
            assert_eq!(is_word_char(c), c.is_alphanumeric(), "U+{:04X}", c as u32);
        }
    }

    /// `n` pieces picked by a xorshift generator (deterministic test inputs).
    fn random_concat(pieces: &[&str], n: usize, state: &mut u64) -> String {
        let mut out = String::new();
        for _ in 0..n {
            *state ^= *state << 13;
            *state ^= *state >> 7;
            *state ^= *state << 17;
            out.push_str(pieces[(*state % pieces.len() as u64) as usize]);
        }
        out
    }

    /// `normalize` as it was before runs were copied whole (one push per character); the
    /// fingerprint identity (`clean/v2`) promises exactly its output. Like it, a combining mark
    /// after a fast-path character is normalised on its own ("e" + U+0301 stays decomposed).
    fn normalize_reference(text: &str, fold: Option<&FoldTable>) -> String {
        let mut out = String::with_capacity(text.len());
        let mut slow_run_start: Option<usize> = None;
        for (i, c) in text.char_indices() {
            let fast = match c {
                'A'..='Z' => Some(c.to_ascii_lowercase()),
                '\0'..='\x7f' => Some(c),
                '\u{4e00}'..='\u{9fff}' => Some(fold.map_or(c, |t| t.fold_char(c))),
                '\u{3001}'..='\u{303f}' | '\u{2010}'..='\u{2027}' => Some(c),
                '\u{3000}' => Some(' '),
                '\u{ff01}'..='\u{ff5e}' => {
                    char::from_u32(c as u32 - 0xfee0).map(|h| h.to_ascii_lowercase())
                }
                _ => None,
            };
            match fast {
                Some(f) => {
                    if let Some(start) = slow_run_start.take() {
                        push_nfkc_lower(&text[start..i], fold, &mut out);
                    }
                    out.push(f);
                }
                None => {
                    if slow_run_start.is_none() {
                        slow_run_start = Some(i);
                    }
                }
            }
        }
        if let Some(start) = slow_run_start {
            push_nfkc_lower(&text[start..], fold, &mut out);
        }
        out
    }

    /// Copying unchanged runs whole changes nothing: same output as the per-character form on mixed
    /// scripts, compatibility characters, combining marks at run edges and Traditional characters.
    #[test]
    fn normalize_run_copy_equals_per_char_form() {
        let pieces = [
            "中国",
            "國務院",
            "ＡＢＣ",
            "abc",
            "XYZ",
            "　",
            "，",
            "。",
            "①",
            "ﬁ",
            "e\u{301}",
            "\u{301}",
            "가\u{11a8}",
            "ｶ",
            "ﾞ",
            "㍿",
            "—",
            "“",
            "😀",
            "\n",
            " ",
            "Ä",
            "ǅ",
            "İ",
            "々",
            "〇",
            "\u{3099}",
        ];
        let table = fold_table();
        let mut state = 0x9e3779b97f4a7c15u64;
        for _ in 0..20_000 {
            let text = random_concat(&pieces, 6, &mut state);
            assert_eq!(
                normalize(&text, None),
                normalize_reference(&text, None),
                "{text:?}"
            );
            assert_eq!(
                normalize(&text, Some(table)),
                normalize_reference(&text, Some(table)),
                "{text:?} (folded)"
            );
        }
    }

    #[test]
    fn tags_entities_and_comments_are_removed() {
        assert_eq!(
            clean("<p style=\"color:red\">中国&nbsp;新闻</p><!-- ad --><br/>第二段&amp;&#20013;&#x6587;"),
            "中国 新闻\n第二段&中文"
        );
        // A lone '<' is text, not a tag.
        assert_eq!(clean("a < b 和 1<2"), "a < b 和 1<2");
        assert_eq!(clean("未闭合的 <div 标签"), "未闭合的 <div 标签");
    }

    #[test]
    fn leftover_attributes_and_urls_are_removed() {
        assert_eq!(
            clean("正文 style=\"margin-bottom: 10px; text-indent: 2em;\"继续"),
            "正文 继续"
        );
        assert_eq!(clean("图片 style=max-width:100%;/>1近日"), "图片 1近日");
        assert_eq!(clean("详见 https://example.com/a?b=1 网站"), "详见 网站");
    }

    #[test]
    fn boilerplate_lines_are_removed_but_story_lines_stay() {
        let text = "来源：新华网\n【环球网报道】\n记者从市政府获悉，地铁将开通……阅读全文\n（编辑：张三）\n点击查看原文\n关注公众号获取更多";
        assert_eq!(clean(text), "记者从市政府获悉,地铁将开通……");
        assert_eq!(
            Cleaner::new(false).clean("来源：新华网\n正文"),
            "来源:新华网\n正文"
        );
    }

    /// The hint may only skip lines the full pattern would not match: every keyword of the
    /// pattern, in every line shape it accepts, passes the hint.
    #[test]
    fn boilerplate_hint_never_skips_a_boilerplate_line() {
        let c = Cleaner::new(true);
        let labels = [
            "来源",
            "稿源",
            "出处",
            "新闻来源",
            "文章来源",
            "本文来源",
            "信息来源",
            "转自",
            "责任编辑",
            "责编",
            "编辑",
            "原标题",
            "原文标题",
            "原题",
            "作者",
            "图片来源",
            "图源",
            "摄影",
            "免责声明",
            "声明",
            "版权声明",
            "转载声明",
            "特别声明",
        ];
        let calls = [
            "阅读全文",
            "查看原文",
            "点击查看",
            "阅读原文",
            "展开全文",
            "查看全文",
            "关注我们",
            "关注公众号",
            "关注微信",
            "扫码关注",
            "长按识别",
            "长按二维码",
            "本文来自",
            "本文转载自",
            "转载请注明",
            "未经授权",
            "侵删",
            "广告",
            "更多精彩",
            "下载新闻客户端",
        ];
        let mut lines: Vec<String> = Vec::new();
        for l in labels {
            lines.push(format!("{l}:新华网"));
            lines.push(format!("  【{l} | 张三】"));
            lines.push(format!("({l}:张三)"));
        }
        for p in calls {
            lines.push(p.to_owned());
            lines.push(format!("请{p}获取更多"));
        }
        lines.push("【环球网报道】".to_owned());
        for line in &lines {
            assert!(c.boilerplate_line.is_match(line), "{line}: not boilerplate");
            assert!(
                c.boilerplate_hint.is_match(line),
                "{line}: skipped by the hint"
            );
        }
        // And a story line is skipped by the hint without running the full pattern.
        assert!(!c.boilerplate_hint.is_match("记者从市政府获悉,地铁将开通"));
    }

    #[test]
    fn traditional_folds_to_simplified_when_enabled() {
        let folding = Cleaner::with_options(true, true);
        assert_eq!(
            folding.clean("國務院總理發表講話，經濟穩定增長"),
            "国务院总理发表讲话,经济稳定增长"
        );
        assert_eq!(folding.clean("国务院总理"), "国务院总理");
        assert_eq!(Cleaner::with_options(true, false).clean("國務院"), "國務院");
    }

    /// `push_collapsed` as it was (one char at a time); the byte-run form must equal it.
    fn push_collapsed_reference(line: &str, out: &mut String) {
        let mut pending_space = false;
        let mut started = false;
        for c in line.chars() {
            if c.is_whitespace() {
                pending_space = started;
                continue;
            }
            if !started {
                if !out.is_empty() {
                    out.push('\n');
                }
                started = true;
            } else if pending_space {
                out.push(' ');
            }
            pending_space = false;
            out.push(c);
        }
    }

    #[test]
    fn push_collapsed_equals_per_char_form() {
        let pieces = [
            " ", "\t", "\r", "\u{b}", "\u{c}", "\u{85}", "\u{a0}", "\u{1680}", "\u{2000}",
            "\u{200a}", "\u{200b}", "\u{2028}", "\u{2029}", "\u{202f}", "\u{205f}", "\u{2060}",
            "\u{3000}", "\u{3001}", "\u{1c}", "中", "a", "é", "😀", "—", "\u{e1}", "\u{1681}",
        ];
        let mut state = 0x2545f4914f6cdd1du64;
        for _ in 0..20_000 {
            let line = random_concat(&pieces, 7, &mut state);
            for prefix in ["", "x"] {
                let (mut fast, mut slow) = (prefix.to_owned(), prefix.to_owned());
                push_collapsed(&line, &mut fast);
                push_collapsed_reference(&line, &mut slow);
                assert_eq!(fast, slow, "{line:?}");
            }
        }
    }

    #[test]
    fn whitespace_collapses_but_paragraphs_stay() {
        assert_eq!(clean("  a \t b \r\n\n  c  "), "a b\nc");
    }

    #[test]
    fn hostile_input_does_not_panic() {
        for s in [
            "<",
            "&",
            "&#",
            "&#x;",
            "&#99999999999;",
            "<<<>>>",
            "<!--",
            "\u{0}",
            "&#xD800;",
        ] {
            let _ = clean(s);
        }
    }
}
