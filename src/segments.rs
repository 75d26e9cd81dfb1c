//! Segment signatures: an article's cleaned text cut into sentences, each signed with a hash.
//!
//! The 32-bin sketch estimates how much of one text is in another; it cannot say *which* text is
//! shared, and its ±0.09 cannot see an earlier report that is a fifth of the later one. Sentences
//! can: an update holds the earlier report's sentences whole, a repost with one name changed loses
//! only the sentences holding the name, and the sentences two court rulings share are the court's
//! form, which many other indexed articles hold too (template text, known by how many unique
//! articles hold the segment: see `index::layout::SEGMENT_BAND`).
//!
//! A segment is a clause: it ends at a sentence end (。！？；!?;… or a line break) or a comma
//! (，,、：:; a half-width full stop too, outside a figure), so that an edit (a word changed, a figure updated) changes the one clause it is in,
//! not a whole sentence. One of fewer than [`MIN_SEGMENT_CHARS`] letters and digits is not kept
//! (a dateline, "记者 张三", "与此同时" say nothing alone, and dropping it keeps every other
//! segment independent of its neighbours). Only letters and digits are signed (cleaning already
//! folded width, case and script), so punctuation and spacing differences between copies do not
//! change a signature. An article keeps at most
//! [`MAX_SEGMENTS`] signatures: the ones with the smallest hashes (a bottom-k sample, so two
//! articles sampled alike are compared on the same part of the hash range), with their lengths and
//! the total length of all its segments.

/// Clauses with fewer letters and digits than this are not kept.
pub const MIN_SEGMENT_CHARS: u32 = 8;
/// Signatures kept per article (the smallest hashes).
pub const MAX_SEGMENTS: usize = 40;
/// Segments at least this long are searchable: looked up by a new article, and (the first
/// [`INDEXED_SEGMENTS`] in hash order) entered in the index by a unique one.
pub const SEARCHABLE_SEGMENT_CHARS: u8 = 12;
/// Searchable segments of a unique article entered in the index.
pub const INDEXED_SEGMENTS: usize = 8;
/// Longest length recorded for one segment (a byte): longer segments count as this long.
const MAX_RECORDED_CHARS: u32 = u8::MAX as u32;
/// Binary form: count (1 byte), bound (4), total characters (4), then per segment hash (4) and
/// length (1).
const HEADER_BYTES: usize = 9;
const ENTRY_BYTES: usize = 5;

/// Version of the segment definition; part of the fingerprint identity.
pub const SEGMENTS_VERSION: &str = "clause8-fnv32/bottom40";

/// The signatures of one article's segments (see the module).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segments {
    /// Hashes, ascending, distinct.
    hashes: [u32; MAX_SEGMENTS],
    /// Letters and digits of each segment (at most 255).
    lens: [u8; MAX_SEGMENTS],
    count: u8,
    /// The largest hash the sample covers: `u32::MAX` when every segment is kept, else the
    /// largest kept hash.
    bound: u32,
    /// Letters and digits of all segments (not only the kept ones).
    chars: u32,
}

impl Default for Segments {
    fn default() -> Self {
        Segments {
            hashes: [0; MAX_SEGMENTS],
            lens: [0; MAX_SEGMENTS],
            count: 0,
            bound: u32::MAX,
            chars: 0,
        }
    }
}

/// Bit `i` set: the `i`-th kept segment (in hash order).
pub type SegmentMask = u64;

/// How much of two texts' kept segments they share (A the new article, B the indexed one), in
/// letters and digits, over the part of the hash range both samples cover. Template segments of A
/// (held by many indexed articles) are left out of every figure but `template_chars`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Overlap {
    /// Segments both hold, and their characters.
    pub shared: u32,
    pub shared_chars: u32,
    /// A's compared segments and characters (B's below).
    pub a: u32,
    pub a_chars: u32,
    pub b: u32,
    pub b_chars: u32,
    /// Characters of the shared segments left out as template.
    pub template_chars: u32,
    /// Template segments left out (shared or A's only).
    pub template: u32,
}

impl Overlap {
    /// Share of A's compared characters that B holds (None: A has none compared).
    pub fn a_in_b(&self) -> Option<f64> {
        (self.a_chars > 0).then(|| f64::from(self.shared_chars) / f64::from(self.a_chars))
    }

    /// Share of B's compared characters that A holds.
    pub fn b_in_a(&self) -> Option<f64> {
        (self.b_chars > 0).then(|| f64::from(self.shared_chars) / f64::from(self.b_chars))
    }
}

/// FNV-1a over code points, finished with a multiply-xorshift so that the top bits mix too.
#[derive(Clone, Copy)]
struct Signer(u64);

impl Signer {
    const START: u64 = 0xcbf2_9ce4_8422_2325;
    fn push(&mut self, c: char) {
        self.0 = (self.0 ^ u64::from(u32::from(c))).wrapping_mul(0x0100_0000_01b3);
    }
    fn finish(self) -> u32 {
        let mut x = self.0;
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x as u32
    }
}

fn ends_clause(c: char) -> bool {
    matches!(
        c,
        '。' | '！'
            | '？'
            | '；'
            | '!'
            | '?'
            | ';'
            | '\n'
            | '\r'
            | '…'
            | '，'
            | ','
            | '、'
            | '：'
            | ':'
    )
}

impl Segments {
    /// The segments of already-cleaned `text`.
    pub fn of(text: &str) -> Segments {
        let mut all: Vec<(u32, u32)> = Vec::new();
        let mut signer = Signer(Signer::START);
        let mut len = 0u32;
        let mut chars = 0u32;
        let mut close = |signer: &mut Signer, len: &mut u32| {
            if *len >= MIN_SEGMENT_CHARS {
                all.push((signer.finish(), *len));
            }
            *signer = Signer(Signer::START);
            *len = 0;
        };
        // The last letter or digit: a full stop turned half-width ('.', a reposting site's
        // punctuation) ends a clause too, but not inside a figure ("3.5").
        let mut after_digit = false;
        for c in text.chars() {
            if crate::text::clean::is_word_char(c) {
                signer.push(c);
                len += 1;
                chars = chars.saturating_add(1);
                after_digit = c.is_ascii_digit();
            } else if ends_clause(c) || (c == '.' && !after_digit) {
                close(&mut signer, &mut len);
            }
        }
        close(&mut signer, &mut len);
        Segments::from_signed(all, chars)
    }

    /// The segments of a text from its segments' (hash, letters and digits), in any order, and
    /// the text's letters and digits: the sample [`Segments::of`] keeps (benchmarks build
    /// synthetic articles with it).
    pub fn from_signed(mut all: Vec<(u32, u32)>, chars: u32) -> Segments {
        // Distinct hashes (a repeated sentence counts once, at its longest), smallest first.
        all.sort_unstable();
        all.dedup_by(|later, kept| {
            if later.0 == kept.0 {
                kept.1 = kept.1.max(later.1);
                true
            } else {
                false
            }
        });
        let mut s = Segments {
            chars,
            ..Segments::default()
        };
        let kept = all.len().min(MAX_SEGMENTS);
        for (i, &(h, l)) in all[..kept].iter().enumerate() {
            s.hashes[i] = h;
            s.lens[i] = l.min(MAX_RECORDED_CHARS) as u8;
        }
        s.count = kept as u8;
        if all.len() > MAX_SEGMENTS {
            s.bound = all[MAX_SEGMENTS - 1].0;
        }
        s
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Kept segments: (hash, characters), hash ascending.
    pub fn iter(&self) -> impl Iterator<Item = (u32, u8)> + '_ {
        let n = usize::from(self.count);
        self.hashes[..n]
            .iter()
            .copied()
            .zip(self.lens[..n].iter().copied())
    }

    /// Letters and digits of all the article's segments.
    pub fn chars(&self) -> u32 {
        self.chars
    }

    /// True when every segment is kept (no sample).
    pub fn whole(&self) -> bool {
        self.bound == u32::MAX
    }

    /// The kept segments long enough to search by, with their position among the kept ones:
    /// what a new article looks up.
    pub fn searchable(&self) -> impl Iterator<Item = (usize, u32)> + '_ {
        self.iter()
            .enumerate()
            .filter(|(_, (_, len))| *len >= SEGMENT_SEARCH_MIN)
            .map(|(i, (h, _))| (i, h))
    }

    /// The segments a unique article enters in the index: its first [`INDEXED_SEGMENTS`]
    /// searchable ones in hash order (so a later text holding this one whole, sampled alike,
    /// looks up the same ones).
    pub fn indexed(&self) -> impl Iterator<Item = u32> + '_ {
        self.searchable().take(INDEXED_SEGMENTS).map(|(_, h)| h)
    }

    /// What A (`self`) and B share, A's `template` segments left out.
    pub fn overlap(&self, other: &Segments, template: SegmentMask) -> Overlap {
        let bound = self.bound.min(other.bound);
        let mut o = Overlap::default();
        let (mut i, mut j) = (0usize, 0usize);
        let (na, nb) = (usize::from(self.count), usize::from(other.count));
        loop {
            let a = (i < na && self.hashes[i] <= bound).then(|| self.hashes[i]);
            let b = (j < nb && other.hashes[j] <= bound).then(|| other.hashes[j]);
            let a_template = a.is_some() && template & (1 << i) != 0;
            match (a, b) {
                (None, None) => break,
                (Some(ha), Some(hb)) if ha == hb => {
                    let len = u32::from(self.lens[i].max(other.lens[j]));
                    if a_template {
                        o.template += 1;
                        o.template_chars += len;
                    } else {
                        o.shared += 1;
                        o.shared_chars += len;
                        o.a += 1;
                        o.a_chars += len;
                        o.b += 1;
                        o.b_chars += len;
                    }
                    i += 1;
                    j += 1;
                }
                (Some(ha), hb) if hb.is_none_or(|hb| ha < hb) => {
                    if a_template {
                        o.template += 1;
                    } else {
                        o.a += 1;
                        o.a_chars += u32::from(self.lens[i]);
                    }
                    i += 1;
                }
                _ => {
                    o.b += 1;
                    o.b_chars += u32::from(other.lens[j]);
                    j += 1;
                }
            }
        }
        o
    }

    /// Binary form (see `HEADER_BYTES`): 9 + 5 bytes per kept segment.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.push(self.count);
        out.extend_from_slice(&self.bound.to_le_bytes());
        out.extend_from_slice(&self.chars.to_le_bytes());
        for (h, l) in self.iter() {
            out.extend_from_slice(&h.to_le_bytes());
            out.push(l);
        }
    }

    /// Reads the binary form at the start of `bytes`: the segments and the bytes they took.
    /// None if it is truncated, too long or its hashes are not ascending.
    pub fn read(bytes: &[u8]) -> Option<(Segments, usize)> {
        let (&count, rest) = bytes.split_first()?;
        let n = usize::from(count);
        let size = HEADER_BYTES + n * ENTRY_BYTES;
        if n > MAX_SEGMENTS || bytes.len() < size {
            return None;
        }
        let word = |at: usize| {
            rest.get(at..at + 4)
                .and_then(|w| w.try_into().ok())
                .map(u32::from_le_bytes)
        };
        let mut s = Segments {
            count,
            bound: word(0)?,
            chars: word(4)?,
            ..Segments::default()
        };
        for i in 0..n {
            let at = 8 + i * ENTRY_BYTES;
            s.hashes[i] = word(at)?;
            s.lens[i] = *rest.get(at + 4)?;
            if i > 0 && s.hashes[i] <= s.hashes[i - 1] {
                return None;
            }
        }
        Some((s, size))
    }
}

/// Searchable length, as the byte the lengths are stored in.
const SEGMENT_SEARCH_MIN: u8 = SEARCHABLE_SEGMENT_CHARS;

#[cfg(test)]
mod tests {
    use super::*;

    const STORY: &str = "国务院今天召开常务会议，部署进一步稳定就业的措施。会议指出，今年以来就业形势总体稳定。\n会议要求各地加大对中小企业的支持力度，落实减税降费政策。";

    #[test]
    fn sentences_are_signed_without_punctuation_or_spacing() {
        let a = Segments::of(STORY);
        let b = Segments::of(&STORY.replace('，', ",").replace('。', "。 "));
        assert_eq!(a.iter().count(), 5);
        assert_eq!(a, b);
        // One character changed changes one clause.
        let c = Segments::of(&STORY.replace("今天", "昨天"));
        let o = a.overlap(&c, 0);
        assert_eq!((o.shared, o.a, o.b), (4, 5, 5));
    }

    #[test]
    fn clauses_are_segments_and_short_ones_are_not_kept() {
        // "记者张三" is 4 characters: not kept, and the next clause is signed alone.
        let s = Segments::of("记者张三。国务院今天召开常务会议，部署就业工作的各项措施。");
        assert_eq!(s.iter().count(), 2);
        assert_eq!(s.chars(), 26);
        let alone = Segments::of("国务院今天召开常务会议，部署就业工作的各项措施。");
        assert_eq!(s.overlap(&alone, 0).shared, 2);
    }

    #[test]
    fn an_earlier_report_inside_a_later_one_is_held_whole() {
        let earlier = Segments::of(STORY);
        let later = Segments::of(&format!(
            "{STORY}\n记者了解到，多地已经出台配套细则，重点支持高校毕业生和农民工就业。专家认为，这些措施将有效缓解就业压力。"
        ));
        let o = later.overlap(&earlier, 0);
        assert_eq!(o.b_in_a(), Some(1.0));
        assert!(o.a_in_b().is_some_and(|s| s < 0.7));
        // Every segment the earlier one indexes is one the later one looks up.
        let looked: Vec<u32> = later.searchable().map(|(_, h)| h).collect();
        assert!(earlier.indexed().all(|h| looked.contains(&h)));
    }

    #[test]
    fn template_segments_are_left_out() {
        let a = Segments::of(STORY);
        let b = Segments::of(&STORY.replace("今天", "昨天"));
        let all = a.overlap(&b, 0);
        let first_shared = a
            .iter()
            .position(|(h, _)| b.iter().any(|(g, _)| g == h))
            .unwrap_or(0);
        let o = a.overlap(&b, 1 << first_shared);
        assert_eq!(o.shared + 1, all.shared);
        assert_eq!(o.template, 1);
        assert!(o.template_chars > 0);
    }

    #[test]
    fn long_texts_keep_a_bottom_sample_compared_on_the_common_range() {
        let text: String = (0..200)
            .map(|i| format!("第{i}条消息说明了一件不同的事情。"))
            .collect();
        let s = Segments::of(&text);
        assert_eq!(s.iter().count(), MAX_SEGMENTS);
        assert!(!s.whole());
        let part: String = (0..100)
            .map(|i| format!("第{i}条消息说明了一件不同的事情。"))
            .collect();
        let p = Segments::of(&part);
        // The part is wholly in the text: every compared segment of it is shared.
        assert_eq!(s.overlap(&p, 0).b_in_a(), Some(1.0));
    }

    #[test]
    fn binary_form_round_trips_and_refuses_damage() {
        let s = Segments::of(STORY);
        let mut out = Vec::new();
        s.write(&mut out);
        out.extend_from_slice(b"tail");
        assert_eq!(Segments::read(&out), Some((s, out.len() - 4)));
        assert_eq!(Segments::read(&out[..5]), None);
        let mut bad = out.clone();
        bad[0] = 200;
        assert_eq!(Segments::read(&bad), None);
    }
}
