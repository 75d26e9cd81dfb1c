//! The consumer loop: polls the `BaseConsumer` from one plain thread, registers every consumed
//! record in the offset tracker and submits it to the engine, pauses fetching under backpressure
//! or while the group rules hold this member back, wakes the committer, exports progress, and
//! ends (on a stop, a fatal error or, bounded, once every partition is done) with the drain and
//! the final commit within the stop's budget.

use super::commit::{commit_done, Committer};
use super::consumer::{
    detach, partition_label, Admit, Bounds, ConsumeParams, InputConsumer, LoopExit, Shared,
};
use super::engine::Engine;
use super::group_rules::{set_paused, GroupRules, PauseState, GROUP_RULES_EVERY};
use super::stop::{self, CommitResult, Phase, StopReport};
use super::{ServiceClientContext, State};
use crate::metrics as m;
use rdkafka::consumer::Consumer;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Headers, Message};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

const POLL: Duration = Duration::from_millis(100);

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
    let healthy = shared.health.liveness(crate::metrics::Asker::Loopback).0 == 200;
    metrics::gauge!(m::HEALTHY).set(if healthy { 1.0 } else { 0.0 });
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
    let mut unstarted_tried = Instant::now();
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
        // Partitions kept paused for want of their committed offsets: once started, the pause
        // state of the whole assignment is applied again (which resumes them if it fetches).
        let mut started = false;
        if unstarted_tried.elapsed() >= super::rebalance::UNSTARTED_RETRY {
            unstarted_tried = Instant::now();
            started = super::rebalance::start_unstarted(consumer, &shared);
        }
        if let Some(p) = pause.next(pressure || !gate_open, rebalanced || started) {
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
                let bytes = super::record::held_bytes(
                    msg.payload_len(),
                    msg.key_len(),
                    msg.headers()
                        .into_iter()
                        .flat_map(|h| h.iter().map(|h| (h.key, h.value))),
                );
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
