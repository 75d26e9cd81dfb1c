//! The consumer side: a `BaseConsumer` polled from one plain thread (as quickwit's Kafka source
//! does), so rebalance callbacks run on that thread and can block while in-flight work of revoked
//! partitions finishes and its offsets are committed, before the partitions are released.
//!
//! * Every consumed record is registered in the [`OffsetTracker`] and submitted to the engine.
//! * Backpressure: when `max_in_flight` records or `max_in_flight_bytes` bytes are in flight,
//!   fetching is paused (the loop keeps polling, so group membership and callbacks stay alive)
//!   and resumed once both are below half that.
//! * Commits: a committer thread commits the tracker's committable offsets every
//!   `commit_interval`, or sooner once `commit_every` records are done, after the index WAL is
//!   synced; also on revoke and at shutdown. Commits are synchronous (librdkafka reports nothing
//!   back for asynchronous manual commits, and the tracker must know what was committed) but
//!   batched and off the poll thread, so they never slow consumption down. One lock serialises
//!   them, so committed offsets never go backwards.
//! * Revoke: wait (bounded by `rebalance_timeout`) for the revoked partitions' in-flight records,
//!   commit what is done, forget the rest (late acknowledgements are ignored: epochs).
//! * Assign: every partition starts at its committed offset (or `auto.offset.reset` for a new
//!   group), logged and exported; a partition whose committed offset cannot be read stays paused
//!   until the loop has read it.
//! * Bounded (`replay`, [`run_bounded`](super::poll_loop::run_bounded)): the partitions are assigned by the caller at explicit
//!   start offsets (no rebalance callbacks run), and a [`Bounds`] decides for each fetched record
//!   whether it is in range; the loop ends like a shutdown (drain, final commit) once every
//!   partition is done.
//! * Stop ([`super::stop`]): one budget from the signal for draining, the final commit, leaving
//!   the group and closing; a wait inside a callback never outlasts the drain.
//!
//! The consumer is split by concern: this file holds the state shared between the consumer loop
//! and its callbacks ([`Shared`]), the consumer and its context ([`ConsumerCtx`],
//! [`create_consumer`]), and what the loop's callers give and get (`ConsumeParams`, `Bounds`,
//! `LoopExit`, `detach`); [`super::commit`] the committer and `commit_done`;
//! [`super::rebalance`] the rebalance callbacks; [`super::group_rules`] the group rules, the
//! pause state and the falling-behind check; [`super::poll_loop`] the poll loop itself
//! (`run_loop`, `run_bounded`) and the stop after it.

use super::exclusive::{Observed, Signal};
use super::record::InputMessage;
use super::stop::{StopReport, StopRequest};
use super::tracker::OffsetTracker;
use super::{Health, ServiceClientContext};
use crate::runner::RunnerHandle;
use parking_lot::Mutex;
use rdkafka::client::ClientContext;
use rdkafka::consumer::BaseConsumer;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Headers, Message};
use rdkafka::statistics::Statistics;
use rdkafka::topic_partition_list::TopicPartitionList;
use rdkafka::ClientConfig;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// State shared between the consumer loop and the consumer's callbacks.
pub struct Shared {
    pub topic: String,
    pub tracker: Arc<Mutex<OffsetTracker>>,
    pub engine: RunnerHandle,
    pub health: Arc<Health>,
    pub rebalance_timeout: Duration,
    /// `auto.offset.reset`: Some(true) earliest, Some(false) latest, None left to librdkafka.
    pub offset_reset: Option<bool>,
    /// Set by rebalance callbacks: the loop sets the pause state of the whole assignment afresh.
    pub rebalanced: AtomicBool,
    /// Rebalance callbacks run so far (revoke, lost, assign): a description of the group asked
    /// for before the latest one says nothing about the current assignment.
    pub rebalances: AtomicU64,
    /// What the group watch has seen (`exclusive`), and a counter bumped at each look.
    pub observed: Mutex<Observed>,
    pub observed_version: AtomicU64,
    /// Set by the consumer loop while this member fetches nothing: the watch then measures the
    /// records waiting beyond the group's committed offsets.
    pub idle: AtomicBool,
    /// Set by the consumer loop while the group rules let this member decide: corrections are
    /// applied only then (`corrections`).
    pub deciding: AtomicBool,
    /// Wakes the group watch (after a rebalance) and stops it.
    pub watch: Signal,
    /// Partitions whose "watermark below position" warning was already logged.
    pub(super) suspect_logged: Mutex<HashSet<i32>>,
    /// High watermark per partition, from librdkafka's statistics (`statistics.interval.ms`).
    pub(super) watermarks: Mutex<HashMap<i32, i64>>,
    /// Assigned partitions whose committed offsets could not be read at the assignment: kept
    /// paused (librdkafka would start them by `auto.offset.reset` alone, reading a partition
    /// again or skipping it) until the consumer loop reads them and seeks there.
    pub(super) unstarted: Mutex<BTreeSet<i32>>,
    /// Serialises commits (committer thread, rebalance callback, final commit).
    pub(super) commit_lock: Mutex<()>,
    /// The stop request and its budget: bounds the waits of the rebalance callbacks once a stop
    /// is under way.
    pub stop: Arc<StopRequest>,
}

impl Shared {
    pub fn new(
        topic: String,
        tracker: Arc<Mutex<OffsetTracker>>,
        engine: RunnerHandle,
        health: Arc<Health>,
        rebalance_timeout: Duration,
        offset_reset: Option<bool>,
        stop: Arc<StopRequest>,
    ) -> Shared {
        Shared {
            topic,
            tracker,
            engine,
            health,
            rebalance_timeout,
            offset_reset,
            rebalanced: AtomicBool::new(false),
            rebalances: AtomicU64::new(0),
            observed: Mutex::new(Observed::default()),
            observed_version: AtomicU64::new(0),
            idle: AtomicBool::new(false),
            deciding: AtomicBool::new(false),
            watch: Signal::default(),
            suspect_logged: Mutex::new(HashSet::new()),
            watermarks: Mutex::new(HashMap::new()),
            unstarted: Mutex::new(BTreeSet::new()),
            commit_lock: Mutex::new(()),
            stop,
        }
    }
}

/// Context of the consumer: client error reporting + rebalance handling.
pub struct ConsumerCtx {
    pub client: ServiceClientContext,
    pub shared: Arc<Shared>,
}

pub type InputConsumer = BaseConsumer<ConsumerCtx>;

pub fn create_consumer(
    properties: &BTreeMap<String, String>,
    ctx: ConsumerCtx,
) -> Result<InputConsumer, KafkaError> {
    let mut config = ClientConfig::new();
    for (k, v) in properties {
        config.set(k, v);
    }
    config
        .create_with_context(ctx)
        .map_err(|e| super::producer::redacted(e, properties))
}

impl ClientContext for ConsumerCtx {
    fn error(&self, error: KafkaError, reason: &str) {
        // The end of a partition (`enable.partition.eof`, replay) is an event, not an error.
        if error.rdkafka_error_code() == Some(RDKafkaErrorCode::PartitionEOF) {
            return;
        }
        self.client.report(&error, reason);
    }

    /// Keeps the high watermark of each input partition (for the lag gauges).
    fn stats(&self, statistics: Statistics) {
        if let Some(topic) = statistics.topics.get(&self.shared.topic) {
            let mut w = self.shared.watermarks.lock();
            for (p, s) in &topic.partitions {
                if *p >= 0 && s.hi_offset >= 0 {
                    w.insert(*p, s.hi_offset);
                }
            }
        }
    }
}

pub(super) fn partitions_of(tpl: &TopicPartitionList, topic: &str) -> Vec<i32> {
    let mut v: Vec<i32> = tpl
        .elements_for_topic(topic)
        .iter()
        .map(|e| e.partition())
        .collect();
    v.sort_unstable();
    v
}

pub(super) fn partition_label(p: i32) -> String {
    p.to_string()
}

/// Why the consumer loop ended, and how its stop went so far (drain and final commit; the
/// caller leaves the group and closes).
#[derive(Debug, Clone)]
pub enum LoopExit {
    /// SIGINT/SIGTERM (or a bounded consumption complete): drained, or abandoned at the drain's
    /// deadline, and committed.
    Shutdown(StopReport),
    /// The decision stage failed (index error): what was done before is committed.
    Fatal { error: String, stop: StopReport },
}

impl LoopExit {
    pub fn stop(&self) -> &StopReport {
        match self {
            LoopExit::Shutdown(stop) | LoopExit::Fatal { stop, .. } => stop,
        }
    }

    pub fn stop_mut(&mut self) -> &mut StopReport {
        match self {
            LoopExit::Shutdown(stop) | LoopExit::Fatal { stop, .. } => stop,
        }
    }
}

/// The consumed record as the engine takes it (`correction`: a record of the corrections topic).
pub(crate) fn detach(
    msg: &rdkafka::message::BorrowedMessage<'_>,
    topic: &Arc<str>,
    epoch: u64,
    correction: bool,
) -> InputMessage {
    let (headers, headers_dropped) = match msg.headers() {
        Some(h) => super::record::detach_headers(h.count(), h.iter().map(|h| (h.key, h.value))),
        None => (Vec::new(), 0),
    };
    InputMessage {
        topic: topic.clone(),
        partition: msg.partition(),
        offset: msg.offset(),
        epoch,
        timestamp_ms: msg.timestamp().to_millis(),
        key: msg.key().map(<[u8]>::to_vec),
        payload: msg.payload().map(<[u8]>::to_vec),
        headers,
        headers_dropped,
        received: Instant::now(),
        correction,
    }
}

/// What the consumer loop does with a fetched record of a bounded consumption.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// In range: decide it.
    Decide,
    /// Before the range (a broker that could not seek by time): pass over it.
    Skip,
    /// Past the range: not decided, and its partition is done (paused).
    End,
}

/// Where a bounded consumption (`replay`) stops by itself; `run` has none.
pub trait Bounds {
    fn admit(&mut self, partition: i32, offset: i64, timestamp_ms: Option<i64>) -> Admit;
    /// librdkafka reached the end of the partition (`enable.partition.eof`).
    fn end_of_partition(&mut self, partition: i32);
    /// True once every partition is done.
    fn complete(&self) -> bool;
}

/// What the consumer loop needs to know (resolved by `settings`).
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumeParams {
    pub input_topic: String,
    pub group_id: String,
    /// How often done offsets are committed (`--commit-interval-ms`).
    pub commit_interval: Duration,
    /// Commit sooner once this many records are done (`--commit-every`).
    pub commit_every: u64,
    /// The consumer's `session.timeout.ms`.
    pub session_timeout: Duration,
    /// `--exclusive-grace-ms`; None: the one-instance rule is off.
    pub exclusive_grace: Option<Duration>,
    /// `--progress-timeout-ms`.
    pub progress_timeout: Duration,
    /// The index held articles at start: this member decided before (in an earlier process),
    /// so under the one-active-instance rule it is the incumbent, and a newcomer (an empty
    /// index) leaves first.
    pub decided_before: bool,
    /// Backpressure bounds (`--max-in-flight`, `--max-in-flight-bytes`).
    pub max_in_flight: usize,
    pub max_in_flight_bytes: usize,
}
