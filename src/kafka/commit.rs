//! Offset commits of the consumer: [`commit_done`] commits the tracker's committable offsets
//! after the index WAL is synced (from the committer thread, the revoke callback and the final
//! commit, serialised by one lock so committed offsets never go backwards), and the
//! `Committer` thread commits every `commit_interval`, or sooner when woken once `commit_every`
//! records are done, holding commits back after a stall of the process.

use super::consumer::{partition_label, InputConsumer, Shared};
use crate::metrics as m;
use crate::runner::ControlError;
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest wait for the decision thread to fsync the index before a commit.
const SYNC_TIMEOUT: Duration = Duration::from_secs(60);

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
pub(super) struct Committer {
    wake: crossbeam_channel::Sender<()>,
    handle: std::thread::JoinHandle<()>,
}

impl Committer {
    /// `session_timeout`: after a stall (the process frozen, swapped out or starved) of more
    /// than half of it, the group may have given our partitions to another member before
    /// librdkafka could tell us; commits wait one session timeout, long enough for librdkafka
    /// to report the lost assignment (the revoke callback then abandons those partitions).
    pub(super) fn spawn(
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

    pub(super) fn wake(&self) {
        let _ = self.wake.try_send(());
    }

    pub(super) fn stop(self) {
        drop(self.wake);
        let _ = self.handle.join();
    }
}
