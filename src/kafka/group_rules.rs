//! What decides whether the consumer loop fetches: the consumer group's rules for `run` (one
//! active instance through the `exclusive` gate, the waiting bounds, and the check that a
//! member that fetches does not fall behind, [`Behind`]), and the pause state the loop applies
//! to its whole assignment (backpressure or a closed gate), set afresh after every rebalance.

use super::behind::{Behind, BehindFacts, Ends};
use super::consumer::{ConsumeParams, InputConsumer, Shared};
use super::exclusive::{Closed, Facts, Gate, Verdict, WaitFacts, Waiting};
use crate::metrics as m;
use rdkafka::consumer::Consumer;
use rdkafka::topic_partition_list::TopicPartitionList;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Pauses or resumes fetching of the whole current assignment (a resume leaves the partitions
/// whose start is not known yet paused, [`Shared::unstarted`]).
pub(super) fn set_paused(consumer: &InputConsumer, pause: bool) {
    match consumer.assignment() {
        Ok(mut tpl) if tpl.count() > 0 => {
            let r = if pause {
                consumer.pause(&tpl)
            } else {
                let unstarted = consumer.context().shared.unstarted.lock().clone();
                if !unstarted.is_empty() {
                    let mut startable = TopicPartitionList::new();
                    for e in tpl.elements() {
                        if e.topic() != consumer.context().shared.topic
                            || !unstarted.contains(&e.partition())
                        {
                            startable.add_partition(e.topic(), e.partition());
                        }
                    }
                    tpl = startable;
                }
                if tpl.count() == 0 {
                    return;
                }
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
pub(super) struct GroupRules {
    group: String,
    gate: Gate,
    waiting: Waiting,
    behind: Behind,
}

impl GroupRules {
    pub(super) fn new(params: &ConsumeParams) -> GroupRules {
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
    pub(super) fn evaluate(&mut self, shared: &Shared, room: bool) -> Result<bool, String> {
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
pub(super) const GROUP_RULES_EVERY: Duration = Duration::from_millis(250);

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
