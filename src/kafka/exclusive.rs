//! One active instance. The decision is single-writer on one index: a second `run` in the same
//! group would split the input between two indexes and miss every duplicate whose original went
//! to the other one. So `run` decides only while it holds every partition of the input topic:
//!
//! * the consumer loop pauses fetching whenever this member holds fewer partitions than the topic
//!   has (`Health::alone`), so nothing is decided while the group is split;
//! * a watch thread keeps the partition count current and stops the service, like any fatal error
//!   (/health 503 with the reason, commit what is done, exit non-zero), once this member has held
//!   fewer than every partition for longer than the grace period, counted from the end of its
//!   group join. A member that never held every
//!   partition (the newcomer) goes after one grace period; one that did (the incumbent) waits
//!   twice as long, so that the newcomer leaves first and the incumbent takes its partitions back.
//!
//! Group membership is not read at start (brokers disagree on when a crashed member stops being
//! listed; Tansu lists it until the next rebalance), only named in the error.

use super::consumer::{InputConsumer, Shared};
use super::Health;
use rdkafka::consumer::{Consumer, ConsumerContext};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the watch looks at the assignment and refreshes the partition count.
const WATCH_EVERY: Duration = Duration::from_secs(1);

/// Reads the input topic's partition count into `health` (before joining, so that a member is
/// never alone by mistake). Best effort: unknown until the watch reads it.
pub fn count_partitions<C: ConsumerContext>(
    consumer: &impl Consumer<C>,
    topic: &str,
    health: &Health,
) {
    if let Ok(partitions) = super::topic_partitions(consumer, topic) {
        health
            .partitions_total
            .store(partitions.len(), Ordering::Relaxed);
    }
}

/// The members of `group`, as `client.id@host (member id)`, for the error message.
fn members<C: ConsumerContext>(consumer: &impl Consumer<C>, group: &str) -> Vec<String> {
    let Ok(list) = consumer.fetch_group_list(Some(group), REQUEST_TIMEOUT) else {
        return Vec::new();
    };
    list.groups()
        .iter()
        .filter(|g| g.name() == group)
        .flat_map(|g| g.members())
        .map(|m| {
            let client = format!(
                "{}@{}",
                m.client_id(),
                m.client_host().trim_start_matches('/')
            );
            if client == "@" {
                format!("member {}", m.id())
            } else {
                format!("{client} (member {})", m.id())
            }
        })
        .collect()
}

/// The running check: see the module documentation.
pub struct ExclusiveWatch {
    stop: crossbeam_channel::Sender<()>,
    handle: std::thread::JoinHandle<()>,
}

impl ExclusiveWatch {
    pub fn spawn(
        consumer: Arc<InputConsumer>,
        shared: Arc<Shared>,
        group: String,
        grace: Duration,
    ) -> ExclusiveWatch {
        let (stop, stopped) = crossbeam_channel::bounded::<()>(0);
        let handle = std::thread::Builder::new()
            .name("exclusive-watch".into())
            .spawn(move || {
                let health = &shared.health;
                let mut warned = false;
                while let Err(crossbeam_channel::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(WATCH_EVERY)
                {
                    count_partitions(&*consumer, &shared.topic, health);
                    let total = health.partitions_total.load(Ordering::Relaxed);
                    let held = health.assigned.load(Ordering::Relaxed);
                    let since_ms = health.short_since_ms.load(Ordering::Relaxed);
                    if since_ms == 0 {
                        if warned {
                            warned = false;
                            tracing::info!("holding every partition of {} again: deciding", shared.topic);
                        }
                        continue;
                    }
                    let short_for =
                        Duration::from_millis(crate::dedup::now_ms().saturating_sub(since_ms));
                    if held > 0 && !warned {
                        warned = true;
                        tracing::warn!(
                            "holding {held} of the {total} partitions of {}: fetching paused (one active instance: another member of group {group:?} holds the others)",
                            shared.topic
                        );
                    }
                    // The incumbent outlasts a newcomer, which leaves first.
                    let incumbent = health.held_all_once.load(Ordering::Relaxed);
                    let limit = if incumbent { 2 * grace } else { grace };
                    if short_for < limit {
                        continue;
                    }
                    let listed = members(&*consumer, &group);
                    let why = format!(
                        "another instance is active in consumer group {group:?}: this member has held {held} of the {total} partitions of {} for {:?}{}. newsdedup decides with a single writer on one index; two members would split the input between two indexes and miss duplicates. Stop the other instance (or, for an independent pipeline, give this one its own --group-id and --index-dir); a standby (`newsdedup standby`) never joins the group",
                        shared.topic,
                        short_for,
                        if listed.is_empty() {
                            String::new()
                        } else {
                            format!(" (the group's members, this one included: {})", listed.join(", "))
                        }
                    );
                    tracing::error!("{why}");
                    shared.engine.fail(why);
                    return;
                }
            })
            .expect("spawn the exclusive-watch thread");
        ExclusiveWatch { stop, handle }
    }

    pub fn stop(self) {
        drop(self.stop);
        let _ = self.handle.join();
    }
}
