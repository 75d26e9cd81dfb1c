//! One active instance. The decision is single-writer on one index: a second `run` in the same
//! group would split the input between two indexes and miss every duplicate whose original went
//! to the other one. So `run` refuses to share its group:
//!
//! * before joining, it waits (up to the grace period) for the group to have no member: a
//!   crashed instance's member leaves after `session.timeout.ms`, a live one does not, and then
//!   `run` exits with an error naming it, having decided nothing;
//! * while running, a watch checks every few seconds that this member holds every partition of
//!   the input topic; when it has not for longer than the grace period (another member joined
//!   anyway, e.g. two instances started at the same moment), it stops the service like any fatal
//!   error: /health 503 with the reason, commit what is done, exit non-zero.

use super::consumer::{InputConsumer, Shared};
use rdkafka::consumer::{Consumer, ConsumerContext};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the watch looks at the assignment.
const WATCH_EVERY: Duration = Duration::from_secs(2);

/// The members of `group`, as `client.id@host (member id)`.
fn members<C: ConsumerContext>(
    consumer: &impl Consumer<C>,
    group: &str,
) -> Result<Vec<String>, String> {
    let list = consumer
        .fetch_group_list(Some(group), REQUEST_TIMEOUT)
        .map_err(|e| e.to_string())?;
    Ok(list
        .groups()
        .iter()
        .filter(|g| g.name() == group)
        .flat_map(|g| g.members())
        .map(|m| {
            format!(
                "{}@{} (member {})",
                m.client_id(),
                m.client_host().trim_start_matches('/'),
                m.id()
            )
        })
        .collect())
}

fn refusal(group: &str, others: &[String]) -> String {
    format!(
        "another instance is active in consumer group {group:?}: {}. newsdedup decides with a single writer on one index; two members would split the input between two indexes and miss duplicates. Stop the other instance (or, for an independent pipeline, give this one its own --group-id and --index-dir); a standby (`newsdedup standby`) never joins the group",
        others.join(", ")
    )
}

/// Waits until `group` has no member, at most `grace`; Err with the reason if members remain.
/// A broker that cannot list the group's members leaves the check to the watch.
pub fn wait_for_empty_group<C: ConsumerContext>(
    consumer: &impl Consumer<C>,
    group: &str,
    grace: Duration,
) -> Result<(), String> {
    let start = Instant::now();
    let mut logged = false;
    loop {
        match members(consumer, group) {
            Ok(m) if m.is_empty() => return Ok(()),
            Ok(m) => {
                if start.elapsed() >= grace {
                    return Err(refusal(group, &m));
                }
                if !logged {
                    logged = true;
                    tracing::warn!(
                        "consumer group {group:?} has members {}: waiting up to {grace:?} for them to leave (a crashed instance leaves after session.timeout.ms) before joining",
                        m.join(", ")
                    );
                }
            }
            Err(e) => {
                tracing::warn!(
                    "cannot list the members of consumer group {group:?} ({e}); joining, the assignment watch still stops this instance if another one holds partitions"
                );
                return Ok(());
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    }
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
                let mut short_since: Option<Instant> = None;
                while let Err(crossbeam_channel::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(WATCH_EVERY)
                {
                    let total = match partition_count(&*consumer, &shared.topic) {
                        Some(n) => n,
                        None => continue,
                    };
                    let held = shared.health.assigned.load(Ordering::Relaxed);
                    if held >= total {
                        short_since = None;
                        continue;
                    }
                    let since = *short_since.get_or_insert_with(Instant::now);
                    if since.elapsed() < grace {
                        continue;
                    }
                    // This member among them: the broker does not say which one it is.
                    let all = members(&*consumer, &group).unwrap_or_default();
                    let why = format!(
                        "this member has held {held} of the {total} partitions of {} for {:?} (longer than the exclusive grace period): {}",
                        shared.topic,
                        since.elapsed(),
                        refusal(
                            &group,
                            &if all.is_empty() {
                                vec!["another member".to_owned()]
                            } else {
                                vec![format!("the group's members are {}", all.join(", "))]
                            }
                        )
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

/// Partitions of `topic` per the broker's metadata (None when it cannot be read now).
fn partition_count<C: ConsumerContext>(consumer: &impl Consumer<C>, topic: &str) -> Option<usize> {
    let md = consumer.fetch_metadata(Some(topic), REQUEST_TIMEOUT).ok()?;
    let t = md.topics().iter().find(|t| t.name() == topic)?;
    (!t.partitions().is_empty()).then(|| t.partitions().len())
}
