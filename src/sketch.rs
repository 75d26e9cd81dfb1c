//! The second, precise check: a compact MinHash sketch of an article's character 4-grams.
//!
//! Simhash says "these two word distributions are close"; the sketch says "these two texts share
//! most of their wording". It is independent of segmentation (a typo or a resegmented name changes a
//! handful of 4-grams, not a word's weight) and of the title. One-permutation hashing: each 4-gram
//! hash (packed characters through a SplitMix64 finaliser) goes to one of 32 bins by its top 5 bits and the bin keeps the minimum of its low 32 bits,
//! so a sketch costs one hash per character and 132 bytes of storage.
//!
//! The sketch also carries the text's segment signatures ([`crate::segments`]): which sentences
//! two texts share, where the bins only estimate how much; and its event slots
//! ([`crate::slots`]): the names and figures each text holds.

use crate::segments::{Overlap, SegmentMask, Segments};
use crate::slots::{SlotOverlap, Slots};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

pub const BINS: usize = 32;
/// Size of the bins' binary form; the segment signatures follow it (see `to_bytes`).
pub const SKETCH_BYTES: usize = (BINS + 1) * 4;
/// Characters per shingle.
pub const SHINGLE: usize = 4;
const EMPTY: u32 = u32::MAX;

/// Version of the sketch definition; part of the fingerprint identity.
pub const SKETCH_VERSION: &str = "oph32-char4-splitmix/v1+segments+slots1";

/// Hash of a 4-character shingle: the three previous characters (packed, injective) and the new
/// one, mixed with the SplitMix64/Murmur3 finaliser. A few arithmetic operations per character
/// instead of a general-purpose hash over a UTF-8 buffer.
#[inline]
fn shingle_hash(prev3: u64, code: u64) -> u64 {
    let mut x = prev3 ^ code.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(23);
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sketch {
    pub bins: [u32; BINS],
    /// Number of shingles (4-gram windows) in the text.
    pub shingles: u32,
    /// The text's segment signatures.
    pub segments: Segments,
    /// The text's event slots (from segmentation: empty for a sketch of text alone).
    pub slots: Slots,
}

/// Estimated resemblance of two texts A (`self` of [`Sketch::similarity`]) and B (`other`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Similarity {
    /// Estimated Jaccard similarity of the 4-gram sets.
    pub jaccard: f64,
    /// Estimated |A ∩ B| / min(|A|, |B|): high when one text contains most of the other (truncation,
    /// an added paragraph).
    pub containment: f64,
    /// Estimated share of A's 4-grams found in B (|A ∩ B| / |A|): high when A says nothing B did
    /// not (an excerpt of B), low when A adds material of its own (a roundup quoting B).
    pub a_in_b: f64,
    /// Estimated share of B's 4-grams found in A.
    pub b_in_a: f64,
    /// Bins where A and B keep the same 4-gram (each an observed shared 4-gram).
    pub shared_bins: u32,
    /// Bins whose smallest 4-gram of A ∪ B is A's and not in B (an observed 4-gram of A only).
    pub a_only_bins: u32,
    /// Bins whose smallest 4-gram of A ∪ B is B's and not in A.
    pub b_only_bins: u32,
    /// Bins left out as template text: their smallest 4-gram of A ∪ B is A's and is held by many
    /// indexed articles (its band bucket is crowded), so it says nothing about this pair (see
    /// [`Sketch::similarity_discounting`]). Not counted in the three above.
    pub template_bins: u32,
    /// Shingles (4-gram windows) of A and of B: their ratio is the texts' length ratio, exact
    /// where the bins only estimate.
    pub a_shingles: u32,
    pub b_shingles: u32,
    /// The segments the two texts share, A's template segments left out.
    pub segments: Overlap,
    /// The event slots (names, figures) the two texts share.
    pub slots: SlotOverlap,
}

impl Similarity {
    /// B's length as a share of A's (by 4-gram windows, at most 1): with B whole inside A, the
    /// share of A that B makes up. Exact, unlike `a_in_b`, whose 32 bins cannot tell 0.5 from
    /// 0.6 reliably.
    pub fn b_share_of_a(&self) -> f64 {
        if self.a_shingles == 0 {
            0.0
        } else {
            (f64::from(self.b_shingles) / f64::from(self.a_shingles)).min(1.0)
        }
    }

    /// A's length over B's (by 4-gram windows; 1 when B has none): what A adds (above 1) or
    /// removes (below 1), exactly.
    pub fn length_ratio(&self) -> f64 {
        if self.b_shingles == 0 {
            1.0
        } else {
            f64::from(self.a_shingles) / f64::from(self.b_shingles)
        }
    }

    /// Bins that carry evidence about A (shared, or A's only), template bins left out.
    pub fn a_bins(&self) -> u32 {
        self.shared_bins + self.a_only_bins
    }

    /// Bins that carry evidence about either text (shared, A's only or B's only): none when
    /// cleaning left one of them no text, or every bin was template.
    pub fn compared_bins(&self) -> u32 {
        self.a_bins() + self.b_only_bins
    }
}

/// The band number under which the index keeps segment entries (segment hash -> the unique
/// articles holding it), beside the sketch's bands.
pub const SEGMENT_BAND: u8 = 0x40;

/// Bit `i` set: bin `i`. A set of bins, e.g. those whose value is common in the index.
pub type BinMask = u32;

/// The bins a band is made of, as a mask: two for a Jaccard band, one for a containment band.
pub fn band_bins(band: usize) -> BinMask {
    if band < BANDS {
        0b11 << (band * BAND_BINS)
    } else if band < ALL_BANDS {
        1 << (BANDS * BAND_BINS + (band - BANDS))
    } else {
        0
    }
}

/// The bins of the crowded bands in `crowded_bands` (bit `b` set: band `b`'s bucket is crowded).
/// A crowded Jaccard bucket means both of its values are held by many articles, so both bins are
/// common; a crowded containment bucket, its one bin.
pub fn crowded_bins(crowded_bands: u16) -> BinMask {
    (0..ALL_BANDS)
        .filter(|b| crowded_bands & (1 << b) != 0)
        .fold(0, |m, b| m | band_bins(b))
}

/// The bins no band covers (20..32): the index cannot say whether their values are common.
pub const UNBANDED_BINS: BinMask = !((1 << (BANDS * BAND_BINS + CONTAINMENT_BANDS)) - 1);

/// A's banded bins that must be crowded before its unbanded bins are left out too (of 20).
pub const TEMPLATE_PAGE_BINS: u32 = 8;

/// The bins the second check leaves out given the crowded bands of A's sketch: the crowded
/// bands' bins and, when at least [`TEMPLATE_PAGE_BINS`] of them are crowded, the unbanded ones.
/// A text that is mostly template (a page that is nine tenths chrome has chrome in nine bins of
/// ten, banded or not) then has only the bins of uncrowded bands, whose values few indexed
/// articles hold, as evidence. A few crowded bins (a common phrase) leave the unbanded bins in.
pub fn template_bins(crowded_bands: u16) -> BinMask {
    let crowded = crowded_bins(crowded_bands);
    if crowded.count_ones() >= TEMPLATE_PAGE_BINS {
        crowded | UNBANDED_BINS
    } else {
        crowded
    }
}

/// Number of LSH bands taken from a sketch (two bins each) for candidate search.
pub const BANDS: usize = 8;
/// Bins per band: two texts share a band with probability ~J^2.
pub const BAND_BINS: usize = 2;
/// Sketches of fewer shingles than this are not banded (too little text for a reliable estimate).
pub const MIN_BANDED_SHINGLES: u32 = 16;
/// Containment bands: single bins after the Jaccard bands' bins, band numbers `BANDS..ALL_BANDS`.
/// An excerpt holding a share f of its original's 4-grams keeps the original's bin value with
/// probability f, so one of these bands finds it with probability 1 - (1 - f)^4 (f = 0.4: 87%,
/// together with the Jaccard bands 97%), where two-bin bands need f^2.
pub const CONTAINMENT_BANDS: usize = 4;
/// All band numbers: the Jaccard bands, then the containment bands.
pub const ALL_BANDS: usize = BANDS + CONTAINMENT_BANDS;

impl Sketch {
    /// The LSH band keys of this sketch: (band number, 64-bit key). Two texts with Jaccard J share
    /// a given Jaccard band (0..8, two bins each) with probability about J^2, so a near-duplicate
    /// shares at least one of the 8 with high probability (J = 0.5: 90%, J = 0.7: 99.6%) while
    /// unrelated texts almost never do. The containment bands (8..12, one bin each) find texts
    /// that share a smaller part, such as an excerpt and its original (see `CONTAINMENT_BANDS`);
    /// one common 4-gram can make such a band crowded, which lookups ignore. Bands with an empty
    /// bin are skipped.
    pub fn bands(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        let enough = self.shingles >= MIN_BANDED_SHINGLES;
        (0..ALL_BANDS).filter_map(move |b| {
            let bins = if b < BANDS {
                &self.bins[b * BAND_BINS..(b + 1) * BAND_BINS]
            } else {
                let bin = BANDS * BAND_BINS + (b - BANDS);
                &self.bins[bin..bin + 1]
            };
            if !enough || bins.contains(&EMPTY) {
                return None;
            }
            let packed = match bins {
                [one] => u64::from(*one),
                [first, second, ..] => (u64::from(*first) << 32) | u64::from(*second),
                [] => return None,
            };
            Some((
                b,
                shingle_hash(packed >> 1, packed & 0x1f_ffff ^ (b as u64) << 40),
            ))
        })
    }

    /// Every entry the index keeps for a unique article with this sketch, as (band number, key):
    /// its LSH bands ([`Sketch::bands`]) and its indexed segments (band [`SEGMENT_BAND`], the
    /// segment's hash; see [`Segments::indexed`]).
    pub fn entries(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.bands().chain(
            self.segments
                .indexed()
                .map(|h| (usize::from(SEGMENT_BAND), u64::from(h))),
        )
    }

    /// Sketch of already-cleaned text. Only letters and digits count: punctuation, whitespace and
    /// symbols differ between copies without changing the story.
    pub fn of(text: &str) -> Sketch {
        let mut bins = [EMPTY; BINS];
        let mut shingles = 0u32;
        for_each_shingle(text, |_, bin, value| {
            if value < bins[bin] {
                bins[bin] = value;
            }
            shingles = shingles.saturating_add(1);
        });
        Sketch {
            bins,
            shingles,
            segments: Segments::of(text),
            slots: Slots::default(),
        }
    }

    /// This sketch carrying `slots` (found by segmenting the same text).
    pub fn with_slots(self, slots: Slots) -> Sketch {
        Sketch { slots, ..self }
    }

    pub fn is_empty(&self) -> bool {
        self.shingles == 0
    }

    /// Bins that sampled a 4-gram (all 32 but for a very short text).
    pub fn sampled_bins(&self) -> u32 {
        self.bins.iter().filter(|&&v| v != EMPTY).count() as u32
    }

    /// The estimated resemblance of this text (A) and `other` (B), in both directions.
    ///
    /// A bin keeps the smallest hash of each text; the smallest of A ∪ B in the bin is a uniform
    /// draw from A ∪ B. It is in A ∩ B when both bins agree, in A only when A's is smaller (B's
    /// bin empty included), in B only when B's is. So of the bins whose draw fell in A, the share
    /// that B also has estimates |A ∩ B| / |A|, whatever the sizes: an excerpt of a text three
    /// times its length still measures ~1, a text quoting B among as much material of its own
    /// ~0.5.
    pub fn similarity(&self, other: &Sketch) -> Similarity {
        self.similarity_discounting(other, 0)
    }

    /// [`Sketch::similarity`] without the bins of `common` (A's bins whose value many indexed
    /// articles hold: template text, page chrome) where A's value is the smallest of A ∪ B (shared
    /// or A's only). Such a 4-gram says nothing about the pair. Dropping the bin keeps the
    /// estimate unbiased: in every other bin the smallest 4-gram of A ∪ B is still a uniform draw
    /// from the 4-grams that are not common. B's own smaller values (B only) stay: they are not
    /// the common value.
    pub fn similarity_discounting(&self, other: &Sketch, common: BinMask) -> Similarity {
        self.similarity_with(other, common, 0)
    }

    /// [`Sketch::similarity_discounting`], and the segments shared with `template` (A's segments
    /// that many indexed articles hold) left out.
    pub fn similarity_with(
        &self,
        other: &Sketch,
        common: BinMask,
        template: SegmentMask,
    ) -> Similarity {
        let segments = self.segments.overlap(&other.segments, template);
        let slots = self.slots.overlap(&other.slots);
        let mut none = Similarity {
            jaccard: 0.0,
            containment: 0.0,
            a_in_b: 0.0,
            b_in_a: 0.0,
            shared_bins: 0,
            a_only_bins: 0,
            b_only_bins: 0,
            template_bins: 0,
            a_shingles: self.shingles,
            b_shingles: other.shingles,
            segments,
            slots,
        };
        if self.is_empty() || other.is_empty() {
            return none;
        }
        // A text that is mostly template (its unbanded bins left out, see `template_bins`): in a
        // Jaccard band that is not crowded but agrees with B on one bin only, that bin may be the
        // template's (the band is rare only through its other bin), so it is left out too. A
        // band agreeing on both bins, or a containment band (one bin), vouches for its values.
        let mut common = common;
        if common & UNBANDED_BINS == UNBANDED_BINS {
            for band in 0..BANDS {
                let bins = band_bins(band);
                let agree = (0..BINS)
                    .filter(|&i| bins & (1 << i) != 0 && self.bins[i] == other.bins[i])
                    .count();
                if common & bins == 0 && agree == 1 {
                    common |= bins;
                }
            }
        }
        let (mut shared, mut a_only, mut b_only, mut template) = (0u32, 0u32, 0u32, 0u32);
        for (i, (a, b)) in self.bins.iter().zip(other.bins.iter()).enumerate() {
            let is_common = common & (1 << i) != 0;
            match a.cmp(b) {
                std::cmp::Ordering::Equal if *a == EMPTY => {}
                std::cmp::Ordering::Equal | std::cmp::Ordering::Less if is_common => template += 1,
                std::cmp::Ordering::Equal => shared += 1,
                std::cmp::Ordering::Less => a_only += 1,
                std::cmp::Ordering::Greater => b_only += 1,
            }
        }
        none.template_bins = template;
        let used = shared + a_only + b_only;
        if used == 0 {
            return none;
        }
        let jaccard = f64::from(shared) / f64::from(used);
        let (na, nb) = (f64::from(self.shingles), f64::from(other.shingles));
        // |A ∩ B| = J (|A| + |B|) / (1 + J)
        let intersection = jaccard * (na + nb) / (1.0 + jaccard);
        let containment = (intersection / na.min(nb)).min(1.0);
        let share = |hit: u32, miss: u32| {
            if hit == 0 {
                0.0
            } else {
                f64::from(hit) / f64::from(hit + miss)
            }
        };
        Similarity {
            jaccard,
            containment,
            a_in_b: share(shared, a_only),
            b_in_a: share(shared, b_only),
            shared_bins: shared,
            a_only_bins: a_only,
            b_only_bins: b_only,
            template_bins: template,
            a_shingles: self.shingles,
            b_shingles: other.shingles,
            segments,
            slots,
        }
    }

    /// Binary form: 32 little-endian u32 bins, then the shingle count (132 bytes), then the
    /// segment signatures (`Segments::write`: 9 bytes and 5 per segment), then the event slots
    /// (`Slots::write`: 6 bytes and 5 per slot).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            SKETCH_BYTES + 9 + 5 * crate::segments::MAX_SEGMENTS + crate::slots::MAX_BYTES,
        );
        for v in self.bins.iter().chain(std::iter::once(&self.shingles)) {
            out.extend_from_slice(&v.to_le_bytes());
        }
        self.segments.write(&mut out);
        self.slots.write(&mut out);
        out
    }

    /// The binary form, whole.
    pub fn from_bytes(bytes: &[u8]) -> Option<Sketch> {
        match Sketch::read(bytes) {
            Some((sketch, used)) if used == bytes.len() => Some(sketch),
            _ => None,
        }
    }

    /// The binary form at the start of `bytes`, and its length. None if it is truncated or
    /// malformed (a sketch written before segments or slots were kept included).
    pub fn read(bytes: &[u8]) -> Option<(Sketch, usize)> {
        let head = bytes.get(..SKETCH_BYTES)?;
        let word = |i: usize| {
            u32::from_le_bytes([
                head[4 * i],
                head[4 * i + 1],
                head[4 * i + 2],
                head[4 * i + 3],
            ])
        };
        let mut bins = [EMPTY; BINS];
        for (i, b) in bins.iter_mut().enumerate() {
            *b = word(i);
        }
        let (segments, used) = Segments::read(&bytes[SKETCH_BYTES..])?;
        let (slots, slot_bytes) = Slots::read(&bytes[SKETCH_BYTES + used..])?;
        Some((
            Sketch {
                bins,
                shingles: word(BINS),
                segments,
                slots,
            },
            SKETCH_BYTES + used + slot_bytes,
        ))
    }

    /// The binary form, hex encoded (JSON outputs and stored records).
    pub fn to_hex(&self) -> String {
        let mut s = String::new();
        for b in self.to_bytes() {
            let _ = write!(s, "{b:02x}");
        }
        s
    }

    pub fn from_hex(s: &str) -> Option<Sketch> {
        if !s.len().is_multiple_of(2) || !s.is_ascii() {
            return None;
        }
        let bytes: Option<Vec<u8>> = (0..s.len() / 2)
            .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok())
            .collect();
        Sketch::from_bytes(&bytes?)
    }
}

impl Serialize for Sketch {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for Sketch {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Sketch::from_hex(&s).ok_or_else(|| serde::de::Error::custom("invalid sketch"))
    }
}

/// Calls `f(end, bin, value)` for every 4-gram of already-cleaned `text` (letters and digits only,
/// as [`Sketch::of`] counts them), `end` the byte offset just past its last character: the one
/// walk over the text that both the sketch and [`locate`] make, so they agree on every 4-gram.
#[inline(always)]
fn for_each_shingle(text: &str, mut f: impl FnMut(usize, usize, u32)) {
    // The last three characters (21 bits each: every Unicode scalar fits) packed in one word.
    let mut prev3: u64 = 0;
    let mut filled = 0usize;
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        // Decode by hand: CJK text is three-byte sequences, ASCII one byte; the rest goes
        // through `chars()` (the text is a `str`, so every sequence is valid).
        let (code, len, word) = match bytes[i] {
            b @ 0x00..=0x7f => (u32::from(b), 1, b.is_ascii_alphanumeric()),
            b0 @ 0xe0..=0xef if i + 2 < bytes.len() => {
                let code = crate::text::decode_three_byte(b0, bytes[i + 1], bytes[i + 2]);
                let word = (0x4e00..=0x9fff).contains(&code)
                    || char::from_u32(code).is_some_and(crate::text::clean::is_word_char);
                (code, 3, word)
            }
            _ => match text.get(i..).and_then(|rest| rest.chars().next()) {
                Some(c) => (
                    u32::from(c),
                    c.len_utf8(),
                    crate::text::clean::is_word_char(c),
                ),
                None => break,
            },
        };
        i += len;
        if !word {
            continue;
        }
        let code = u64::from(code);
        filled += 1;
        if filled >= SHINGLE {
            let h = shingle_hash(prev3, code);
            f(i, (h >> 59) as usize, h as u32);
        }
        prev3 = ((prev3 << 21) | code) & ((1 << 63) - 1);
    }
}

/// One of an earlier text's sampled 4-grams found in a later text (see [`locate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Located {
    /// Its 4-gram number in the later text.
    pub shingle: u32,
    /// The byte offset just past it in the later text.
    pub end: usize,
    /// The earlier text's bin that sampled it.
    pub bin: usize,
}

/// Where `earlier`'s sampled 4-grams (its bins' minima) occur in `text` (cleaned, as sketched):
/// every occurrence, in text order. With the earlier text inside this one, they mark where it is.
pub fn locate(text: &str, earlier: &Sketch) -> Vec<Located> {
    let mut found = Vec::new();
    let mut n = 0u32;
    for_each_shingle(text, |end, bin, value| {
        if earlier.bins[bin] == value && value != EMPTY {
            found.push(Located {
                shingle: n,
                end,
                bin,
            });
        }
        n = n.saturating_add(1);
    });
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "国家统计局今天发布数据显示，今年前三季度国内生产总值同比增长百分之六点二，\
        经济运行总体平稳，就业形势基本稳定，居民收入持续增长，消费对经济增长的贡献率继续提高。\
        专家认为，随着一系列稳增长政策措施落地见效，四季度经济有望保持平稳运行。";

    #[test]
    fn identical_and_unrelated() {
        let a = Sketch::of(TEXT);
        assert_eq!(a.similarity(&a).jaccard, 1.0);
        assert_eq!(a.similarity(&a).containment, 1.0);
        let b = Sketch::of("上海市气象台发布暴雨黄色预警，预计今天夜间到明天本市将出现大到暴雨，局部地区有大暴雨，请市民注意出行安全。");
        assert!(a.similarity(&b).jaccard < 0.1);
    }

    #[test]
    fn punctuation_and_whitespace_do_not_matter() {
        let a = Sketch::of(TEXT);
        let b = Sketch::of(&TEXT.replace('，', " , ").replace('。', "."));
        assert_eq!(a, b);
    }

    #[test]
    fn truncation_keeps_containment_high() {
        let a = Sketch::of(TEXT);
        let cut: String = TEXT.chars().take(TEXT.chars().count() * 6 / 10).collect();
        let b = Sketch::of(&cut);
        let s = a.similarity(&b);
        assert!(s.containment > 0.7, "{s:?}");
        assert!(s.jaccard < s.containment);
    }

    /// Six short paragraphs of different stories (written for this test).
    const PARAGRAPHS: [&str; 6] = [
        "市交通运输局今天通报，城区新开通的三条公交线路运行一周以来日均客流超过两万人次，早晚高峰发车间隔已缩短到六分钟。",
        "气象部门预计，受冷空气影响，本周后期全市将出现明显降温，最低气温可降至零下三度，请市民及时添衣保暖，注意出行安全。",
        "第十二届青少年科技创新大赛昨天闭幕，来自四十多所中小学的三百余件作品参展，其中机器人与人工智能类作品数量创历届新高。",
        "省农业农村厅发布数据显示，今年全省粮食总产量再创新高，优质稻种植面积比去年增加一成，农民人均可支配收入稳步增长。",
        "市图书馆新馆将于下月初正式对外开放，新馆藏书量达一百二十万册，设有少儿阅览区、数字阅读体验区和古籍修复展示区。",
        "为迎接旅游旺季，景区管理部门新增停车位八百个，并在主要路口设置临时引导标识，游客可通过小程序提前预约入园时段。",
    ];

    #[test]
    fn containment_is_directional() {
        let story = PARAGRAPHS.concat();
        let full = Sketch::of(&story);
        // An excerpt (the middle half) is in the story; the story is only half in the excerpt.
        let excerpt = Sketch::of(&format!("来源：某网{}", PARAGRAPHS[2..5].concat()));
        let s = excerpt.similarity(&full);
        assert!(s.a_in_b >= 0.9, "{s:?}");
        assert!(s.b_in_a < 0.8, "{s:?}");
        assert_eq!(
            s.a_in_b,
            f64::from(s.shared_bins) / f64::from(s.shared_bins + s.a_only_bins)
        );
        // A roundup: one short item among as much other material: the item is in it, not it in
        // the item.
        let item = Sketch::of(PARAGRAPHS[0]);
        let roundup = Sketch::of(&format!(
            "{}{}{}",
            PARAGRAPHS[3], PARAGRAPHS[0], PARAGRAPHS[5]
        ));
        let r = roundup.similarity(&item);
        assert!(r.a_in_b < 0.6, "{r:?}");
        assert!(r.b_in_a >= 0.9, "{r:?}");
        // Unrelated texts share nothing.
        let u = Sketch::of(PARAGRAPHS[1]).similarity(&item);
        assert_eq!((u.shared_bins, u.a_in_b, u.b_in_a), (0, 0.0, 0.0));
    }

    #[test]
    fn bands_jaccard_then_containment() {
        let a = Sketch::of(&PARAGRAPHS.concat());
        let bands: Vec<usize> = a.bands().map(|(b, _)| b).collect();
        assert_eq!(bands, (0..ALL_BANDS).collect::<Vec<_>>());
        // A containment band is one bin: texts agreeing on that bin alone share it.
        let mut b = Sketch::of(PARAGRAPHS[1]);
        b.bins[BANDS * BAND_BINS] = a.bins[BANDS * BAND_BINS];
        let shared: Vec<usize> = a
            .bands()
            .filter(|band| b.bands().any(|other| other == *band))
            .map(|(n, _)| n)
            .collect();
        assert_eq!(shared, vec![BANDS]);
        assert_eq!(Sketch::of("短文本").bands().count(), 0);
    }

    /// `Sketch::of` as it was before its hand-made decoder (`chars()` + `is_word_char`).
    fn sketch_reference(text: &str) -> Sketch {
        let mut bins = [EMPTY; BINS];
        let (mut prev3, mut filled, mut shingles) = (0u64, 0usize, 0u32);
        for c in text
            .chars()
            .filter(|&c| crate::text::clean::is_word_char(c))
        {
            let code = u64::from(u32::from(c));
            filled += 1;
            if filled >= SHINGLE {
                let h = shingle_hash(prev3, code);
                let bin = (h >> 59) as usize;
                bins[bin] = bins[bin].min(h as u32);
                shingles = shingles.saturating_add(1);
            }
            prev3 = ((prev3 << 21) | code) & ((1 << 63) - 1);
        }
        Sketch {
            bins,
            shingles,
            segments: Segments::of(text),
            slots: Slots::default(),
        }
    }

    #[test]
    fn decoder_equals_chars() {
        let mixed = format!(
            "{TEXT} abc 123 é ü ÿ ǅ 𠀀𠀁 😀 ｶﾀｶﾅ 가나다 ① \u{7ff}\u{800}\u{ffff}\u{10000}x"
        );
        for text in [TEXT, mixed.as_str(), "", "a", "中", "𠀀", "é"] {
            for end in (0..=text.len()).filter(|&e| text.is_char_boundary(e)) {
                assert_eq!(Sketch::of(&text[..end]), sketch_reference(&text[..end]));
            }
        }
    }

    #[test]
    fn template_bins_are_left_out() {
        // Bands 0 (bins 0, 1) and 8 (bin 16) crowded: three bins; with eight or more crowded, the
        // unbanded bins 20..32 too.
        assert_eq!(crowded_bins(0b1_0000_0001), 0b1_0000_0000_0000_0011);
        assert_eq!(template_bins(0b1_0000_0001), 0b1_0000_0000_0000_0011);
        let many = template_bins(0b1111);
        assert_eq!(many, 0xff | UNBANDED_BINS);
        let story = Sketch::of(&PARAGRAPHS.concat());
        let mut copy = story;
        copy.bins[BINS - 1] = 7; // one bin differs
        let all = copy.similarity(&story);
        assert_eq!(
            (all.shared_bins, all.a_only_bins, all.template_bins),
            (31, 1, 0)
        );
        // Bins 0 and 1 held by many articles: left out, shared or not.
        let some = copy.similarity_discounting(&story, 0b11);
        assert_eq!(
            (some.shared_bins, some.a_only_bins, some.template_bins),
            (29, 1, 2)
        );
        // B's own smaller value in a common bin is still B's (not the common value).
        let mut lower = story;
        lower.bins[0] = 1;
        let b_lower = copy.similarity_discounting(&lower, 0b1);
        assert_eq!((b_lower.b_only_bins, b_lower.template_bins), (1, 0));
        // Mostly template: a Jaccard band agreeing on one bin only is left out whole.
        let mut half = story;
        half.bins[9] = 3; // band 4 (bins 8, 9) agrees on bin 8 only
        let t = half.similarity_discounting(&story, template_bins(0b1111));
        assert_eq!(t.template_bins, 8 + 12 + 2);
        assert_eq!((t.shared_bins, t.a_only_bins), (10, 0));
    }

    #[test]
    fn hex_round_trip_and_empty() {
        let a = Sketch::of(TEXT);
        assert_eq!(Sketch::from_hex(&a.to_hex()), Some(a));
        assert_eq!(Sketch::from_bytes(&a.to_bytes()), Some(a));
        assert_eq!(Sketch::from_bytes(&[0u8; 5]), None);
        assert_eq!(Sketch::from_hex("zz"), None);
        let e = Sketch::of("，。!");
        assert!(e.is_empty());
        assert_eq!(e.similarity(&a).jaccard, 0.0);
    }
}
