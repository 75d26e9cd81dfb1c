//! Index entries from the service's own output records: how `index rebuild`, `standby` and the
//! takeover of a standby's directory turn a record of `articles.unique` / `articles.duplicate`
//! (or a line of `batch` output) back into what the decision stored when it was made.
//!
//! An output record is the input article plus its `dedup` member, so it carries everything: the
//! text, the fingerprint and the decision with its match. The content sketch comes with a topic's
//! record (header `newsdedup.sketch`; a correction's record carries the stored one) and is
//! recomputed from the text where the record has none (a `batch` output line). A correction's
//! record is dated with the stored event time (header `newsdedup.source.timestamp`), and applied
//! to a stored article of the same version it changes the decision alone
//! (`StoredArticle::with_correction_of`), as on the service. For a sample of the records ([`Verification`]) the
//! fingerprint and the sketch are recomputed too and must equal the recorded ones: records made
//! with another fingerprint identity (other dictionaries, stop words, parameters) are refused,
//! since their fingerprints are not comparable with the ones this configuration makes.
//!
//! Applying a restored article is idempotent, so the same records may be applied any number of
//! times and in any overlap (a standby restarted after `kill -9`, a takeover re-reading what the
//! standby already had): an id already stored with the same fingerprint is left as it is unless
//! the record carries a later editor's correction of it (`dedup.correction.at`); a different
//! version replaces the stored one only when its revision number is higher. The pair a correction
//! separates or joins is applied whatever happens to the article, ordered by the correction's time
//! alone, so the unique and the duplicate topic may be read in any interleaving.

use crate::article::{Article, ReadRules};
use crate::error::IndexError;
use crate::fingerprint::Fingerprinter;
use crate::index::{CorrectionKind, PairChange, Revision, StoredArticle, StoredDecision};
use crate::output::{DedupMember, MatchMember};
use crate::runner::{self, RunError, Stage};
use crate::simhash::Fingerprint;
use crate::sketch::Sketch;
use serde::{Deserialize, Serialize};
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why an output record cannot be restored.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RestoreError {
    /// The record is not an article with a `dedup` decision (not JSON, a DLQ record...).
    #[error("not a decided article: {0}")]
    NotDecided(String),
    /// The recomputed fingerprint differs from the recorded one.
    #[error(
        "article {id:?} was fingerprinted {recorded} when it was decided, the configured fingerprint \
         identity gives {recomputed}: the records were made with another fingerprint configuration \
         (dictionaries, stop words, IDF table or parameters). Rebuild with the configuration they \
         were made with (--config), or replay the input topic into a new index instead"
    )]
    IdentityMismatch {
        id: String,
        recorded: Fingerprint,
        recomputed: Fingerprint,
    },
    /// The recomputed content sketch differs from the one the record carries.
    #[error(
        "article {id:?} carries a content sketch (header newsdedup.sketch) that this build and \
         configuration do not compute from its text, though the fingerprint agrees: the records \
         were made by a build or configuration that cleans text otherwise. Rebuild with the build \
         and --config they were made with, or replay the input topic into a new index instead"
    )]
    SketchMismatch { id: String },
}

/// An article as the decision stored it, recovered from its output record.
#[derive(Debug, Clone, PartialEq)]
pub struct Restored {
    pub id: String,
    /// `seq` is 0: the writer gives the next sequence number of its index.
    pub article: StoredArticle,
    /// Unique articles become searchable again (and articles an editor merged, and updates, see
    /// [`StoredArticle::searchable`]); duplicates keep their decision for replays.
    pub searchable: bool,
    /// The pair an editor's correction separated (a release) or joined again (a merge).
    pub pair: Option<PairChange>,
}

#[derive(Deserialize)]
struct WithDedup<'a> {
    #[serde(borrow)]
    dedup: Option<DedupMember<'a>>,
}

/// Restores one output record. `decided_ms` is when it was decided (the output record's
/// timestamp where it has one), `input_time_ms` the timestamp of the input record it answers
/// (header `newsdedup.source.timestamp`): with `published_at`, they give the article's event time
/// as the decision computed it; `recorded_sketch` the sketch it carries (header
/// `newsdedup.sketch`). `Ok(None)`: a record to skip (an invalid input's DLQ record). With
/// `verify`, the fingerprint and the sketch are recomputed and must equal the recorded ones;
/// without, the recorded ones are taken, and the sketch is computed only for a record without
/// one (no segmentation: see [`Verification`]).
pub fn restore(
    record: &[u8],
    recorded_sketch: Option<&Sketch>,
    fingerprinter: &Fingerprinter,
    rules: &ReadRules,
    decided_ms: u64,
    input_time_ms: Option<i64>,
    verify: bool,
) -> Result<Option<Restored>, RestoreError> {
    let member = serde_json::from_slice::<WithDedup>(record)
        .map_err(|e| RestoreError::NotDecided(format!("not a JSON object with `dedup`: {e}")))?
        .dedup
        .ok_or_else(|| RestoreError::NotDecided("no `dedup` member".into()))?;
    let decision = match member.decision.as_ref() {
        "unique" => StoredDecision::Unique,
        "duplicate" => StoredDecision::Duplicate,
        "invalid" => return Ok(None),
        other => {
            return Err(RestoreError::NotDecided(format!(
                "unknown decision {other:?}"
            )))
        }
    };
    let recorded = member
        .fingerprint
        .ok_or_else(|| RestoreError::NotDecided("`dedup` has no fingerprint".into()))?;
    if decision == StoredDecision::Duplicate && member.matched.is_none() {
        return Err(RestoreError::NotDecided(
            "a duplicate without its `match`".into(),
        ));
    }
    let article = Article::parse(record, rules.max_bytes)
        .map_err(|e| RestoreError::NotDecided(format!("not a valid article: {e}")))?;
    let sketch = if verify {
        let fingerprinted = fingerprinter
            .fingerprint(article.title(), article.content())
            .map_err(|e| RestoreError::NotDecided(e.to_string()))?;
        if fingerprinted.fingerprint != recorded {
            return Err(RestoreError::IdentityMismatch {
                id: article.id().to_owned(),
                recorded,
                recomputed: fingerprinted.fingerprint,
            });
        }
        if recorded_sketch.is_some_and(|s| *s != fingerprinted.sketch) {
            return Err(RestoreError::SketchMismatch {
                id: article.id().to_owned(),
            });
        }
        fingerprinted.sketch
    } else if let Some(sketch) = recorded_sketch {
        *sketch
    } else {
        fingerprinter.sketch(article.title(), article.content())
    };
    let revision = match (member.revision, member.previous_fingerprint) {
        (Some(number), Some(previous_fingerprint)) => Some(Revision {
            number,
            previous_fingerprint,
        }),
        _ => None,
    };
    let correction = match &member.correction {
        Some(c) => Some(c.to_stored().ok_or_else(|| {
            RestoreError::NotDecided(format!("`dedup.correction.at` {:?} is not a time", c.at))
        })?),
        None => None,
    };
    let pair = correction.as_ref().and_then(|c| {
        let (other, separated) = match c.kind {
            CorrectionKind::Release => (c.previous_match.as_ref()?.id.clone(), true),
            CorrectionKind::Merge => (member.matched.as_ref()?.id.to_string(), false),
        };
        Some(PairChange {
            other,
            separated,
            at_ms: c.at_ms,
        })
    });
    let title = article.title();
    let published_ms = article.published_ms(rules.published_at_offset);
    // A correction's record is published later than the decision it corrects, with the stored
    // event time as its input's time: that time is the article's, as the service dated it when
    // it was decided (clamped or not), whatever the correction's own time.
    let (event_ms, event_time_clamped) = match (&correction, input_time_ms) {
        (Some(_), Some(stored_event_ms)) => (stored_event_ms, member.event_time_clamped),
        _ => crate::index::event_time(published_ms, input_time_ms, decided_ms as i64),
    };
    let matched = member.matched.as_ref().map(MatchMember::to_stored);
    let restored = StoredArticle {
        seq: 0,
        fingerprint: recorded,
        url: article.url().map(str::to_owned),
        title: (!title.is_empty()).then(|| title.to_owned()),
        first_seen_ms: decided_ms,
        decision,
        indexed_extension: decision == StoredDecision::Duplicate
            && matched
                .as_ref()
                .is_some_and(StoredArticle::indexes_extension),
        matched,
        sketch: Some(sketch),
        revision,
        event_ms,
        published_ms,
        event_time_clamped,
        earlier: Vec::new(),
        correction,
    };
    Ok(Some(Restored {
        id: article.id().to_owned(),
        // As the decision stored it: unique, merged by an editor, or an update.
        searchable: restored.searchable(),
        article: restored,
        pair,
    }))
}

/// What applying a restored article to an index does.
#[derive(Debug, Clone, PartialEq)]
pub enum Apply {
    /// The id is not stored yet.
    Insert,
    /// A newer version of a stored id: replaces the stored one.
    Replace(Box<StoredArticle>),
    /// Already stored (the same version, or a newer one).
    Skip,
}

/// The rule that makes applying idempotent: see the module documentation.
pub fn apply_rule(stored: Option<StoredArticle>, incoming: &StoredArticle) -> Apply {
    match stored {
        None => Apply::Insert,
        // The same version: replaced only by a later correction of it.
        Some(s) if s.fingerprint == incoming.fingerprint => {
            if incoming.corrected_at() > s.corrected_at() {
                Apply::Replace(Box::new(s))
            } else {
                Apply::Skip
            }
        }
        Some(s) => {
            let number = |a: &StoredArticle| a.revision.map_or(0, |r| r.number);
            if number(incoming) > number(&s) {
                Apply::Replace(Box::new(s))
            } else {
                Apply::Skip
            }
        }
    }
}

/// An index that restored articles can be applied to.
pub trait RestoreTarget {
    /// Applies `restored` (when given) and records `position` (topic, partition, next offset to
    /// read; when given) and the corrections position `correction` (the same, of the corrections
    /// topic, when the record is a correction's output; never moved back) in one atomic write.
    fn apply_restored(
        &mut self,
        restored: Option<&Restored>,
        position: Option<(&str, i32, i64)>,
        correction: Option<(&str, i32, i64)>,
    ) -> Result<Apply, IndexError>;
}

/// One output record to restore, from a topic or a file.
#[derive(Debug, Clone)]
pub struct SourceRecord {
    pub bytes: Vec<u8>,
    /// When it was decided: the record's timestamp (ms since the epoch); None for a file line.
    pub timestamp_ms: Option<u64>,
    /// Where it was read (topic, partition, offset); None for a file line.
    pub position: Option<(Arc<str>, i32, i64)>,
    /// The record of the corrections topic it is the output of (topic, partition, offset: its
    /// `newsdedup.source.*` headers), when it is a correction's; None for a file line.
    pub correction: Option<(Arc<str>, i32, i64)>,
    /// Timestamp of the input record it answers (header `newsdedup.source.timestamp`).
    pub input_time_ms: Option<i64>,
    /// The content sketch of its text as the decision computed it (header `newsdedup.sketch`);
    /// None for a file line.
    pub sketch: Option<Sketch>,
}

/// Counters of a restore run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RestoreSummary {
    /// Records read.
    pub records: u64,
    /// Articles added to the index.
    pub inserted: u64,
    /// Stored articles replaced by a later revision.
    pub replaced: u64,
    /// Records of articles the index already held (same version or newer).
    pub already_indexed: u64,
    /// Records of invalid inputs (DLQ records), which have nothing to restore.
    pub invalid_inputs: u64,
    /// Records that are not decided articles (not JSON, no `dedup`...): skipped, with the first
    /// few reasons in `unreadable_examples`.
    pub unreadable: u64,
    pub unreadable_examples: Vec<String>,
    #[serde(serialize_with = "secs")]
    pub elapsed: Duration,
}

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((d.as_secs_f64() * 1000.0).round() / 1000.0)
}

impl RestoreSummary {
    pub fn records_per_sec(&self) -> f64 {
        self.records as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Why a restore run stopped early.
#[derive(Debug, thiserror::Error)]
pub enum RestoreRunError {
    #[error(transparent)]
    Identity(RestoreError),
    #[error(transparent)]
    Index(#[from] IndexError),
    // The cause is in the message, not chained as a source: printed with its causes it would be
    // told twice.
    #[error("reading the records: {0}")]
    Io(io::Error),
}

/// Which restored records have their fingerprint recomputed and checked. Every record of one run
/// was written by one configuration, and a configuration that fingerprints differently does so
/// on nearly every article: checking the first records of a run and a sample after them refuses
/// another identity as surely as checking all, at a fraction of the cost (segmentation is ~60% of
/// fingerprinting; the others are stored with their recorded fingerprint and sketch, which are
/// what the writer's index holds, the sketch recomputed from the text where a record has none).
#[derive(Debug, Default)]
pub struct Verification {
    seen: std::sync::atomic::AtomicU64,
}

impl Verification {
    /// Records checked at the start of every run.
    pub const FIRST: u64 = 64;
    /// After them, one record in this many.
    pub const EVERY: u64 = 16;

    /// Whether the next record is checked.
    pub fn next(&self) -> bool {
        let n = self.seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        n < Self::FIRST || n.is_multiple_of(Self::EVERY)
    }
}

/// How many unreadable records are quoted in the summary.
const UNREADABLE_EXAMPLES: usize = 5;

/// Restores every record `next` yields (until it returns None) into `target` with the runner:
/// records are parsed and fingerprinted on `threads` workers and applied in the order read, each
/// with its position in the same write. `progress` is called after each applied record. Stops at
/// the first record made with another fingerprint identity.
pub fn restore_all<T: RestoreTarget + Send>(
    next: impl FnMut() -> io::Result<Option<SourceRecord>> + Send,
    target: &mut T,
    fingerprinter: &Fingerprinter,
    rules: &ReadRules,
    threads: usize,
    progress: impl FnMut(&RestoreSummary) + Send,
) -> Result<RestoreSummary, RestoreRunError> {
    let now = crate::dedup::now_ms();
    let verification = Verification::default();
    let mut stage = Restoring {
        target,
        summary: RestoreSummary::default(),
        started: Instant::now(),
        progress,
    };
    let ran = runner::run_to_end(
        next,
        &|rec: &mut SourceRecord| {
            let decided = rec.timestamp_ms.unwrap_or(now);
            restore(
                &rec.bytes,
                rec.sketch.as_ref(),
                fingerprinter,
                rules,
                decided,
                rec.input_time_ms,
                verification.next(),
            )
        },
        &mut stage,
        |()| Ok(()),
        &runner::Options::file(threads),
    );
    match ran {
        Ok(_) => {}
        Err(RunError::Stage(e)) => return Err(e),
        Err(RunError::Source(e) | RunError::Sink(e)) => return Err(RestoreRunError::Io(e)),
        Err(RunError::Failed(why)) => return Err(RestoreRunError::Io(io::Error::other(why))),
    }
    stage.summary.elapsed = stage.started.elapsed();
    Ok(stage.summary)
}

/// The restore as a runner stage: applies each restored record with its position, counting.
struct Restoring<'t, T, F> {
    target: &'t mut T,
    summary: RestoreSummary,
    started: Instant,
    progress: F,
}

impl<T: RestoreTarget, F: FnMut(&RestoreSummary)>
    Stage<SourceRecord, Result<Option<Restored>, RestoreError>> for Restoring<'_, T, F>
{
    type Output = ();
    type Error = RestoreRunError;

    fn apply(
        &mut self,
        record: SourceRecord,
        restored: Result<Option<Restored>, RestoreError>,
    ) -> Result<(), RestoreRunError> {
        let summary = &mut self.summary;
        summary.records += 1;
        let position = record
            .position
            .as_ref()
            .map(|(topic, partition, offset)| (&**topic, *partition, offset + 1));
        let restored = match restored {
            Ok(Some(r)) => Some(r),
            Ok(None) => {
                summary.invalid_inputs += 1;
                None
            }
            Err(
                e @ (RestoreError::IdentityMismatch { .. } | RestoreError::SketchMismatch { .. }),
            ) => return Err(RestoreRunError::Identity(e)),
            Err(RestoreError::NotDecided(why)) => {
                summary.unreadable += 1;
                if summary.unreadable_examples.len() < UNREADABLE_EXAMPLES {
                    let at = match position {
                        Some((t, p, next)) => format!("{t} [{p}] offset {}", next - 1),
                        None => format!("record {}", summary.records),
                    };
                    summary.unreadable_examples.push(format!("{at}: {why}"));
                }
                None
            }
        };
        let correction = record
            .correction
            .as_ref()
            .map(|(topic, partition, offset)| (&**topic, *partition, offset + 1));
        if restored.is_some() || position.is_some() || correction.is_some() {
            match self
                .target
                .apply_restored(restored.as_ref(), position, correction)?
            {
                Apply::Insert => summary.inserted += 1,
                Apply::Replace(_) => summary.replaced += 1,
                Apply::Skip if restored.is_some() => summary.already_indexed += 1,
                Apply::Skip => {}
            }
        }
        summary.elapsed = self.started.elapsed();
        (self.progress)(summary);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint::FingerprintConfig;

    fn fp() -> Fingerprinter {
        Fingerprinter::new(&FingerprintConfig::default()).unwrap()
    }

    const TEXT: &str =
        "国家统计局今天发布数据，十月份全国居民消费价格同比上涨百分之二点一，环比持平。";

    /// `record` restored, checked, decided at 42.
    fn restored(record: &str, fpr: &Fingerprinter) -> Restored {
        restore(
            record.as_bytes(),
            None,
            fpr,
            &ReadRules::new(1 << 20),
            42,
            None,
            true,
        )
        .unwrap()
        .unwrap()
    }

    fn decided(fpr: &Fingerprinter, extra: &str) -> String {
        let f = fpr.fingerprint("标题", TEXT).unwrap().fingerprint;
        format!(
            r#"{{"id":"a1","title":"标题","content":"{TEXT}","dedup":{{"decision":"unique","fingerprint":"{}"{extra}}}}}"#,
            f.to_hex()
        )
    }

    #[test]
    fn a_unique_record_comes_back_searchable_with_its_sketch() {
        let fpr = fp();
        let r = restored(&decided(&fpr, ""), &fpr);
        assert_eq!(r.id, "a1");
        assert!(r.searchable);
        assert_eq!(r.article.decision, StoredDecision::Unique);
        assert_eq!(r.article.first_seen_ms, 42);
        assert_eq!(r.article.title.as_deref(), Some("标题"));
        assert_eq!(
            r.article.sketch,
            Some(fpr.fingerprint("标题", TEXT).unwrap().sketch)
        );
    }

    #[test]
    fn an_update_comes_back_searchable_and_resolving_to_its_match_other_duplicates_do_not() {
        let fpr = fp();
        let duplicate = |relation: &str| {
            let f = fpr.fingerprint("标题", TEXT).unwrap().fingerprint;
            let record = format!(
                r#"{{"id":"a1","title":"标题","content":"{TEXT}","dedup":{{"decision":"duplicate","fingerprint":"{}","match":{{"id":"o1","fingerprint":"{}","distance":12,"rule":"extension","relation":"{relation}"}}}}}}"#,
                f.to_hex(),
                f.to_hex()
            );
            restored(&record, &fpr)
        };
        let update = duplicate("extension");
        assert_eq!(update.article.decision, StoredDecision::Duplicate);
        assert!(update.searchable && update.article.indexed_extension);
        assert_eq!(update.article.resolves_to(), Some("o1"));
        let excerpt = duplicate("excerpt");
        assert!(!excerpt.searchable && !excerpt.article.indexed_extension);
        assert_eq!(excerpt.article.resolves_to(), None);
    }

    #[test]
    fn an_unchecked_record_restores_as_a_checked_one() {
        let fpr = fp();
        let record = decided(&fpr, "");
        let restore_with = |verify| {
            restore(
                record.as_bytes(),
                None,
                &fpr,
                &ReadRules::new(1 << 20),
                42,
                None,
                verify,
            )
        };
        assert_eq!(restore_with(false), restore_with(true));
        // Only a checked record can tell another identity.
        let f = fpr.fingerprint("标题", TEXT).unwrap().fingerprint;
        let tampered = record.replace(&f.to_hex(), &Fingerprint(f.0 ^ 1).to_hex());
        assert!(restore(
            tampered.as_bytes(),
            None,
            &fpr,
            &ReadRules::new(1 << 20),
            0,
            None,
            false
        )
        .is_ok());
    }

    #[test]
    fn a_recorded_sketch_is_taken_and_checked_on_the_records_verified() {
        let fpr = fp();
        let record = decided(&fpr, "");
        let computed = fpr.fingerprint("标题", TEXT).unwrap().sketch;
        let other = fpr.sketch("标题", "另一篇报道的正文，与这条记录的文字毫无关系。");
        assert_ne!(other, computed);
        let restore_with = |sketch: &Sketch, verify| {
            restore(
                record.as_bytes(),
                Some(sketch),
                &fpr,
                &ReadRules::new(1 << 20),
                0,
                None,
                verify,
            )
        };
        // Unverified: the record's sketch is what the writer stored, and is stored as it is.
        let taken = restore_with(&other, false).unwrap().unwrap();
        assert_eq!(taken.article.sketch, Some(other));
        // Verified: it must be the one this build computes from the text.
        let checked = restore_with(&computed, true).unwrap().unwrap();
        assert_eq!(checked.article.sketch, Some(computed));
        assert!(matches!(
            restore_with(&other, true),
            Err(RestoreError::SketchMismatch { .. })
        ));
    }

    #[test]
    fn the_first_records_of_a_run_and_a_sample_after_them_are_checked() {
        let v = Verification::default();
        let checked: Vec<bool> = (0..200).map(|_| v.next()).collect();
        assert!(checked[..Verification::FIRST as usize].iter().all(|c| *c));
        let after = checked[Verification::FIRST as usize..]
            .iter()
            .filter(|c| **c)
            .count();
        assert_eq!(after, 136usize.div_ceil(Verification::EVERY as usize));
    }

    #[test]
    fn another_identity_is_refused_and_dlq_records_are_skipped() {
        let fpr = fp();
        let record = decided(&fpr, "");
        let f = fpr.fingerprint("标题", TEXT).unwrap().fingerprint;
        let tampered = record.replace(&f.to_hex(), &Fingerprint(f.0 ^ 1).to_hex());
        assert!(matches!(
            restore(
                tampered.as_bytes(),
                None,
                &fpr,
                &ReadRules::new(1 << 20),
                0,
                None,
                true
            ),
            Err(RestoreError::IdentityMismatch { .. })
        ));
        let dlq = br#"{"line":3,"dedup":{"decision":"invalid","error":"bad_json: x"}}"#;
        assert_eq!(
            restore(dlq, None, &fpr, &ReadRules::new(1 << 20), 0, None, true),
            Ok(None)
        );
        assert!(matches!(
            restore(
                b"{not json",
                None,
                &fpr,
                &ReadRules::new(1 << 20),
                0,
                None,
                true
            ),
            Err(RestoreError::NotDecided(_))
        ));
    }

    #[test]
    fn applying_is_idempotent_and_keeps_the_newest_revision() {
        let fpr = fp();
        let first = restore(
            decided(&fpr, "").as_bytes(),
            None,
            &fpr,
            &ReadRules::new(1 << 20),
            0,
            None,
            true,
        )
        .unwrap()
        .unwrap()
        .article;
        assert_eq!(apply_rule(None, &first), Apply::Insert);
        assert_eq!(apply_rule(Some(first.clone()), &first), Apply::Skip);
        let revised = StoredArticle {
            fingerprint: Fingerprint(first.fingerprint.0 ^ 0xff),
            revision: Some(Revision {
                number: 1,
                previous_fingerprint: first.fingerprint,
            }),
            ..first.clone()
        };
        assert_eq!(
            apply_rule(Some(first.clone()), &revised),
            Apply::Replace(Box::new(first.clone()))
        );
        // The older version read after the newer one changes nothing.
        assert_eq!(apply_rule(Some(revised), &first), Apply::Skip);
    }
}
