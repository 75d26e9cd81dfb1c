//! The consumer's rebalance callbacks ([`ConsumerCtx`] as rdkafka's `ConsumerContext`): on
//! revoke, wait (bounded) for the revoked partitions' in-flight records, commit what is done and
//! forget the rest; on a lost assignment, abandon it uncommitted; on assign, give every partition
//! an absolute start offset (or, when the committed offsets cannot be read, mark it unstarted
//! for the consumer loop to start later), pause it and tell the consumer loop, which decides what
//! fetches.

use super::commit::commit_done;
use super::consumer::{partition_label, partitions_of, ConsumerCtx, Shared};
use crate::metrics as m;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Longest wait for a running commit before the revoke callback gives up committing.
const REVOKE_COMMIT_LOCK_WAIT: Duration = Duration::from_secs(10);

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
                {
                    let mut unstarted = shared.unstarted.lock();
                    for p in &parts {
                        unstarted.remove(p);
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
/// `auto.offset.reset` alone, ignoring the committed offset: the partition would be read again
/// from its beginning. So when the committed offsets cannot be read, the partitions are kept
/// paused ([`Shared::unstarted`]) until [`start_unstarted`] has read them. Returns how each
/// partition starts, for the log.
fn start_offsets(
    consumer: &BaseConsumer<ConsumerCtx>,
    shared: &Shared,
    tpl: &mut TopicPartitionList,
) -> Vec<String> {
    // During a stop (an assignment while draining), no longer than the drain.
    let timeout = shared.stop.bounded(OFFSETS_READ_TIMEOUT);
    let topic = shared.topic.as_str();
    let parts = partitions_of(tpl, topic);
    let committed = match consumer.committed_offsets(tpl.clone(), timeout) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(
                "cannot read the committed offsets of {topic} {parts:?}: {e}; they stay paused until they are read (retried every {UNSTARTED_RETRY:?})"
            );
            shared.unstarted.lock().extend(parts.iter().copied());
            return parts.iter().map(|p| format!("{p}@?")).collect();
        }
    };
    parts
        .into_iter()
        .map(|p| {
            let (start, label) = start_of(consumer, shared, &committed, p, timeout);
            if let Some(o) = start {
                if let Err(e) = tpl.set_partition_offset(topic, p, Offset::Offset(o)) {
                    tracing::warn!("cannot set the start offset of {topic} [{p}]: {e}");
                }
            }
            label
        })
        .collect()
}

/// Where partition `p` starts, given the group's `committed` offsets: the committed offset
/// (recorded in the tracker and exported), else the `auto.offset.reset` end read from the
/// broker (None: left to librdkafka); and how, for the log.
fn start_of(
    consumer: &BaseConsumer<ConsumerCtx>,
    shared: &Shared,
    committed: &TopicPartitionList,
    p: i32,
    timeout: Duration,
) -> (Option<i64>, String) {
    let topic = shared.topic.as_str();
    match committed.find_partition(topic, p).map(|e| e.offset()) {
        Some(Offset::Offset(o)) => {
            shared.tracker.lock().set_committed(p, o);
            metrics::gauge!(m::COMMITTED_OFFSET, "partition" => partition_label(p)).set(o as f64);
            (Some(o), format!("{p}@{o}"))
        }
        _ => {
            let reset = shared.offset_reset.and_then(|earliest| {
                match consumer.fetch_watermarks(topic, p, timeout) {
                    Ok((low, high)) => Some(if earliest { low } else { high }),
                    Err(e) => {
                        tracing::warn!(
                            "cannot read the offsets of {topic} [{p}]: {e}; librdkafka looks them up"
                        );
                        None
                    }
                }
            });
            let label = match reset {
                Some(o) => format!("{p}@auto.offset.reset={o}"),
                None => format!("{p}@auto.offset.reset"),
            };
            (reset, label)
        }
    }
}

/// Longest wait for the committed offsets of assigned partitions. Short: the wait holds the poll
/// thread (in the assign callback, or the consumer loop), and a wait near `max.poll.interval.ms`
/// would have the member leave the group; partitions not started in time are retried.
const OFFSETS_READ_TIMEOUT: Duration = Duration::from_secs(2);

/// How often the consumer loop tries again to read the committed offsets of partitions kept
/// paused for want of them.
pub(super) const UNSTARTED_RETRY: Duration = Duration::from_secs(1);

/// Reads the committed offsets of the partitions kept paused for want of them
/// ([`Shared::unstarted`]) and seeks each to its start; true if any can now be fetched (the
/// loop then applies its pause state to the whole assignment again). Called by the consumer loop
/// (a seek needs an assigned partition, and the loop is the one that resumes).
pub(super) fn start_unstarted(consumer: &BaseConsumer<ConsumerCtx>, shared: &Shared) -> bool {
    let parts: Vec<i32> = shared.unstarted.lock().iter().copied().collect();
    if parts.is_empty() {
        return false;
    }
    let topic = shared.topic.as_str();
    let mut tpl = TopicPartitionList::new();
    for &p in &parts {
        tpl.add_partition(topic, p);
    }
    let timeout = shared.stop.bounded(OFFSETS_READ_TIMEOUT);
    let committed = match consumer.committed_offsets(tpl, timeout) {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!("committed offsets of {topic} {parts:?} still unreadable: {e}");
            return false;
        }
    };
    let mut started = Vec::new();
    for p in parts {
        let (start, label) = start_of(consumer, shared, &committed, p, timeout);
        if let Some(o) = start {
            if let Err(e) = consumer.seek(topic, p, Offset::Offset(o), timeout) {
                tracing::warn!("cannot seek {topic} [{p}] to {o}: {e}; it stays paused, retried");
                continue;
            }
        }
        shared.unstarted.lock().remove(&p);
        started.push(label);
    }
    if !started.is_empty() {
        tracing::info!(
            "committed offsets of {topic} read: resuming from [{}]",
            started.join(", ")
        );
    }
    !started.is_empty()
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
