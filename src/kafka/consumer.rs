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
//! * Assign: librdkafka resumes from the committed offsets (or `auto.offset.reset` for a new group);
//!   the committed offsets are logged and exported.
//! * Bounded (`replay`, [`run_bounded`]): the partitions are assigned by the caller at explicit
//!   start offsets (no rebalance callbacks run), and a [`Bounds`] decides for each fetched record
//!   whether it is in range; the loop ends like a shutdown (drain, final commit) once every
//!   partition is done.
//! * Stop ([`super::stop`]): one budget from the signal for draining, the final commit, leaving
//!   the group and closing; a wait inside a callback never outlasts the drain.

use super::behind::{Behind, BehindFacts, Ends};
use super::engine::Engine;
use super::exclusive::{Closed, Facts, Gate, Observed, Signal, Verdict, WaitFacts, Waiting};
use super::record::InputMessage;
use super::stop::{self, CommitResult, Phase, StopReport, StopRequest};
use super::tracker::OffsetTracker;
use super::{Health, ServiceClientContext, State};
use crate::metrics as m;
use crate::runner::{ControlError, RunnerHandle};
use parking_lot::Mutex;
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Headers, Message};
use rdkafka::statistics::Statistics;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::ClientConfig;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest wait for the decision thread to fsync the index before a commit.
const SYNC_TIMEOUT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(100);
/// Longest wait for a running commit before the revoke callback gives up committing.
const REVOKE_COMMIT_LOCK_WAIT: Duration = Duration::from_secs(10);

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
    suspect_logged: Mutex<HashSet<i32>>,
    /// High watermark per partition, from librdkafka's statistics (`statistics.interval.ms`).
    watermarks: Mutex<HashMap<i32, i64>>,
    /// Serialises commits (committer thread, rebalance callback, final commit).
    commit_lock: Mutex<()>,
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

fn partitions_of(tpl: &TopicPartitionList, topic: &str) -> Vec<i32> {
    let mut v: Vec<i32> = tpl
        .elements_for_topic(topic)
        .iter()
        .map(|e| e.partition())
        .collect();
    v.sort_unstable();
    v
}

fn partition_label(p: i32) -> String {
    p.to_string()
}

impl ConsumerContext for ConsumerCtx {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let shared = &self.shared;
        match rebalance {
            Rebalance::Revoke(tpl) => {
                let parts = partitions_of(tpl, &shared.topic);
                if consumer.assignment_lost() {
                    metrics::counter!(m::REBALANCES, "kind" => "lost").increment(1);
                    let mut t = shared.tracker.lock();
                    let abandoned: usize = parts.iter().map(|p| t.revoke(*p)).sum();
                    tracing::warn!(
                        "assignment of partitions {parts:?} was lost (session timed out?): {abandoned} in-flight records abandoned, nothing committed for them; the next owner resumes from the last commit"
                    );
                } else if shared.stop.final_commit_over() {
                    // Leaving the group at the end of a stop: the final commit is made, and what
                    // is still in flight was abandoned with the drain.
                    metrics::counter!(m::REBALANCES, "kind" => "revoke").increment(1);
                    let mut t = shared.tracker.lock();
                    for p in &parts {
                        t.revoke(*p);
                    }
                } else {
                    metrics::counter!(m::REBALANCES, "kind" => "revoke").increment(1);
                    let n = shared.tracker.lock().in_flight_of(&parts);
                    // During a stop, the wait ends with the drain.
                    let wait = shared.stop.bounded(shared.rebalance_timeout);
                    tracing::info!(
                        "partitions {parts:?} of {} revoked: finishing {n} in-flight records (up to {wait:?}) and committing before releasing them",
                        shared.topic,
                    );
                    let deadline = Instant::now() + wait;
                    while shared.tracker.lock().in_flight_of(&parts) > 0
                        && !shared
                            .stop
                            .bounded(deadline.saturating_duration_since(Instant::now()))
                            .is_zero()
                        && shared.engine.failure().is_none()
                    {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    let lock_wait = shared.stop.bounded(REVOKE_COMMIT_LOCK_WAIT);
                    match commit_done(consumer, shared, Some(&parts), Some(lock_wait)) {
                        Ok(_) => {}
                        Err(e) => tracing::warn!("commit on revoke failed: {e}; the next owner may process some records again"),
                    }
                    let mut t = shared.tracker.lock();
                    let abandoned: usize = parts.iter().map(|p| t.revoke(*p)).sum();
                    if abandoned > 0 {
                        tracing::warn!(
                            "abandoned {abandoned} in-flight records of revoked partitions {parts:?} (not committed: the next owner processes them again, with the same decisions if it shares this index)"
                        );
                    }
                }
                shared
                    .health
                    .assigned
                    .store(shared.tracker.lock().assigned().len(), Ordering::Relaxed);
                shared.rebalances.fetch_add(1, Ordering::SeqCst);
                shared.rebalanced.store(true, Ordering::SeqCst);
            }
            Rebalance::Assign(_) => {}
            Rebalance::Error(e) => {
                metrics::counter!(m::REBALANCES, "kind" => "error").increment(1);
                tracing::warn!("rebalance error: {e}");
            }
        }
    }

    /// rdkafka's own rebalance (pre_rebalance, assign or unassign, post_rebalance), except that
    /// assigned partitions get absolute start offsets (see [`start_offsets`]).
    fn rebalance(
        &self,
        consumer: &BaseConsumer<Self>,
        err: rdkafka::types::RDKafkaRespErr,
        tpl: &mut TopicPartitionList,
    ) {
        use rdkafka::consumer::RebalanceProtocol;
        use rdkafka::types::RDKafkaRespErr;
        let cooperative = matches!(
            consumer.rebalance_protocol(),
            RebalanceProtocol::Cooperative
        );
        match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                self.pre_rebalance(consumer, &Rebalance::Assign(tpl));
                {
                    let shared = &self.shared;
                    let mut t = shared.tracker.lock();
                    for p in partitions_of(tpl, &shared.topic) {
                        t.assign(p);
                    }
                    shared
                        .health
                        .assigned
                        .store(t.assigned().len(), Ordering::Relaxed);
                }
                let resume = start_offsets(consumer, &self.shared, tpl);
                let r = if cooperative {
                    consumer.incremental_assign(tpl)
                } else {
                    consumer.assign(tpl)
                };
                if let Err(e) = r {
                    tracing::warn!("cannot take the assigned partitions: {e}");
                }
                self.assigned(consumer, tpl, &resume);
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                self.pre_rebalance(consumer, &Rebalance::Revoke(tpl));
                let r = if cooperative {
                    consumer.incremental_unassign(tpl)
                } else {
                    consumer.unassign()
                };
                if let Err(e) = r {
                    tracing::warn!("cannot release the revoked partitions: {e}");
                }
            }
            _ => {
                let code: RDKafkaErrorCode = err.into();
                self.pre_rebalance(consumer, &Rebalance::Error(KafkaError::Rebalance(code)));
            }
        }
    }
}

/// Gives every assigned partition an absolute start offset before it is assigned: its committed
/// offset, or for a partition without one its first or next offset (`auto.offset.reset`). With a
/// logical start, librdkafka looks the offset up after the assignment, and a pause and resume
/// meanwhile (the assign callback pauses; the loop resumes) looks it up again, by
/// `auto.offset.reset` alone, ignoring the committed offset: the partition is read again from its
/// beginning (or, with `latest`, records are skipped). Returns how each partition starts, for
/// the log; a partition whose offsets cannot be read is left to librdkafka.
fn start_offsets(
    consumer: &BaseConsumer<ConsumerCtx>,
    shared: &Shared,
    tpl: &mut TopicPartitionList,
) -> Vec<String> {
    // During a stop (an assignment while draining), no longer than the drain.
    let timeout = shared.stop.bounded(Duration::from_secs(10));
    let topic = shared.topic.as_str();
    let parts = partitions_of(tpl, topic);
    let mut resume = Vec::with_capacity(parts.len());
    let committed = match consumer.committed_offsets(tpl.clone(), timeout) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(
                "cannot read the committed offsets of {parts:?}: {e}; librdkafka looks them up"
            );
            return parts.iter().map(|p| format!("{p}@?")).collect();
        }
    };
    for p in parts {
        let start = match committed.find_partition(topic, p).map(|e| e.offset()) {
            Some(Offset::Offset(o)) => {
                shared.tracker.lock().set_committed(p, o);
                metrics::gauge!(m::COMMITTED_OFFSET, "partition" => partition_label(p))
                    .set(o as f64);
                resume.push(format!("{p}@{o}"));
                Some(o)
            }
            _ => {
                let reset = shared.offset_reset.and_then(|earliest| {
                    match consumer.fetch_watermarks(topic, p, timeout) {
                        Ok((low, high)) => Some(if earliest { low } else { high }),
                        Err(e) => {
                            tracing::warn!("cannot read the offsets of {topic} [{p}]: {e}; librdkafka looks them up");
                            None
                        }
                    }
                });
                resume.push(match reset {
                    Some(o) => format!("{p}@auto.offset.reset={o}"),
                    None => format!("{p}@auto.offset.reset"),
                });
                reset
            }
        };
        if let Some(o) = start {
            if let Err(e) = tpl.set_partition_offset(topic, p, Offset::Offset(o)) {
                tracing::warn!("cannot set the start offset of {topic} [{p}]: {e}");
            }
        }
    }
    resume
}

impl ConsumerCtx {
    /// After an assignment: what is assigned starts paused (the consumer loop decides what
    /// fetches, and a record of these partitions must not reach it before it has: this very
    /// poll may return one; a pause also drops what was fetched before it); the loop is told.
    fn assigned(&self, consumer: &BaseConsumer<Self>, tpl: &TopicPartitionList, resume: &[String]) {
        let shared = &self.shared;
        metrics::counter!(m::REBALANCES, "kind" => "assign").increment(1);
        let parts = partitions_of(tpl, &shared.topic);
        if tpl.count() > 0 {
            if let Err(e) = consumer.pause(tpl) {
                tracing::warn!("cannot pause the newly assigned partitions {parts:?}: {e}");
            }
        }
        tracing::info!(
            "partitions {parts:?} of {} assigned; resuming from committed offsets [{}]",
            shared.topic,
            resume.join(", ")
        );
        shared.rebalances.fetch_add(1, Ordering::SeqCst);
        shared.rebalanced.store(true, Ordering::SeqCst);
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// The index could not be made durable: committing would risk losing decisions.
    #[error("cannot make the index durable before committing: {0}")]
    Index(ControlError),
    #[error("offset commit failed: {0}")]
    Kafka(KafkaError),
    #[error("another commit is still running")]
    Busy,
}

/// Commits the tracker's committable offsets (of `only`, if given) after syncing the index.
/// Waits for a commit in progress (at most `lock_wait` if given). Returns the number of
/// partitions committed.
pub fn commit_done(
    consumer: &InputConsumer,
    shared: &Shared,
    only: Option<&[i32]>,
    lock_wait: Option<Duration>,
) -> Result<usize, CommitError> {
    let _guard = match lock_wait {
        Some(wait) => shared
            .commit_lock
            .try_lock_for(wait)
            .ok_or(CommitError::Busy)?,
        None => shared.commit_lock.lock(),
    };
    let candidates = {
        let mut t = shared.tracker.lock();
        let c = t.commit_candidates(only);
        t.commit_requested(&c);
        c
    };
    if candidates.is_empty() {
        return Ok(0);
    }
    // Once the group has moved our partitions on, an offset of ours could be older than the new
    // owner's: never commit it (librdkafka says so until the next assignment).
    if consumer.assignment_lost() {
        return Ok(0);
    }
    // Every candidate's record was acknowledged, so its index write happened before now.
    shared
        .engine
        .sync(SYNC_TIMEOUT)
        .map_err(CommitError::Index)?;
    // The sync may have taken long enough for a rebalance to move a partition: drop what is no
    // longer ours, so a commit never goes backwards over another member's.
    let candidates: Vec<_> = {
        let t = shared.tracker.lock();
        candidates.into_iter().filter(|c| t.is_current(c)).collect()
    };
    if candidates.is_empty() {
        return Ok(0);
    }
    let mut tpl = TopicPartitionList::with_capacity(candidates.len());
    for c in &candidates {
        tpl.add_partition_offset(&shared.topic, c.partition, Offset::Offset(c.offset))
            .map_err(CommitError::Kafka)?;
    }
    tracing::debug!("committing {candidates:?}");
    match consumer.commit(&tpl, CommitMode::Sync) {
        Ok(()) => {
            let mut t = shared.tracker.lock();
            for c in &candidates {
                t.committed(c.partition, c.offset);
                metrics::gauge!(m::COMMITTED_OFFSET, "partition" => partition_label(c.partition))
                    .set(c.offset as f64);
            }
            metrics::counter!(m::COMMITS, "result" => "ok").increment(1);
            shared.health.broker_ok();
            Ok(candidates.len())
        }
        Err(e) => {
            metrics::counter!(m::COMMITS, "result" => "error").increment(1);
            Err(CommitError::Kafka(e))
        }
    }
}

/// The committer thread: commits every `interval`, or when woken (enough records done).
struct Committer {
    wake: crossbeam_channel::Sender<()>,
    handle: std::thread::JoinHandle<()>,
}

impl Committer {
    /// `session_timeout`: after a stall (the process frozen, swapped out or starved) of more
    /// than half of it, the group may have given our partitions to another member before
    /// librdkafka could tell us; commits wait one session timeout, long enough for librdkafka
    /// to report the lost assignment (the revoke callback then abandons those partitions).
    fn spawn(
        consumer: Arc<InputConsumer>,
        shared: Arc<Shared>,
        interval: Duration,
        session_timeout: Duration,
    ) -> Committer {
        let (wake, rx) = crossbeam_channel::bounded::<()>(1);
        let guard = shared.engine.fail_on_panic("committer");
        let handle = std::thread::Builder::new()
            .name("committer".into())
            .spawn(move || {
                let _guard = guard;
                let mut hold_until: Option<Instant> = None;
                loop {
                    let asleep = Instant::now();
                    if let Err(crossbeam_channel::RecvTimeoutError::Disconnected) =
                        rx.recv_timeout(interval)
                    {
                        break;
                    }
                    let late = asleep.elapsed().saturating_sub(interval);
                    if late > session_timeout / 2 {
                        tracing::warn!(
                            "the process stalled for {late:?}: the group may have moved its partitions meanwhile; commits wait {session_timeout:?} (session.timeout.ms) for librdkafka to report a lost assignment"
                        );
                        hold_until = Some(Instant::now() + session_timeout);
                    }
                    if hold_until.is_some_and(|h| Instant::now() < h) {
                        continue;
                    }
                    // Failures are retried at the next interval. An index failure is recorded
                    // by the engine; the consumer loop sees it and stops.
                    if let Err(e) = commit_done(&consumer, &shared, None, None) {
                        if shared.health.should_log("commit") {
                            tracing::warn!("{e}; retrying at the next commit interval (nothing is lost: uncommitted records are only processed again)");
                        }
                    }
                }
            })
            .expect("cannot spawn the committer thread");
        Committer { wake, handle }
    }

    fn wake(&self) {
        let _ = self.wake.try_send(());
    }

    fn stop(self) {
        drop(self.wake);
        let _ = self.handle.join();
    }
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

/// Pauses or resumes fetching of the whole current assignment.
fn set_paused(consumer: &InputConsumer, pause: bool) {
    match consumer.assignment() {
        Ok(tpl) if tpl.count() > 0 => {
            let r = if pause {
                consumer.pause(&tpl)
            } else {
                consumer.resume(&tpl)
            };
            if let Err(e) = r {
                tracing::warn!(
                    "cannot {} fetching: {e}",
                    if pause { "pause" } else { "resume" }
                );
            }
        }
        Ok(_) => {}
        Err(e) => tracing::warn!("cannot read the assignment: {e}"),
    }
}

/// The fetch state the consumer loop applies to its assignment. librdkafka keeps an
/// application's pause on a partition across rebalances (and the assign callback pauses what it
/// assigns), so after any rebalance the state of the whole assignment is set afresh, whatever
/// was applied before; otherwise only changes are applied.
#[derive(Debug, Default)]
pub struct PauseState {
    applied: Option<bool>,
}

impl PauseState {
    /// Some(pause) when the whole assignment must be set to `pause` now.
    pub fn next(&mut self, want_paused: bool, rebalanced: bool) -> Option<bool> {
        if rebalanced || self.applied != Some(want_paused) {
            self.applied = Some(want_paused);
            Some(want_paused)
        } else {
            None
        }
    }
}

/// The consumer group's rules for `run` (not for `replay`, which assigns its partitions): one
/// active instance, and a member that waits for work it is not given.
struct GroupRules {
    group: String,
    gate: Gate,
    waiting: Waiting,
    behind: Behind,
}

impl GroupRules {
    fn new(params: &ConsumeParams) -> GroupRules {
        GroupRules {
            group: params.group_id.clone(),
            gate: Gate::new(
                &params.group_id,
                &params.input_topic,
                params.exclusive_grace,
                params.session_timeout,
                params.decided_before,
            ),
            waiting: Waiting::new(
                params.session_timeout.min(params.progress_timeout / 2),
                params.progress_timeout,
            ),
            // A trend needs several measurements (every 5 s): half the progress timeout before
            // /ready says so.
            behind: Behind::new(
                params.progress_timeout / 2,
                params.progress_timeout,
                BEHIND_ADVICE.to_owned(),
            ),
        }
    }

    /// Whether to fetch now; Err(why) when this member must stop (another instance). `room`:
    /// backpressure does not hold fetching back and the pipeline is at most half full.
    fn evaluate(&mut self, shared: &Shared, room: bool) -> Result<bool, String> {
        let now = Instant::now();
        let held = shared.health.assigned.load(Ordering::Relaxed);
        let observed = shared.observed.lock();
        let verdict = self.gate.step(&Facts {
            now,
            held,
            total: observed.partitions,
            rebalances: shared.rebalances.load(Ordering::SeqCst),
            seen: observed.seen.as_ref(),
        });
        let closed: Option<Closed> = match verdict {
            Verdict::Open => None,
            Verdict::Closed(c) => Some(c),
            Verdict::StepDown(why) => return Err(why),
        };
        let idle = closed.is_some();
        shared.idle.store(idle, Ordering::SeqCst);
        let state = self.waiting.step(
            now,
            &WaitFacts {
                idle,
                held,
                closed,
                observed: &observed,
                others_in_charge: self.gate.others_in_charge(observed.seen.as_ref()),
                broker_up: shared.health.broker_is_up(),
                group: &self.group,
                topic: &shared.topic,
            },
        );
        let (waiting, consumed) = beyond_position(shared, observed.ends.as_ref(), now);
        drop(observed);
        metrics::gauge!(m::WAITING_SECONDS).set(state.waited.map_or(0.0, |w| w.as_secs_f64()));
        shared.health.set_waiting(state);
        let behind = self.behind.step(
            now,
            &BehindFacts {
                fetching: closed.is_none() && held > 0 && room,
                waiting,
                consumed,
                held,
            },
        );
        shared.health.set_behind(behind);
        Ok(closed.is_none())
    }
}

/// What the log says about a member that fetches yet falls behind ([`Behind`]).
const BEHIND_ADVICE: &str = "On Tansu (the test broker) this is its fetch: it answers a fetch with nothing once reading the partition takes longer than fetch.wait.max.ms, and its reads slow down as a partition grows: raise it (-X fetch.wait.max.ms=500; the default, 250, lasts to ~250,000 records a partition). On Apache Kafka, look at the brokers' fetch latency and at fetch.max.bytes / max.partition.fetch.bytes";

/// A measured end offset older than this is not used.
const ENDS_RECENT: Duration = Duration::from_secs(15);

/// Records beyond this member's position in the partitions it holds (with when the ends were
/// measured; None without a recent measurement), and the sum of those positions. A partition's
/// position is one past its last consumed record, else its committed offset.
fn beyond_position(
    shared: &Shared,
    ends: Option<&Ends>,
    now: Instant,
) -> (Option<(i64, Instant)>, i64) {
    let progress = shared.tracker.lock().progress();
    let mut consumed = 0;
    for p in &progress {
        consumed += p.consumed_upto.or(p.committed).unwrap_or(0);
    }
    let Some(ends) = ends.filter(|e| now.saturating_duration_since(e.at) <= ENDS_RECENT) else {
        return (None, consumed);
    };
    let mut waiting = 0;
    for (partition, end) in &ends.partitions {
        let position = progress
            .iter()
            .find(|p| p.partition == *partition)
            .and_then(|p| p.consumed_upto.or(p.committed));
        if let Some(position) = position {
            waiting += (end - position).max(0);
        }
    }
    (Some((waiting, ends.at)), consumed)
}

/// How often the consumer loop looks at its group rules when nothing new was observed (the
/// step-down deadline and the waiting bounds).
const GROUP_RULES_EVERY: Duration = Duration::from_millis(250);

/// The consumed record as the engine takes it (`correction`: a record of the corrections topic).
pub(crate) fn detach(
    msg: &rdkafka::message::BorrowedMessage<'_>,
    topic: &Arc<str>,
    epoch: u64,
    correction: bool,
) -> InputMessage {
    InputMessage {
        topic: topic.clone(),
        partition: msg.partition(),
        offset: msg.offset(),
        epoch,
        timestamp_ms: msg.timestamp().to_millis(),
        key: msg.key().map(<[u8]>::to_vec),
        payload: msg.payload().map(<[u8]>::to_vec),
        headers: msg
            .headers()
            .map(|h| {
                h.iter()
                    .map(|h| {
                        (
                            h.key.to_owned(),
                            h.value.map(<[u8]>::to_vec).unwrap_or_default(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default(),
        received: Instant::now(),
        correction,
    }
}

fn report_poll_error(shared: &Shared, ctx: &ServiceClientContext, e: &KafkaError) {
    match e.rdkafka_error_code() {
        Some(RDKafkaErrorCode::UnknownTopicOrPartition) | Some(RDKafkaErrorCode::UnknownTopic) => {
            if shared.health.should_log("unknown-input-topic") {
                tracing::warn!(
                    "input topic {} does not exist (yet): {e}; waiting for it",
                    shared.topic
                );
            }
        }
        _ => ctx.report(e, "while consuming"),
    }
}

/// Exports per-partition offsets, lag and in-flight counts.
fn export_progress(shared: &Shared) {
    let progress = shared.tracker.lock().progress();
    let mut in_flight = 0;
    for p in progress {
        in_flight += p.in_flight;
        let label = partition_label(p.partition);
        if let Some(c) = p.consumed_upto {
            metrics::gauge!(m::CONSUMED_OFFSET, "partition" => label.clone()).set(c as f64);
        }
        if let (Some(c), Some(k)) = (p.consumed_upto, p.committed) {
            metrics::gauge!(m::UNCOMMITTED_MESSAGES, "partition" => label.clone())
                .set((c - k).max(0) as f64);
        }
        // High watermark from the last statistics event (no request of our own).
        let high = shared.watermarks.lock().get(&p.partition).copied();
        if let Some(high) = high {
            metrics::gauge!(m::HIGH_WATERMARK, "partition" => label.clone()).set(high as f64);
            let position = p.consumed_upto.or(p.committed);
            let suspect = position.is_some_and(|pos| high < pos);
            metrics::gauge!(m::WATERMARK_SUSPECT, "partition" => label.clone()).set(if suspect {
                1.0
            } else {
                0.0
            });
            if suspect {
                metrics::gauge!(m::CONSUMER_LAG, "partition" => label).set(-1.0);
                if shared.suspect_logged.lock().insert(p.partition) {
                    tracing::warn!(
                        "partition {}: the broker reports high watermark {high} below the consumed offset {}: its watermarks are unreliable (a known Tansu gap), so consumer lag is reported as -1 (unknown); compare newsdedup_consumed_offset with newsdedup_committed_offset instead",
                        p.partition,
                        position.unwrap_or_default()
                    );
                }
            } else if let Some(base) = p.committed.or(p.consumed_upto) {
                metrics::gauge!(m::CONSUMER_LAG, "partition" => label)
                    .set((high - base).max(0) as f64);
            }
        }
    }
    metrics::gauge!(m::IN_FLIGHT).set(in_flight as f64);
    metrics::gauge!(m::ASSIGNED_PARTITIONS)
        .set(shared.health.assigned.load(Ordering::Relaxed) as f64);
    shared.health.in_flight.store(in_flight, Ordering::Relaxed);
    let healthy = shared.health.liveness().0 == 200;
    metrics::gauge!(m::HEALTHY).set(if healthy { 1.0 } else { 0.0 });
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

/// Consumes until a stop is requested (`Shared::stop`) or the decision stage fails, then drains
/// and commits within the stop's budget.
pub fn run_loop(
    consumer: &Arc<InputConsumer>,
    engine: &mut Engine,
    params: &ConsumeParams,
) -> LoopExit {
    consume(
        consumer,
        engine,
        params,
        None,
        Some(GroupRules::new(params)),
    )
}

/// As [`run_loop`] over the partitions assigned to `consumer` (with `assign`), also stopping,
/// draining and committing once `bounds` is complete.
pub fn run_bounded(
    consumer: &Arc<InputConsumer>,
    engine: &mut Engine,
    params: &ConsumeParams,
    bounds: &mut dyn Bounds,
) -> LoopExit {
    consume(consumer, engine, params, Some(bounds), None)
}

fn pause_partition(consumer: &InputConsumer, topic: &str, partition: i32) {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition(topic, partition);
    if let Err(e) = consumer.pause(&tpl) {
        tracing::warn!("cannot pause fetching {topic} [{partition}]: {e}");
    }
}

fn consume(
    consumer: &Arc<InputConsumer>,
    engine: &mut Engine,
    params: &ConsumeParams,
    mut bounds: Option<&mut dyn Bounds>,
    mut group: Option<GroupRules>,
) -> LoopExit {
    let ctx = consumer.context();
    let shared = ctx.shared.clone();
    let committer = Committer::spawn(
        consumer.clone(),
        shared.clone(),
        params.commit_interval,
        params.session_timeout,
    );
    let topic: Arc<str> = Arc::from(params.input_topic.as_str());
    let consumed = metrics::counter!(m::ARTICLES_CONSUMED);
    let max_in_flight = params.max_in_flight;
    let max_bytes = params.max_in_flight_bytes;
    let mut pause = PauseState::default();
    // Backpressure: too many records or bytes in flight (with hysteresis).
    let mut pressure = false;
    // Whether the group rules let this member fetch (always without them: `replay`).
    let mut gate_open = group.is_none();
    let mut looked_at: Option<(u64, Instant)> = None;
    let mut last_export = Instant::now();
    metrics::gauge!(m::BROKER_UP).set(1.0);
    metrics::gauge!(m::FETCH_PAUSED).set(0.0);
    shared.health.set_state(State::Running);

    let fatal = loop {
        if shared.stop.is_requested() || bounds.as_ref().is_some_and(|b| b.complete()) {
            break None;
        }
        if let Some(f) = shared.engine.failure() {
            break Some(f);
        }
        let (in_flight, bytes) = {
            let t = shared.tracker.lock();
            (t.in_flight(), t.in_flight_bytes())
        };
        let rebalanced = shared.rebalanced.swap(false, Ordering::SeqCst);
        if rebalanced {
            // A fresh description of the group is what opens the gate again.
            shared.watch.wake();
        }
        if !pressure && (in_flight >= max_in_flight || bytes >= max_bytes) {
            tracing::debug!("{in_flight} records ({bytes} bytes) in flight: pausing fetch");
            pressure = true;
            metrics::gauge!(m::FETCH_PAUSED).set(1.0);
        } else if pressure && in_flight <= max_in_flight / 2 && bytes <= max_bytes / 2 {
            pressure = false;
            metrics::gauge!(m::FETCH_PAUSED).set(0.0);
        }
        if let Some(rules) = group.as_mut() {
            let version = shared.observed_version.load(Ordering::SeqCst);
            let due =
                looked_at.is_none_or(|(v, at)| v != version || at.elapsed() >= GROUP_RULES_EVERY);
            if rebalanced || due {
                looked_at = Some((version, Instant::now()));
                // Room in the pipeline: a member held back by its own pace is not starved.
                let room = !pressure && in_flight <= max_in_flight / 2;
                match rules.evaluate(&shared, room) {
                    Ok(open) => gate_open = open,
                    Err(why) => {
                        shared.engine.fail(why.clone());
                        break Some(why);
                    }
                }
            }
        }
        shared.deciding.store(gate_open, Ordering::Relaxed);
        if let Some(p) = pause.next(pressure || !gate_open, rebalanced) {
            set_paused(consumer, p);
        }
        match consumer.poll(POLL) {
            None => {}
            Some(Ok(msg)) if !gate_open => {
                // Fetched before the pause took effect (a pause drops what was fetched, so this
                // is not expected): not decided; fetching resumes from it once the gate opens.
                let (p, o) = (msg.partition(), msg.offset());
                drop(msg);
                if let Err(e) =
                    consumer.seek(&shared.topic, p, Offset::Offset(o), Duration::from_secs(10))
                {
                    let why = format!("a record of {} [{p}] at offset {o} arrived while fetching was paused and the partition cannot be rewound to it: {e}", shared.topic);
                    shared.engine.fail(why.clone());
                    break Some(why);
                }
                tracing::debug!("{} [{p}] rewound to {o}: fetching is paused", shared.topic);
            }
            Some(Ok(msg)) => {
                shared.health.broker_ok();
                let admit = bounds.as_mut().map_or(Admit::Decide, |b| {
                    b.admit(msg.partition(), msg.offset(), msg.timestamp().to_millis())
                });
                if admit != Admit::Decide {
                    if admit == Admit::End {
                        pause_partition(consumer, &shared.topic, msg.partition());
                    }
                    shared.health.polled();
                    continue;
                }
                let bytes = msg.payload_len()
                    + msg.key_len()
                    + msg.headers().map_or(0, |h| {
                        h.iter()
                            .map(|h| h.key.len() + h.value.map_or(0, <[u8]>::len))
                            .sum()
                    });
                let epoch =
                    shared
                        .tracker
                        .lock()
                        .register_sized(msg.partition(), msg.offset(), bytes);
                let input = detach(&msg, &topic, epoch, false);
                drop(msg);
                consumed.increment(1);
                if let Err(e) = engine.submit(input) {
                    break Some(e.to_string());
                }
            }
            Some(Err(KafkaError::PartitionEOF(p))) if bounds.is_some() => {
                if let Some(b) = bounds.as_mut() {
                    b.end_of_partition(p);
                }
            }
            Some(Err(e)) => report_poll_error(&shared, &ctx.client, &e),
        }
        shared.health.polled();
        if shared.tracker.lock().released_since_commit() >= params.commit_every {
            committer.wake();
        }
        if last_export.elapsed() >= Duration::from_secs(1) {
            last_export = Instant::now();
            export_progress(&shared);
        }
    };
    shared.deciding.store(false, Ordering::Relaxed);

    finish(consumer, &shared, committer, fatal)
}

/// Longest drain after a fatal error (records behind the failed one are never acknowledged).
const FATAL_DRAIN: Duration = Duration::from_secs(10);

/// The stop after the consumer loop: fetching paused, in-flight work drained (decided and its
/// outputs acknowledged) until the drain's deadline, then the final commit until the commit's;
/// whatever is not done by then is abandoned, never committed, processed again after a restart.
fn finish(
    consumer: &Arc<InputConsumer>,
    shared: &Arc<Shared>,
    committer: Committer,
    fatal: Option<String>,
) -> LoopExit {
    // The budget counts from the signal; a loop that ended by itself starts it now.
    let budget = shared.stop.begin();
    match &fatal {
        Some(f) => shared.health.fail(f.clone()),
        None => shared.health.set_state(State::Draining),
    }
    set_paused(consumer, true);
    // The group's members no longer matter to this member.
    shared.watch.stop();
    let (abandoned_before, dropped_before) = shared.tracker.lock().given_up();
    let in_flight = shared.tracker.lock().in_flight();
    let mut report = StopReport::new(budget, in_flight);
    let mut drain_until = budget.deadline(Phase::Drain);
    if let Some(f) = &fatal {
        tracing::error!("stopping after a fatal error: {f}");
        drain_until = drain_until.min(Instant::now() + FATAL_DRAIN);
    }

    // Drain: keep polling (callbacks, membership) until in-flight work is done.
    let mut last_progress = (in_flight, Instant::now());
    let left = loop {
        let n = shared.tracker.lock().in_flight();
        if n == 0 {
            break 0;
        }
        if n < last_progress.0 {
            last_progress = (n, Instant::now());
        }
        // After a fatal error, records behind the failed one are never acknowledged: stop once
        // acknowledgements stop arriving.
        let stuck = fatal.is_some() && last_progress.1.elapsed() > Duration::from_secs(2);
        if Instant::now() >= drain_until || stuck {
            break n;
        }
        // Records returned now are ignored: never registered, so never committed.
        let _ = consumer.poll(Duration::from_millis(20));
        shared.health.polled();
    };
    if left > 0 {
        shared.engine.abandon();
    }
    let (abandoned_after, dropped_after) = shared.tracker.lock().given_up();
    let revoked = usize::try_from(abandoned_after - abandoned_before).unwrap_or(usize::MAX);
    report.abandoned = left.saturating_add(revoked);
    report.dropped_uncommitted = dropped_after - dropped_before;
    if fatal.is_none() && (report.abandoned > 0 || report.dropped_uncommitted > 0) {
        tracing::warn!(
            "stop: draining cut short after {:.1}s: {} in-flight records abandoned ({left} still unacknowledged at the drain's deadline, {revoked} with partitions revoked or lost meanwhile){}; none of it is committed: it is processed again after a restart (same decisions)",
            budget.elapsed().as_secs_f64(),
            report.abandoned,
            if report.dropped_uncommitted > 0 {
                format!(
                    ", and {} done offsets of those partitions not committed",
                    report.dropped_uncommitted
                )
            } else {
                String::new()
            }
        );
    }

    // Final commit, on a thread of its own: a synchronous commit to a broker that does not
    // answer cannot be interrupted, and must not hold the stop past its deadline.
    let (c, s) = (consumer.clone(), shared.clone());
    let commit_until = budget.deadline(Phase::Commit);
    let committed = stop::finish_by("final-commit", commit_until, move || {
        committer.stop();
        commit_done(&c, &s, None, None)
    });
    shared.stop.set_final_commit_over();
    report.commit = match committed {
        Some(Ok(n)) => CommitResult::Done(n),
        Some(Err(e)) => {
            tracing::warn!(
                "stop: final commit failed after {:.1}s: {e}; records done since the last commit are processed again after a restart",
                budget.elapsed().as_secs_f64()
            );
            CommitResult::Failed(e.to_string())
        }
        None => {
            tracing::warn!(
                "stop: final commit cut short after {:.1}s: no answer in time (broker or index); records done since the last commit are processed again after a restart",
                budget.elapsed().as_secs_f64()
            );
            CommitResult::CutShort
        }
    };
    {
        let t = shared.tracker.lock();
        report.left_uncommitted = t.commit_candidates(None).len();
        report.committed = t
            .progress()
            .into_iter()
            .map(|p| (p.partition, p.committed))
            .collect();
    }
    export_progress(shared);
    match fatal {
        Some(error) => LoopExit::Fatal {
            error,
            stop: report,
        },
        None => LoopExit::Shutdown(report),
    }
}

#[cfg(test)]
mod tests {
    use super::PauseState;

    #[test]
    fn a_backpressure_pause_does_not_outlive_a_rebalance() {
        let mut p = PauseState::default();
        // Backpressure: the assignment is paused.
        assert_eq!(p.next(true, false), Some(true));
        assert_eq!(p.next(true, false), None);
        // The assignment is lost (empty); in-flight work abandoned, pressure gone: the resume
        // reaches no partition.
        assert_eq!(p.next(false, true), Some(false));
        // Partitions assigned again, still paused by librdkafka (and by the assign callback):
        // they are resumed although nothing changed in what the loop wants.
        assert_eq!(p.next(false, true), Some(false));
        assert_eq!(p.next(false, false), None);
        // Every rebalance re-applies a pause too.
        assert_eq!(p.next(true, false), Some(true));
        assert_eq!(p.next(true, true), Some(true));
    }
}
