//! The service's configuration of the [runner](crate::runner): Kafka records in, Kafka records
//! out. The consumer loop pushes each consumed record ([`Engine::submit`]); a channel is the
//! runner's source, the [`LocalPreparer`] its prepare stage, [`Decide`] over the `Deduper` its
//! single writer, and the producer its sink. Every group of decisions is made durable before its
//! outputs are handed to the producer ([`Durability::EachGroup`]), so a published decision
//! survives a power loss; the committer syncs once more before it commits an offset
//! ([`RunnerHandle::sync`]). Decisions and the runner's groups are exported as metrics here.
//!
//! An index error is fatal: nothing after it is decided (later records are dropped and never
//! acknowledged, so their offsets are never committed), the failure is recorded, and `sync`
//! keeps being answered so that what was done before the failure can still be committed.

use super::record::{self, InputMessage, OutputRecord, Ticket};
use crate::article::{InvalidArticle, InvalidReason, ReadRules};
use crate::correction::Acceptance;
use crate::fingerprint::Fingerprinter;
use crate::index::{DiskUsage, IndexCounts};
use crate::metrics as m;
use crate::pipeline::{
    self, Decide, DecisionObserver, DecisionStage, Envelope, Outcome, Prepared, SharedCounts,
};
use crate::runner::{self, Durability, Observer, Prepare, RunnerHandle};
use crossbeam_channel::{unbounded, Sender};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Where decided records go. `send` may block (output queue full); it must eventually report the
/// delivery of `ticket` to whoever tracks offsets, or never report it if the record is abandoned
/// or can never be delivered (then it calls [`RunnerHandle::fail`]).
pub trait OutputSink: Send + 'static {
    /// Called once by [`Engine::start`], before the first `send`, with the run's handle.
    fn attach(&mut self, _engine: &RunnerHandle) {}
    fn send(&mut self, record: OutputRecord, ticket: Ticket);
}

/// An [`OutputSink`] as the runner's sink: delivery is reported by the sink itself.
struct Delivered<K>(K);

impl<K: OutputSink> runner::Sink<(OutputRecord, Ticket)> for Delivered<K> {
    fn send(&mut self, (record, ticket): (OutputRecord, Ticket)) -> std::io::Result<()> {
        self.0.send(record, ticket);
        Ok(())
    }
}

/// `pipeline::prepare` on this machine, plus the check that a valid article's output record
/// fits the producer's limit.
pub struct LocalPreparer {
    pub fingerprinter: Fingerprinter,
    pub read_rules: ReadRules,
    /// The producer's `message.max.bytes`. An article whose output record (value, key and
    /// headers) could exceed it is invalid (`oversized`) before it reaches the index, so the
    /// index never holds an article that no reader of the output topics saw.
    pub max_output_bytes: usize,
    /// What a correction must be to apply (signed with its keys, none: not checked; for this
    /// service; unexpired).
    pub correction_acceptance: Acceptance,
}

impl Prepare<InputMessage> for LocalPreparer {
    type Prepared = Prepared;

    fn prepare(&self, msg: &mut InputMessage) -> Prepared {
        let prepared = self.prepare_record(msg);
        if matches!(prepared, Prepared::Valid { .. }) {
            // Only the DLQ needs the original bytes. A correction keeps them: the index may
            // still refuse it, and its DLQ record then carries it as it was sent.
            msg.payload = None;
        }
        prepared
    }
}

impl LocalPreparer {
    fn prepare_record(&self, msg: &InputMessage) -> Prepared {
        let Some(bytes) = msg.payload.as_deref() else {
            return Prepared::Invalid(InvalidArticle::new(
                InvalidReason::BadJson,
                "record has no value (null payload)",
            ));
        };
        if msg.headers_dropped > 0 {
            return Prepared::Invalid(InvalidArticle::new(
                InvalidReason::Oversized,
                format!(
                    "record carries {} headers; at most {} are read (the DLQ record keeps the first {})",
                    record::MAX_INPUT_HEADERS + msg.headers_dropped,
                    record::MAX_INPUT_HEADERS,
                    record::MAX_INPUT_HEADERS
                ),
            ));
        }
        let prepared = if msg.correction {
            pipeline::prepare_correction(
                bytes,
                &self.fingerprinter,
                &self.read_rules,
                &self.correction_acceptance,
            )
        } else {
            pipeline::prepare(bytes, &self.fingerprinter, &self.read_rules)
        };
        let bounded = match &prepared {
            Prepared::Valid {
                article,
                open_record,
                ..
            } => Some((article.id.as_str(), open_record.len())),
            Prepared::Correction {
                correction,
                open_record,
                ..
            } => Some((
                correction.id.as_str(),
                open_record.len() + crate::output::MAX_CORRECTION_MEMBER_BYTES,
            )),
            Prepared::Invalid(_) => None,
        };
        if let Some((id, open_len)) = bounded {
            let worst = record::worst_case_output_bytes(msg, id, open_len);
            if worst > self.max_output_bytes {
                return Prepared::Invalid(InvalidArticle {
                    reason: InvalidReason::Oversized,
                    message: format!(
                        "its output record could reach {worst} bytes with key and headers, over the producer's message.max.bytes ({}): it could never be delivered, so it is not indexed",
                        self.max_output_bytes
                    ),
                    id: Some(id.to_owned()),
                });
            }
        }
        prepared
    }
}

impl Envelope for InputMessage {
    type Output = (OutputRecord, Ticket);

    fn record_time_ms(&self) -> Option<i64> {
        self.timestamp_ms
    }

    fn output(self, outcome: Outcome) -> (OutputRecord, Ticket) {
        let ticket = self.ticket();
        let record = match outcome {
            Outcome::Decided {
                id,
                record,
                decision,
                ..
            } => record::decided_record(&self, &id, record, &decision),
            Outcome::Invalid { error, record } => record::dlq_record(self, &error, record),
        };
        (record, ticket)
    }
}

/// A prepare stage timed into the `prepare` stage histogram.
struct Timed<P> {
    inner: Arc<P>,
    prepare_secs: metrics::Histogram,
}

impl<P: Prepare<InputMessage> + Send> Prepare<InputMessage> for Timed<P> {
    type Prepared = P::Prepared;

    fn prepare(&self, msg: &mut InputMessage) -> P::Prepared {
        let start = Instant::now();
        let prepared = self.inner.prepare(msg);
        self.prepare_secs.record(start.elapsed().as_secs_f64());
        prepared
    }
}

/// The decisions and the runner's groups as metrics.
#[derive(Clone)]
struct Exported {
    unique: metrics::Counter,
    duplicate: metrics::Counter,
    replayed: metrics::Counter,
    candidates: metrics::Histogram,
    decide_secs: metrics::Histogram,
    sync_secs: metrics::Histogram,
    index_articles: metrics::Gauge,
    index_unique: metrics::Gauge,
    index_stream_time: metrics::Gauge,
    group_size: metrics::Histogram,
}

impl Exported {
    fn new() -> Self {
        Exported {
            unique: metrics::counter!(m::ARTICLES_UNIQUE),
            duplicate: metrics::counter!(m::ARTICLES_DUPLICATE),
            replayed: metrics::counter!(m::ARTICLES_REPLAYED),
            candidates: metrics::histogram!(m::CANDIDATES_PER_LOOKUP),
            decide_secs: metrics::histogram!(m::STAGE_SECONDS, "stage" => "decide"),
            sync_secs: metrics::histogram!(m::STAGE_SECONDS, "stage" => "sync"),
            index_articles: metrics::gauge!(m::INDEX_ARTICLES),
            index_unique: metrics::gauge!(m::INDEX_UNIQUE),
            index_stream_time: metrics::gauge!(m::INDEX_STREAM_TIME),
            group_size: metrics::histogram!(m::GROUP_COMMIT_SIZE),
        }
    }
}

impl Observer for Exported {
    fn group(&self, size: usize) {
        self.group_size.record(size as f64);
    }

    fn synced(&self, secs: f64) {
        self.sync_secs.record(secs);
    }
}

impl DecisionObserver for Exported {
    fn decided(&mut self, outcome: &Outcome, took: Duration, index: &IndexCounts) {
        match outcome {
            Outcome::Decided {
                corrected: Some(kind),
                ..
            } => {
                metrics::counter!(m::CORRECTIONS, "kind" => kind.as_str()).increment(1);
                self.index_changed(index, None);
            }
            Outcome::Decided { decision, .. } => {
                if decision.is_duplicate() {
                    self.duplicate.increment(1);
                } else {
                    self.unique.increment(1);
                }
                if decision.replayed {
                    self.replayed.increment(1);
                } else {
                    self.candidates.record(decision.candidates as f64);
                }
                self.index_changed(index, None);
            }
            Outcome::Invalid { error, .. } => {
                metrics::counter!(m::ARTICLES_INVALID, "reason" => error.reason.as_str())
                    .increment(1);
            }
        }
        self.decide_secs.record(took.as_secs_f64());
    }

    fn index_changed(&mut self, index: &IndexCounts, disk: Option<DiskUsage>) {
        self.index_articles.set(index.articles as f64);
        self.index_unique.set(index.unique as f64);
        self.index_stream_time
            .set(index.stream_time_ms as f64 / 1000.0);
        if let Some(disk) = disk {
            m::record_disk_usage(&disk);
        }
    }
}

/// The running service pipeline: records submitted in consumption order are decided in that
/// order on the runner's apply thread.
pub struct Engine {
    jobs: Option<Sender<InputMessage>>,
    handle: RunnerHandle,
    counts: SharedCounts,
    thread: Option<JoinHandle<()>>,
}

impl Engine {
    /// Starts the runner: `threads` prepare workers and the decision thread owning `decider`
    /// (typically a `Deduper<RocksIndex>`), outputs to `sink`. `abandon` is the flag set by
    /// [`RunnerHandle::abandon`] (share it with the sink so it stops retrying).
    pub fn start<D, P, K>(
        decider: D,
        preparer: Arc<P>,
        sink: K,
        threads: usize,
        abandon: Arc<AtomicBool>,
    ) -> Engine
    where
        D: DecisionStage + 'static,
        P: Prepare<InputMessage, Prepared = Prepared> + Send + 'static,
        K: OutputSink,
    {
        let exported = Exported::new();
        let observer: Arc<dyn Observer> = Arc::new(exported.clone());
        let options = runner::Options {
            threads,
            window: None,
            durability: Durability::EachGroup,
            read_after_failure: true,
            observer: observer.clone(),
        };
        let preparer = Timed {
            inner: preparer,
            prepare_secs: metrics::histogram!(m::STAGE_SECONDS, "stage" => "prepare"),
        };
        let (handle, controls) = RunnerHandle::new(decider.sync_handle(), abandon, observer);
        let mut sink = sink;
        sink.attach(&handle);
        let (jobs, rx) = unbounded::<InputMessage>();
        let mut stage = Decide::new(decider, exported.clone());
        let counts = stage.counts();
        let guard = handle.fail_on_panic("decide");
        let run_handle = handle.clone();
        let thread = std::thread::Builder::new()
            .name("decide".into())
            .spawn(move || {
                let _guard = guard;
                let source = move || Ok(rx.recv().ok());
                // A failure is already recorded in the handle, where the consumer loop sees it.
                let _ = runner::run(
                    source,
                    &preparer,
                    &mut stage,
                    Delivered(sink),
                    &run_handle,
                    controls,
                    &options,
                );
                let mut exported = exported;
                exported.index_changed(
                    &stage.decider().counts(),
                    Some(stage.decider().disk_usage()),
                );
            })
            .expect("cannot spawn the decision thread");
        Engine {
            jobs: Some(jobs),
            handle,
            counts,
            thread: Some(thread),
        }
    }

    pub fn handle(&self) -> &RunnerHandle {
        &self.handle
    }

    /// The outcomes decided so far, shared.
    pub fn counts(&self) -> SharedCounts {
        self.counts.clone()
    }

    /// A sender that queues records like [`Engine::submit`] (the corrections loop's); the run
    /// ends only once every sender is dropped.
    pub fn submitter(&self) -> Option<Sender<InputMessage>> {
        self.jobs.clone()
    }

    /// Queues a consumed record. Records are decided in the order they are submitted.
    pub fn submit(&mut self, msg: InputMessage) -> Result<(), runner::ControlError> {
        match &self.jobs {
            Some(tx) => tx.send(msg).map_err(|_| match self.handle.failure() {
                Some(f) => runner::ControlError::Failed(f),
                None => runner::ControlError::Stopped,
            }),
            None => Err(runner::ControlError::Stopped),
        }
    }

    /// Finishes queued work (unless abandoned), makes the index durable and closes it.
    pub fn shutdown(mut self) {
        self.jobs = None;
        self.handle.close();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
