//! The two stages between consumer and producer, independent of Kafka:
//!
//! ```text
//! submit (consume order, seq 0,1,2...) ─► prepare pool (N threads, any order) ─► reorder by seq ─► decide (1 thread) ─► OutputSink
//! ```
//!
//! * **prepare** ([`Preparer`]): parse + validate + fingerprint, pure. Runs on `threads` workers.
//!   It needs the record (bytes, and headers for the output-size check) and returns a [`Prepared`], so it could run on other machines
//!   (a remote `Preparer` keyed by topic/partition/offset) without touching the decision stage.
//! * **decide**: one thread owns the `Deduper` (lookup + atomic insert), so two near-duplicates in
//!   flight can never both be unique. Results are put back in submission order first, and the
//!   consumer submits in consumption order, so decisions follow each partition's order.
//! * The decision thread decides every record that is ready, makes those index writes durable
//!   with one fsync (group commit), and only then hands their outcomes to an [`OutputSink`]
//!   (Kafka producer in the service, a vector in tests): a published decision survives a power
//!   loss. With the store's [`SyncHandle`] a publisher thread does the fsync and the hand-over,
//!   so the decision thread decides the next group meanwhile. The committer syncs once more before it commits an offset (with the store's
//!   [`SyncHandle`] on its own thread; a store without one has its `sync` requests served by the
//!   decision thread between two groups).
//!
//! An index error is fatal: the decision thread stops deciding (later records are dropped and
//! never acknowledged, so their offsets are never committed), records the failure and keeps
//! answering `sync` so that what was done before the failure can still be committed.

use super::record::{self, Indexed, InputMessage, OutputRecord, Ticket};
use crate::article::{InvalidArticle, InvalidReason, ReadRules};
use crate::dedup::{self, Deduper};
use crate::error::IndexError;
use crate::fingerprint::Fingerprinter;
use crate::index::{ArticleStore, IndexCounts, RocksIndex, SyncHandle};
use crate::metrics as m;
use crate::pipeline::{self, Outcome, Prepared};
use crate::simhash::Fingerprint;
use crossbeam_channel::{bounded, never, select, unbounded, Receiver, Sender};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// An index the decision stage can make durable.
pub trait DurableStore: ArticleStore + Send + 'static {
    /// Makes every write so far durable.
    fn sync(&self) -> Result<(), IndexError>;
    /// A handle that does `sync` from another thread, if the store has one.
    fn sync_handle(&self) -> Option<SyncHandle> {
        None
    }
    /// Size on disk, for the metrics.
    fn disk_bytes(&self) -> u64 {
        0
    }
    /// Removes `id` if its stored version has `fingerprint`, durably; true if it did.
    fn withdraw(&mut self, id: &str, fingerprint: Fingerprint) -> Result<bool, IndexError>;
}

impl DurableStore for RocksIndex {
    fn withdraw(&mut self, id: &str, fingerprint: Fingerprint) -> Result<bool, IndexError> {
        if self.get(id)?.is_some_and(|a| a.fingerprint == fingerprint) {
            return Ok(!self.delete(&[id.to_owned()])?.is_empty());
        }
        Ok(false)
    }

    fn sync(&self) -> Result<(), IndexError> {
        RocksIndex::sync(self)
    }

    fn sync_handle(&self) -> Option<SyncHandle> {
        Some(RocksIndex::sync_handle(self))
    }

    fn disk_bytes(&self) -> u64 {
        RocksIndex::disk_bytes(self)
    }
}

/// The decision stage: lookup + decision + insert, one writer. Implemented by `Deduper` over a
/// [`DurableStore`]; tests wrap it to inject failures.
pub trait DecisionStage: Send + 'static {
    /// Decides one prepared record (an invalid one is passed through without touching the index).
    fn decide(&mut self, prepared: Prepared, now_ms: u64) -> Result<Outcome, IndexError>;
    /// Makes every decision so far durable.
    fn sync(&self) -> Result<(), IndexError>;
    /// A handle that does `sync` from another thread (the committer's), if there is one.
    fn sync_handle(&self) -> Option<SyncHandle> {
        None
    }
    fn counts(&self) -> IndexCounts;
    fn disk_bytes(&self) -> u64 {
        0
    }
    /// Takes a decided article out of the index (its stored version is `fingerprint`),
    /// durably, because its output can never reach its topic. True if it was there.
    fn withdraw(&mut self, id: &str, fingerprint: Fingerprint) -> Result<bool, IndexError>;
}

impl<S: DurableStore> DecisionStage for Deduper<S> {
    fn withdraw(&mut self, id: &str, fingerprint: Fingerprint) -> Result<bool, IndexError> {
        self.store_mut().withdraw(id, fingerprint)
    }

    fn decide(&mut self, prepared: Prepared, now_ms: u64) -> Result<Outcome, IndexError> {
        pipeline::decide(self, prepared, None, now_ms)
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

    fn disk_bytes(&self) -> u64 {
        self.store().disk_bytes()
    }
}

/// Where decided records go. `send` may block (output queue full); it must eventually report the
/// delivery of `ticket` to whoever tracks offsets, or never report it if the record is abandoned
/// or can never be delivered (then it calls [`EngineHandle::fail`]).
pub trait OutputSink: Send + 'static {
    /// Called once by [`Engine::start`], before the first `send`, with the engine's handle.
    fn attach(&mut self, _engine: &EngineHandle) {}
    fn send(&mut self, record: OutputRecord, ticket: Ticket);
}

/// The fingerprint stage: consumed record -> validated, fingerprinted article (or why not).
pub trait Preparer: Send + Sync + 'static {
    fn prepare(&self, msg: &InputMessage) -> Prepared;
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
}

impl Preparer for LocalPreparer {
    fn prepare(&self, msg: &InputMessage) -> Prepared {
        let Some(bytes) = msg.payload.as_deref() else {
            return Prepared::Invalid(InvalidArticle::new(
                InvalidReason::BadJson,
                "record has no value (null payload)",
            ));
        };
        let prepared = pipeline::prepare(bytes, &self.fingerprinter, &self.read_rules);
        if let Prepared::Valid {
            article,
            open_record,
            ..
        } = &prepared
        {
            let worst = record::worst_case_output_bytes(msg, &article.id, open_record.len());
            if worst > self.max_output_bytes {
                return Prepared::Invalid(InvalidArticle {
                    reason: InvalidReason::Oversized,
                    message: format!(
                        "its output record could reach {worst} bytes with key and headers, over the producer's message.max.bytes ({}): it could never be delivered, so it is not indexed",
                        self.max_output_bytes
                    ),
                    id: Some(article.id.clone()),
                });
            }
        }
        prepared
    }
}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum EngineError {
    #[error("the decision stage failed: {0}")]
    Failed(String),
    #[error("the decision stage has stopped")]
    Stopped,
    #[error("the decision stage did not answer a sync request within {0:?}")]
    Timeout(Duration),
}

struct Job {
    seq: u64,
    msg: InputMessage,
}

struct Ready {
    seq: u64,
    msg: InputMessage,
    prepared: Prepared,
    prepare_secs: f64,
}

enum Control {
    Sync(Sender<Result<(), String>>),
    Withdraw(Indexed, Sender<Result<bool, String>>),
}

/// Cloneable access to a running engine: durability requests and failure state.
#[derive(Clone)]
pub struct EngineHandle {
    control: Sender<Control>,
    failure: Arc<Mutex<Option<String>>>,
    abandon: Arc<AtomicBool>,
    /// The store's own sync, done on the caller's thread (see the module docs); emptied when
    /// the engine shuts down, so that no clone of a handle keeps the index open past
    /// [`Engine::shutdown`] (a handle holds the database).
    sync_handle: Option<Arc<Mutex<Option<SyncHandle>>>>,
    /// Set when the stage must stop deciding (a failed sync, an output that can never be
    /// delivered, a panicked thread): nothing after the failure is decided.
    halted: Arc<AtomicBool>,
    sync_secs: metrics::Histogram,
}

impl EngineHandle {
    /// Makes every index write so far durable, and waits: on this thread when the store has a
    /// sync handle (`timeout` does not apply: an fsync cannot be interrupted), else by asking the
    /// decision thread (waiting at most `timeout`). A failed sync stops the decision stage.
    pub fn sync(&self, timeout: Duration) -> Result<(), EngineError> {
        if let Some(slot) = &self.sync_handle {
            // Held during the fsync, so that the shutdown waits for it before closing the index.
            let guard = slot.lock();
            let Some(handle) = guard.as_ref() else {
                return Err(self.stopped());
            };
            let start = Instant::now();
            let result = handle.sync();
            self.sync_secs.record(start.elapsed().as_secs_f64());
            return result.map_err(|e| {
                EngineError::Failed(
                    self.fail(format!("cannot sync the index: {e}; stopped deciding")),
                )
            });
        }
        let (tx, rx) = bounded(1);
        self.control
            .send(Control::Sync(tx))
            .map_err(|_| self.stopped())?;
        match rx.recv_timeout(timeout) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(EngineError::Failed(e)),
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => Err(EngineError::Timeout(timeout)),
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => Err(self.stopped()),
        }
    }

    /// Withdraws a decided article from the index, durably, because its output record can never
    /// reach its topic (refused as too large: it goes to the DLQ instead). Waits at most
    /// `timeout` for the decision thread. Call it before the replacement record is delivered, so
    /// the input offset is never committed with the article still indexed. Later copies are then
    /// decided as a reader of the output topics (a standby, a rebuild) would decide them.
    pub fn withdraw(&self, indexed: &Indexed, timeout: Duration) -> Result<bool, EngineError> {
        let (tx, rx) = bounded(1);
        self.control
            .send(Control::Withdraw(indexed.clone(), tx))
            .map_err(|_| self.stopped())?;
        match rx.recv_timeout(timeout) {
            Ok(Ok(done)) => Ok(done),
            Ok(Err(e)) => Err(EngineError::Failed(e)),
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => Err(EngineError::Timeout(timeout)),
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => Err(self.stopped()),
        }
    }

    fn stopped(&self) -> EngineError {
        match self.failure() {
            Some(f) => EngineError::Failed(f),
            None => EngineError::Stopped,
        }
    }

    /// True once the stage was stopped ([`EngineHandle::fail`], a failed sync).
    pub fn is_halted(&self) -> bool {
        self.halted.load(Ordering::SeqCst)
    }

    /// The fatal error of the decision stage, if it failed.
    pub fn failure(&self) -> Option<String> {
        self.failure.lock().clone()
    }

    /// Stops the decision stage for good: nothing more is decided, the consumer loop sees the
    /// failure, commits what is done and the service exits non-zero. Returns the failure kept
    /// (the first one, if several threads fail).
    pub fn fail(&self, why: String) -> String {
        self.halted.store(true, Ordering::SeqCst);
        let mut failure = self.failure.lock();
        if failure.is_none() {
            tracing::error!("{why}");
        }
        failure.get_or_insert(why).clone()
    }

    /// A guard that fails the engine if the thread holding it panics, so a panic anywhere in
    /// the pipeline stops the service visibly instead of leaving a record forever in flight.
    pub fn fail_on_panic(&self, thread: &'static str) -> FailOnPanic {
        FailOnPanic {
            engine: self.clone(),
            thread,
        }
    }

    /// Drops every record not yet handed to the sink (on shutdown timeout): they are never
    /// acknowledged, so their offsets are not committed and they are processed again later.
    pub fn abandon(&self) {
        self.abandon.store(true, Ordering::SeqCst);
    }
}

/// See [`EngineHandle::fail_on_panic`].
pub struct FailOnPanic {
    engine: EngineHandle,
    thread: &'static str,
}

impl Drop for FailOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.engine.fail(format!(
                "the {} thread panicked (see the panic message above); stopped deciding: offsets are committed only up to the last record delivered before it",
                self.thread
            ));
        }
    }
}

/// The running stages.
pub struct Engine {
    jobs: Option<Sender<Job>>,
    handle: EngineHandle,
    next_seq: u64,
    workers: Vec<JoinHandle<()>>,
    decider: Option<JoinHandle<()>>,
}

impl Engine {
    /// Starts `threads` prepare workers and the decision thread owning `decider` (typically a
    /// `Deduper<RocksIndex>`). `abandon` is the flag set by [`EngineHandle::abandon`] (share it
    /// with the sink so it stops retrying).
    pub fn start<D: DecisionStage, K: OutputSink>(
        decider: D,
        preparer: Arc<dyn Preparer>,
        mut sink: K,
        threads: usize,
        abandon: Arc<AtomicBool>,
    ) -> Engine {
        let (jobs_tx, jobs_rx) = unbounded::<Job>();
        let (ready_tx, ready_rx) = unbounded::<Ready>();
        let (control_tx, control_rx) = unbounded::<Control>();
        let failure = Arc::new(Mutex::new(None));
        let handle = EngineHandle {
            control: control_tx,
            failure: failure.clone(),
            abandon: abandon.clone(),
            sync_handle: decider.sync_handle().map(|h| Arc::new(Mutex::new(Some(h)))),
            halted: Arc::new(AtomicBool::new(false)),
            sync_secs: metrics::histogram!(m::STAGE_SECONDS, "stage" => "sync"),
        };
        sink.attach(&handle);
        let workers = (0..threads.max(1))
            .map(|i| {
                let rx = jobs_rx.clone();
                let tx = ready_tx.clone();
                let preparer = preparer.clone();
                let abandon = abandon.clone();
                let guard = handle.fail_on_panic("prepare");
                std::thread::Builder::new()
                    .name(format!("prepare-{i}"))
                    .spawn(move || {
                        let _guard = guard;
                        prepare_loop(rx, tx, preparer.as_ref(), &abandon)
                    })
                    .expect("cannot spawn a prepare thread")
            })
            .collect();
        drop(ready_tx);
        let decider = {
            let stop = DecideStop {
                abandon,
                halted: handle.halted.clone(),
            };
            let guard = handle.fail_on_panic("decide");
            let engine = handle.clone();
            std::thread::Builder::new()
                .name("decide".into())
                .spawn(move || {
                    let _guard = guard;
                    decide_loop(
                        decider, sink, ready_rx, control_rx, &failure, &stop, &engine,
                    )
                })
                .expect("cannot spawn the decision thread")
        };
        Engine {
            jobs: Some(jobs_tx),
            handle,
            next_seq: 0,
            workers,
            decider: Some(decider),
        }
    }

    pub fn handle(&self) -> &EngineHandle {
        &self.handle
    }

    /// Queues a consumed record. Records are decided in the order they are submitted.
    pub fn submit(&mut self, msg: InputMessage) -> Result<(), EngineError> {
        let seq = self.next_seq;
        self.next_seq += 1;
        match &self.jobs {
            Some(tx) => tx.send(Job { seq, msg }).map_err(|_| self.handle.stopped()),
            None => Err(EngineError::Stopped),
        }
    }

    /// Finishes queued work (unless abandoned), makes the index durable and closes it.
    pub fn shutdown(mut self) {
        self.jobs = None;
        if let Some(slot) = &self.handle.sync_handle {
            slot.lock().take();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
        if let Some(d) = self.decider.take() {
            let _ = d.join();
        }
    }
}

fn prepare_loop(
    rx: Receiver<Job>,
    tx: Sender<Ready>,
    preparer: &dyn Preparer,
    abandon: &AtomicBool,
) {
    for Job { seq, mut msg } in rx {
        if abandon.load(Ordering::Relaxed) {
            continue;
        }
        let start = Instant::now();
        let prepared = preparer.prepare(&msg);
        if matches!(prepared, Prepared::Valid { .. }) {
            // Only the DLQ needs the original bytes.
            msg.payload = None;
        }
        let ready = Ready {
            seq,
            msg,
            prepared,
            prepare_secs: start.elapsed().as_secs_f64(),
        };
        if tx.send(ready).is_err() {
            break;
        }
    }
}

struct DecideMetrics {
    unique: metrics::Counter,
    duplicate: metrics::Counter,
    replayed: metrics::Counter,
    candidates: metrics::Histogram,
    prepare_secs: metrics::Histogram,
    decide_secs: metrics::Histogram,
    sync_secs: metrics::Histogram,
    index_articles: metrics::Gauge,
    index_unique: metrics::Gauge,
    index_stream_time: metrics::Gauge,
    index_disk: metrics::Gauge,
    group_size: metrics::Histogram,
}

/// Most records decided before one fsync publishes them (bounds the latency a group adds).
const GROUP_COMMIT_MAX: usize = 1024;

impl DecideMetrics {
    fn new() -> Self {
        DecideMetrics {
            unique: metrics::counter!(m::ARTICLES_UNIQUE),
            duplicate: metrics::counter!(m::ARTICLES_DUPLICATE),
            replayed: metrics::counter!(m::ARTICLES_REPLAYED),
            candidates: metrics::histogram!(m::CANDIDATES_PER_LOOKUP),
            prepare_secs: metrics::histogram!(m::STAGE_SECONDS, "stage" => "prepare"),
            decide_secs: metrics::histogram!(m::STAGE_SECONDS, "stage" => "decide"),
            sync_secs: metrics::histogram!(m::STAGE_SECONDS, "stage" => "sync"),
            index_articles: metrics::gauge!(m::INDEX_ARTICLES),
            index_unique: metrics::gauge!(m::INDEX_UNIQUE),
            index_stream_time: metrics::gauge!(m::INDEX_STREAM_TIME),
            index_disk: metrics::gauge!(m::INDEX_DISK_BYTES),
            group_size: metrics::histogram!(m::GROUP_COMMIT_SIZE),
        }
    }
}

/// Why the decision thread would stop deciding, set from other threads.
struct DecideStop {
    /// Shutdown timed out: drop what is left.
    abandon: Arc<AtomicBool>,
    /// The stage was stopped from another thread ([`EngineHandle::fail`]).
    halted: Arc<AtomicBool>,
}

/// Where a decided group goes: made durable, then handed to the sink. With the store's
/// [`SyncHandle`] a publisher thread does both, so the decision thread goes on deciding the next
/// group during the fsync; without one the decision thread does them itself.
enum Publisher<K: OutputSink> {
    Inline(K),
    Thread {
        groups: Sender<Vec<(OutputRecord, Ticket)>>,
        thread: JoinHandle<()>,
    },
}

impl<K: OutputSink> Publisher<K> {
    fn start(sink: K, sync: Option<SyncHandle>, engine: &EngineHandle) -> Self {
        let Some(sync) = sync else {
            return Publisher::Inline(sink);
        };
        // A few groups in flight: the decision thread waits once the fsyncs fall behind.
        let (groups, rx) = bounded::<Vec<(OutputRecord, Ticket)>>(4);
        let engine = engine.clone();
        let guard = engine.fail_on_panic("publish");
        let thread = std::thread::Builder::new()
            .name("publish".into())
            .spawn(move || {
                let _guard = guard;
                let mut sink = sink;
                let sync_secs = metrics::histogram!(m::STAGE_SECONDS, "stage" => "sync");
                for group in rx {
                    if engine.is_halted() {
                        continue;
                    }
                    let start = Instant::now();
                    let synced = sync.sync();
                    sync_secs.record(start.elapsed().as_secs_f64());
                    match synced {
                        Ok(()) => {
                            for (record, ticket) in group {
                                sink.send(record, ticket);
                            }
                        }
                        // Nothing of the group is published: its decisions may not be durable.
                        Err(e) => {
                            engine.fail(format!("cannot sync the index: {e}; stopped deciding"));
                        }
                    }
                }
            })
            .expect("cannot spawn the publisher thread");
        Publisher::Thread { groups, thread }
    }

    /// Publishes a decided group: durable first, then to the sink. Returns the sync's error when
    /// done inline.
    fn publish<D: DecisionStage>(
        &mut self,
        decider: &D,
        group: Vec<(OutputRecord, Ticket)>,
        sync_secs: &metrics::Histogram,
    ) -> Result<(), IndexError> {
        match self {
            Publisher::Inline(sink) => {
                let start = Instant::now();
                let synced = decider.sync();
                sync_secs.record(start.elapsed().as_secs_f64());
                synced?;
                for (record, ticket) in group {
                    sink.send(record, ticket);
                }
                Ok(())
            }
            Publisher::Thread { groups, .. } => {
                // Only fails if the publisher is gone (it panicked: the engine is failed).
                let _ = groups.send(group);
                Ok(())
            }
        }
    }

    /// Waits until every group handed over is published.
    fn finish(self) {
        if let Publisher::Thread { groups, thread } = self {
            drop(groups);
            let _ = thread.join();
        }
    }
}

fn decide_loop<D: DecisionStage, K: OutputSink>(
    mut decider: D,
    sink: K,
    ready_rx: Receiver<Ready>,
    mut control_rx: Receiver<Control>,
    failure: &Mutex<Option<String>>,
    stop: &DecideStop,
    engine: &EngineHandle,
) {
    let mut publisher = Publisher::start(sink, decider.sync_handle(), engine);
    let metrics = DecideMetrics::new();
    let counts = decider.counts();
    metrics.index_articles.set(counts.articles as f64);
    metrics.index_unique.set(counts.unique as f64);
    metrics
        .index_stream_time
        .set(counts.stream_time_ms as f64 / 1000.0);
    metrics.index_disk.set(decider.disk_bytes() as f64);
    let mut last_disk = Instant::now();
    let mut pending: BTreeMap<u64, Ready> = BTreeMap::new();
    let mut next = 0u64;
    let mut failed = false;
    loop {
        select! {
            recv(ready_rx) -> item => match item {
                Ok(item) => {
                    pending.insert(item.seq, item);
                    // Group commit: decide every record that is ready, make the index writes
                    // durable with one fsync, and only then hand their outputs to the sink, so a
                    // published decision survives a power loss (a replay can never swap which of
                    // two near-duplicates is the original).
                    while pending.len() < GROUP_COMMIT_MAX {
                        match ready_rx.try_recv() {
                            Ok(more) => {
                                pending.insert(more.seq, more);
                            }
                            Err(_) => break,
                        }
                    }
                    let mut outbox = Vec::new();
                    while let Some(item) = pending.remove(&next) {
                        next += 1;
                        failed |= stop.halted.load(Ordering::Relaxed);
                        if failed || stop.abandon.load(Ordering::Relaxed) {
                            continue;
                        }
                        match decide_one(&mut decider, item, &metrics) {
                            Ok(out) => outbox.push(out),
                            Err(e) => {
                                failed = true;
                                let msg = format!(
                                    "index error: {e}; stopped deciding; offsets are committed only up to the last record decided and delivered before the error"
                                );
                                tracing::error!("{msg}");
                                *failure.lock() = Some(msg);
                            }
                        }
                    }
                    if !outbox.is_empty() {
                        metrics.group_size.record(outbox.len() as f64);
                        if let Err(e) = publisher.publish(&decider, outbox, &metrics.sync_secs) {
                            failed = true;
                            let msg = format!("cannot sync the index: {e}; stopped deciding");
                            tracing::error!("{msg}");
                            failure.lock().get_or_insert(msg);
                        }
                    }
                    if last_disk.elapsed() >= Duration::from_secs(10) {
                        last_disk = Instant::now();
                        metrics.index_disk.set(decider.disk_bytes() as f64);
                    }
                }
                Err(_) => break,
            },
            recv(control_rx) -> c => match c {
                Ok(Control::Sync(reply)) => {
                    let start = Instant::now();
                    let result = decider.sync().map_err(|e| e.to_string());
                    metrics.sync_secs.record(start.elapsed().as_secs_f64());
                    if let Err(e) = &result {
                        failed = true;
                        let msg = format!("cannot sync the index: {e}; stopped deciding");
                        tracing::error!("{msg}");
                        failure.lock().get_or_insert(msg);
                    }
                    if last_disk.elapsed() >= Duration::from_secs(10) {
                        last_disk = Instant::now();
                        metrics.index_disk.set(decider.disk_bytes() as f64);
                    }
                    let _ = reply.send(result);
                }
                Ok(Control::Withdraw(indexed, reply)) => {
                    let result = decider
                        .withdraw(&indexed.id, indexed.fingerprint)
                        .map_err(|e| e.to_string());
                    match &result {
                        Ok(true) => tracing::warn!(
                            "withdrew article {:?} from the index: its output was refused by the broker and went to the DLQ",
                            indexed.id
                        ),
                        Ok(false) => {}
                        Err(e) => {
                            failed = true;
                            let msg = format!("cannot withdraw article {:?} from the index: {e}; stopped deciding", indexed.id);
                            tracing::error!("{msg}");
                            failure.lock().get_or_insert(msg);
                        }
                    }
                    let counts = decider.counts();
                    metrics.index_articles.set(counts.articles as f64);
                    metrics.index_unique.set(counts.unique as f64);
                    let _ = reply.send(result);
                }
                Err(_) => control_rx = never(),
            },
        }
    }
    publisher.finish();
    if let Err(e) = decider.sync() {
        tracing::error!("final sync of the index failed: {e}");
    }
    metrics.index_disk.set(decider.disk_bytes() as f64);
    drop(decider);
}

/// Decides one record; returns its output record (not yet published: see the group commit).
fn decide_one<D: DecisionStage>(
    decider: &mut D,
    item: Ready,
    metrics: &DecideMetrics,
) -> Result<(OutputRecord, Ticket), IndexError> {
    let Ready {
        msg,
        mut prepared,
        prepare_secs,
        ..
    } = item;
    // Without a readable `published_at`, the record timestamp is the article's event time.
    prepared.set_record_time(msg.timestamp_ms);
    metrics.prepare_secs.record(prepare_secs);
    let start = Instant::now();
    let ticket = msg.ticket();
    let record = match decider.decide(prepared, dedup::now_ms())? {
        Outcome::Decided {
            id,
            record,
            decision,
        } => {
            if decision.is_duplicate() {
                metrics.duplicate.increment(1);
            } else {
                metrics.unique.increment(1);
            }
            if decision.replayed {
                metrics.replayed.increment(1);
            } else {
                metrics.candidates.record(decision.candidates as f64);
            }
            let counts = decider.counts();
            metrics.index_articles.set(counts.articles as f64);
            metrics.index_unique.set(counts.unique as f64);
            metrics
                .index_stream_time
                .set(counts.stream_time_ms as f64 / 1000.0);
            record::decided_record(&msg, &id, record, &decision)
        }
        Outcome::Invalid { error, record } => {
            metrics::counter!(m::ARTICLES_INVALID, "reason" => error.reason.as_str()).increment(1);
            record::dlq_record(msg, &error, record)
        }
    };
    metrics.decide_secs.record(start.elapsed().as_secs_f64());
    Ok((record, ticket))
}
