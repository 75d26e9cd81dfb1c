//! The corrections topic as `run` reads it: editors' corrections (`newsdedup correct`) are handed
//! to the engine like input records ([`InputMessage::correction`] set), so the single writer
//! applies each one between two articles, its output is published to `articles.unique` /
//! `articles.duplicate` (or the DLQ with the reason it was refused) after the group's sync, and
//! only after that output is acknowledged is the correction's offset committed. A crash repeats
//! a correction, and applying one again only publishes its output again.
//!
//! Plain `assign` of every partition of the topic. The position lives with the index
//! ([`CorrectionsPosition`], written once a correction's outcome is acknowledged): it never
//! expires as a consumer group's offsets do after `offsets.retention.minutes`, and an index put
//! back from a copy re-reads exactly the corrections it has not seen. It is also committed under
//! the consumer group `<group-id>.corrections` (no member ever joins it, so it never rebalances
//! and never counts as another instance of the service's own group), for lag monitoring and for
//! an index that holds no position yet (one from an earlier release, a rebuild): such an index
//! starts from the group's offsets, or, without any, from the beginning (from the end if the index
//! holds no article, as no correction could apply to it). A correction that may apply is handed over
//! alone and its outcome waited for: they are rare, and their order is the topic's. A record the
//! service refuses whatever its index holds (not a correction, unsigned, for another service,
//! expired: checked here with the engine's `Acceptance`) is handed over without waiting, and the
//! positions of such records are recorded and committed a batch at a time, so a flood of junk
//! costs the engine's pace, not a broker round trip and an index write each. Nothing is fetched while the group rules keep this
//! member from deciding (`Shared::deciding`): a waiting newcomer applies nothing.
//!
//! When several members share the group (`exclusive_grace_ms = 0`), each with its own index,
//! every member reads every correction, under a position of its own index
//! (`<group-id>.corrections.<index id>`), and applies only those of articles its index holds:
//! a correction of an article the index does not hold is passed over (no output, position
//! committed), so each correction has one outcome, from the member that holds its article.

use super::consumer::Shared;
use super::record::{InputMessage, OutputKind};
use crate::correction::{Acceptance, Correction};
use crate::index::CorrectionsPosition;
use anyhow::{Context, Result};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use parking_lot::Mutex;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::ClientConfig;
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Metadata and offset requests.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(100);
/// While the topic is missing or unreadable, look again this often.
const RETRY: Duration = Duration::from_secs(5);
/// On stop, how long the acknowledgement of a correction handed over is waited for.
const STOP_WAIT: Duration = Duration::from_secs(2);
/// Most records refused in the reader (unreadable, unsigned, expired) handed to the engine before
/// their outputs are waited for.
const MAX_REFUSED_IN_FLIGHT: usize = 1024;
/// Refused records whose position is recorded and committed at once.
const REFUSED_PER_COMMIT: usize = 256;

/// The consumer group under which `run` commits its position in the corrections topic:
/// `<group>.corrections`, or `<group>.corrections.<index id>` for one of several members.
pub fn group_id(service_group: &str, member: Option<&str>) -> String {
    match member {
        None => format!("{service_group}.corrections"),
        Some(index_id) => format!("{service_group}.corrections.{index_id}"),
    }
}

/// Longest wait for the decision thread to say whether the index holds an article.
const HOLDS_TIMEOUT: Duration = Duration::from_secs(60);

/// What the loop needs.
pub struct CorrectionsParams {
    pub topic: String,
    /// The consumer's librdkafka properties (`group.id` is replaced by [`group_id`]).
    pub properties: BTreeMap<String, String>,
    pub service_group: String,
    /// One of several members of the group (`exclusive_grace_ms = 0`): the id of its index,
    /// which names its group; only corrections of articles its index holds are applied.
    pub member: Option<String>,
    /// Whether the index held articles when the service started (see [`assign`]).
    pub index_holds_articles: bool,
    /// What a correction must be to apply (the engine's): one it refuses is known to be refused
    /// here already, and is not waited for.
    pub acceptance: Acceptance,
}

/// What the loop holds of the engine and of the index: taken away when the service stops, so that
/// both can close (the engine's queue once no sender is left, the index once no handle is)
/// whatever the loop is blocked in (a request to a frozen broker).
struct Held {
    jobs: Option<Sender<InputMessage>>,
    position: Option<CorrectionsPosition>,
}

type Lent = Arc<Mutex<Held>>;

/// The running loop.
pub struct Corrections {
    lent: Lent,
}

impl Corrections {
    /// Starts the loop: records go to `jobs` (the engine's), acknowledgements come back on
    /// `acks` (from the producer's `Acks`); reading resumes at the index's `position`.
    pub fn spawn(
        params: CorrectionsParams,
        position: CorrectionsPosition,
        jobs: Sender<InputMessage>,
        acks: Receiver<(i32, i64, OutputKind)>,
        shared: Arc<Shared>,
    ) -> Result<Corrections> {
        let lent: Lent = Arc::new(Mutex::new(Held {
            jobs: Some(jobs),
            position: Some(position),
        }));
        let held = lent.clone();
        std::thread::Builder::new()
            .name("corrections".into())
            .spawn(move || {
                let _guard = shared.engine.fail_on_panic("corrections");
                run(&params, &held, &acks, &shared);
            })
            .context("cannot spawn the corrections thread")?;
        Ok(Corrections { lent })
    }

    /// Before the engine closes: nothing more is handed to it, nothing more is written to the
    /// index. The loop ends by itself once it sees the stop (a correction not yet recorded done,
    /// even if acknowledged meanwhile, is applied again after the restart, which changes nothing
    /// and publishes its record again); it is not waited for, so a request it is blocked in
    /// cannot hold up the stop.
    pub fn close(self) {
        let mut held = self.lent.lock();
        held.jobs.take();
        held.position.take();
    }
}

fn stopping(shared: &Shared) -> bool {
    shared.stop.is_requested() || shared.engine.failure().is_some()
}

fn run(
    params: &CorrectionsParams,
    lent: &Lent,
    acks: &Receiver<(i32, i64, OutputKind)>,
    shared: &Shared,
) {
    let mut logged_missing = false;
    // One client for the whole run: a retry asks again on its open connection.
    let group = group_id(&params.service_group, params.member.as_deref());
    let consumer = match create(&params.properties, &group) {
        Ok(c) => c,
        Err(e) => {
            shared
                .engine
                .fail(format!("cannot read corrections: {e:#}; stopped deciding"));
            return;
        }
    };
    loop {
        if stopping(shared) {
            return;
        }
        match assign(&consumer, params, lent, !logged_missing) {
            Ok(()) => break,
            Err(e) => {
                if !logged_missing {
                    tracing::warn!(
                        "corrections are not applied yet: {e:#}; trying again every {}s",
                        RETRY.as_secs()
                    );
                    logged_missing = true;
                }
                sleep_unless_stopped(shared, RETRY);
            }
        }
    }
    let topic: Arc<str> = Arc::from(params.topic.as_str());
    let mut flight = InFlight::default();
    while !stopping(shared) {
        if !shared.deciding.load(Ordering::Relaxed) {
            flight.collect(acks);
            flight.finish(&consumer, params, lent);
            std::thread::sleep(POLL);
            continue;
        }
        let msg = match consumer.poll(POLL) {
            None => {
                flight.collect(acks);
                flight.finish(&consumer, params, lent);
                continue;
            }
            Some(Err(e)) => {
                let message = fetch_failed(&params.topic, &group, &e);
                if shared
                    .health
                    .should_log(&format!("corrections:{}", error_code(&e)))
                {
                    tracing::warn!("{message}");
                }
                continue;
            }
            Some(Ok(m)) => m,
        };
        let (partition, offset) = (msg.partition(), msg.offset());
        let correction = msg.payload().and_then(|p| Correction::parse(p).ok());
        let refused = correction.as_ref().is_none_or(|c| {
            c.accept(&params.acceptance, crate::dedup::now_ms() as i64)
                .is_err()
        });
        // One of several members: a correction of an article another member's index holds is
        // that member's to apply or refuse (an unreadable record, every member's).
        if let (Some(c), Some(_)) = (&correction, &params.member) {
            match shared.engine.holds(&c.id, HOLDS_TIMEOUT) {
                Ok(true) => {}
                Ok(false) => {
                    tracing::info!(
                        "correction {}[{partition}]@{offset} of article {:?} passed over: this member's index does not hold it (the member holding it applies it)",
                        params.topic,
                        c.id
                    );
                    drop(msg);
                    flight.pass_over(partition, offset);
                    flight.finish(&consumer, params, lent);
                    continue;
                }
                Err(e) => {
                    // Stopping, or the engine failed: not committed, read again after a restart.
                    tracing::debug!(
                        "corrections: cannot ask the index for article {:?}: {e}",
                        c.id
                    );
                    return;
                }
            }
        }
        let input = super::consumer::detach(&msg, &topic, 0, true);
        drop(msg);
        // The sender is cloned for this one send: `close` can take it away at any time.
        let sender = lent.lock().jobs.clone();
        if sender.is_none_or(|tx| tx.send(input).is_err()) {
            return;
        }
        flight.hand(partition, offset, refused);
        if refused {
            if flight.len() >= MAX_REFUSED_IN_FLIGHT && !flight.wait_all(acks, shared) {
                return;
            }
            flight.collect(acks);
            if flight.done_ready() >= REFUSED_PER_COMMIT {
                flight.finish(&consumer, params, lent);
            }
            continue;
        }
        // A correction that may apply: its outcome, and those of the records before it, are
        // waited for. Not acknowledged (stopping, or the engine failed): not committed, so
        // applied again after a restart.
        if !flight.wait_all(acks, shared) {
            return;
        }
        flight.finish(&consumer, params, lent);
    }
}

/// Records handed to the engine (or passed over) whose positions are not recorded yet, in the
/// order read; a position is recorded only once every record before it is acknowledged, so a
/// crash re-reads, never skips.
#[derive(Default)]
struct InFlight {
    /// (partition, offset, refused in the reader) in the order read.
    handed: VecDeque<(i32, i64, bool)>,
    /// What each acknowledged record was published as.
    acked: BTreeMap<(i32, i64), OutputKind>,
    /// Passed over: done without an output.
    passed: HashSet<(i32, i64)>,
}

impl InFlight {
    fn len(&self) -> usize {
        self.handed.len()
    }

    fn hand(&mut self, partition: i32, offset: i64, refused: bool) {
        self.handed.push_back((partition, offset, refused));
    }

    fn pass_over(&mut self, partition: i32, offset: i64) {
        self.handed.push_back((partition, offset, true));
        self.passed.insert((partition, offset));
    }

    fn is_done(&self, partition: i32, offset: i64) -> bool {
        self.acked.contains_key(&(partition, offset)) || self.passed.contains(&(partition, offset))
    }

    /// How many records from the first on are done.
    fn done_ready(&self) -> usize {
        self.handed
            .iter()
            .take_while(|(p, o, _)| self.is_done(*p, *o))
            .count()
    }

    /// Takes the acknowledgements that have arrived.
    fn collect(&mut self, acks: &Receiver<(i32, i64, OutputKind)>) {
        while let Ok((p, o, kind)) = acks.try_recv() {
            self.acked.insert((p, o), kind);
        }
    }

    /// Waits until every record handed over is acknowledged; false when the engine failed, or
    /// a stop was requested and they did not come within [`STOP_WAIT`].
    fn wait_all(&mut self, acks: &Receiver<(i32, i64, OutputKind)>, shared: &Shared) -> bool {
        let mut stop_seen: Option<Instant> = None;
        loop {
            self.collect(acks);
            if self.done_ready() == self.handed.len() {
                return true;
            }
            match acks.recv_timeout(POLL) {
                Ok((p, o, kind)) => {
                    self.acked.insert((p, o), kind);
                }
                Err(RecvTimeoutError::Disconnected) => return false,
                Err(RecvTimeoutError::Timeout) => {}
            }
            if shared.engine.failure().is_some() {
                return false;
            }
            if shared.stop.is_requested() {
                let since = *stop_seen.get_or_insert_with(Instant::now);
                if since.elapsed() >= STOP_WAIT {
                    return false;
                }
            }
        }
    }

    /// Records and commits the position after the records done from the first on, and says
    /// what became of them (each correction that could apply, the refused ones together).
    fn finish(&mut self, consumer: &BaseConsumer, params: &CorrectionsParams, lent: &Lent) {
        let mut next: BTreeMap<i32, i64> = BTreeMap::new();
        let mut refused: Vec<(i32, i64)> = Vec::new();
        while let Some(&(p, o, refused_here)) = self.handed.front() {
            if !self.is_done(p, o) {
                break;
            }
            self.handed.pop_front();
            next.insert(p, o + 1);
            if self.passed.remove(&(p, o)) {
                continue;
            }
            let kind = self.acked.remove(&(p, o));
            match kind {
                Some(OutputKind::Dlq) if refused_here => refused.push((p, o)),
                Some(OutputKind::Dlq) => tracing::warn!(
                    "correction {}[{p}]@{o} refused or unreadable: see {} for the reason",
                    params.topic,
                    "the DLQ record (header newsdedup.error.message)"
                ),
                Some(kind) => tracing::info!(
                    "correction {}[{p}]@{o} applied: published to the {} topic",
                    params.topic,
                    kind.as_str()
                ),
                None => {}
            }
        }
        if let (Some(first), Some(last)) = (refused.first(), refused.last()) {
            tracing::warn!(
                "{} record(s) of {} refused (not a correction, unsigned, for another service or expired), {}[{}]@{} to [{}]@{}: see the DLQ records (header newsdedup.error.message)",
                refused.len(),
                params.topic,
                params.topic,
                first.0,
                first.1,
                last.0,
                last.1
            );
        }
        if !next.is_empty() {
            done(consumer, params, lent, &next);
        }
    }
}

/// Records the positions `next` (partition -> the offset after the last record done) in the
/// index, then commits them under the group: those corrections are done (applied and
/// published, refused, or passed over).
fn done(
    consumer: &BaseConsumer,
    params: &CorrectionsParams,
    lent: &Lent,
    next: &BTreeMap<i32, i64>,
) {
    // A position not written (an error, or the service stopping) is only corrections read
    // again after a restart, which are recognised and only published again.
    {
        let held = lent.lock();
        let Some(position) = &held.position else {
            return;
        };
        for (&partition, &offset) in next {
            if let Err(e) = position.record(partition, offset) {
                tracing::warn!(
                    "cannot record the corrections position {}[{partition}]@{offset} in the index: {e}; the correction is read again after a restart (which changes nothing)",
                    params.topic,
                );
            }
        }
    }
    let mut tpl = TopicPartitionList::new();
    let added = next.iter().try_for_each(|(&partition, &offset)| {
        tpl.add_partition_offset(&params.topic, partition, Offset::Offset(offset))
    });
    if let Err(e) = added.map_err(anyhow::Error::from).and_then(|()| {
        consumer
            .commit(&tpl, CommitMode::Sync)
            .map_err(anyhow::Error::from)
    }) {
        // Only for lag monitoring and an index without a position of its own.
        tracing::warn!(
            "cannot commit the corrections position {} {next:?} under group {}: {e}; the index holds it, where reading resumes",
            params.topic,
            group_id(&params.service_group, params.member.as_deref())
        );
    }
}

fn error_code(e: &KafkaError) -> String {
    e.rdkafka_error_code()
        .map_or_else(|| "other".to_owned(), |c| format!("{c:?}"))
}

/// A failed fetch of the corrections topic: counted in `newsdedup_corrections_fetch_errors_total`
/// (by code); returns what to log, with what to do. Corrections wait meanwhile, nothing is
/// skipped.
fn fetch_failed(topic: &str, group: &str, e: &KafkaError) -> String {
    use RDKafkaErrorCode as C;
    metrics::counter!(crate::metrics::CORRECTIONS_FETCH_ERRORS, "code" => error_code(e))
        .increment(1);
    let todo = match e.rdkafka_error_code() {
        Some(C::TopicAuthorizationFailed | C::GroupAuthorizationFailed) => format!(
            "grant the service's principal Read on topic {topic} and on consumer group {group}"
        ),
        Some(C::UnknownTopicOrPartition | C::UnknownTopic) => {
            format!("create topic {topic} (see the topics of the operations guide)")
        }
        _ => "check the broker and the client's settings (-X)".to_owned(),
    };
    format!("cannot read corrections from {topic}: {e}; no correction is applied until this is fixed: {todo}")
}

fn sleep_unless_stopped(shared: &Shared, total: Duration) {
    let until = Instant::now() + total;
    while Instant::now() < until && !stopping(shared) {
        std::thread::sleep(POLL);
    }
}

/// The reader of the corrections topic, committing under `group` (see [`group_id`]).
fn create(properties: &BTreeMap<String, String>, group: &str) -> Result<BaseConsumer> {
    let mut config = ClientConfig::new();
    for (k, v) in properties {
        config.set(k, v);
    }
    config
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("enable.partition.eof", "false")
        // The service's consumer statistics are its own; this reader's would only be logged.
        .set("statistics.interval.ms", "0")
        .set(
            "fetch.wait.max.ms",
            super::properties::reader_fetch_wait_ms(properties),
        )
        .set("client.id", "newsdedup-corrections");
    config
        .create()
        .map_err(|e| super::producer::redacted(e, properties))
        .context("cannot create the corrections consumer")
}

/// Moves the index's corrections position up to the offsets committed under `group` where they
/// are further on (never back); returns the partitions moved. Only for an index that has read
/// every output record of the instance that committed them (a takeover after its catch-up): a
/// correction refused or passed over leaves no output record, so such an index's own position
/// may stop short of them, and would refuse them all again.
pub fn advance_to_group(
    properties: &BTreeMap<String, String>,
    group: &str,
    topic: &str,
    position: &CorrectionsPosition,
) -> Result<Vec<(i32, i64)>> {
    let consumer = create(properties, group)?;
    let partitions = super::topic_partitions_within(&consumer, topic, REQUEST_TIMEOUT)?;
    let mut tpl = TopicPartitionList::new();
    for p in &partitions {
        tpl.add_partition(topic, *p);
    }
    let committed = consumer
        .committed_offsets(tpl, REQUEST_TIMEOUT)
        .with_context(|| format!("cannot read the committed offsets of group {group}"))?;
    let stored = position.read()?;
    let mut moved = Vec::new();
    for e in committed.elements_for_topic(topic) {
        if let Offset::Offset(o) = e.offset() {
            if stored.get(&e.partition()).is_none_or(|&at| at < o) {
                position.record(e.partition(), o)?;
                moved.push((e.partition(), o));
            }
        }
    }
    Ok(moved)
}

/// Assigns every partition of the corrections topic where the index stands. A partition the index
/// holds no position for starts at the group's committed offset, or without one at the
/// beginning (no correction is ever skipped), or at the end when the index holds no article (no
/// correction written before could apply to it; a new index does not refuse a month of them),
/// which is then recorded as the index's position: only at the service's start (`at_start`),
/// before it has decided anything.
fn assign(
    consumer: &BaseConsumer,
    params: &CorrectionsParams,
    lent: &Lent,
    at_start: bool,
) -> Result<()> {
    let partitions = super::topic_partitions_within(consumer, &params.topic, REQUEST_TIMEOUT)?;
    let stored = match &lent.lock().position {
        Some(position) => position
            .read()
            .context("cannot read the index's corrections position")?,
        None => anyhow::bail!("the service is stopping"),
    };
    let group = group_id(&params.service_group, params.member.as_deref());
    let committed = if partitions.iter().all(|p| stored.contains_key(p)) {
        None
    } else {
        let mut tpl = TopicPartitionList::new();
        for p in &partitions {
            tpl.add_partition(&params.topic, *p);
        }
        Some(
            consumer
                .committed_offsets(tpl, REQUEST_TIMEOUT)
                .with_context(|| format!("cannot read the committed offsets of group {group}"))?,
        )
    };
    let mut start = TopicPartitionList::new();
    let mut said = Vec::new();
    for p in &partitions {
        let from_group = committed.as_ref().and_then(|c| {
            match c.find_partition(&params.topic, *p).map(|e| e.offset()) {
                Some(Offset::Offset(o)) if o >= 0 => Some(o),
                _ => None,
            }
        });
        let (offset, from) = match (stored.get(p), from_group) {
            (Some(&o), _) => (Offset::Offset(o), format!("{o} (the index's position)")),
            (None, Some(o)) => (Offset::Offset(o), format!("{o} (group {group})")),
            // After a failed first attempt the index may hold articles by now (a topic created
            // later, by the first `correct`): nothing is skipped.
            (None, None) if params.index_holds_articles || !at_start => {
                (Offset::Beginning, "the beginning".to_owned())
            }
            (None, None) => {
                // Recorded at once: once the index holds articles, a restart before the first
                // correction must not go back to the corrections written before it existed.
                let (_, end) = consumer
                    .fetch_watermarks(&params.topic, *p, REQUEST_TIMEOUT)
                    .with_context(|| format!("cannot read the end of {} [{p}]", params.topic))?;
                if let Some(position) = &lent.lock().position {
                    position
                        .record(*p, end)
                        .context("cannot record the corrections position in the index")?;
                }
                (
                    Offset::Offset(end),
                    format!(
                        "{end}, its end (the index holds no article a correction could apply to)"
                    ),
                )
            }
        };
        start.add_partition_offset(&params.topic, *p, offset)?;
        said.push(format!("[{p}] from {from}"));
    }
    consumer
        .assign(&start)
        .with_context(|| format!("cannot assign the partitions of {}", params.topic))?;
    tracing::info!(
        "reading corrections from {} {}",
        params.topic,
        said.join(", ")
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fetch error (a missing Read ACL) is counted and said at warn with what to do, not only
    /// at debug.
    #[test]
    fn a_fetch_error_is_counted_and_says_what_to_do() {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        let denied = KafkaError::MessageConsumption(RDKafkaErrorCode::TopicAuthorizationFailed);
        let message = metrics::with_local_recorder(&recorder, || {
            fetch_failed("articles.corrections", "newsdedup.corrections", &denied)
        });
        assert!(
            message.contains("grant the service's principal Read on topic articles.corrections")
                && message.contains("newsdedup.corrections"),
            "{message}"
        );
        let rendered = handle.render();
        assert!(
            rendered.contains(
                "newsdedup_corrections_fetch_errors_total{code=\"TopicAuthorizationFailed\"} 1"
            ),
            "{rendered}"
        );
    }

    /// A client that cannot be created does not echo a secret: librdkafka reports a property it
    /// does not know (here a Java client's setting) with its value.
    #[test]
    fn a_client_creation_error_does_not_show_a_secret() {
        let properties = BTreeMap::from([
            ("bootstrap.servers".to_owned(), "localhost:9".to_owned()),
            (
                "ssl.truststore.password".to_owned(),
                "hunter2-secret".to_owned(),
            ),
        ]);
        let corrections = format!(
            "{:#}",
            create(&properties, "newsdedup.corrections")
                .err()
                .expect("refused")
        );
        let audit = format!(
            "{:#}",
            super::super::audit_source::create(&properties)
                .err()
                .expect("refused")
        );
        for e in [corrections, audit] {
            assert!(e.contains("ssl.truststore.password"), "{e}");
            assert!(!e.contains("hunter2-secret"), "{e}");
        }
    }
}
