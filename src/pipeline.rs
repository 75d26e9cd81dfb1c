//! The two stages every article goes through, whatever its source and sink: `prepare` (parse +
//! validate + fingerprint: pure, parallel, could run on another machine) and `decide` (index
//! lookup + insert: serial, single writer). [`Decide`] is the decision as a stage of the
//! [`runner`](crate::runner), counting outcomes for every command in one place; an [`Envelope`]
//! (a JSONL line, a Kafka record) says what the source carried around the article and how its
//! outcome is written back.

use crate::article::{Article, InvalidArticle, InvalidReason, ReadRules};
use crate::correction::{Acceptance, CarriedArticle, Correction};
use crate::dedup::{Decision, DecisionInput, Deduper};
use crate::error::IndexError;
use crate::fingerprint::{Fingerprinted, Fingerprinter};
use crate::index::{
    ArticleStore, CorrectionKind, DiskUsage, DurableStore, IndexCounts, IndexWrite, SyncHandle,
};
use crate::output;
use crate::runner::Stage;
use crate::topic::Outline;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the decision stage needs of a valid article (the record itself is not kept).
#[derive(Debug, Clone, PartialEq)]
pub struct ArticleRef {
    pub id: String,
    pub url: Option<String>,
    /// "" when the article has no title.
    pub title: String,
    /// `published_at` read as a time (Unix ms).
    pub published_ms: Option<i64>,
    /// The timestamp of the record that carried the article (Kafka), if any: its event time
    /// when it has no readable `published_at`. Set by the edge ([`Prepared::set_record_time`]).
    pub record_time_ms: Option<i64>,
}

/// Result of the parallel stage.
#[derive(Debug)]
// Nearly every record is valid: boxing the large variant would only add an allocation per record.
#[allow(clippy::large_enum_variant)]
pub enum Prepared {
    Valid {
        article: ArticleRef,
        fingerprint: Fingerprinted,
        /// The cleaned content and heaviest words, for the topic check of an extension.
        outline: Outline,
        /// The article's output record so far (`output::open_record`), rendered here because
        /// this stage runs in parallel and the decision stage does not.
        open_record: Vec<u8>,
    },
    /// An editor's correction (`correction`), with its article's output record so far and what
    /// the index compares with its stored article.
    Correction {
        correction: Correction,
        carried: CarriedArticle,
        open_record: Vec<u8>,
    },
    Invalid(InvalidArticle),
}

impl Prepared {
    /// Records the timestamp of the record that carried the article (Kafka's record timestamp).
    pub fn set_record_time(&mut self, record_time_ms: Option<i64>) {
        if let Prepared::Valid { article, .. } = self {
            article.record_time_ms = record_time_ms;
        }
    }
}

/// Parses, validates and fingerprints one raw record.
pub fn prepare(raw: &[u8], fingerprinter: &Fingerprinter, rules: &ReadRules) -> Prepared {
    let article = match Article::parse(raw, rules.max_bytes) {
        Ok(a) => a,
        Err(e) => return Prepared::Invalid(e),
    };
    let open_record = match crate::output::open_record(&article) {
        Ok(open) => open,
        Err(e) => {
            return Prepared::Invalid(InvalidArticle {
                reason: InvalidReason::BadJson,
                message: format!("the article cannot be written back as JSON: {e}"),
                id: Some(article.id().to_owned()),
            })
        }
    };
    match fingerprinter.prepare(article.title(), article.content()) {
        Ok((fingerprint, outline)) => Prepared::Valid {
            article: ArticleRef {
                id: article.id().to_owned(),
                url: article.url().map(str::to_owned),
                title: article.title().to_owned(),
                published_ms: article.published_ms(rules.published_at_offset),
                record_time_ms: None,
            },
            fingerprint,
            outline,
            open_record,
        },
        Err(e) => Prepared::Invalid(InvalidArticle {
            reason: InvalidReason::NoFeatures,
            message: e.to_string(),
            id: Some(article.id().to_owned()),
        }),
    }
}

/// Reads a correction record (`correction::Correction`) and the article it carries: its output
/// record so far, as [`prepare`] renders an article's, and its fingerprint and sketch, which the
/// decision compares with the stored article's (`correction::CarriedArticle`). A correction
/// `acceptance` refuses (unsigned, for another service, expired) is refused before anything else
/// is read.
pub fn prepare_correction(
    raw: &[u8],
    fingerprinter: &Fingerprinter,
    rules: &ReadRules,
    acceptance: &Acceptance,
) -> Prepared {
    let refuse = |message: String, id: Option<String>| {
        Prepared::Invalid(InvalidArticle {
            reason: InvalidReason::BadCorrection,
            message,
            id,
        })
    };
    let correction = match Correction::parse(raw) {
        Ok(c) => c,
        Err(e) => return refuse(e.to_string(), None),
    };
    let id = Some(correction.id.clone());
    let signed_with = match correction.accept(acceptance, crate::dedup::now_ms() as i64) {
        Ok(signed_with) => signed_with,
        Err(e) => {
            return Prepared::Invalid(InvalidArticle {
                reason: if e.is_expiry() {
                    InvalidReason::ExpiredCorrection
                } else {
                    InvalidReason::UnsignedCorrection
                },
                message: format!("correction refused: {e}"),
                id,
            })
        }
    };
    let article = match Article::parse(correction.article.as_bytes(), rules.max_bytes) {
        Ok(a) => a,
        Err(e) => return refuse(format!("its `article` is not a valid article: {e}"), id),
    };
    if article.id() != correction.id {
        return refuse(
            format!(
                "its `article` has id {:?}, the correction names {:?}",
                article.id(),
                correction.id
            ),
            id,
        );
    }
    let open_record = match crate::output::open_record(&article) {
        Ok(open_record) => open_record,
        Err(e) => {
            return refuse(
                format!("its `article` cannot be written back as JSON: {e}"),
                id,
            )
        }
    };
    let fingerprinted = match fingerprinter.fingerprint(article.title(), article.content()) {
        Ok(f) => f,
        Err(e) => return refuse(format!("its `article` cannot be fingerprinted: {e}"), id),
    };
    let title = article.title();
    let carried = CarriedArticle {
        fingerprint: fingerprinted.fingerprint,
        sketch: fingerprinted.sketch,
        title: (!title.is_empty()).then(|| title.to_owned()),
        url: article.url().map(str::to_owned),
        published_ms: article.published_ms(rules.published_at_offset),
        signed_with,
    };
    Prepared::Correction {
        correction,
        carried,
        open_record,
    }
}

/// Result of the serial stage: the output record (one JSON object, no newline) and what happened.
#[derive(Debug)]
// One per record, moved once from the decision to the output: boxing the decision would cost an
// allocation per record for nothing.
#[allow(clippy::large_enum_variant)]
pub enum Outcome {
    Decided {
        /// The article id (the output record's key).
        id: String,
        record: Vec<u8>,
        decision: Decision,
        /// Set when this is an editor's correction applied (`decision.replayed`: applied
        /// before, its output made again), not an article decided.
        corrected: Option<CorrectionKind>,
    },
    Invalid {
        record: Vec<u8>,
        error: InvalidArticle,
    },
}

impl Outcome {
    pub fn record(&self) -> &[u8] {
        match self {
            Outcome::Decided { record, .. } | Outcome::Invalid { record, .. } => record,
        }
    }
}

/// Outcomes counted for the summaries and progress lines of `batch` and `replay`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OutcomeCounts {
    pub unique: u64,
    pub duplicate: u64,
    /// Decisions the index already held (the same id and content seen before).
    pub replayed: u64,
    /// Editors' corrections applied, by kind (not counted as unique or duplicate; a refused one
    /// is invalid, `refused_correction`).
    pub corrected: std::collections::BTreeMap<&'static str, u64>,
    /// Invalid records, by reason.
    pub invalid: std::collections::BTreeMap<&'static str, u64>,
}

impl OutcomeCounts {
    pub fn add(&mut self, outcome: &Outcome) {
        match outcome {
            Outcome::Decided {
                corrected: Some(kind),
                ..
            } => *self.corrected.entry(kind.as_str()).or_default() += 1,
            Outcome::Decided { decision, .. } => {
                self.replayed += u64::from(decision.replayed);
                if decision.is_duplicate() {
                    self.duplicate += 1;
                } else {
                    self.unique += 1;
                }
            }
            Outcome::Invalid { error, .. } => {
                *self.invalid.entry(error.reason.as_str()).or_default() += 1
            }
        }
    }

    pub fn invalid_total(&self) -> u64 {
        self.invalid.values().sum()
    }

    pub fn corrected_total(&self) -> u64 {
        self.corrected.values().sum()
    }

    /// Every outcome counted.
    pub fn records(&self) -> u64 {
        self.unique + self.duplicate + self.invalid_total() + self.corrected_total()
    }
}

/// Outcome counts shared between the decision stage (which adds) and whoever reports them on
/// other threads (progress lines, summaries).
#[derive(Debug, Clone, Default)]
pub struct SharedCounts(Arc<Mutex<OutcomeCounts>>);

impl SharedCounts {
    pub fn add(&self, outcome: &Outcome) {
        if let Ok(mut counts) = self.0.lock() {
            counts.add(outcome);
        }
    }

    pub fn snapshot(&self) -> OutcomeCounts {
        self.0.lock().map(|c| c.clone()).unwrap_or_default()
    }

    pub fn records(&self) -> u64 {
        self.snapshot().records()
    }
}

/// Decides a prepared article. `line` (1-based) is included in invalid records when known.
pub fn decide<S: ArticleStore>(
    deduper: &mut Deduper<S>,
    prepared: Prepared,
    line: Option<u64>,
    now_ms: u64,
) -> Result<Outcome, IndexError> {
    match prepared {
        Prepared::Invalid(error) => Ok(Outcome::Invalid {
            record: output::invalid_line(line, &error),
            error,
        }),
        Prepared::Valid {
            article,
            fingerprint,
            outline,
            open_record,
        } => {
            let input = DecisionInput {
                id: &article.id,
                url: article.url.as_deref(),
                title: (!article.title.is_empty()).then_some(article.title.as_str()),
                fingerprint: fingerprint.fingerprint,
                sketch: Some(&fingerprint.sketch),
                off_title_text: fingerprint.off_title_text.as_deref(),
                outline: Some(&outline),
                published_ms: article.published_ms,
                record_time_ms: article.record_time_ms,
            };
            let decision = deduper.decide(&input, now_ms)?;
            Ok(Outcome::Decided {
                id: article.id,
                record: output::close_record(open_record, &decision),
                decision,
                corrected: None,
            })
        }
        Prepared::Correction {
            correction,
            carried,
            open_record,
        } => Ok(match deduper.correct(&correction, &carried, now_ms)? {
            Ok(corrected) => {
                let decision = Decision {
                    replayed: !corrected.changed,
                    ..corrected.decision
                };
                Outcome::Decided {
                    id: correction.id,
                    record: output::close_record(open_record, &decision),
                    decision,
                    corrected: Some(correction.kind),
                }
            }
            Err(refusal) => {
                let error = InvalidArticle {
                    reason: InvalidReason::RefusedCorrection,
                    message: format!("{} correction refused: {refusal}", correction.kind.as_str()),
                    id: Some(correction.id),
                };
                Outcome::Invalid {
                    record: output::invalid_line(line, &error),
                    error,
                }
            }
        }),
    }
}

/// The decision a [`Decide`] stage runs: implemented by `Deduper` over a [`DurableStore`]; tests
/// wrap it to inject failures.
pub trait DecisionStage: Send {
    /// Decides one prepared record (an invalid one is passed through without touching the index).
    fn decide(&mut self, prepared: Prepared, now_ms: u64) -> Result<Outcome, IndexError>;
    /// Makes every decision so far durable.
    fn sync(&self) -> Result<(), IndexError>;
    /// A handle that does `sync` from another thread, if there is one.
    fn sync_handle(&self) -> Option<SyncHandle> {
        None
    }
    fn counts(&self) -> IndexCounts;
    fn disk_usage(&self) -> DiskUsage {
        DiskUsage::default()
    }
    /// Undoes what the decision of `id` wrote (`write`), durably, because its output can never
    /// reach its topic. True if the index changed.
    fn undo(&mut self, id: &str, write: &IndexWrite) -> Result<bool, IndexError>;
    /// Whether the index holds an article `id`.
    fn holds(&self, id: &str) -> Result<bool, IndexError>;
}

impl<S: DurableStore> DecisionStage for Deduper<S> {
    fn decide(&mut self, prepared: Prepared, now_ms: u64) -> Result<Outcome, IndexError> {
        decide(self, prepared, None, now_ms)
    }

    fn sync(&self) -> Result<(), IndexError> {
        self.store().sync()
    }

    fn sync_handle(&self) -> Option<SyncHandle> {
        self.store().sync_handle()
    }

    fn counts(&self) -> IndexCounts {
        self.store().counts()
    }

    fn disk_usage(&self) -> DiskUsage {
        self.store().disk_usage()
    }

    fn undo(&mut self, id: &str, write: &IndexWrite) -> Result<bool, IndexError> {
        self.store_mut().undo(id, write)
    }

    fn holds(&self, id: &str) -> Result<bool, IndexError> {
        Ok(self.store().get(id)?.is_some())
    }
}

/// What a source carried around an article, and how the article's outcome is written back for
/// its sink (a JSONL line with its line number, a Kafka record with its headers and offset).
pub trait Envelope {
    type Output: Send;
    /// The carrier's own time (Kafka's record timestamp): the event time of an article without
    /// a readable `published_at`.
    fn record_time_ms(&self) -> Option<i64> {
        None
    }
    fn output(self, outcome: Outcome) -> Self::Output;
}

/// Watches the decisions (the service exports them as metrics).
pub trait DecisionObserver: Send {
    /// False when nothing is watched: the index is then not measured for it.
    fn watching(&self) -> bool {
        true
    }
    /// `outcome` was decided in `took`; the index now holds `index`.
    fn decided(&mut self, _outcome: &Outcome, _took: Duration, _index: &IndexCounts) {}
    /// The index changed outside a decision (a withdrawal), or its disk use was measured.
    fn index_changed(&mut self, _index: &IndexCounts, _disk: Option<DiskUsage>) {}
}

impl DecisionObserver for () {
    fn watching(&self) -> bool {
        false
    }
}

/// How often the index's disk use is measured while deciding.
pub(crate) const DISK_EVERY: Duration = Duration::from_secs(10);

/// The decision as a runner stage: decides each article, counts its outcome, and writes it back
/// through its envelope.
pub struct Decide<D, O = ()> {
    decider: D,
    counts: SharedCounts,
    observer: O,
    measured: Instant,
}

impl<D: DecisionStage, O: DecisionObserver> Decide<D, O> {
    pub fn new(decider: D, mut observer: O) -> Self {
        if observer.watching() {
            observer.index_changed(&decider.counts(), Some(decider.disk_usage()));
        }
        Decide {
            decider,
            counts: SharedCounts::default(),
            observer,
            measured: Instant::now(),
        }
    }

    /// The outcomes counted so far, shared (for progress lines read on other threads).
    pub fn counts(&self) -> SharedCounts {
        self.counts.clone()
    }

    pub fn decider(&self) -> &D {
        &self.decider
    }

    pub fn into_decider(self) -> D {
        self.decider
    }
}

impl<D: DecisionStage, O: DecisionObserver, E: Envelope> Stage<E, Prepared> for Decide<D, O> {
    type Output = E::Output;
    type Error = IndexError;

    fn apply(&mut self, envelope: E, mut prepared: Prepared) -> Result<E::Output, IndexError> {
        prepared.set_record_time(envelope.record_time_ms());
        let start = Instant::now();
        let outcome = self.decider.decide(prepared, crate::dedup::now_ms())?;
        self.counts.add(&outcome);
        if self.observer.watching() {
            self.observer
                .decided(&outcome, start.elapsed(), &self.decider.counts());
            if self.measured.elapsed() >= DISK_EVERY {
                self.measured = Instant::now();
                self.observer
                    .index_changed(&self.decider.counts(), Some(self.decider.disk_usage()));
            }
        }
        Ok(envelope.output(outcome))
    }

    fn sync(&self) -> Result<(), IndexError> {
        self.decider.sync()
    }

    fn sync_handle(&self) -> Option<SyncHandle> {
        self.decider.sync_handle()
    }

    fn undo(&mut self, id: &str, write: &IndexWrite) -> Result<bool, IndexError> {
        let undone = self.decider.undo(id, write)?;
        self.observer.index_changed(&self.decider.counts(), None);
        Ok(undone)
    }

    fn holds(&self, id: &str) -> Result<bool, IndexError> {
        self.decider.holds(id)
    }
}
