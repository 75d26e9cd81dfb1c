//! `newsdedup correct release|merge`: an editor's correction, from the command line to where the
//! single writer applies it. The command finds the latest decided record of the article (and of
//! the merge's original) in the output topics (or a `batch` output file), refuses at once what
//! the index would refuse (with the reason and what to do instead), and writes a
//! [`Correction`] carrying the article to the corrections topic (or appends it to a file for
//! `batch --corrections`). With `--wait`, it then watches the output topics until the service
//! has published the corrected record, or the DLQ until it has refused the correction.
//!
//! The records it reads are the same the standby reads: the latest record of an id is its
//! current decision (a correction is published as that article's newest record).

use crate::article::Article;
use crate::correction::{Correction, Refusal};
use crate::index::{event_time, CorrectionKind};
use crate::kafka::record::{H_ERROR_MESSAGE, H_ERROR_REASON};
use crate::output::{self, DedupMember};
use crate::progress::Progress;
use crate::signing::SigningKey;
use crate::simhash::Fingerprint;
use crate::time::{format_rfc3339, TimeSpan, UtcOffset};
use anyhow::{bail, Context, Result};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::ClientConfig;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Exit status of `correct` when the correction was produced but not seen applied in time.
pub const EXIT_NOT_CONFIRMED: i32 = 3;

/// The correction was produced but its outcome not seen within the wait.
#[derive(Debug, thiserror::Error)]
#[error(
    "the correction was produced to {topic} [{partition}] at offset {offset}, but the service did \
     not publish its outcome within {secs} s: it is applied when `newsdedup run` reads it (is the \
     service running and deciding?); producing it again is harmless"
)]
pub struct NotConfirmed {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub secs: u64,
}

/// What the editor asked for.
#[derive(Debug, Clone)]
pub struct Request {
    pub kind: CorrectionKind,
    pub id: String,
    pub into: Option<String>,
    pub by: Option<String>,
    pub reason: Option<String>,
    /// The key the correction is signed with, if any (`signing`).
    pub signing_key: Option<SigningKey>,
    /// The service it is for (its consumer group: `Correction::audience`).
    pub audience: String,
    /// How long after it is made it may apply (`Correction::expires`; at most
    /// `correction::MAX_VALIDITY_MS`).
    pub valid_for_ms: i64,
}

/// The output topics, as the service writes them.
#[derive(Debug, Clone)]
pub struct Topics {
    pub unique: String,
    pub duplicate: String,
    pub dlq: String,
    pub corrections: String,
}

/// Where the decided records are read.
pub enum Records {
    /// The output topics (reader properties: `bootstrap.servers` included).
    Kafka {
        properties: BTreeMap<String, String>,
        topics: Topics,
    },
    /// A `batch` output file.
    File(PathBuf),
}

/// Where the correction goes.
pub enum Destination {
    /// The corrections topic (writer properties), then waiting up to `wait` for the outcome.
    Kafka {
        reader: BTreeMap<String, String>,
        writer: BTreeMap<String, String>,
        topics: Topics,
        wait: Duration,
    },
    /// Appended to a JSONL file for `batch --corrections`.
    File(PathBuf),
}

/// How reading and checking behave.
#[derive(Debug, Clone, Copy)]
pub struct Rules {
    /// The retention window of the index (`[index] retention`).
    pub retention: Option<TimeSpan>,
    /// The UTC offset of a `published_at` without one.
    pub published_at_offset: UtcOffset,
    pub max_record_bytes: usize,
    /// Print progress to stderr while reading.
    pub progress: bool,
    /// Read the output topics only from the records of this time on (Unix ms; None: from
    /// their beginning).
    pub since_ms: Option<i64>,
}

/// What became of a correction.
#[derive(Debug)]
pub enum Outcome {
    /// Refused before anything was written.
    Refused(Refusal),
    /// Appended to the file.
    Written(PathBuf),
    /// Produced; the outcome was not waited for (or not seen within the wait).
    Produced {
        partition: i32,
        offset: i64,
        waited: bool,
    },
    /// Applied by the service: the corrected record is at (topic, partition, offset).
    Applied {
        topic: String,
        partition: i32,
        offset: i64,
    },
    /// Refused by the service: the DLQ record's reason.
    RefusedByService { reason: String, message: String },
}

/// The current decision of an article, from its latest output record.
#[derive(Debug, Clone)]
struct Decided {
    record: Vec<u8>,
    decision: String,
    fingerprint: Fingerprint,
    match_id: Option<String>,
    event_ms: Option<i64>,
    /// The time of the correction in effect (`dedup.correction.at`), if one is: what a new
    /// correction follows.
    corrected_at: Option<String>,
    /// The record's timestamp (the latest one is the current decision).
    at: i64,
}

#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow)]
    id: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    dedup: Option<DedupMember<'a>>,
}

/// An output record as read: its value, its timestamp (None for a file line) and that of the
/// input it answers (header `newsdedup.source.timestamp`).
struct Seen<'a> {
    bytes: &'a [u8],
    timestamp_ms: Option<i64>,
    input_time_ms: Option<i64>,
}

/// The decided record of `rec` if it is one of `ids`' (cheap test first: the id's text).
fn decided_of(rec: &Seen, ids: &[String], rules: &Rules) -> Option<(String, Decided)> {
    if !ids.iter().any(|id| contains(rec.bytes, id.as_bytes())) {
        return None;
    }
    let head: Head = serde_json::from_slice(rec.bytes).ok()?;
    if !ids.iter().any(|id| id == head.id.as_ref()) {
        return None;
    }
    let dedup = head.dedup?;
    if dedup.decision == "invalid" {
        return None;
    }
    let published = Article::parse(rec.bytes, rules.max_record_bytes)
        .ok()
        .and_then(|a| a.published_ms(rules.published_at_offset));
    let at = rec.timestamp_ms.unwrap_or(i64::MAX);
    let event_ms = match (published, rec.input_time_ms, rec.timestamp_ms) {
        (None, None, None) => None,
        _ => Some(event_time(published, rec.input_time_ms, at).0),
    };
    Some((
        head.id.into_owned(),
        Decided {
            record: rec.bytes.to_vec(),
            decision: dedup.decision.into_owned(),
            fingerprint: dedup.fingerprint?,
            match_id: dedup.matched.map(|m| m.id.into_owned()),
            event_ms,
            corrected_at: dedup.correction.map(|c| c.at.into_owned()),
            at,
        },
    ))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(haystack, needle).is_some()
}

/// Keeps the later of two decided records of one id.
fn keep_latest(found: &mut BTreeMap<String, Decided>, id: String, d: Decided) {
    match found.get(&id) {
        Some(old) if old.at > d.at => {}
        _ => {
            found.insert(id, d);
        }
    }
}

/// The latest decided record of each of `ids`.
fn latest(records: &Records, ids: &[String], rules: &Rules) -> Result<BTreeMap<String, Decided>> {
    let mut found = BTreeMap::new();
    match records {
        Records::File(path) => {
            let file = std::fs::File::open(path)
                .with_context(|| format!("cannot open {}", path.display()))?;
            let mut reader = std::io::BufReader::new(file);
            let mut line = Vec::new();
            let mut n = 0i64;
            loop {
                line.clear();
                if reader.read_until(b'\n', &mut line)? == 0 {
                    break;
                }
                n += 1;
                let rec = Seen {
                    bytes: &line,
                    timestamp_ms: None,
                    input_time_ms: None,
                };
                if let Some((id, mut d)) = decided_of(&rec, ids, rules) {
                    // Lines are in decision order.
                    d.at = n;
                    keep_latest(&mut found, id, d);
                }
            }
        }
        Records::Kafka { properties, topics } => {
            // Each partition up to the end it had when the command started (records decided
            // later are not waited for: the service applies a correction only on top of the
            // correction in effect, whatever was read here).
            let consumer = crate::kafka::audit_source::create(properties)
                .context("cannot read the output topics")?;
            let mut progress =
                Progress::new("correct", rules.progress.then_some(Duration::from_secs(5)));
            for topic in [&topics.unique, &topics.duplicate] {
                let spans =
                    crate::kafka::audit_source::spans(&consumer, topic, rules.since_ms, None)?;
                crate::kafka::audit_source::scan(
                    &consumer,
                    topic,
                    &spans,
                    &mut progress,
                    &format!("reading the output records, looking for {}", ids.join(", ")),
                    |r| {
                        // A time lookup may start a few records early (at a batch's first).
                        if let (Some(since), Some(t)) = (rules.since_ms, r.timestamp) {
                            if t < since {
                                return;
                            }
                        }
                        let rec = Seen {
                            bytes: r.value,
                            timestamp_ms: r.timestamp,
                            input_time_ms: r.input_time_ms,
                        };
                        if let Some((id, d)) = decided_of(&rec, ids, rules) {
                            keep_latest(&mut found, id, d);
                        }
                    },
                )?;
            }
        }
    }
    Ok(found)
}

/// What the index would refuse, known from the records (the service checks again).
fn refusal(req: &Request, found: &BTreeMap<String, Decided>, rules: &Rules) -> Option<Refusal> {
    let Some(article) = found.get(&req.id) else {
        return Some(Refusal::UnknownId(req.id.clone()));
    };
    let now = crate::dedup::now_ms() as i64;
    let outside = |id: &str, d: &Decided| {
        let window = rules.retention?;
        let event = d.event_ms?;
        (event < now.saturating_sub(window.as_ms())).then(|| Refusal::OutsideRetention {
            id: id.to_owned(),
            event: format_rfc3339(event),
            window: window.to_string(),
            newest: format_rfc3339(now),
        })
    };
    if let Some(r) = outside(&req.id, article) {
        return Some(r);
    }
    match req.kind {
        CorrectionKind::Release => {
            (article.decision != "duplicate").then(|| Refusal::ReleaseOfUnique(req.id.clone()))
        }
        CorrectionKind::Merge => {
            let into = req.into.clone().unwrap_or_default();
            if into == req.id {
                return Some(Refusal::MergeIntoItself(req.id.clone()));
            }
            if article.decision == "duplicate" {
                return Some(Refusal::AlreadyDuplicate {
                    id: req.id.clone(),
                    of: article.match_id.clone().unwrap_or_default(),
                });
            }
            let Some(original) = found.get(&into) else {
                return Some(Refusal::UnknownId(into));
            };
            if let Some(r) = outside(&into, original) {
                return Some(r);
            }
            if original.decision == "duplicate" {
                return Some(Refusal::MergeIntoDuplicate {
                    id: req.id.clone(),
                    into,
                    original: original.match_id.clone().unwrap_or_default(),
                });
            }
            match (article.event_ms, original.event_ms) {
                (Some(a), Some(o)) if o > a => Some(Refusal::MergeIntoLater {
                    id: req.id.clone(),
                    into,
                    id_at: format_rfc3339(a),
                    into_at: format_rfc3339(o),
                }),
                _ => None,
            }
        }
    }
}

/// Makes the correction: see the module documentation.
pub fn correct(
    req: &Request,
    records: &Records,
    destination: &Destination,
    rules: &Rules,
) -> Result<(Option<Correction>, Outcome)> {
    let mut ids = vec![req.id.clone()];
    ids.extend(req.into.iter().cloned());
    let found = latest(records, &ids, rules)?;
    if let (Some(since), Records::Kafka { .. }) = (rules.since_ms, records) {
        if let Some(missing) = ids.iter().find(|id| !found.contains_key(*id)) {
            bail!(
                "no decided record of {missing:?} in the output topics since {}: give an earlier \
                 --since, or leave it out to read the topics from their beginning",
                format_rfc3339(since)
            );
        }
    }
    if let Some(r) = refusal(req, &found, rules) {
        return Ok((None, Outcome::Refused(r)));
    }
    let Some(article) = found.get(&req.id) else {
        return Ok((None, Outcome::Refused(Refusal::UnknownId(req.id.clone()))));
    };
    let Some(input) = output::input_text(&article.record) else {
        bail!(
            "the latest record of {:?} has no `dedup` member at its end: not written by newsdedup",
            req.id
        );
    };
    if !(1..=crate::correction::MAX_VALIDITY_MS).contains(&req.valid_for_ms) {
        bail!("--valid-for must be more than 0 and at most 31d");
    }
    let made_ms = crate::dedup::now_ms() as i64;
    let correction = Correction {
        kind: req.kind,
        id: req.id.clone(),
        into: req.into.clone(),
        by: req.by.clone(),
        reason: req.reason.clone(),
        at: format_rfc3339(made_ms),
        follows: article.corrected_at.clone(),
        audience: Some(req.audience.clone()),
        expires: Some(format_rfc3339(made_ms.saturating_add(req.valid_for_ms))),
        key_id: None,
        signature: None,
        fingerprint: article.fingerprint,
        article: String::from_utf8(input).context("the article's record is not UTF-8")?,
    };
    let correction = match &req.signing_key {
        Some(key) => correction.signed(key),
        None => correction,
    };
    let line = correction.to_json();
    // What the service will check again: refuse here what it would refuse anyway.
    if let Err(e) = Correction::parse(line.as_bytes()) {
        bail!("cannot write this correction: {e}");
    }
    let outcome = match destination {
        Destination::File(path) => {
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open {}", path.display()))?;
            writeln!(file, "{line}")
                .and_then(|()| file.sync_all())
                .with_context(|| format!("cannot write {}", path.display()))?;
            Outcome::Written(path.clone())
        }
        Destination::Kafka {
            reader,
            writer,
            topics,
            wait,
        } => {
            let watched = [
                topics.unique.clone(),
                topics.duplicate.clone(),
                topics.dlq.clone(),
            ];
            let watcher = if wait.is_zero() {
                None
            } else {
                Some(Watcher::at_end(reader, &watched)?)
            };
            let (partition, offset) = produce(writer, &topics.corrections, &req.id, &line)?;
            match watcher {
                None => Outcome::Produced {
                    partition,
                    offset,
                    waited: false,
                },
                Some(w) => {
                    w.outcome(&correction, &line, topics, *wait)?
                        .unwrap_or(Outcome::Produced {
                            partition,
                            offset,
                            waited: true,
                        })
                }
            }
        }
    };
    Ok((Some(correction), outcome))
}

/// Produces `value` keyed `key` to `topic` and waits for its acknowledgement.
fn produce(
    properties: &BTreeMap<String, String>,
    topic: &str,
    key: &str,
    value: &str,
) -> Result<(i32, i64)> {
    let mut config = ClientConfig::new();
    for (k, v) in properties {
        config.set(k, v);
    }
    config.set("client.id", "newsdedup-correct");
    let producer: BaseProducer<DeliveryContext> = config
        .create_with_context(DeliveryContext::default())
        .map_err(|e| crate::kafka::producer::redacted(e, properties))
        .context("cannot create the Kafka producer")?;
    producer
        .send(BaseRecord::to(topic).key(key).payload(value))
        .map_err(|(e, _)| e)
        .with_context(|| format!("cannot produce the correction to {topic}"))?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        producer.poll(Duration::from_millis(100));
        if let Some(result) = producer.context().result.lock().take() {
            return result.map_err(|e| anyhow::anyhow!("{topic} refused the correction: {e}"));
        }
        if Instant::now() >= deadline {
            bail!("the correction was not acknowledged by {topic} within 60 s: is the broker reachable? nothing was applied; run the command again");
        }
    }
}

/// Receives the delivery report of the one record produced.
#[derive(Default)]
struct DeliveryContext {
    result: parking_lot::Mutex<Option<Result<(i32, i64), String>>>,
}

impl rdkafka::ClientContext for DeliveryContext {}

impl rdkafka::producer::ProducerContext for DeliveryContext {
    type DeliveryOpaque = ();
    fn delivery(
        &self,
        report: &rdkafka::message::DeliveryResult<'_>,
        _opaque: Self::DeliveryOpaque,
    ) {
        let result = match report {
            Ok(m) => Ok((m.partition(), m.offset())),
            Err((e, _)) => Err(e.to_string()),
        };
        *self.result.lock() = Some(result);
    }
}

/// Watches the output topics from their ends for the outcome of one correction.
struct Watcher {
    consumer: BaseConsumer,
}

impl Watcher {
    fn at_end(properties: &BTreeMap<String, String>, topics: &[String]) -> Result<Watcher> {
        // The audit's reader: never a member of a group, never a commit (an end-of-partition
        // event is an error to `outcome`, which skips it).
        let consumer = crate::kafka::audit_source::create(properties)?;
        let mut tpl = TopicPartitionList::new();
        for topic in topics {
            let partitions =
                crate::kafka::topic_partitions_within(&consumer, topic, Duration::from_secs(30))?;
            for p in partitions {
                let (_, high) = consumer
                    .fetch_watermarks(topic, p, Duration::from_secs(30))
                    .with_context(|| format!("cannot read the end of {topic} [{p}]"))?;
                // Brokers with low watermarks (Tansu) report the last batch's base offset + 1:
                // start a little before; only the correction's own outcome is looked for.
                tpl.add_partition_offset(topic, p, Offset::Offset((high - 100).max(0)))?;
            }
        }
        consumer
            .assign(&tpl)
            .context("cannot read the output topics")?;
        Ok(Watcher { consumer })
    }

    /// The outcome of `correction` (whose record is `line`), if seen within `wait`.
    fn outcome(
        &self,
        correction: &Correction,
        line: &str,
        topics: &Topics,
        wait: Duration,
    ) -> Result<Option<Outcome>> {
        let deadline = Instant::now() + wait;
        while Instant::now() < deadline {
            let Some(Ok(m)) = self.consumer.poll(Duration::from_millis(200)) else {
                continue;
            };
            let payload = m.payload().unwrap_or_default();
            if m.topic() == topics.dlq {
                if payload == line.as_bytes() {
                    let header = |name: &str| {
                        crate::kafka::record::header_value(&m, name)
                            .map(|v| String::from_utf8_lossy(v).into_owned())
                            .unwrap_or_default()
                    };
                    return Ok(Some(Outcome::RefusedByService {
                        reason: header(H_ERROR_REASON),
                        message: header(H_ERROR_MESSAGE),
                    }));
                }
                continue;
            }
            if m.key() != Some(correction.id.as_bytes()) {
                continue;
            }
            let Ok(head) = serde_json::from_slice::<Head>(payload) else {
                continue;
            };
            // Identified by when the editor made it (`made_at`; records of earlier services
            // have only `at`).
            let ours = head.dedup.and_then(|d| d.correction).is_some_and(|c| {
                c.made_at.as_ref().unwrap_or(&c.at) == &correction.at && c.kind == correction.kind
            });
            if ours {
                return Ok(Some(Outcome::Applied {
                    topic: m.topic().to_owned(),
                    partition: m.partition(),
                    offset: m.offset(),
                }));
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The producer `correct` writes with does not echo a secret when it cannot be created.
    #[test]
    fn a_producer_creation_error_does_not_show_a_secret() {
        let properties = BTreeMap::from([
            ("bootstrap.servers".to_owned(), "localhost:9".to_owned()),
            (
                "ssl.truststore.password".to_owned(),
                "hunter2-secret".to_owned(),
            ),
        ]);
        let e = format!(
            "{:#}",
            produce(&properties, "articles.corrections", "a", "{}").expect_err("refused")
        );
        assert!(e.contains("ssl.truststore.password"), "{e}");
        assert!(!e.contains("hunter2-secret"), "{e}");
    }
}
