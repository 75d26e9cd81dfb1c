//! The stop of `run` (and `replay`): one budget, `--shutdown-timeout-ms`, counted from the signal
//! (or from the moment the consumer loop ended by itself), split among the phases so that the
//! whole stop ends inside it:
//!
//! ```text
//! signal ── drain ──────────────────────────── commit ──── leave ──── close ──► limit
//!           fetch paused; in-flight records     index sync  the        index closed,
//!           decided and their outputs           + offset    consumer   clients and
//!           acknowledged (the producer flush)   commit      group      runtime stopped
//! ```
//!
//! Each phase ends at its own deadline, computed from the one start instant; a phase that ends
//! early leaves its time to the next. The later phases take milliseconds while the broker
//! answers, so they get small reserves and the drain gets the rest. What a phase could not
//! finish is not committed and is processed again after a restart: nothing is lost. A stop is
//! clean when everything decided was committed; otherwise the process exits with
//! [`EXIT_INCOMPLETE_STOP`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The exit status of a stop that ended within its budget but left work undone (records
/// abandoned in flight, or done but not committed): nothing is lost, that work is processed
/// again after a restart. `EX_TEMPFAIL` of sysexits.h.
pub const EXIT_INCOMPLETE_STOP: i32 = 75;

/// Beyond the budget, a watchdog ends the process (exit 1) in case a phase that cannot be cut
/// short (closing the index, a stuck thread) hangs.
pub const WATCHDOG_MARGIN: Duration = Duration::from_secs(10);

/// Most time reserved for the final commit (an fsync and one round trip).
const COMMIT_RESERVE: Duration = Duration::from_secs(2);
/// Most time reserved for leaving the consumer group (a round trip).
const LEAVE_RESERVE: Duration = Duration::from_secs(2);
/// Most time reserved for closing the index, the clients and the runtime.
const CLOSE_RESERVE: Duration = Duration::from_secs(3);
/// No reserve takes more than this share of the budget (a tenth), so a small budget still
/// leaves most of it to the drain.
const RESERVE_SHARE: u32 = 10;

/// A stop request (SIGINT/SIGTERM, or the consumer loop ending by itself) and when it came.
#[derive(Debug)]
pub struct StopRequest {
    requested: AtomicBool,
    at: OnceLock<Instant>,
    limit: Duration,
    /// Set once the final commit is over: a revoke while leaving the group neither waits for
    /// in-flight records nor commits (that was the final commit's job).
    final_commit_over: AtomicBool,
}

impl StopRequest {
    /// `limit`: `--shutdown-timeout-ms`.
    pub fn new(limit: Duration) -> StopRequest {
        StopRequest {
            requested: AtomicBool::new(false),
            at: OnceLock::new(),
            limit,
            final_commit_over: AtomicBool::new(false),
        }
    }

    /// Asks for a stop; the budget counts from the first request.
    pub fn request(&self) {
        self.at.get_or_init(Instant::now);
        self.requested.store(true, Ordering::SeqCst);
    }

    pub fn is_requested(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
    }

    /// The flag alone, for loops that only need to know whether to stop.
    pub fn flag(&self) -> &AtomicBool {
        &self.requested
    }

    pub fn limit(&self) -> Duration {
        self.limit
    }

    /// Requests the stop (if not yet requested) and returns its budget.
    pub fn begin(&self) -> StopBudget {
        self.request();
        StopBudget::new(*self.at.get_or_init(Instant::now), self.limit)
    }

    /// The budget, once a stop was requested.
    pub fn budget(&self) -> Option<StopBudget> {
        self.at
            .get()
            .map(|&start| StopBudget::new(start, self.limit))
    }

    /// `wait`, cut to what is left of the drain once a stop was requested: a wait inside a
    /// callback (a revoke, an assignment) must not outlast the drain.
    pub fn bounded(&self, wait: Duration) -> Duration {
        match self.budget() {
            Some(b) => wait.min(b.left(Phase::Drain)),
            None => wait,
        }
    }

    pub fn set_final_commit_over(&self) {
        self.final_commit_over.store(true, Ordering::SeqCst);
    }

    pub fn final_commit_over(&self) -> bool {
        self.final_commit_over.load(Ordering::SeqCst)
    }
}

/// The phases of a stop, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// In-flight records decided and their outputs acknowledged.
    Drain,
    /// Index synced, offsets committed.
    Commit,
    /// The consumer group left.
    Leave,
    /// Index closed, clients destroyed, runtime stopped.
    Close,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Drain => "draining",
            Phase::Commit => "the final commit",
            Phase::Leave => "leaving the consumer group",
            Phase::Close => "closing",
        }
    }
}

/// One stop's deadlines, all computed from its start instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopBudget {
    start: Instant,
    limit: Duration,
}

impl StopBudget {
    pub fn new(start: Instant, limit: Duration) -> StopBudget {
        StopBudget { start, limit }
    }

    pub fn start(&self) -> Instant {
        self.start
    }

    pub fn limit(&self) -> Duration {
        self.limit
    }

    fn reserve(&self, most: Duration) -> Duration {
        most.min(self.limit / RESERVE_SHARE)
    }

    /// When `phase` must be over, as an offset from the start.
    pub fn ends_after(&self, phase: Phase) -> Duration {
        let close = self.reserve(CLOSE_RESERVE);
        let leave = self.reserve(LEAVE_RESERVE);
        let commit = self.reserve(COMMIT_RESERVE);
        let after_close = self.limit;
        let after_leave = after_close.saturating_sub(close);
        let after_commit = after_leave.saturating_sub(leave);
        match phase {
            Phase::Drain => after_commit.saturating_sub(commit),
            Phase::Commit => after_commit,
            Phase::Leave => after_leave,
            Phase::Close => after_close,
        }
    }

    /// When `phase` must be over.
    pub fn deadline(&self, phase: Phase) -> Instant {
        self.start + self.ends_after(phase)
    }

    /// Time left until `phase` must be over (zero once it is past).
    pub fn left(&self, phase: Phase) -> Duration {
        self.deadline(phase)
            .saturating_duration_since(Instant::now())
    }

    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }
}

/// How the final commit went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommitResult {
    /// Committed (or nothing was left to commit); how many partitions advanced.
    Done(usize),
    /// The broker refused it, or the index could not be synced.
    Failed(String),
    /// No answer before the commit's deadline.
    CutShort,
}

/// What a stop did, for its summary line and the exit status.
#[derive(Debug, Clone)]
pub struct StopReport {
    pub budget: StopBudget,
    /// Records in flight when the drain began.
    pub in_flight: usize,
    /// Of those, records given up: still in flight at the drain's end, or dropped with a
    /// partition revoked or lost meanwhile.
    pub abandoned: usize,
    /// Offsets done but never committed because their partition was revoked or lost during
    /// the stop (the next owner, or a restart, processes them again).
    pub dropped_uncommitted: u64,
    pub commit: CommitResult,
    /// Offsets done but left uncommitted after the final commit (it failed or was cut short).
    pub left_uncommitted: usize,
    /// The committed offset of each partition still held at the end (None: never committed).
    pub committed: BTreeMap<i32, Option<i64>>,
    /// False when leaving the group was cut short (None: not tried, e.g. no group).
    pub left_group: Option<bool>,
}

impl StopReport {
    pub fn new(budget: StopBudget, in_flight: usize) -> StopReport {
        StopReport {
            budget,
            in_flight,
            abandoned: 0,
            dropped_uncommitted: 0,
            commit: CommitResult::Done(0),
            left_uncommitted: 0,
            committed: BTreeMap::new(),
            left_group: None,
        }
    }

    /// Everything decided was committed: nothing is processed again after a restart.
    pub fn clean(&self) -> bool {
        self.abandoned == 0
            && self.dropped_uncommitted == 0
            && self.left_uncommitted == 0
            && matches!(self.commit, CommitResult::Done(_))
    }

    pub fn drained(&self) -> usize {
        self.in_flight.saturating_sub(self.abandoned)
    }

    /// `[0@1200, 1@none]`, or `[] (no partition held)`.
    pub fn committed_list(&self) -> String {
        if self.committed.is_empty() {
            return "[] (no partition held)".to_owned();
        }
        let parts: Vec<String> = self
            .committed
            .iter()
            .map(|(p, o)| match o {
                Some(o) => format!("{p}@{o}"),
                None => format!("{p}@none"),
            })
            .collect();
        format!("[{}]", parts.join(", "))
    }

    /// The final summary line after a fatal error (the exit status is 1).
    pub fn fatal_summary(&self) -> String {
        format!(
            "stopped after the fatal error in {:.1}s: committed up to {}; what was not committed is processed again once the cause is fixed and the service restarted",
            self.budget.elapsed().as_secs_f64(),
            self.committed_list()
        )
    }

    /// The final summary line.
    pub fn summary(&self) -> String {
        let took = self.budget.elapsed().as_secs_f64();
        let limit = self.budget.limit().as_secs_f64();
        if self.clean() {
            return format!(
                "stopped cleanly in {took:.1}s (limit {limit:.1}s): {} in-flight records drained, committed up to {}",
                self.drained(),
                self.committed_list()
            );
        }
        let mut undone = Vec::new();
        if self.abandoned > 0 {
            undone.push(format!("{} in-flight records abandoned", self.abandoned));
        }
        if self.dropped_uncommitted > 0 {
            undone.push(format!(
                "{} done offsets of revoked or lost partitions not committed",
                self.dropped_uncommitted
            ));
        }
        if self.left_uncommitted > 0 {
            undone.push(format!(
                "done records of {} partition(s) not committed",
                self.left_uncommitted
            ));
        }
        match &self.commit {
            CommitResult::Done(_) => {}
            CommitResult::Failed(e) => undone.push(format!("final commit failed: {e}")),
            CommitResult::CutShort => undone.push("final commit cut short".to_owned()),
        }
        format!(
            "stopped in {took:.1}s (limit {limit:.1}s) with work left undone: {}; {} in-flight records drained, committed up to {}; nothing is lost: what was not committed is processed again after a restart (same decisions); exit status {EXIT_INCOMPLETE_STOP}",
            undone.join(", "),
            self.drained(),
            self.committed_list()
        )
    }
}

/// The stop ended within its budget but left work undone: see [`StopReport::summary`].
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct IncompleteStop(pub String);

/// Runs `f` on a thread of its own and waits for its result until `deadline`. None if it is
/// not done by then: the thread is left to finish (or to end with the process), so that a call
/// that cannot be interrupted (a synchronous commit to a broker that does not answer) never
/// holds the stop past its deadline.
pub fn finish_by<T: Send + 'static>(
    name: &str,
    deadline: Instant,
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let spawned = std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            let _ = tx.send(f());
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot spawn the {name} thread: {e}");
        return None;
    }
    rx.recv_deadline(deadline).ok()
}

/// Waits until `handle`'s thread has ended or `deadline` has passed; false if it is still
/// running (it is then left to end with the process).
pub fn join_by(handle: std::thread::JoinHandle<()>, deadline: Instant) -> bool {
    while !handle.is_finished() {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = handle.join();
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(d: Duration) -> f64 {
        d.as_secs_f64()
    }

    #[test]
    fn the_phases_share_one_budget_and_end_at_its_limit() {
        let b = StopBudget::new(Instant::now(), Duration::from_secs(30));
        // Default budget: the reserves are at their most (2 s, 2 s, 3 s), the drain the rest.
        assert_eq!(secs(b.ends_after(Phase::Drain)), 23.0);
        assert_eq!(secs(b.ends_after(Phase::Commit)), 25.0);
        assert_eq!(secs(b.ends_after(Phase::Leave)), 27.0);
        assert_eq!(secs(b.ends_after(Phase::Close)), 30.0);

        // A small budget: each reserve is a tenth of it.
        let b = StopBudget::new(Instant::now(), Duration::from_secs(8));
        assert!((secs(b.ends_after(Phase::Drain)) - 5.6).abs() < 1e-9);
        assert_eq!(b.ends_after(Phase::Close), Duration::from_secs(8));

        // Zero: every phase ends at once, never after the limit.
        let b = StopBudget::new(Instant::now(), Duration::ZERO);
        for p in [Phase::Drain, Phase::Commit, Phase::Leave, Phase::Close] {
            assert_eq!(b.ends_after(p), Duration::ZERO);
        }
    }

    #[test]
    fn the_budget_counts_from_the_first_request() {
        let stop = StopRequest::new(Duration::from_secs(10));
        assert!(stop.budget().is_none());
        assert_eq!(
            stop.bounded(Duration::from_secs(20)),
            Duration::from_secs(20)
        );
        stop.request();
        let first = stop.budget().expect("budget").start();
        std::thread::sleep(Duration::from_millis(5));
        stop.request();
        assert_eq!(stop.budget().expect("budget").start(), first);
        // A callback's wait ends with the drain (7 s of 10).
        assert!(stop.bounded(Duration::from_secs(20)) <= Duration::from_secs(7));
    }

    #[test]
    fn a_stop_is_clean_only_when_everything_decided_was_committed() {
        let budget = StopBudget::new(Instant::now(), Duration::from_secs(30));
        let mut r = StopReport::new(budget, 40);
        r.committed.insert(0, Some(1200));
        assert!(r.clean());
        assert!(
            r.summary().starts_with("stopped cleanly"),
            "{}",
            r.summary()
        );
        assert!(r
            .summary()
            .contains("40 in-flight records drained, committed up to [0@1200]"));

        r.abandoned = 12;
        assert!(!r.clean());
        assert_eq!(r.drained(), 28);
        assert!(r
            .summary()
            .contains("with work left undone: 12 in-flight records abandoned"));

        let mut r = StopReport::new(budget, 0);
        r.commit = CommitResult::CutShort;
        assert!(!r.clean());
        let mut r = StopReport::new(budget, 0);
        r.dropped_uncommitted = 3;
        assert!(!r.clean());
        // Leaving the group cut short loses nothing: still clean.
        let mut r = StopReport::new(budget, 0);
        r.left_group = Some(false);
        assert!(r.clean());
    }

    #[test]
    fn finish_by_gives_up_at_the_deadline() {
        let soon = Instant::now() + Duration::from_millis(50);
        assert_eq!(finish_by("quick", soon, || 7), Some(7));
        let started = Instant::now();
        let never = finish_by("slow", Instant::now() + Duration::from_millis(50), || {
            std::thread::sleep(Duration::from_secs(2));
        });
        assert!(never.is_none());
        assert!(started.elapsed() < Duration::from_secs(1));
    }
}
