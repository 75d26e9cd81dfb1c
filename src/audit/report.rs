//! The report model: totals, distributions and the shown pairs, built from a [`Plan`] whose
//! records were read again. Rendering is elsewhere (`html`, and [`Report::write_jsonl`]).

use super::collect::{AuditOptions, CorrectionRow, Counts, Location, Plan, Reason, SampleKind};
use super::highlight::{shared_passages, Shared};
use super::record::Decided;
use crate::compare::{round3, score_pair, CompareInput, PairScores};
use crate::correction::command_line;
use crate::dedup::DedupConfig;
use crate::fingerprint::Fingerprinter;
use crate::index::CorrectionKind;
use crate::time::Bucket;
use rustc_hash::FxHashMap;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{self, Write};

/// Bins of the containment histogram (width 0.05).
pub const CONTAINMENT_BINS: usize = 20;

/// What the report is about, as the source describes it (shown at the top).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Header {
    /// (label, value) lines: input, topics, time range...
    pub scope: Vec<(String, String)>,
    /// When the report was made (ms since the epoch).
    pub generated_ms: i64,
}

/// One side of a shown pair.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Side {
    pub id: String,
    pub title: String,
    pub url: Option<String>,
    pub source: Option<String>,
    pub published_at: Option<String>,
    pub fingerprint: Option<String>,
    /// Where the record is (`line 12`, `articles.unique [0] @17`).
    pub location: String,
    #[serde(skip)]
    pub content: String,
}

/// The numbers the decision recorded (`dedup.match`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DecisionNumbers {
    pub match_id: String,
    pub match_title: Option<String>,
    pub match_url: Option<String>,
    pub match_fingerprint: Option<String>,
    pub distance: u32,
    pub containment: Option<f64>,
    /// The relation the decision recorded (`copy`, `rewrite`, `excerpt`, `extension`).
    pub relation: Option<String>,
}

/// The pair's numbers computed again from both texts, by the code of `newsdedup compare`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recomputed {
    pub distance: u32,
    pub jaccard: f64,
    pub containment: f64,
    pub shares_block: bool,
    pub shares_sketch_band: bool,
    /// By the current `[dedup]` rule: `duplicate` or `distinct`.
    pub verdict: &'static str,
    /// What kind of repeat the duplicate is of the original, by the current rule.
    pub relation: &'static str,
    /// Why, in one sentence (`compare`'s `why`; no template bins are left out: the audit has no
    /// index).
    pub why: String,
}

impl Recomputed {
    fn new(s: PairScores, rule: &DedupConfig) -> Self {
        Recomputed {
            distance: s.distance,
            jaccard: round3(s.similarity.jaccard),
            containment: round3(s.similarity.containment),
            shares_block: s.shares_block,
            shares_sketch_band: s.shares_band,
            verdict: if s.duplicate { "duplicate" } else { "distinct" },
            relation: s.relation.as_str(),
            why: s.why(rule),
        }
    }
}

/// A shown pair.
#[derive(Debug, Clone, PartialEq)]
pub struct Pair {
    /// 1-based position in the report.
    pub rank: usize,
    pub sample: SampleKind,
    pub reasons: Vec<Reason>,
    pub duplicate: Side,
    pub original: Option<Side>,
    pub decision: DecisionNumbers,
    pub recomputed: Option<Recomputed>,
    /// Why something could not be shown or recomputed, or that an editor already released it.
    pub notes: Vec<String>,
    /// Shared passages of the contents (duplicate = a, original = b).
    pub shared: Option<Shared>,
    /// The exact `newsdedup correct` commands that correct the pair, in order (none once an
    /// editor released it).
    pub commands: Vec<String>,
}

impl Pair {
    /// The pair for machines (`--jsonl`): everything but the texts and passage offsets.
    pub fn to_json(&self) -> Value {
        json!({
            "rank": self.rank,
            "sample": self.sample,
            "reasons": self.reasons,
            "duplicate": self.duplicate,
            "original": self.original,
            "decision": self.decision,
            "recomputed": self.recomputed,
            "shared": self.shared.as_ref().map(|s| json!({
                "duplicate_share": round3(s.share_a),
                "original_share": round3(s.share_b),
                "passages": s.spans_a.len(),
                "ngram": s.n,
            })),
            "notes": self.notes,
            "commands": self.commands,
        })
    }
}

/// A suspicious duplicate in the list of all of them.
#[derive(Debug, Clone, PartialEq)]
pub struct SuspiciousRow {
    pub id: String,
    pub title: String,
    pub match_id: String,
    pub reasons: Vec<Reason>,
    pub distance: u32,
    pub containment: Option<f64>,
    /// Rank of its pair when shown.
    pub shown_as: Option<usize>,
}

/// Duplicates and unique articles of one source.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceRow {
    /// None: records without `source`.
    pub source: Option<String>,
    pub duplicates: u64,
    pub unique: u64,
}

/// Duplicates and unique articles per period.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeSeries {
    pub bucket: Bucket,
    /// True: record timestamps; false: `published_at`.
    pub record_timestamps: bool,
    /// (bucket start ms, duplicates, unique), every bucket from the first to the last.
    pub rows: Vec<(i64, u64, u64)>,
    /// Records without a usable time (duplicates, unique).
    pub untimed: (u64, u64),
    /// Records outside the chart's span (the earliest and latest 1%).
    pub outside: (u64, u64),
}

/// The whole audit.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub header: Header,
    pub options: AuditOptions,
    pub rule: DedupConfig,
    pub counts: Counts,
    pub bad_examples: Vec<String>,
    pub originals_found: u64,
    pub originals_missing: u64,
    /// Suspicious duplicates per reason (a pair may have several).
    pub reason_counts: Vec<(Reason, u64)>,
    pub suspicious: Vec<SuspiciousRow>,
    /// Duplicates per decision distance (index = distance), up to the largest seen.
    pub distance: Vec<u64>,
    /// Duplicates per decision containment bin ([0, 0.05), ..., [0.95, 1.0]).
    pub containment: [u64; CONTAINMENT_BINS],
    /// Duplicates whose decision has no containment (a side without text to sketch).
    pub containment_none: u64,
    /// Sources, most duplicates first.
    pub by_source: Vec<SourceRow>,
    pub over_time: Option<TimeSeries>,
    pub pairs: Vec<Pair>,
    /// Editors' corrections made in scope, each once, by time made.
    pub corrections: Vec<CorrectionRow>,
}

impl Report {
    /// Duplicates / (unique + duplicates), 0 without records.
    pub fn duplicate_rate(&self) -> f64 {
        let decided = self.counts.unique + self.counts.duplicate;
        if decided == 0 {
            0.0
        } else {
            self.counts.duplicate as f64 / decided as f64
        }
    }

    /// Suspicious duplicates (any reason).
    pub fn suspicious_total(&self) -> usize {
        self.suspicious.len()
    }

    /// One JSON line per shown pair, in report order.
    pub fn write_jsonl(&self, out: &mut impl Write) -> io::Result<()> {
        for p in &self.pairs {
            serde_json::to_writer(&mut *out, &p.to_json())?;
            out.write_all(b"\n")?;
        }
        out.flush()
    }

    /// The summary for logs: counts, rate, suspicious pairs, pairs shown.
    pub fn summary_json(&self) -> Value {
        json!({
            "records": self.counts.records,
            "unique": self.counts.unique,
            "duplicate": self.counts.duplicate,
            "invalid": self.counts.invalid,
            "bad": self.counts.bad,
            "repeated": self.counts.repeated,
            "duplicate_rate": round3(self.duplicate_rate()),
            "suspicious": self.suspicious.len(),
            "originals_missing": self.originals_missing,
            "pairs": self.pairs.len(),
            "corrections": self.corrections.len(),
        })
    }
}

fn owned(v: &Option<std::borrow::Cow<'_, str>>) -> Option<String> {
    v.as_deref().map(str::to_owned)
}

fn side(rec: &Decided, loc: &Location) -> Side {
    Side {
        id: rec.id.to_string(),
        title: rec.title.as_deref().unwrap_or("").to_owned(),
        url: owned(&rec.url),
        source: owned(&rec.source),
        published_at: owned(&rec.published_at),
        fingerprint: owned(&rec.fingerprint),
        location: loc.to_string(),
        content: rec.content.as_deref().unwrap_or("").to_owned(),
    }
}

impl Plan {
    /// Builds the report: the shown pairs from the records read again (numbers recomputed with
    /// `fp` and `rule`, shared passages marked), the rest from the summaries.
    pub fn finish(self, fp: &Fingerprinter, rule: &DedupConfig, header: Header) -> Report {
        let Plan {
            opts,
            scope,
            originals,
            reasons,
            suspicious,
            shown,
            fetched,
        } = self;
        let dups = &scope.dups;
        let mut corrections = scope.corrections.clone();
        corrections.sort_by(|a, b| {
            (a.at_ms, &a.at, &a.id, a.kind.as_str()).cmp(&(b.at_ms, &b.at, &b.id, b.kind.as_str()))
        });
        // The latest release of each id: its pair needs no command, only who released it.
        let mut releases: FxHashMap<&str, &CorrectionRow> = FxHashMap::default();
        for c in corrections
            .iter()
            .filter(|c| c.kind == CorrectionKind::Release)
        {
            releases.insert(&c.id, c);
        }
        let mut shown_rank = vec![None; dups.len()];
        let mut pairs = Vec::with_capacity(shown.len());
        for (n, &(i, sample)) in shown.iter().enumerate() {
            let d = &dups[i];
            shown_rank[i] = Some(n + 1);
            let mut notes = Vec::new();
            let dup_rec = super::collect::reread(&fetched, &d.loc, &d.id)
                .map_err(|e| notes.push(e))
                .ok();
            let orig_rec = originals[i].as_ref().and_then(|o| {
                super::collect::reread(&fetched, &o.loc, &d.match_id)
                    .map_err(|e| notes.push(e))
                    .ok()
                    .map(|r| (r, &o.loc))
            });
            let decision = DecisionNumbers {
                match_id: d.match_id.to_string(),
                match_title: None,
                match_url: None,
                match_fingerprint: d.match_fingerprint.as_deref().map(str::to_owned),
                distance: d.distance,
                containment: d.containment,
                relation: d.relation.as_deref().map(str::to_owned),
            };
            let decision = match dup_rec.as_ref().map(|r| &r.decision) {
                Some(super::record::Decision::Duplicate(m)) => DecisionNumbers {
                    match_title: owned(&m.title),
                    match_url: owned(&m.url),
                    ..decision
                },
                _ => decision,
            };
            let duplicate = match &dup_rec {
                Some(r) => side(r, &d.loc),
                None => Side {
                    id: d.id.to_string(),
                    title: d.title.to_string(),
                    url: None,
                    source: d
                        .source
                        .map(|s| scope.sources.names[s as usize].to_string()),
                    published_at: None,
                    fingerprint: None,
                    location: d.loc.to_string(),
                    content: String::new(),
                },
            };
            // A merge made after the release (this record's own correction) is what stands now.
            let released = releases
                .get(d.id.as_ref())
                .filter(|c| d.corrected_ms.is_none_or(|own| c.at_ms > Some(own)));
            let commands = match released {
                Some(c) => {
                    notes.push(format!(
                        "released by {} at {}: {}",
                        c.by.as_deref().unwrap_or("(unnamed)"),
                        c.at,
                        c.reason.as_deref().unwrap_or("(no reason given)")
                    ));
                    Vec::new()
                }
                None => {
                    // Over Kafka the duplicate's record time bounds what the command must read.
                    let since = d.time_ms.filter(|_| scope.record_timestamps);
                    let mut commands =
                        vec![command_line(CorrectionKind::Release, &d.id, None, since)];
                    // The original came later: the later article is the one to merge into the
                    // earlier (a merge into a later article is refused).
                    if reasons[i].contains(Reason::PublishedLater) {
                        commands.push(command_line(
                            CorrectionKind::Merge,
                            &d.match_id,
                            Some(&d.id),
                            None,
                        ));
                    }
                    commands
                }
            };
            let original = orig_rec.as_ref().map(|(r, loc)| side(r, loc));
            let (mut recomputed, mut shared) = (None, None);
            if let (Some(_), Some(o)) = (&dup_rec, &original) {
                let input = |s: &Side| CompareInput {
                    id: s.id.clone(),
                    title: s.title.clone(),
                    content: s.content.clone(),
                };
                match score_pair(fp, &input(&duplicate), &input(o), rule) {
                    Ok(s) => recomputed = Some(Recomputed::new(s, rule)),
                    Err(e) => notes.push(format!("cannot recompute: {e}")),
                }
                shared = Some(shared_passages(&duplicate.content, &o.content));
            }
            pairs.push(Pair {
                rank: n + 1,
                sample,
                reasons: reasons[i].iter().collect(),
                duplicate,
                original,
                decision,
                recomputed,
                notes,
                shared,
                commands,
            });
        }

        let suspicious_rows = suspicious
            .iter()
            .map(|&i| SuspiciousRow {
                id: dups[i].id.to_string(),
                title: dups[i].title.to_string(),
                match_id: dups[i].match_id.to_string(),
                reasons: reasons[i].iter().collect(),
                distance: dups[i].distance,
                containment: dups[i].containment,
                shown_as: shown_rank[i],
            })
            .collect();
        let reason_counts = Reason::ALL
            .iter()
            .map(|&r| (r, reasons.iter().filter(|x| x.contains(r)).count() as u64))
            .collect();
        let originals_missing = originals.iter().filter(|o| o.is_none()).count() as u64;

        let max_distance = dups.iter().map(|d| d.distance).max().unwrap_or(0) as usize;
        let mut distance = vec![0u64; max_distance.max(rule.threshold as usize) + 1];
        let mut containment = [0u64; CONTAINMENT_BINS];
        let mut containment_none = 0;
        for d in dups {
            distance[d.distance as usize] += 1;
            match d.containment {
                Some(c) if c.is_finite() => {
                    let bin = ((c.clamp(0.0, 1.0) * CONTAINMENT_BINS as f64) as usize)
                        .min(CONTAINMENT_BINS - 1);
                    containment[bin] += 1;
                }
                _ => containment_none += 1,
            }
        }

        // Sources: duplicates and unique articles per source, most duplicates first.
        let mut per_source: BTreeMap<Option<u32>, (u64, u64)> = BTreeMap::new();
        for d in dups {
            per_source.entry(d.source).or_default().0 += 1;
        }
        for (s, n) in &scope.unique_by_source {
            per_source.entry(*s).or_default().1 += n;
        }
        let mut by_source: Vec<SourceRow> = per_source
            .into_iter()
            .map(|(s, (duplicates, unique))| SourceRow {
                source: s.map(|s| scope.sources.names[s as usize].to_string()),
                duplicates,
                unique,
            })
            .collect();
        by_source.sort_by(|a, b| {
            b.duplicates
                .cmp(&a.duplicates)
                .then(b.unique.cmp(&a.unique))
                .then_with(|| a.source.cmp(&b.source))
        });

        let over_time = time_series(&scope, dups.iter().map(|d| d.time_ms));
        Report {
            header,
            options: opts,
            rule: rule.clone(),
            counts: scope.counts.clone(),
            bad_examples: scope.bad_examples.clone(),
            originals_found: dups.len() as u64 - originals_missing,
            originals_missing,
            reason_counts,
            suspicious: suspicious_rows,
            distance,
            containment,
            containment_none,
            by_source,
            over_time,
            pairs,
            corrections,
        }
    }
}

/// Most bars of the chart over time.
const MAX_TIME_ROWS: usize = 400;

/// Duplicates and unique articles per bucket, from the first to the last timed record; the
/// earliest and latest 1% (mistyped dates, a stray record from another year) are counted apart
/// rather than stretching the chart.
fn time_series(
    scope: &super::collect::Scope,
    dup_times: impl Iterator<Item = Option<i64>>,
) -> Option<TimeSeries> {
    let mut minutes: BTreeMap<i64, (u64, u64)> = BTreeMap::new();
    let mut dup_untimed = 0;
    for t in dup_times {
        match t {
            Some(t) => minutes.entry(t - t.rem_euclid(60_000)).or_default().0 += 1,
            None => dup_untimed += 1,
        }
    }
    for (t, n) in &scope.unique_minutes {
        minutes.entry(*t).or_default().1 += n;
    }
    let total: u64 = minutes.values().map(|(d, u)| d + u).sum();
    let trim = total / 100;
    let first = after_skipping(trim, minutes.iter())?;
    let last = after_skipping(trim, minutes.iter().rev())?;
    let bucket = Bucket::for_span(first, last);
    let mut starts = vec![bucket.start(last)];
    while let Some(&newest) = starts.last() {
        if newest <= first || starts.len() >= MAX_TIME_ROWS {
            break;
        }
        starts.push(bucket.start(newest - 1));
    }
    starts.reverse();
    let mut rows: Vec<(i64, u64, u64)> = starts.iter().map(|&s| (s, 0, 0)).collect();
    let (lo, hi) = (starts[0], bucket.next(bucket.start(last)));
    let mut outside = (0, 0);
    for (t, (d, u)) in &minutes {
        if *t < lo || *t >= hi {
            outside.0 += d;
            outside.1 += u;
            continue;
        }
        let i = rows.partition_point(|r| r.0 <= *t).saturating_sub(1);
        rows[i].1 += d;
        rows[i].2 += u;
    }
    Some(TimeSeries {
        bucket,
        record_timestamps: scope.record_timestamps,
        rows,
        untimed: (dup_untimed, scope.unique_untimed),
        outside,
    })
}

/// The time of the first minute whose records are not among the first `skip` records.
fn after_skipping<'a>(
    mut skip: u64,
    minutes: impl Iterator<Item = (&'a i64, &'a (u64, u64))>,
) -> Option<i64> {
    for (t, (d, u)) in minutes {
        if d + u > skip {
            return Some(*t);
        }
        skip -= d + u;
    }
    None
}
