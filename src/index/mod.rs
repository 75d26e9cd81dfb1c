//! The persistent near-duplicate index: what is stored per article and the small interface the
//! decision (`dedup`) needs. `rocks` implements it on RocksDB.

pub mod block_bucket;
pub mod bucket;
pub mod layout;
pub mod recent;
pub mod rocks;

use crate::error::IndexError;
use crate::simhash::Fingerprint;
use crate::sketch::Sketch;
use crate::time::TimeSpan;
use serde::{Deserialize, Serialize};

pub use rocks::{CorrectionsPosition, RocksIndex, SyncHandle};

/// Settings of the persistent index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IndexConfig {
    /// RocksDB block cache shared by all column families, in MiB.
    pub block_cache_mib: usize,
    /// fsync the WAL on every write. Off by default: the service syncs the WAL once per group of
    /// decisions before their outputs are produced, and again before each offset commit, which
    /// gives the same guarantee at a fraction of the cost.
    pub sync_writes: bool,
    /// Read table files through memory maps instead of `pread` into buffers. A lookup whose
    /// blocks are not in the block cache then costs a page-cache access instead of a system call
    /// and a copy per block: its median is 10-20% lower at 3-10M articles, but the decide's tail
    /// is not shown better (docs/PERFORMANCE.md), a disk read error ends the process with SIGBUS
    /// instead of an error, and the mapped pages count in the process's RSS. Off by default.
    pub mmap_reads: bool,
    /// Retention window by event time (`"30d"`; None: keep every article for ever). An indexed
    /// article no longer matches an article more than this newer, and is removed once it is
    /// more than this older than the newest event time the index has seen (see `rocks::write`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retention: Option<TimeSpan>,
}

impl Default for IndexConfig {
    fn default() -> Self {
        IndexConfig {
            block_cache_mib: 256,
            sync_writes: false,
            mmap_reads: false,
            retention: None,
        }
    }
}

/// An indexed fingerprint that shares at least one 16-bit block with the query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Insertion sequence number: smaller is earlier seen.
    pub seq: u64,
    pub fingerprint: Fingerprint,
    pub distance: u32,
    pub id: String,
}

/// The reference a duplicate carries to the article it repeats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatchRef {
    pub id: String,
    pub url: Option<String>,
    pub title: Option<String>,
    pub fingerprint: Fingerprint,
    pub distance: u32,
    /// Second-check score: estimated share of the shorter text's 4-grams found in the other
    /// (rounded to 0.001), when both articles have a content sketch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub containment: Option<f64>,
    /// When the matched article was published (Unix ms; None when it had no readable
    /// `published_at`). Output as `match.published_at`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published_ms: Option<i64>,
    /// Estimated share of the duplicate's own 4-grams found in the match (rounded to 0.001), when
    /// both articles have a content sketch: what the `containment` rule compares.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contained: Option<f64>,
    /// The rule that made the article a duplicate of the match (absent in records stored before
    /// rules were named).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<MatchRule>,
    /// What kind of repeat the article is of the match (absent in records stored before
    /// relations were named).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relation: Option<Relation>,
    /// The indexed article the match was found through, when that article was merged into the
    /// match by an editor (`distance` and the scores then describe the article and `via`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// The segments (sentences) the article shares with the match, when both have any to
    /// compare: what an auditor reads to see which text is repeated, in each direction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segments: Option<Box<SegmentMatch>>,
    /// The event slots (names, figures) the article shares with the match and those only one of
    /// them holds, when either has any: what the texts are about, beside how they are worded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slots: Option<Box<crate::slots::SlotOverlap>>,
}

/// The segments a duplicate shares with its match (`match.segments`): counted over the part of
/// both texts their segment samples cover, template segments (held by many indexed articles)
/// left out and counted apart.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SegmentMatch {
    /// Segments both hold verbatim, and their letters and digits.
    pub shared: u32,
    pub shared_chars: u32,
    /// Share of this article's compared text in segments the match holds (rounded to 0.001).
    pub in_match: Option<f64>,
    /// Share of the match's compared text in segments this article holds.
    pub of_match: Option<f64>,
    /// Template segments of this article left out.
    pub template: u32,
}

impl SegmentMatch {
    /// From the second check's segment overlap; None when neither text had segments compared.
    pub fn of(o: &crate::segments::Overlap) -> Option<Box<SegmentMatch>> {
        let round = |x: f64| (x * 1000.0).round() / 1000.0;
        (o.a > 0 || o.b > 0 || o.template > 0).then(|| {
            Box::new(SegmentMatch {
                shared: o.shared,
                shared_chars: o.shared_chars,
                in_match: o.a_in_b().map(round),
                of_match: o.b_in_a().map(round),
                template: o.template,
            })
        })
    }
}

/// Why an article is a duplicate of its match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MatchRule {
    /// Simhash within the threshold (an ordinary repost).
    Simhash,
    /// Beyond the threshold, but the texts are near-identical and the article's content is
    /// mostly in the match (a repost whose edits moved the simhash too far).
    Resemblance,
    /// Beyond the threshold, but (almost) all of the article's content is in the match, however
    /// much longer the match is: an excerpt that says nothing new.
    Containment,
    /// Beyond the threshold, but the match is (almost) whole inside the article and makes up most
    /// of it: the same report with new text added (an update).
    Extension,
    /// An editor merged the article into the match (`dedup.correction`).
    Editor,
}

impl MatchRule {
    pub fn as_str(self) -> &'static str {
        match self {
            MatchRule::Simhash => "simhash",
            MatchRule::Resemblance => "resemblance",
            MatchRule::Containment => "containment",
            MatchRule::Extension => "extension",
            MatchRule::Editor => "editor",
        }
    }
}

/// What kind of repeat a duplicate is of its match (the later article against the earlier).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Relation {
    /// Near-identical text.
    Copy,
    /// The same report reworded: each text has material the other lacks.
    Rewrite,
    /// The later is a part of the earlier.
    Excerpt,
    /// The later holds the earlier plus new text.
    Extension,
}

impl Relation {
    pub const ALL: [Relation; 4] = [
        Relation::Copy,
        Relation::Rewrite,
        Relation::Excerpt,
        Relation::Extension,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Relation::Copy => "copy",
            Relation::Rewrite => "rewrite",
            Relation::Excerpt => "excerpt",
            Relation::Extension => "extension",
        }
    }
}

/// Decision recorded for an article.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoredDecision {
    Unique,
    Duplicate,
}

/// What the article column family holds per id. Replays read it back instead of deciding again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredArticle {
    pub seq: u64,
    pub fingerprint: Fingerprint,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Unix milliseconds when the article was first decided.
    pub first_seen_ms: u64,
    pub decision: StoredDecision,
    #[serde(rename = "match", default, skip_serializing_if = "Option::is_none")]
    pub matched: Option<MatchRef>,
    /// Content sketch for the second check (absent for articles stored without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sketch: Option<Sketch>,
    /// Set when this is a later version of the id with different content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<Revision>,
    /// Event time (Unix ms): `published_at`, else the Kafka record timestamp, else the time it was
    /// decided; a time more than [`MAX_FUTURE_MS`] ahead of that is clamped to it. The
    /// retention window is measured in it (see [`event_time`]).
    #[serde(default)]
    pub event_ms: i64,
    /// `published_at` as read (Unix ms), when the article had a readable one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published_ms: Option<i64>,
    /// The claimed event time was too far in the future and the arrival time was used instead.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub event_time_clamped: bool,
    /// The versions of the id this one replaced (or that arrived after it but were older),
    /// newest first, at most [`MAX_EARLIER_VERSIONS`], each with the decision it got: a
    /// re-delivered or replayed older version gets that decision again and replaces nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier: Vec<EarlierVersion>,
    /// The editor's correction that made this decision, if one did (the latest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correction: Option<CorrectionNote>,
    /// A duplicate of relation `extension` stored searchable: it holds text its match lacks, so
    /// a later copy of it may not find the match (a small part of it) but finds it, and names
    /// the match. Records written before extensions were searchable lack the flag and stay
    /// unsearchable, as their index entries are.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub indexed_extension: bool,
}

impl StoredArticle {
    /// Whether later articles can find this one: a unique article, or a duplicate whose later
    /// copies must still find its story: one an editor merged into an earlier article, or an
    /// update of one ([`StoredArticle::indexed_extension`]); a match with either names that
    /// earlier article ([`StoredArticle::resolves_to`]).
    pub fn searchable(&self) -> bool {
        self.decision == StoredDecision::Unique || self.resolves_to().is_some()
    }

    /// Whether a duplicate of `matched` with this relation is stored searchable (see
    /// [`StoredArticle::indexed_extension`]): an update, found by the rules (an editor's merge
    /// is searchable as merged).
    pub fn indexes_extension(matched: &MatchRef) -> bool {
        matched.relation == Some(Relation::Extension) && matched.rule != Some(MatchRule::Editor)
    }

    /// An editor merged this article into its match (only a merge makes the rule `editor`, so
    /// any record of it says so, also one without the correction member).
    pub fn merged(&self) -> bool {
        self.decision == StoredDecision::Duplicate
            && self
                .matched
                .as_ref()
                .is_some_and(|m| m.rule == Some(MatchRule::Editor))
    }

    /// The article a match with this one names instead of it: for a merged article or a
    /// searchable update, its original.
    pub fn resolves_to(&self) -> Option<&str> {
        self.matched
            .as_ref()
            .filter(|_| self.merged() || self.routes_update())
            .map(|m| m.id.as_str())
    }

    /// A searchable update ([`StoredArticle::indexed_extension`]) of the article it matched.
    pub fn routes_update(&self) -> bool {
        self.indexed_extension && self.decision == StoredDecision::Duplicate
    }

    /// This article as a correction leaves it: the decision, match and note of `corrected`, and
    /// everything else (dating, sketch, url and title, history) its own. The one rule of what a
    /// correction changes, for the service that applies it and every index restored from its
    /// output (whose record of the correction is dated and sketched as the stored article).
    pub fn with_correction_of(&self, corrected: &StoredArticle) -> StoredArticle {
        StoredArticle {
            decision: corrected.decision,
            matched: corrected.matched.clone(),
            indexed_extension: corrected.indexed_extension,
            correction: corrected.correction.clone(),
            ..self.clone()
        }
    }

    /// When the latest correction of this article was made (Unix ms; i64::MIN: never corrected).
    pub fn corrected_at(&self) -> i64 {
        self.correction.as_ref().map_or(i64::MIN, |c| c.at_ms)
    }

    /// What this article moves the index's stream time to (at least): its event time, but never
    /// past the time it arrived, so a clock that runs ahead dates the article without expiring
    /// everything else.
    pub fn stream_time_ms(&self) -> i64 {
        self.event_ms
            .min(i64::try_from(self.first_seen_ms).unwrap_or(i64::MAX))
    }

    /// This version as an [`EarlierVersion`] of a newer one.
    pub fn as_earlier(&self) -> EarlierVersion {
        EarlierVersion {
            fingerprint: self.fingerprint,
            decision: self.decision,
            matched: self.matched.clone(),
            revision: self.revision,
            event_ms: self.event_ms,
            event_time_clamped: self.event_time_clamped,
            superseded: false,
        }
    }

    /// The decision a version of this id with `fingerprint` got, if it is this one or one of the
    /// remembered earlier ones.
    pub fn version(&self, fingerprint: Fingerprint) -> Option<EarlierVersion> {
        if self.fingerprint == fingerprint {
            return Some(self.as_earlier());
        }
        self.earlier
            .iter()
            .find(|v| v.fingerprint == fingerprint)
            .cloned()
    }

    /// `earlier` for a version that replaces this one: this one first, then its own earlier
    /// versions, bounded.
    pub fn history_after(&self) -> Vec<EarlierVersion> {
        std::iter::once(self.as_earlier())
            .chain(self.earlier.iter().cloned())
            .take(MAX_EARLIER_VERSIONS)
            .collect()
    }
}

/// How many earlier versions of an id the index remembers (their decisions are replayed when
/// they are delivered again). Older ones than this are decided afresh.
pub const MAX_EARLIER_VERSIONS: usize = 8;

/// What one decision wrote to the index under its article's id. Its output record carries it:
/// when the record can never be published, exactly this is undone (so that the index agrees with
/// the output topics, what a standby or a rebuild reads), and nothing published before it.
#[derive(Debug, Clone, PartialEq)]
pub enum IndexWrite {
    /// A new id, stored as `fingerprint`: undone by taking the id out.
    Inserted { fingerprint: Fingerprint },
    /// A revision `fingerprint` replaced the stored version `previous`: undone by putting
    /// `previous` back (it was published; the revision was not).
    Revised {
        fingerprint: Fingerprint,
        previous: Box<StoredArticle>,
    },
    /// An older version `fingerprint`, remembered beside the stored one (superseded): undone by
    /// forgetting it.
    Remembered { fingerprint: Fingerprint },
    /// A correction applied at `at_ms` to the stored version `fingerprint`: undone by reverting
    /// it (the article keeps the decision published before).
    Corrected {
        fingerprint: Fingerprint,
        at_ms: i64,
    },
}

/// How a store undoes an [`IndexWrite`], decided against the id's stored version now.
#[derive(Debug, Clone, PartialEq)]
pub enum Undoing {
    /// Take the id out.
    Remove,
    /// Store this version in place of the current one (searchable as it says).
    Put(Box<StoredArticle>),
    /// Revert the correction applied at `at_ms` (the store keeps what it replaced).
    RevertCorrection { at_ms: i64 },
}

impl IndexWrite {
    /// What undoing this write does to `current`, the id's stored version now; None when it no
    /// longer holds what this write made (a later version or correction stands, or it was undone
    /// before).
    pub fn undoing(&self, current: &StoredArticle) -> Option<Undoing> {
        match self {
            IndexWrite::Inserted { fingerprint } => {
                (current.fingerprint == *fingerprint).then_some(Undoing::Remove)
            }
            IndexWrite::Revised {
                fingerprint,
                previous,
            } => (current.fingerprint == *fingerprint).then(|| Undoing::Put(previous.clone())),
            IndexWrite::Remembered { fingerprint } => {
                let at = current
                    .earlier
                    .iter()
                    .position(|v| v.superseded && v.fingerprint == *fingerprint)?;
                let mut kept = current.clone();
                kept.earlier.remove(at);
                Some(Undoing::Put(Box::new(kept)))
            }
            IndexWrite::Corrected { fingerprint, at_ms } => (current.fingerprint == *fingerprint
                && current.correction.as_ref().map(|n| n.at_ms) == Some(*at_ms))
            .then_some(Undoing::RevertCorrection { at_ms: *at_ms }),
        }
    }

    /// A correction's write (its article was published before it).
    pub fn is_correction(&self) -> bool {
        matches!(self, IndexWrite::Corrected { .. })
    }
}

/// An earlier version of an article id, with the decision it got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EarlierVersion {
    pub fingerprint: Fingerprint,
    pub decision: StoredDecision,
    #[serde(rename = "match", default, skip_serializing_if = "Option::is_none")]
    pub matched: Option<MatchRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<Revision>,
    #[serde(default)]
    pub event_ms: i64,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub event_time_clamped: bool,
    /// This version arrived after a newer one (it was published before it) and never replaced it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub superseded: bool,
}

/// The two corrections an editor can make (`newsdedup correct`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CorrectionKind {
    /// A false duplicate made unique: it and its old match never link again.
    Release,
    /// A missed duplicate made a duplicate of an earlier article.
    Merge,
}

impl CorrectionKind {
    pub const ALL: [CorrectionKind; 2] = [CorrectionKind::Release, CorrectionKind::Merge];

    pub fn as_str(self) -> &'static str {
        match self {
            CorrectionKind::Release => "release",
            CorrectionKind::Merge => "merge",
        }
    }
}

/// Longest `by` of a correction, in bytes.
pub const MAX_CORRECTION_BY_BYTES: usize = 256;
/// Longest `reason` of a correction, in bytes.
pub const MAX_CORRECTION_REASON_BYTES: usize = 4096;

/// An editor's correction as the index keeps it with the corrected article (and the output
/// writes it as `dedup.correction`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CorrectionNote {
    pub kind: CorrectionKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// The id of the key its signature was verified with, when the service checks signatures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When the service applied it (Unix ms; written before: when the editor made it): orders
    /// the corrections of one article and of one pair, later than every one applied before it
    /// (see `correction`).
    pub at_ms: i64,
    /// When the editor made it (the correction's own `at`, Unix ms): with its kind, identifies
    /// the correction, so that the same one read again changes nothing. None in notes written
    /// before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub made_ms: Option<i64>,
    /// The decision it corrected.
    pub previous_decision: StoredDecision,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_match: Option<MatchRef>,
}

/// What a correction does to the pairs editors keep apart: `separated` (a release: the two never
/// link again) or joined again (a merge of a pair released before). `at_ms` orders the changes
/// of one pair, so that applying them in any order (a rebuild reads two topics) ends the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairChange {
    pub other: String,
    pub separated: bool,
    pub at_ms: i64,
}

/// Event times more than this ahead of the arrival time (a bad clock, a typo in the year) are
/// clamped to the arrival time, so one article cannot push the index's stream time forward and
/// expire everything else.
pub const MAX_FUTURE_MS: i64 = 86_400_000;

/// An article's event time and whether it was clamped: `published_ms` (its readable
/// `published_at`), else `record_time_ms` (the Kafka record timestamp), else `arrival_ms` (when it
/// is decided or indexed); clamped to `arrival_ms` when more than [`MAX_FUTURE_MS`] ahead of it.
/// Every writer of the index computes it with this function (the decision, a rebuild from output
/// records).
pub fn event_time(
    published_ms: Option<i64>,
    record_time_ms: Option<i64>,
    arrival_ms: i64,
) -> (i64, bool) {
    let claimed = published_ms.or(record_time_ms).unwrap_or(arrival_ms);
    if claimed > arrival_ms.saturating_add(MAX_FUTURE_MS) {
        (arrival_ms, true)
    } else {
        (claimed, false)
    }
}

/// A later version of an article id whose content (fingerprint) differs from the stored one: a
/// corrected article, or an id reused to get past dedup. It is decided afresh and replaces the
/// stored version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revision {
    /// 1 for the first revision of the id, then 2, 3...
    pub number: u32,
    /// The fingerprint of the version it replaces.
    pub previous_fingerprint: Fingerprint,
}

/// Counters kept by the index (updated in the same atomic write as the data).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct IndexCounts {
    pub articles: u64,
    /// Searchable articles ([`StoredArticle::searchable`]): the unique ones, and the few
    /// duplicates kept searchable to route their copies (merged by an editor, updates).
    pub unique: u64,
    pub next_seq: u64,
    /// Stream time: the newest event time (Unix ms) of any article written, each capped at its
    /// arrival time ([`StoredArticle::stream_time_ms`]); 0 when none. Only moves forward.
    pub stream_time_ms: i64,
}

/// A segment held by this many unique articles or more is template text (a court's or a
/// tender's form, a portal's chrome): left out of the second check and of candidate finding.
pub const TEMPLATE_SEGMENT_ARTICLES: u64 = 3;

/// What a new article shares with too many indexed ones to say anything about a pair: its sketch
/// bands whose buckets are crowded (bit `b`: band `b`), and its kept segments held by
/// [`TEMPLATE_SEGMENT_ARTICLES`] or more unique articles (bit `i`: the `i`-th kept segment).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Crowded {
    pub bands: u16,
    pub segments: crate::segments::SegmentMask,
}

/// The storage interface of the decision. One writer at a time (`&mut self` on insert).
pub trait ArticleStore {
    /// The stored record of an already-decided article id.
    fn get(&self, id: &str) -> Result<Option<StoredArticle>, IndexError>;
    /// Only the stored content sketch of `id` (stores may skip decoding the rest).
    fn get_sketch(&self, id: &str) -> Result<Option<Sketch>, IndexError> {
        Ok(self.get(id)?.and_then(|a| a.sketch))
    }
    /// Appends to `out` every indexed fingerprint within `max_distance` of `fp` that shares at
    /// least one 16-bit block with it (all of them, for `max_distance <= 3`). Each article once.
    fn candidates(
        &self,
        fp: Fingerprint,
        max_distance: u32,
        out: &mut Vec<Candidate>,
    ) -> Result<(), IndexError>;
    /// Appends to `out` the (seq, id) of every searchable article whose content sketch shares an
    /// LSH band with `sketch`, or that holds one of its searchable segments (not a template one).
    /// Each article once. Returns what is crowded (see [`Crowded`]): template text that the
    /// second check discounts.
    fn sketch_lookup(
        &self,
        sketch: &Sketch,
        out: &mut Vec<(u64, String)>,
    ) -> Result<Crowded, IndexError>;
    /// Both candidate searches at once (`candidates` into `candidates`, and `sketch_lookup` into
    /// `banded` when a sketch is given); stores may share work between them. Returns what is
    /// crowded (nothing without a sketch).
    fn lookup(
        &self,
        fp: Fingerprint,
        max_distance: u32,
        sketch: Option<&Sketch>,
        candidates: &mut Vec<Candidate>,
        banded: &mut Vec<(u64, String)>,
    ) -> Result<Crowded, IndexError> {
        self.candidates(fp, max_distance, candidates)?;
        match sketch {
            Some(sketch) => self.sketch_lookup(sketch, banded),
            None => Ok(Crowded::default()),
        }
    }
    /// Atomically records `article` under `id`; when `searchable`, also adds its fingerprint to the
    /// four block families and its sketch's bands to the band index so later articles can match it.
    fn insert(
        &mut self,
        id: &str,
        article: &StoredArticle,
        searchable: bool,
    ) -> Result<(), IndexError>;
    /// As `insert`, replacing `previous` (the stored version of `id`) in the same atomic write:
    /// its block and band entries go, so it can no longer be matched.
    fn replace(
        &mut self,
        id: &str,
        previous: &StoredArticle,
        article: &StoredArticle,
        searchable: bool,
    ) -> Result<(), IndexError>;
    fn counts(&self) -> IndexCounts;
    /// The ids an editor separated from `id` (a release): never linked with it, in either
    /// direction. Empty for nearly every id.
    fn separated(&self, _id: &str) -> Vec<String> {
        Vec::new()
    }
    /// When the latest correction of the pair (`id`, `other`) was applied (Unix ms), if one was.
    fn pair_changed_at(&self, _id: &str, _other: &str) -> Result<Option<i64>, IndexError> {
        Ok(None)
    }
    /// An editor's correction: replaces `previous` (the stored version of `id`) by `article`
    /// (searchable as [`StoredArticle::searchable`] says) and applies `pair`, in one atomic
    /// write.
    fn write_correction(
        &mut self,
        id: &str,
        previous: &StoredArticle,
        article: &StoredArticle,
        pair: &PairChange,
    ) -> Result<(), IndexError>;
    /// The retention window: an indexed article whose event time is more than this before the
    /// article being decided no longer matches it. None: every indexed article matches.
    fn retention(&self) -> Option<TimeSpan> {
        None
    }
}

/// How much disk an index takes and what is left beside it, for the metrics: an index that fills
/// its volume stops deciding until space is freed ([`IndexError::DiskFull`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskUsage {
    /// Size of the index directory.
    pub index_bytes: u64,
    /// The volume holding it; `None` where the operating system does not say.
    pub volume: Option<VolumeSpace>,
}

/// Space on a volume (a file system).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VolumeSpace {
    /// Bytes an unprivileged process can still write.
    pub available_bytes: u64,
    /// Size of the volume.
    pub total_bytes: u64,
}

/// A store whose writes can be made durable, and from which one decided article can be taken out
/// again: what a decision stage that publishes its decisions needs.
pub trait DurableStore: ArticleStore + Send {
    /// Makes every write so far durable.
    fn sync(&self) -> Result<(), IndexError>;
    /// A handle that does `sync` from another thread, if the store has one.
    fn sync_handle(&self) -> Option<SyncHandle> {
        None
    }
    /// Size on disk and space left on the volume, for the metrics.
    fn disk_usage(&self) -> DiskUsage {
        DiskUsage::default()
    }
    /// Undoes `write`, made by the decision of `id`, if the id's stored version is still what it
    /// made ([`IndexWrite::undoing`]), durably; true if the index changed.
    fn undo(&mut self, id: &str, write: &IndexWrite) -> Result<bool, IndexError>;
}

impl Serialize for Fingerprint {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for Fingerprint {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}
