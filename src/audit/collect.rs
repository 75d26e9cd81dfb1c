//! Reading decided records into what the report needs, in three passes any source can drive
//! (the JSONL reader here, the Kafka reader at the edge):
//!
//! 1. [`Collector`]: every decided record in scope (a `batch` output file, or the records of the
//!    duplicate and unique topics in the time range). Counts, a small summary per duplicate, and
//!    the editors' corrections made in scope.
//! 2. [`Originals`]: where the originals may be (the same file, or the whole unique topic). Only
//!    unique records whose id a duplicate names are kept, as a location and a few fields.
//! 3. [`Plan`]: which pairs the report shows (suspicious ones first, then a seeded sample); the
//!    source re-reads just those records by location, and [`Plan::finish`] builds the report.
//!
//! Memory is a summary per duplicate and per needed original, never the texts of the whole
//! stream: only the shown pairs' records are read in full.

use super::record::{self, BadRecord, Decided, Decision};
use crate::index::{CorrectionKind, MatchRule};
use crate::time::parse_time;
use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

/// Where a record is, so that it can be read again.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Location {
    /// A line of a JSONL file: 1-based line number and byte offset of its start.
    Line { number: u64, byte: u64 },
    /// A Kafka record.
    Record {
        topic: Arc<str>,
        partition: i32,
        offset: i64,
    },
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Line { number, .. } => write!(f, "line {number}"),
            Location::Record {
                topic,
                partition,
                offset,
            } => write!(f, "{topic} [{partition}] @{offset}"),
        }
    }
}

/// How the report samples and flags pairs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditOptions {
    /// Pairs drawn at random (seeded) from the duplicates that do not look wrong.
    pub sample: usize,
    /// Seed of that draw: the same seed and records give the same sample.
    pub seed: u64,
    /// A duplicate whose decision's containment is below this looks wrong.
    pub low_containment: f64,
    /// Most suspicious pairs shown side by side (all are listed and counted).
    pub max_suspicious_pairs: usize,
    /// Longest text shown per side, in characters (the numbers use the whole text).
    pub max_text_chars: usize,
}

impl Default for AuditOptions {
    fn default() -> Self {
        AuditOptions {
            sample: 100,
            seed: 1,
            low_containment: 0.5,
            max_suspicious_pairs: 500,
            max_text_chars: 20_000,
        }
    }
}

/// Records read, by decision.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Records read in scope (including bad ones and repeats).
    pub records: u64,
    /// Distinct ids decided unique.
    pub unique: u64,
    /// Distinct ids decided duplicate.
    pub duplicate: u64,
    /// Invalid records (`batch` output of an input that was not an article).
    pub invalid: u64,
    /// Records that are not decided records (not JSON, no `dedup`, ...): counted, skipped.
    pub bad: u64,
    /// Records of an id already read with the same decision (at-least-once repeats, replays):
    /// counted once.
    pub repeated: u64,
}

/// Why a pair looks wrong, most telling first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// The decision's containment is below `--low-containment`: the texts share little. Not
    /// for a merge (`rule: editor`): the editor linked the pair, whatever the texts share.
    LowContainment,
    /// The matched original's `published_at` is later than the duplicate's.
    PublishedLater,
    /// The matched original is not where originals are (retention, another file).
    OriginalMissing,
}

impl Reason {
    pub const ALL: [Reason; 3] = [
        Reason::LowContainment,
        Reason::PublishedLater,
        Reason::OriginalMissing,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::LowContainment => "low_containment",
            Reason::PublishedLater => "published_later",
            Reason::OriginalMissing => "original_missing",
        }
    }

    /// For editors.
    pub fn label(self) -> &'static str {
        match self {
            Reason::LowContainment => "low containment",
            Reason::PublishedLater => "original published later",
            Reason::OriginalMissing => "original missing",
        }
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// A set of reasons.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reasons(u8);

impl Reasons {
    pub fn insert(&mut self, r: Reason) {
        self.0 |= r.bit();
    }

    pub fn contains(self, r: Reason) -> bool {
        self.0 & r.bit() != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn iter(self) -> impl Iterator<Item = Reason> {
        Reason::ALL.into_iter().filter(move |r| self.contains(*r))
    }
}

/// Longest title kept per duplicate for the list of suspicious pairs.
const SUMMARY_TITLE_CHARS: usize = 80;
/// Longest source name kept.
const SOURCE_CHARS: usize = 120;
/// Bad records described in the report (all are counted).
const BAD_EXAMPLES: usize = 20;

/// What is kept of each duplicate.
#[derive(Debug, Clone)]
pub(crate) struct Dup {
    pub id: Box<str>,
    pub title: Box<str>,
    pub loc: Location,
    /// Record timestamp (Kafka) or else `published_at`, for the chart over time.
    pub time_ms: Option<i64>,
    pub published_ms: Option<i64>,
    pub source: Option<u32>,
    pub match_id: Box<str>,
    pub match_fingerprint: Option<Box<str>>,
    pub distance: u32,
    pub containment: Option<f64>,
    pub relation: Option<Box<str>>,
    pub rule: Option<MatchRule>,
    /// When this decision's own correction (a merge) was made: a release of the id made before
    /// it no longer applies.
    pub corrected_ms: Option<i64>,
}

/// A correction made in scope: a record with `dedup.correction`, counted once.
#[derive(Debug, Clone, PartialEq)]
pub struct CorrectionRow {
    /// When the editor made it, as recorded (RFC 3339).
    pub at: String,
    /// `at` parsed (None: not a time; such rows sort first).
    pub at_ms: Option<i64>,
    pub kind: CorrectionKind,
    /// The article corrected.
    pub id: String,
    /// A merge's original (the corrected record's match).
    pub into: Option<String>,
    /// The decision before the correction (`unique` or `duplicate`) and its match, if any (for
    /// a release: the article it no longer repeats).
    pub previous_decision: String,
    pub previous_match: Option<String>,
    pub by: Option<String>,
    pub reason: Option<String>,
    /// Where the first record of it is.
    pub location: String,
}

impl CorrectionRow {
    fn new(rec: &Decided, c: &record::Correction, loc: &Location) -> CorrectionRow {
        // Bounded like the `correct` command bounds them: records are input, not trusted.
        let bounded = |v: &Option<std::borrow::Cow<'_, str>>, chars: usize| {
            v.as_deref().map(|s| clip(s, chars).into_string())
        };
        CorrectionRow {
            at: clip(&c.at, SUMMARY_TITLE_CHARS).into_string(),
            at_ms: parse_time(&c.at),
            kind: c.kind,
            id: rec.id.to_string(),
            into: match (&c.kind, &rec.decision) {
                (CorrectionKind::Merge, Decision::Duplicate(m)) => Some(m.id.to_string()),
                _ => None,
            },
            previous_decision: clip(&c.previous.decision, SUMMARY_TITLE_CHARS).into_string(),
            previous_match: c.previous.matched.as_ref().map(|m| m.id.to_string()),
            by: bounded(&c.by, crate::correction::MAX_BY_BYTES),
            reason: bounded(&c.reason, crate::correction::MAX_REASON_BYTES),
            location: loc.to_string(),
        }
    }
}

/// What is kept of a candidate original.
#[derive(Debug, Clone)]
pub(crate) struct Orig {
    pub loc: Location,
    pub fingerprint: Option<Box<str>>,
    pub published_ms: Option<i64>,
}

/// Names interned once (sources).
#[derive(Debug, Default)]
pub(crate) struct Interner {
    pub names: Vec<Box<str>>,
    ids: FxHashMap<Box<str>, u32>,
}

impl Interner {
    fn intern(&mut self, name: &str) -> u32 {
        let name: String = name.trim().chars().take(SOURCE_CHARS).collect();
        if let Some(&id) = self.ids.get(name.as_str()) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.clone().into_boxed_str());
        self.ids.insert(name.into_boxed_str(), id);
        id
    }
}

/// Everything read in pass 1 that the report keeps.
#[derive(Debug, Default)]
pub(crate) struct Scope {
    pub counts: Counts,
    pub bad_examples: Vec<String>,
    pub dups: Vec<Dup>,
    pub sources: Interner,
    /// Unique articles per source (`None`: no source).
    pub unique_by_source: FxHashMap<Option<u32>, u64>,
    /// Unique articles per minute (start ms), for the chart over time.
    pub unique_minutes: BTreeMap<i64, u64>,
    /// Unique articles without a usable time.
    pub unique_untimed: u64,
    /// Whether the times are record timestamps (else `published_at`).
    pub record_timestamps: bool,
    /// Corrections made in scope, in the order read.
    pub corrections: Vec<CorrectionRow>,
}

impl Scope {
    fn bad(&mut self, loc: &Location, why: &BadRecord) {
        self.counts.bad += 1;
        if self.bad_examples.len() < BAD_EXAMPLES {
            self.bad_examples.push(format!("{loc}: {why}"));
        }
    }
}

/// Pass 1: the decided records in scope.
pub struct Collector {
    pub(crate) opts: AuditOptions,
    pub(crate) scope: Scope,
    /// id hash -> index in `scope.dups`.
    dup_index: FxHashMap<u64, usize>,
    unique_seen: FxHashSet<u64>,
    /// (id, at) of the corrections read: replays of a corrected article repeat its correction.
    corrections_seen: FxHashSet<(Box<str>, Box<str>)>,
}

fn text<'a>(v: &'a Option<std::borrow::Cow<'_, str>>) -> &'a str {
    v.as_deref().unwrap_or("")
}

fn clip(s: &str, chars: usize) -> Box<str> {
    s.chars().take(chars).collect::<String>().into_boxed_str()
}

impl Collector {
    pub fn new(opts: AuditOptions) -> Collector {
        Collector {
            opts,
            scope: Scope::default(),
            dup_index: FxHashMap::default(),
            unique_seen: FxHashSet::default(),
            corrections_seen: FxHashSet::default(),
        }
    }

    /// A record the source could not even hand over (e.g. a line over the length limit).
    pub fn add_bad(&mut self, loc: &Location, why: &BadRecord) {
        self.scope.counts.records += 1;
        self.scope.bad(loc, why);
    }

    /// One decided record in scope; `timestamp_ms` is its record timestamp, if it has one.
    pub fn add(&mut self, bytes: &[u8], loc: Location, timestamp_ms: Option<i64>) {
        let scope = &mut self.scope;
        scope.counts.records += 1;
        let rec = match record::parse(bytes) {
            Ok(r) => r,
            Err(why) => return scope.bad(&loc, &why),
        };
        if timestamp_ms.is_some() {
            scope.record_timestamps = true;
        }
        let published_ms = rec.published_at.as_deref().and_then(parse_time);
        let time_ms = timestamp_ms.or(published_ms);
        let key = xxh3_64(rec.id.as_bytes());
        // Before the decision: a repeat of the record is skipped below, its correction here.
        if let Some(c) = &rec.correction {
            if self
                .corrections_seen
                .insert((rec.id.as_ref().into(), c.at.as_ref().into()))
            {
                scope.corrections.push(CorrectionRow::new(&rec, c, &loc));
            }
        }
        match &rec.decision {
            Decision::Invalid => scope.counts.invalid += 1,
            Decision::Unique => {
                if !self.unique_seen.insert(key) {
                    scope.counts.repeated += 1;
                    return;
                }
                scope.counts.unique += 1;
                let source = rec.source.as_deref().map(|s| scope.sources.intern(s));
                *scope.unique_by_source.entry(source).or_default() += 1;
                match time_ms {
                    Some(t) => {
                        *scope
                            .unique_minutes
                            .entry(t - t.rem_euclid(60_000))
                            .or_default() += 1
                    }
                    None => scope.unique_untimed += 1,
                }
            }
            Decision::Duplicate(m) => {
                let dup = Dup {
                    id: rec.id.as_ref().into(),
                    title: clip(text(&rec.title), SUMMARY_TITLE_CHARS),
                    loc,
                    time_ms,
                    published_ms,
                    source: rec.source.as_deref().map(|s| scope.sources.intern(s)),
                    match_id: m.id.as_ref().into(),
                    match_fingerprint: Some(m.fingerprint.to_hex().into()),
                    distance: m.distance,
                    containment: m.containment,
                    relation: m.relation.map(|r| r.as_str().into()),
                    rule: m.rule,
                    corrected_ms: rec.correction.as_ref().and_then(|c| parse_time(&c.at)),
                };
                // A repeat keeps the latest record (a revision's decision replaces the old one).
                match self.dup_index.get(&key) {
                    Some(&i) => {
                        scope.counts.repeated += 1;
                        scope.dups[i] = dup;
                    }
                    None => {
                        scope.counts.duplicate += 1;
                        self.dup_index.insert(key, scope.dups.len());
                        scope.dups.push(dup);
                    }
                }
            }
        }
    }

    pub fn counts(&self) -> &Counts {
        &self.scope.counts
    }

    /// Ends pass 1: the originals to look for are the ids the duplicates matched.
    pub fn start_originals(self) -> Originals {
        let wanted = self
            .scope
            .dups
            .iter()
            .map(|d| (d.match_id.clone(), Vec::new()))
            .collect();
        Originals {
            opts: self.opts,
            scope: self.scope,
            wanted,
            read: 0,
        }
    }
}

/// Pass 2: the unique records that are originals of a duplicate in scope.
pub struct Originals {
    opts: AuditOptions,
    scope: Scope,
    /// Matched id -> its unique records (distinct fingerprints: revisions).
    wanted: FxHashMap<Box<str>, Vec<Orig>>,
    read: u64,
}

impl Originals {
    /// Whether a record with this id (a Kafka key) may be an original in scope.
    pub fn wants(&self, id: &str) -> bool {
        self.wanted.contains_key(id)
    }

    /// Number of distinct originals looked for.
    pub fn wanted(&self) -> usize {
        self.wanted.len()
    }

    /// Records looked at so far.
    pub fn read(&self) -> u64 {
        self.read
    }

    /// A record where originals may be; kept if it is a unique record a duplicate matched.
    /// Records that are not decided records were counted in pass 1 (or are out of scope).
    pub fn add(&mut self, bytes: &[u8], loc: Location) {
        self.read += 1;
        let Ok(rec) = record::parse(bytes) else {
            return;
        };
        if rec.decision != Decision::Unique {
            return;
        }
        let Some(versions) = self.wanted.get_mut(rec.id.as_ref()) else {
            return;
        };
        let orig = Orig {
            loc,
            fingerprint: rec.fingerprint.as_deref().map(Into::into),
            published_ms: rec.published_at.as_deref().and_then(parse_time),
        };
        // Repeats of one version keep the first record; a new version (fingerprint) is added.
        if !versions.iter().any(|v| v.fingerprint == orig.fingerprint) {
            versions.push(orig);
        }
    }

    /// Ends pass 2: flags every duplicate, picks the pairs to show.
    pub fn plan(self) -> Plan {
        let Originals {
            opts,
            scope,
            wanted,
            ..
        } = self;
        let mut originals = Vec::with_capacity(scope.dups.len());
        let mut reasons = Vec::with_capacity(scope.dups.len());
        for d in &scope.dups {
            // The version the duplicate was matched to (its fingerprint), else the latest.
            let orig = wanted.get(&d.match_id).and_then(|versions| {
                versions
                    .iter()
                    .find(|v| v.fingerprint.is_some() && v.fingerprint == d.match_fingerprint)
                    .or(versions.last())
                    .cloned()
            });
            let mut r = Reasons::default();
            // An editor's merge is right by definition, however little the texts share.
            if d.rule != Some(MatchRule::Editor)
                && d.containment.is_some_and(|c| c < opts.low_containment)
            {
                r.insert(Reason::LowContainment);
            }
            match &orig {
                None => r.insert(Reason::OriginalMissing),
                Some(o) => {
                    if let (Some(later), Some(dup)) = (o.published_ms, d.published_ms) {
                        if later > dup {
                            r.insert(Reason::PublishedLater);
                        }
                    }
                }
            }
            originals.push(orig);
            reasons.push(r);
        }
        // Suspicious first: by their most telling reason, the lowest containment, then id.
        let mut suspicious: Vec<usize> = (0..scope.dups.len())
            .filter(|&i| !reasons[i].is_empty())
            .collect();
        suspicious.sort_by(|&a, &b| {
            let key = |i: usize| {
                (
                    reasons[i].iter().next(),
                    scope.dups[i].containment.unwrap_or(1.0),
                )
            };
            let (ka, kb) = (key(a), key(b));
            ka.0.cmp(&kb.0)
                .then(ka.1.total_cmp(&kb.1))
                .then_with(|| scope.dups[a].id.cmp(&scope.dups[b].id))
        });
        // The sample: the smallest seeded hashes of the ids, so the same records and seed give
        // the same pairs whatever the order they were read in.
        let mut others: Vec<(u64, usize)> = (0..scope.dups.len())
            .filter(|&i| reasons[i].is_empty())
            .map(|i| (xxh3_64_with_seed(scope.dups[i].id.as_bytes(), opts.seed), i))
            .collect();
        let by_hash = |a: &(u64, usize), b: &(u64, usize)| {
            a.0.cmp(&b.0)
                .then_with(|| scope.dups[a.1].id.cmp(&scope.dups[b.1].id))
        };
        if others.len() > opts.sample {
            if opts.sample > 0 {
                others.select_nth_unstable_by(opts.sample - 1, by_hash);
            }
            others.truncate(opts.sample);
        }
        others.sort_by(by_hash);
        let shown: Vec<(usize, SampleKind)> = suspicious
            .iter()
            .take(opts.max_suspicious_pairs)
            .map(|&i| (i, SampleKind::Suspicious))
            .chain(others.iter().map(|&(_, i)| (i, SampleKind::Random)))
            .collect();
        Plan {
            opts,
            scope,
            originals,
            reasons,
            suspicious,
            shown,
            fetched: FxHashMap::default(),
        }
    }
}

/// Why a pair is in the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SampleKind {
    /// It looks wrong: always shown first.
    Suspicious,
    /// Drawn at random (seeded) from the others.
    Random,
}

/// Pass 3: the pairs to show; the source reads their records again by location.
pub struct Plan {
    pub(crate) opts: AuditOptions,
    pub(crate) scope: Scope,
    /// Per duplicate: its original, if found.
    pub(crate) originals: Vec<Option<Orig>>,
    pub(crate) reasons: Vec<Reasons>,
    /// Indexes of the suspicious duplicates, in report order.
    pub(crate) suspicious: Vec<usize>,
    /// Pairs shown, in order.
    pub(crate) shown: Vec<(usize, SampleKind)>,
    pub(crate) fetched: FxHashMap<Location, Vec<u8>>,
}

impl Plan {
    /// The records to read again (duplicates and originals of the shown pairs), sorted.
    pub fn locations(&self) -> Vec<Location> {
        let mut locs: Vec<Location> = self
            .shown
            .iter()
            .flat_map(|&(i, _)| {
                std::iter::once(self.scope.dups[i].loc.clone())
                    .chain(self.originals[i].as_ref().map(|o| o.loc.clone()))
            })
            .collect();
        locs.sort();
        locs.dedup();
        locs
    }

    /// The bytes of a record at one of [`Plan::locations`].
    pub fn fill(&mut self, loc: Location, bytes: Vec<u8>) {
        self.fetched.insert(loc, bytes);
    }

    pub fn counts(&self) -> &Counts {
        &self.scope.counts
    }

    /// Number of pairs the report shows.
    pub fn shown(&self) -> usize {
        self.shown.len()
    }
}

/// A record read again for a shown pair, parsed.
pub(crate) fn reread<'a>(
    fetched: &'a FxHashMap<Location, Vec<u8>>,
    loc: &Location,
    id: &str,
) -> Result<Decided<'a>, String> {
    let bytes = fetched
        .get(loc)
        .ok_or_else(|| format!("{loc} could not be read again"))?;
    let rec = record::parse(bytes).map_err(|e| format!("{loc} read again: {e}"))?;
    if rec.id != id {
        return Err(format!(
            "{loc} read again holds id {:?}, not {id:?} (the input changed)",
            rec.id
        ));
    }
    Ok(rec)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Fingerprints are written as 16 hex digits: short test values are padded.
    fn unique(id: &str, fp: &str, published: &str) -> Vec<u8> {
        let fp = format!("{fp:0>16}");
        format!(r#"{{"id":"{id}","content":"c","published_at":"{published}","dedup":{{"decision":"unique","fingerprint":"{fp}"}}}}"#).into_bytes()
    }

    fn duplicate(id: &str, of: &str, of_fp: &str, containment: f64, published: &str) -> Vec<u8> {
        let of_fp = format!("{of_fp:0>16}");
        format!(r#"{{"id":"{id}","content":"c","source":"s","published_at":"{published}","dedup":{{"decision":"duplicate","fingerprint":"0000000000000000","match":{{"id":"{of}","url":null,"title":null,"fingerprint":"{of_fp}","distance":1,"containment":{containment}}}}}}}"#).into_bytes()
    }

    fn line(n: u64) -> Location {
        Location::Line { number: n, byte: n }
    }

    /// Plans over `records` read in the given order: (shown ids with their kind, reasons).
    fn plan(records: &[Vec<u8>], opts: AuditOptions) -> (Plan, Vec<(String, SampleKind)>) {
        let mut c = Collector::new(opts);
        for (i, r) in records.iter().enumerate() {
            c.add(r, line(i as u64 + 1), None);
        }
        let mut o = c.start_originals();
        for (i, r) in records.iter().enumerate() {
            o.add(r, line(i as u64 + 1));
        }
        let plan = o.plan();
        let shown = plan
            .shown
            .iter()
            .map(|&(i, k)| (plan.scope.dups[i].id.to_string(), k))
            .collect();
        (plan, shown)
    }

    #[test]
    fn suspicious_first_then_a_seeded_sample_whatever_the_order() {
        let mut records = vec![
            unique("a", "aa", "2024-03-01"),
            unique("late", "bb", "2024-03-09"),
            duplicate("low", "a", "aa", 0.2, "2024-03-02"),
            duplicate("early", "late", "bb", 0.9, "2024-03-02"),
            duplicate("lost", "gone", "cc", 0.9, "2024-03-02"),
            duplicate("lower", "a", "aa", 0.1, "2024-03-02"),
        ];
        for i in 0..20 {
            records.push(duplicate(&format!("d{i}"), "a", "aa", 0.95, "2024-03-02"));
        }
        let opts = AuditOptions {
            sample: 5,
            ..AuditOptions::default()
        };
        let (p, shown) = plan(&records, opts.clone());
        let kinds: Vec<SampleKind> = shown.iter().map(|s| s.1).collect();
        assert_eq!(&kinds[..4], &[SampleKind::Suspicious; 4]);
        assert_eq!(&kinds[4..], &[SampleKind::Random; 5]);
        let ids: Vec<&str> = shown.iter().map(|s| s.0.as_str()).collect();
        assert_eq!(&ids[..4], &["lower", "low", "early", "lost"]);
        assert_eq!(p.counts().duplicate, 24);
        assert_eq!(p.suspicious.len(), 4);

        // Another order, the same pairs; another seed, another sample.
        records.reverse();
        let (_, again) = plan(&records, opts.clone());
        assert_eq!(again, shown);
        let other: Vec<_> = (2..6)
            .map(|seed| {
                plan(
                    &records,
                    AuditOptions {
                        seed,
                        ..opts.clone()
                    },
                )
                .1
            })
            .collect();
        assert!(other.iter().any(|o| o[4..] != shown[4..]));
    }

    #[test]
    fn repeats_count_once_and_the_matched_version_is_the_original() {
        let records = vec![
            unique("a", "aa", "2024-03-05"),
            unique("a", "aa", "2024-03-05"),
            // A revision of the original, published earlier than the duplicate: not the one matched.
            unique("a", "a2", "2024-03-01"),
            duplicate("d", "a", "aa", 0.9, "2024-03-02"),
            duplicate("d", "a", "aa", 0.9, "2024-03-02"),
            b"not json".to_vec(),
        ];
        let (p, shown) = plan(&records, AuditOptions::default());
        let c = p.counts();
        assert_eq!(
            (c.records, c.unique, c.duplicate, c.repeated, c.bad),
            (6, 1, 1, 3, 1)
        );
        assert_eq!(shown.len(), 1);
        // The version with the matched fingerprint was published after the duplicate.
        assert!(p.reasons[0].contains(Reason::PublishedLater));
        assert_eq!(
            p.originals[0].as_ref().map(|o| o.loc.clone()),
            Some(line(1))
        );
        // The duplicate's last record and its original are read again.
        assert_eq!(p.locations(), vec![line(1), line(5)]);
    }

    #[test]
    fn merges_are_not_low_containment_and_corrections_count_once() {
        let dup = |id: &str, rule: &str, correction: serde_json::Value| {
            serde_json::json!({"id": id, "content": "c", "published_at": "2024-03-02",
                "dedup": {"decision": "duplicate", "fingerprint": "0000000000000000",
                          "match": {"id": "a", "fingerprint": "00000000000000aa", "distance": 9,
                                    "containment": 0.2, "rule": rule},
                          "correction": correction}})
            .to_string()
            .into_bytes()
        };
        let merge = serde_json::json!({"kind": "merge", "by": "ed", "reason": "same story",
            "at": "2024-03-03T00:00:00Z", "previous": {"decision": "unique"}});
        let records = vec![
            unique("a", "aa", "2024-03-01"),
            dup("merged", "editor", merge.clone()),
            dup("merged", "editor", merge),
            dup("low", "simhash", serde_json::Value::Null),
        ];
        let (p, _) = plan(&records, AuditOptions::default());
        let reasons: Vec<(&str, bool)> = p
            .scope
            .dups
            .iter()
            .zip(&p.reasons)
            .map(|(d, r)| (d.id.as_ref(), r.contains(Reason::LowContainment)))
            .collect();
        assert_eq!(reasons, vec![("merged", false), ("low", true)]);
        let c = &p.scope.corrections;
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(
            (
                c[0].kind,
                c[0].id.as_str(),
                c[0].into.as_deref(),
                c[0].location.as_str()
            ),
            (CorrectionKind::Merge, "merged", Some("a"), "line 2")
        );
    }
}
