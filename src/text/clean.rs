//! Text cleaning: everything that differs between two copies of one article but says nothing about
//! its story — markup, entities, width and case, URLs, whitespace, and the source/editor/ad lines
//! reposting sites add — is removed here, before segmentation.

use regex::Regex;
use std::sync::OnceLock;
use unicode_normalization::UnicodeNormalization;

/// Reusable cleaner (holds compiled patterns). Cheap to share across threads.
#[derive(Debug, Clone)]
pub struct Cleaner {
    attribute: Regex,
    url: Regex,
    boilerplate_line: Regex,
    read_more: Regex,
    strip_boilerplate: bool,
    fold_traditional: bool,
}

/// Traditional -> Simplified character table (OpenCC TSCharacters, see the file's header).
pub const TS_CHARACTERS: &str = include_str!("../../config/ts_characters.txt");

const FOLD_BASE: u32 = 0x3400;
const FOLD_END: u32 = 0xa000;

/// Direct-lookup table over U+3400..U+9FFF (55 KB, stays in cache): 0 = no folding.
fn fold_table() -> &'static [u16] {
    static TABLE: OnceLock<Vec<u16>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = vec![0u16; (FOLD_END - FOLD_BASE) as usize];
        for line in TS_CHARACTERS.lines().filter(|l| !l.starts_with('#')) {
            let mut chars = line.chars();
            if let (Some(t), Some('\t'), Some(s)) = (chars.next(), chars.next(), chars.next()) {
                let (t, s) = (u32::from(t), u32::from(s));
                if (FOLD_BASE..FOLD_END).contains(&t) && s <= 0xffff {
                    table[(t - FOLD_BASE) as usize] = s as u16;
                }
            }
        }
        table
    })
}

/// The Simplified form of a Traditional character (itself for anything else).
#[inline]
fn fold_char(c: char, table: &[u16]) -> char {
    let code = u32::from(c);
    if (FOLD_BASE..FOLD_END).contains(&code) {
        if let Some(&s) = table.get((code - FOLD_BASE) as usize) {
            if s != 0 {
                return char::from_u32(u32::from(s)).unwrap_or(c);
            }
        }
    }
    c
}

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
    pub fn clean(&self, text: &str) -> String {
        let normalised = if self.fold_traditional {
            normalize_and_fold(text, fold_table())
        } else {
            normalize_width_case(text)
        };
        let mut text = if normalised.contains(['<', '&']) {
            strip_tags_and_entities(&normalised)
        } else {
            normalised
        };
        // Each pass runs only when its trigger is present: most articles have no markup left.
        if text.contains('=') {
            text = self.attribute.replace_all(&text, " ").into_owned();
        }
        if text.contains("http") || text.contains("www.") {
            text = self.url.replace_all(&text, " ").into_owned();
        }
        if self.strip_boilerplate {
            // "Read more" glued to a body first, so that the line rule cannot take the body with it.
            if let std::borrow::Cow::Owned(t) = self.read_more.replace_all(&text, "") {
                text = t;
            }
        }
        self.finish(&text)
    }

    /// Last pass: drops boilerplate lines (short ones only: long lines are story text) and
    /// collapses whitespace, in one walk over the text.
    fn finish(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        for line in text.split('\n') {
            let boilerplate = self.strip_boilerplate
                && line.len() <= MAX_BOILERPLATE_LINE
                && self.boilerplate_line.is_match(line.trim_end_matches('\r'));
            if !boilerplate {
                push_collapsed(line, &mut out);
            }
        }
        out
    }
}

/// Appends `line` with whitespace runs collapsed to one space, as a new line of `out` (lines with
/// no visible character are dropped).
fn push_collapsed(line: &str, out: &mut String) {
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

/// `char::is_alphanumeric` with a fast path for ASCII and common CJK ideographs (the Unicode table
/// lookup is a measurable share of fingerprinting time otherwise).
#[inline]
pub fn is_word_char(c: char) -> bool {
    match c {
        'a'..='z' | 'A'..='Z' | '0'..='9' | '\u{4e00}'..='\u{9fff}' => true,
        '\0'..='\x7f' => false,
        _ => c.is_alphanumeric(),
    }
}

/// `normalize_width_case`, then Traditional -> Simplified folding of CJK characters, in the same
/// single pass over the text.
pub fn normalize_and_fold(text: &str, table: &[u16]) -> String {
    normalize(text, Some(table))
}

/// NFKC + lowercase with a fast path: ASCII, CJK ideographs and CJK punctuation are NFKC-stable, and
/// the full-width ASCII block maps by subtraction; only other runs go through the full algorithm.
pub fn normalize_width_case(text: &str) -> String {
    normalize(text, None)
}

fn normalize(text: &str, fold: Option<&[u16]>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut slow_run_start: Option<usize> = None;
    for (i, c) in text.char_indices() {
        let fast = match c {
            'A'..='Z' => Some(c.to_ascii_lowercase()),
            '\0'..='\x7f' => Some(c),
            '\u{4e00}'..='\u{9fff}' => Some(fold.map_or(c, |t| fold_char(c, t))),
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

fn push_nfkc_lower(run: &str, fold: Option<&[u16]>, out: &mut String) {
    for c in run.nfkc() {
        for l in c.to_lowercase() {
            out.push(fold.map_or(l, |t| fold_char(l, t)));
        }
    }
}

/// Removes HTML/XML tags and comments and decodes character entities. A `<` that does not open a
/// tag (e.g. "a < b") is kept. Block-level tags become newlines so paragraphs stay apart.
pub fn strip_tags_and_entities(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'<' if opens_tag(&bytes[i + 1..]) => {
                let rest = &text[i..];
                let end = if rest.starts_with("<!--") {
                    rest.find("-->").map(|e| e + 3)
                } else {
                    // Tags longer than this are not tags; keeps the scan linear on hostile input.
                    rest.bytes()
                        .take(4096)
                        .position(|b| b == b'>')
                        .map(|e| e + 1)
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
                let run_end = bytes[i..]
                    .iter()
                    .position(|&b| b == b'<' || b == b'&')
                    .map_or(bytes.len(), |p| i + p);
                let run_end = if run_end == i { i + 1 } else { run_end };
                out.push_str(&text[i..run_end]);
                i = run_end;
            }
        }
    }
    out
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
