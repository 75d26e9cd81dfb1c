//! Event slots: who, where, which organisation, how many — the proper names and figures of a
//! text, kept with its sketch so that the decision can read what a report is *about*.
//!
//! Two court rulings built on one form share four fifths of their text and differ in the
//! defendant, the court and the sentence; two tender lots differ in the lot number and the sum.
//! A rewrite of one report, on the other hand, keeps its names and figures while its wording
//! changes. The 4-gram sketch and the clauses see wording; slots see the names and figures.
//!
//! Slots come from the segmentation pass that makes the fingerprint (no second cut): a dictionary
//! word jieba's dictionary tags as a person, place, organisation or other proper noun (`nr`,
//! `ns`, `nt`, `nz`) of two or more characters, or a word of two to four CJK characters that is
//! not in the dictionary at all (jieba's HMM joined it: mostly names the dictionary lacks), is an
//! *entity*; a number of two or more digits, or with a decimal point or a percent sign (commas
//! and leading zeros dropped), is a *figure* (jieba cuts `20,000` at the comma: such a figure
//! counts by its leading group, `20`, the same in every copy). Each is kept as a 32-bit hash with how often the
//! text holds it; an article keeps its [`MAX_ENTITIES`] most frequent entities and
//! [`MAX_FIGURES`] most frequent figures (ties by hash, so the choice is deterministic), and the
//! number of distinct ones it has in all.

use serde::{Deserialize, Serialize};

/// Entities kept per article (the most frequent).
pub const MAX_ENTITIES: usize = 16;
/// Figures kept per article (the most frequent).
pub const MAX_FIGURES: usize = 12;
/// An article's heaviest entities, compared across the pair: the ones named at least twice,
/// at most this many.
pub const TOP_ENTITIES: usize = 5;
/// Counts are stored in a byte.
const MAX_COUNT: u32 = u8::MAX as u32;
/// Binary form: entity count (1), figure count (1), distinct entities (2), distinct figures
/// (2), then per entity hash (4) and count (1), per figure hash (4) and count (1).
const HEADER_BYTES: usize = 6;
const ENTRY_BYTES: usize = 5;
/// Largest binary form.
pub const MAX_BYTES: usize = HEADER_BYTES + ENTRY_BYTES * (MAX_ENTITIES + MAX_FIGURES);

/// Version of the slot definition; part of the fingerprint identity.
pub const SLOTS_VERSION: &str = "slots-ent16-fig12/v1";

/// What a word of the segmentation pass is to the slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotKind {
    Entity,
    Figure,
}

/// The slots of one article (see the module). Heaviest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Slots {
    entities: [(u32, u8); MAX_ENTITIES],
    figures: [(u32, u8); MAX_FIGURES],
    entity_count: u8,
    figure_count: u8,
    /// Distinct entities and figures of the text (not only the kept ones), saturating.
    distinct_entities: u16,
    distinct_figures: u16,
}

/// How many of one kind of slot two texts (A the new article, B the indexed one) share, over
/// the kept ones.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotShare {
    /// Kept by both.
    pub shared: u32,
    /// Kept by A only, and by B only.
    pub only_later: u32,
    pub only_earlier: u32,
    /// Both texts keep every one they hold (neither had more than it keeps): the counts are
    /// then exact, not over two samples.
    #[serde(default)]
    pub complete: bool,
}

impl SlotShare {
    /// The share of the poorer side's slots (the one that keeps fewer) that the other keeps too:
    /// None when either side keeps none.
    pub fn poorer_share(&self) -> Option<f64> {
        let a = self.shared + self.only_later;
        let b = self.shared + self.only_earlier;
        let poorer = a.min(b);
        (poorer > 0).then(|| f64::from(self.shared) / f64::from(poorer))
    }

    /// Slots either side keeps.
    pub fn total(&self) -> u32 {
        self.shared + self.only_later + self.only_earlier
    }
}

/// The slot evidence about a pair (A the new article, B the indexed one): `match.slots`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotOverlap {
    pub entities: SlotShare,
    pub figures: SlotShare,
    /// A's heaviest entities (named twice or more, at most [`TOP_ENTITIES`]) and how many of them
    /// B keeps; the same of B's in A.
    pub later_top: u32,
    pub later_top_in_earlier: u32,
    pub earlier_top: u32,
    pub earlier_top_in_later: u32,
}

impl SlotOverlap {
    /// The evidence as a match records it: None when neither text keeps a slot.
    pub fn of_pair(o: &SlotOverlap) -> Option<Box<SlotOverlap>> {
        (o.entities.total() > 0 || o.figures.total() > 0).then(|| Box::new(*o))
    }

    /// The smaller of the two sides' shares of their heaviest entities found in the other: what
    /// the two texts are mostly about agrees (None when neither names an entity twice).
    pub fn top_agreement(&self) -> Option<f64> {
        let share = |n: u32, found: u32| (n > 0).then(|| f64::from(found) / f64::from(n));
        match (
            share(self.later_top, self.later_top_in_earlier),
            share(self.earlier_top, self.earlier_top_in_later),
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Collects an article's slots while its words are counted.
#[derive(Debug, Default)]
pub struct SlotCollector {
    entities: Vec<(u32, u32)>,
    figures: Vec<(u32, u32)>,
}

impl SlotCollector {
    pub fn clear(&mut self) {
        self.entities.clear();
        self.figures.clear();
    }

    /// One slot of the text, with how often the text holds it (a hash added twice, say two
    /// spellings of one figure, counts once with both counts).
    pub fn add(&mut self, kind: SlotKind, hash: u32, count: u32) {
        match kind {
            SlotKind::Entity => self.entities.push((hash, count)),
            SlotKind::Figure => self.figures.push((hash, count)),
        }
    }

    /// The kept slots: the most frequent of each kind, ties by hash.
    pub fn finish(&mut self) -> Slots {
        merge_repeats(&mut self.entities);
        merge_repeats(&mut self.figures);
        let mut slots = Slots {
            distinct_entities: saturate16(self.entities.len()),
            distinct_figures: saturate16(self.figures.len()),
            ..Slots::default()
        };
        slots.entity_count = keep_heaviest(&mut self.entities, &mut slots.entities);
        slots.figure_count = keep_heaviest(&mut self.figures, &mut slots.figures);
        slots
    }
}

/// One entry per hash, with the counts of its repeats added.
fn merge_repeats(all: &mut Vec<(u32, u32)>) {
    all.sort_unstable_by_key(|e| e.0);
    all.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            kept.1 = kept.1.saturating_add(later.1);
        }
        same
    });
}

fn saturate16(n: usize) -> u16 {
    u16::try_from(n).unwrap_or(u16::MAX)
}

/// Moves the heaviest of `all` (count descending, then hash) into `kept`; returns how many.
fn keep_heaviest<const N: usize>(all: &mut [(u32, u32)], kept: &mut [(u32, u8); N]) -> u8 {
    let heavier = |a: &(u32, u32), b: &(u32, u32)| b.1.cmp(&a.1).then(a.0.cmp(&b.0));
    if all.len() > N {
        all.select_nth_unstable_by(N - 1, heavier);
    }
    let n = all.len().min(N);
    all[..n].sort_unstable_by(heavier);
    for (slot, &(hash, count)) in kept.iter_mut().zip(&all[..n]) {
        *slot = (hash, count.min(MAX_COUNT) as u8);
    }
    n as u8
}

/// The figure a number token stands for: commas (thousands separators) and leading zeros of
/// the integer part dropped. None if it is not a figure (fewer than two digits, no decimal
/// point nor percent sign).
pub fn figure(token: &str) -> Option<String> {
    let digits = token.bytes().filter(u8::is_ascii_digit).count();
    let marked = token.contains('.') || token.contains('%');
    if digits == 0 || (digits < 2 && !marked) {
        return None;
    }
    let plain: String = token.chars().filter(|&c| c != ',').collect();
    let trimmed = plain.trim_start_matches('0');
    match trimmed.chars().next() {
        // Zeros alone: the "000" group of a figure jieba cut at its separator.
        None => None,
        Some(c) if !c.is_ascii_digit() => Some(format!("0{trimmed}")),
        Some(_) => Some(trimmed.to_owned()),
    }
}

/// True if `word` is two to four CJK characters (U+4E00..U+9FFF): a word jieba's HMM joined
/// that the dictionary lacks is then taken for a name.
pub fn is_name_shaped(word: &str) -> bool {
    let n = word.chars().count();
    (2..=4).contains(&n) && word.chars().all(|c| ('\u{4e00}'..='\u{9fff}').contains(&c))
}

/// True if a dictionary tag names a person, place, organisation or other proper noun.
pub fn is_entity_tag(tag: &str) -> bool {
    ["nr", "ns", "nt", "nz"].iter().any(|t| tag.starts_with(t))
}

impl Slots {
    pub fn entities(&self) -> &[(u32, u8)] {
        &self.entities[..usize::from(self.entity_count)]
    }

    pub fn figures(&self) -> &[(u32, u8)] {
        &self.figures[..usize::from(self.figure_count)]
    }

    pub fn distinct_entities(&self) -> u16 {
        self.distinct_entities
    }

    pub fn distinct_figures(&self) -> u16 {
        self.distinct_figures
    }

    pub fn is_empty(&self) -> bool {
        self.entity_count == 0 && self.figure_count == 0
    }

    /// The heaviest entities: named at least twice, at most [`TOP_ENTITIES`].
    fn top(&self) -> impl Iterator<Item = u32> + '_ {
        self.entities()
            .iter()
            .take(TOP_ENTITIES)
            .filter(|e| e.1 >= 2)
            .map(|e| e.0)
    }

    /// What `self` (A) and `other` (B) share.
    pub fn overlap(&self, other: &Slots) -> SlotOverlap {
        let share = |a: &[(u32, u8)], b: &[(u32, u8)], complete: bool| {
            let shared = a.iter().filter(|x| b.iter().any(|y| y.0 == x.0)).count() as u32;
            SlotShare {
                shared,
                only_later: a.len() as u32 - shared,
                only_earlier: b.len() as u32 - shared,
                complete,
            }
        };
        let all_kept = |kept: usize, distinct: u16| usize::from(distinct) <= kept;
        let found = |top: &Slots, other: &Slots| {
            let (mut n, mut found) = (0, 0);
            for hash in top.top() {
                n += 1;
                found += u32::from(other.entities().iter().any(|e| e.0 == hash));
            }
            (n, found)
        };
        let (later_top, later_top_in_earlier) = found(self, other);
        let (earlier_top, earlier_top_in_later) = found(other, self);
        SlotOverlap {
            entities: share(
                self.entities(),
                other.entities(),
                all_kept(self.entities().len(), self.distinct_entities)
                    && all_kept(other.entities().len(), other.distinct_entities),
            ),
            figures: share(
                self.figures(),
                other.figures(),
                all_kept(self.figures().len(), self.distinct_figures)
                    && all_kept(other.figures().len(), other.distinct_figures),
            ),
            later_top,
            later_top_in_earlier,
            earlier_top,
            earlier_top_in_later,
        }
    }

    /// Binary form (see `HEADER_BYTES`): 6 bytes and 5 per kept slot.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.push(self.entity_count);
        out.push(self.figure_count);
        out.extend_from_slice(&self.distinct_entities.to_le_bytes());
        out.extend_from_slice(&self.distinct_figures.to_le_bytes());
        for &(hash, count) in self.entities().iter().chain(self.figures()) {
            out.extend_from_slice(&hash.to_le_bytes());
            out.push(count);
        }
    }

    /// Reads the binary form at the start of `bytes`: the slots and the bytes they took. None if
    /// it is truncated or holds more slots than an article keeps.
    pub fn read(bytes: &[u8]) -> Option<(Slots, usize)> {
        let head = bytes.get(..HEADER_BYTES)?;
        let (entities, figures) = (usize::from(head[0]), usize::from(head[1]));
        if entities > MAX_ENTITIES || figures > MAX_FIGURES {
            return None;
        }
        let size = HEADER_BYTES + ENTRY_BYTES * (entities + figures);
        let body = bytes.get(HEADER_BYTES..size)?;
        let mut s = Slots {
            entity_count: head[0],
            figure_count: head[1],
            distinct_entities: u16::from_le_bytes([head[2], head[3]]),
            distinct_figures: u16::from_le_bytes([head[4], head[5]]),
            ..Slots::default()
        };
        let mut entries = body.chunks_exact(ENTRY_BYTES).map(|e| {
            (
                u32::from_le_bytes([e[0], e[1], e[2], e[3]]),
                e[ENTRY_BYTES - 1],
            )
        });
        for slot in s.entities.iter_mut().take(entities) {
            *slot = entries.next()?;
        }
        for slot in s.figures.iter_mut().take(figures) {
            *slot = entries.next()?;
        }
        Some((s, size))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(entities: &[(u32, u32)], figures: &[(u32, u32)]) -> Slots {
        let mut c = SlotCollector::default();
        for &(h, n) in entities {
            c.add(SlotKind::Entity, h, n);
        }
        for &(h, n) in figures {
            c.add(SlotKind::Figure, h, n);
        }
        c.finish()
    }

    #[test]
    fn the_heaviest_are_kept_ties_by_hash() {
        let many: Vec<(u32, u32)> = (0..40).map(|h| (h, 1 + h % 3)).collect();
        let s = slots(&many, &[(7, 1)]);
        assert_eq!(s.entities().len(), MAX_ENTITIES);
        assert_eq!(s.distinct_entities(), 40);
        // Counts 3 first (hashes 2, 5, 8, ...), ascending hash within a count.
        assert_eq!(s.entities()[0], (2, 3));
        assert_eq!(s.entities()[1], (5, 3));
        assert!(s.entities().windows(2).all(|w| w[0].1 >= w[1].1));
        // The same slots in another order keep the same.
        let mut reversed = many.clone();
        reversed.reverse();
        assert_eq!(slots(&reversed, &[(7, 1)]), s);
    }

    #[test]
    fn binary_form_round_trips_and_refuses_truncation() {
        let s = slots(&[(1, 3), (9, 300), (4, 1)], &[(77, 2)]);
        assert_eq!(slots(&[(1, 3), (9, 300), (4, 1)], &[(77, 1), (77, 1)]), s);
        let mut out = Vec::new();
        s.write(&mut out);
        assert_eq!(out.len(), HEADER_BYTES + 4 * ENTRY_BYTES);
        assert_eq!(Slots::read(&out), Some((s, out.len())));
        assert_eq!(s.entities()[0], (9, 255), "counts saturate at a byte");
        assert_eq!(Slots::read(&out[..out.len() - 1]), None);
        let mut too_many = out.clone();
        too_many[0] = MAX_ENTITIES as u8 + 1;
        assert_eq!(Slots::read(&too_many), None);
        let empty = Slots::default();
        let mut out = Vec::new();
        empty.write(&mut out);
        assert_eq!(Slots::read(&out), Some((empty, HEADER_BYTES)));
    }

    #[test]
    fn overlap_counts_shared_and_one_sided_slots_and_the_heaviest() {
        let a = slots(&[(1, 4), (2, 2), (3, 1)], &[(10, 1), (11, 1)]);
        let b = slots(&[(1, 5), (5, 3), (6, 1), (7, 1)], &[(10, 2)]);
        let o = a.overlap(&b);
        assert_eq!(
            o.entities,
            SlotShare {
                shared: 1,
                only_later: 2,
                only_earlier: 3,
                complete: true,
            }
        );
        // A text with more names than it keeps: the counts are over its sample.
        let many: Vec<(u32, u32)> = (100..120).map(|h| (h, 1)).collect();
        assert!(!slots(&many, &[]).overlap(&b).entities.complete);
        assert_eq!(o.entities.poorer_share(), Some(1.0 / 3.0));
        assert_eq!(o.figures.poorer_share(), Some(1.0));
        // A's heaviest: 1 and 2 (3 is named once); B keeps 1. B's: 1 and 5; A keeps 1.
        assert_eq!((o.later_top, o.later_top_in_earlier), (2, 1));
        assert_eq!((o.earlier_top, o.earlier_top_in_later), (2, 1));
        assert_eq!(o.top_agreement(), Some(0.5));
        assert_eq!(Slots::default().overlap(&b).entities.poorer_share(), None);
    }

    #[test]
    fn figures_drop_separators_and_leading_zeros() {
        assert_eq!(figure("1,000").as_deref(), Some("1000"));
        assert_eq!(figure("007").as_deref(), Some("7"));
        assert_eq!(figure("0.5").as_deref(), Some("0.5"));
        assert_eq!(figure("3.5%").as_deref(), Some("3.5%"));
        assert_eq!(figure("000"), None, "a separator's zeros alone");
        assert_eq!(figure("7"), None, "one digit says little");
        assert_eq!(figure("2019").as_deref(), Some("2019"));
        assert!(is_name_shaped("韩雨桐") && !is_name_shaped("韩") && !is_name_shaped("abc"));
        assert!(is_entity_tag("nr") && is_entity_tag("nrt") && !is_entity_tag("n"));
    }
}
