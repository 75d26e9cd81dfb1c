//! The group watch: a thread that only observes, for the one-active-instance rule
//! ([`super::exclusive`]): the input topic's partition count, the group's member list (its
//! coordinator's description, [`super::group`]) and, while this member fetches nothing, the
//! records waiting beyond the group's committed offsets. What it sees goes into
//! `Shared::observed`; the consumer loop decides what to do with it.

use super::behind::Ends;
use super::consumer::{InputConsumer, Shared};
use super::exclusive::{Backlog, Seen};
use super::group::{self, GroupView};
use crate::metrics as m;
use rdkafka::consumer::Consumer;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Timeout of each request the watch makes.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the watch looks (it is also woken by every rebalance).
const WATCH_EVERY: Duration = Duration::from_secs(1);
/// How often the end offsets of the held partitions are measured while this member fetches
/// (two ListOffsets requests a partition each time).
const ENDS_EVERY: Duration = Duration::from_secs(5);

/// What the watch needs to know besides the consumer.
#[derive(Debug, Clone)]
pub struct WatchConfig {
    pub group: String,
    /// A partition without a committed offset starts at its beginning (`auto.offset.reset`), so
    /// all of it waits.
    pub earliest: bool,
    /// The bootstrap servers when the connection is PLAINTEXT: a broker whose answer to
    /// librdkafka's describe lists no member of a live group is asked again over it.
    pub plain_bootstrap: Option<String>,
}

/// The observing thread: see the module documentation.
pub struct Watch {
    handle: std::thread::JoinHandle<()>,
    shared: Arc<Shared>,
}

impl Watch {
    pub fn spawn(consumer: Arc<InputConsumer>, shared: Arc<Shared>, config: WatchConfig) -> Watch {
        let s = shared.clone();
        let handle = std::thread::Builder::new()
            .name("group-watch".into())
            .spawn(move || watch(&consumer, &s, &config))
            .expect("spawn the group-watch thread");
        Watch { handle, shared }
    }

    /// Stops it, waiting until `deadline` at most: a look in progress waits for its requests
    /// (up to 5 s each) to a broker that may not answer; the thread is then left to end with
    /// the process.
    pub fn stop_by(self, deadline: Instant) {
        self.shared.watch.stop();
        if !super::stop::join_by(self.handle, deadline) {
            tracing::debug!("the group watch is still waiting for the broker; not waiting for it");
        }
    }
}

fn watch(consumer: &InputConsumer, shared: &Shared, config: &WatchConfig) {
    // Every member id this process has had: a ghost of its own earlier session is not another
    // instance.
    let mut mine: BTreeSet<String> = BTreeSet::new();
    let mut partitions: Vec<i32> = Vec::new();
    let mut ends_at: Option<Instant> = None;
    loop {
        observe(consumer, shared, config, &mut mine, &mut partitions);
        // Not while the broker is unreachable: each request would wait its whole timeout.
        if !shared.idle.load(Ordering::SeqCst)
            && shared.health.broker_is_up()
            && ends_at.is_none_or(|t| t.elapsed() >= ENDS_EVERY)
            && !shared.watch.stopped()
        {
            ends_at = Some(Instant::now());
            let ends = held_ends(consumer, &shared.topic);
            shared.observed.lock().ends = ends;
        }
        shared.observed_version.fetch_add(1, Ordering::SeqCst);
        if !shared.watch.wait(WATCH_EVERY) {
            return;
        }
    }
}

/// One look: the partition count, the group, and the backlog while this member fetches nothing.
fn observe(
    consumer: &InputConsumer,
    shared: &Shared,
    config: &WatchConfig,
    mine: &mut BTreeSet<String>,
    partitions: &mut Vec<i32>,
) {
    let topic = shared.topic.as_str();
    let health = &shared.health;
    if let Ok(ps) = super::topic_partitions_within(consumer, topic, REQUEST_TIMEOUT) {
        health.broker_ok();
        shared.observed.lock().partitions = Some(ps.len());
        *partitions = ps;
    }
    if shared.watch.stopped() {
        return;
    }
    let asked_after = shared.rebalances.load(Ordering::SeqCst);
    let me = group::member_id(consumer);
    if let Some(id) = &me {
        mine.insert(id.clone());
    }
    match describe(consumer, config) {
        Ok(view) => {
            health.broker_ok();
            if view.known {
                metrics::gauge!(m::GROUP_MEMBERS).set(view.members.len() as f64);
            } else if me.is_some() && health.should_log("group-unlisted") {
                tracing::warn!(
                    "no broker lists group {:?} (ListGroups) and it cannot be described directly over TLS or SASL: its members cannot be read; until they can, this member decides only while it holds every partition of {}",
                    config.group,
                    topic
                );
            }
            let others = view
                .members
                .iter()
                .filter(|m| !mine.contains(&m.id))
                .cloned()
                .collect();
            let mut o = shared.observed.lock();
            o.seen = Some(Seen {
                view,
                others,
                me,
                asked_after,
                at: Instant::now(),
            });
            o.describe_error = None;
        }
        Err(e) => shared.observed.lock().describe_error = Some(e),
    }
    if shared.idle.load(Ordering::SeqCst) && !partitions.is_empty() && !shared.watch.stopped() {
        match backlog(consumer, topic, partitions, config.earliest) {
            Ok(b) => {
                health.broker_ok();
                let mut o = shared.observed.lock();
                o.backlog = Some(b);
                o.backlog_error = None;
            }
            Err(e) => shared.observed.lock().backlog_error = Some(e),
        }
    } else {
        let mut o = shared.observed.lock();
        o.backlog = None;
        o.backlog_error = None;
    }
}

/// The end offsets of the partitions this member holds (None when they cannot be read: the
/// broker unreachable, or nothing held).
fn held_ends(consumer: &InputConsumer, topic: &str) -> Option<Ends> {
    let assignment = consumer.assignment().ok()?;
    let mut partitions = Vec::new();
    for e in assignment.elements_for_topic(topic) {
        let (_, high) = consumer
            .fetch_watermarks(topic, e.partition(), REQUEST_TIMEOUT)
            .ok()?;
        partitions.push((e.partition(), high));
    }
    (!partitions.is_empty()).then(|| Ends {
        partitions,
        at: Instant::now(),
    })
}

/// The group as its coordinator describes it (see [`group`]).
fn describe(consumer: &InputConsumer, config: &WatchConfig) -> Result<GroupView, String> {
    let listed = group::describe(consumer, &config.group, REQUEST_TIMEOUT);
    if let Ok(Some(view)) = listed {
        return Ok(view);
    }
    match (&config.plain_bootstrap, listed) {
        (Some(bootstrap), _) => group::describe_plain(bootstrap, &config.group, REQUEST_TIMEOUT),
        (None, Err(e)) => Err(e),
        // The broker answered, without the group: on Apache Kafka a group not joined yet; on a
        // broker that lists only some groups (Tansu: none without committed offsets), unknown.
        (None, Ok(_)) => Ok(GroupView::unknown()),
    }
}

/// Records beyond the group's committed offsets, per partition of the input topic (end offsets
/// as the broker reports them; Tansu under-reports them, so this is a lower bound there).
fn backlog(
    consumer: &InputConsumer,
    topic: &str,
    partitions: &[i32],
    earliest: bool,
) -> Result<Backlog, String> {
    let mut tpl = TopicPartitionList::with_capacity(partitions.len());
    for p in partitions {
        tpl.add_partition(topic, *p);
    }
    let committed = consumer
        .committed_offsets(tpl, REQUEST_TIMEOUT)
        .map_err(|e| format!("committed offsets: {e}"))?;
    let mut records = 0i64;
    let mut per = Vec::with_capacity(partitions.len());
    for p in partitions {
        let (low, high) = consumer
            .fetch_watermarks(topic, *p, REQUEST_TIMEOUT)
            .map_err(|e| format!("watermarks of partition {p}: {e}"))?;
        let c = committed
            .find_partition(topic, *p)
            .and_then(|e| match e.offset() {
                Offset::Offset(o) => Some(o),
                _ => None,
            });
        let from = c.unwrap_or(if earliest { low } else { high });
        records += (high - from).max(0);
        per.push((*p, c.unwrap_or(-1), high));
    }
    Ok(Backlog {
        records,
        partitions: per,
        at: Instant::now(),
    })
}
