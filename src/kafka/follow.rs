//! Reading the service's own output topics (`articles.unique`, `articles.duplicate`) from the
//! positions an index stores: `index rebuild --brokers` (until caught up), `standby` (for ever)
//! and the catch-up of `run` on a standby's directory before it joins the group.
//!
//! Plain `assign` of every partition: no consumer group is joined and nothing is committed; the
//! position of each record read is written into the index with the article it carries
//! (`RestoreTarget::apply_restored`), which is what makes a restart resume exactly.
//!
//! "Caught up" means every partition is at or past the end (high watermark) it had when reading
//! started (or when `lag` last asked) and no record arrived for `QUIET`: a broker whose watermarks
//! are low (Tansu reports the base offset of the last batch + 1) would otherwise end the reading
//! before the last batch, and the quiet period lets those records arrive.
//!
//! The ends are asked again (`lag`) by a thread of their own with a client of their own, so a
//! partition whose leader does not answer never holds up the reading and applying of the others.

use crate::kafka::record::header_value;
use crate::restore::SourceRecord;
use crate::sketch::Sketch;
use anyhow::{Context, Result};
use parking_lot::Mutex;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::ClientConfig;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Metadata and watermark requests at the start.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How often, and how long for each partition, the ends thread asks.
const ENDS_EVERY: Duration = Duration::from_secs(2);
const ENDS_TIMEOUT: Duration = Duration::from_secs(5);
/// See the module documentation.
const QUIET: Duration = Duration::from_secs(2);

/// Where one partition is.
#[derive(Debug, Clone)]
struct PartitionState {
    /// The next offset to read.
    next: i64,
    /// The end (high watermark) when reading started, or when last asked.
    end: i64,
}

/// A reader of output topics from stored positions.
pub struct Follower {
    consumer: BaseConsumer,
    partitions: BTreeMap<(Arc<str>, i32), PartitionState>,
    /// Records still to read when reading started (by the watermarks then).
    pub remaining_at_start: i64,
    last_record: Instant,
    last_error: String,
    /// See `TopicSource::corrections_topic`.
    corrections_topic: Option<Arc<str>>,
    /// The reader's properties, for the ends thread's client.
    reader: BTreeMap<String, String>,
    /// Started by the first `lag`.
    ends: Option<Ends>,
}

/// The end (high watermark) of each (topic, partition).
type EndOffsets = BTreeMap<(Arc<str>, i32), i64>;

/// The latest end of each partition, asked by a thread of its own (see the module
/// documentation); it stops when this is dropped.
struct Ends {
    latest: Arc<Mutex<EndOffsets>>,
    stop: Arc<AtomicBool>,
}

impl Drop for Ends {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Ends {
    fn spawn(reader: &BTreeMap<String, String>, partitions: Vec<(Arc<str>, i32)>) -> Result<Ends> {
        let mut config = ClientConfig::new();
        for (k, v) in reader {
            config.set(k, v);
        }
        if let Some(id) = reader.get("client.id") {
            config.set("client.id", format!("{id}-ends"));
        }
        let client: BaseConsumer = config
            .create()
            .context("cannot create the Kafka client that asks the ends of the partitions")?;
        let latest = Arc::new(Mutex::new(BTreeMap::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (out, stopped) = (latest.clone(), stop.clone());
        std::thread::Builder::new()
            .name("follow-ends".into())
            .spawn(move || {
                let mut said = String::new();
                while !stopped.load(Ordering::Relaxed) {
                    for (topic, p) in &partitions {
                        match client.fetch_watermarks(topic, *p, ENDS_TIMEOUT) {
                            Ok((_, high)) => {
                                out.lock().insert((topic.clone(), *p), high);
                            }
                            Err(e) => {
                                let text = format!("{topic} [{p}]: {e}");
                                if text != said {
                                    tracing::warn!(
                                        "cannot read the end of {text} (its lag stays as last known; reading goes on)"
                                    );
                                    said = text;
                                }
                            }
                        }
                        if stopped.load(Ordering::Relaxed) {
                            return;
                        }
                    }
                    std::thread::sleep(ENDS_EVERY);
                }
            })
            .context("cannot start the thread that asks the ends of the partitions")?;
        Ok(Ends { latest, stop })
    }
}

impl Follower {
    /// Assigns every partition of `topics`, each at its stored position in `positions` or at its
    /// beginning. `properties`: librdkafka properties, `bootstrap.servers` included. A record
    /// that answers a record of `corrections_topic` is a correction's output: its
    /// [`SourceRecord::correction`] says which.
    pub fn start(
        properties: &BTreeMap<String, String>,
        topics: &[String],
        corrections_topic: Option<&str>,
        positions: &BTreeMap<(String, i32), i64>,
        client_id: &str,
    ) -> Result<Follower> {
        let reader = super::properties::plain_reader(properties, client_id);
        super::login::check(&reader)?;
        let mut config = ClientConfig::new();
        for (k, v) in &reader {
            config.set(k, v);
        }
        let consumer: BaseConsumer = config
            .create()
            .context("cannot create the Kafka consumer (check -X properties)")?;
        let mut tpl = TopicPartitionList::new();
        let mut partitions = BTreeMap::new();
        let mut remaining = 0;
        for topic in topics {
            let name: Arc<str> = Arc::from(topic.as_str());
            for p in super::topic_partitions(&consumer, topic)? {
                let (low, high) = consumer
                    .fetch_watermarks(topic, p, REQUEST_TIMEOUT)
                    .with_context(|| format!("cannot read the offsets of {topic} [{p}]"))?;
                let next = positions
                    .get(&(topic.clone(), p))
                    .copied()
                    .unwrap_or(low)
                    .max(low);
                remaining += (high - next).max(0);
                tpl.add_partition_offset(topic, p, Offset::Offset(next))
                    .with_context(|| format!("cannot assign {topic} [{p}]"))?;
                partitions.insert((name.clone(), p), PartitionState { next, end: high });
            }
        }
        consumer
            .assign(&tpl)
            .with_context(|| format!("cannot read {topics:?}"))?;
        Ok(Follower {
            consumer,
            partitions,
            remaining_at_start: remaining,
            last_record: Instant::now(),
            last_error: String::new(),
            corrections_topic: corrections_topic.map(Arc::from),
            reader,
            ends: None,
        })
    }

    /// The next record, or None when none arrived within `timeout`.
    pub fn poll(&mut self, timeout: Duration) -> Option<SourceRecord> {
        match self.consumer.poll(timeout)? {
            Err(e) => {
                let text = e.to_string();
                if text != self.last_error {
                    tracing::warn!("reading the output topics: {text} (retrying)");
                    self.last_error = text;
                }
                None
            }
            Ok(m) => {
                self.last_record = Instant::now();
                let topic = m.topic();
                let key = self
                    .partitions
                    .keys()
                    .find(|(t, p)| &**t == topic && *p == m.partition())
                    .cloned();
                let (name, partition) = key?;
                if let Some(state) = self.partitions.get_mut(&(name.clone(), partition)) {
                    state.next = m.offset() + 1;
                    state.end = state.end.max(state.next);
                }
                let (input_time_ms, sketch) = restore_headers(&m);
                let correction = self.corrections_topic.as_ref().and_then(|corrections| {
                    let (topic, partition, offset) = answered(&m)?;
                    (topic == **corrections).then(|| (corrections.clone(), partition, offset))
                });
                Some(SourceRecord {
                    correction,
                    bytes: m.payload().unwrap_or_default().to_vec(),
                    input_time_ms,
                    sketch,
                    timestamp_ms: m
                        .timestamp()
                        .to_millis()
                        .and_then(|t| u64::try_from(t).ok()),
                    position: Some((name, partition, m.offset())),
                })
            }
        }
    }

    /// Whether every partition has been read to its end (see the module documentation).
    pub fn caught_up(&self) -> bool {
        self.last_record.elapsed() >= QUIET && self.partitions.values().all(|s| s.next >= s.end)
    }

    /// Time since the last record arrived.
    pub fn idle(&self) -> Duration {
        self.last_record.elapsed()
    }

    /// How many records each partition is behind its latest known end: (topic, partition,
    /// records). Never waits for the broker: the ends are asked by a thread of their own (started
    /// by the first call), and a partition whose end cannot be read keeps its last known one. A
    /// broker with low watermarks makes this a lower bound.
    pub fn lag(&mut self) -> Result<Vec<(Arc<str>, i32, i64)>> {
        if self.ends.is_none() {
            let partitions = self.partitions.keys().cloned().collect();
            self.ends = Some(Ends::spawn(&self.reader, partitions)?);
        }
        let latest = self
            .ends
            .as_ref()
            .map(|ends| ends.latest.lock().clone())
            .unwrap_or_default();
        let mut out = Vec::with_capacity(self.partitions.len());
        for (key, state) in self.partitions.iter_mut() {
            if let Some(high) = latest.get(key) {
                state.end = state.end.max(*high);
            }
            out.push((key.0.clone(), key.1, (state.end - state.next).max(0)));
        }
        Ok(out)
    }

    /// The last error the client reported, if any ("" when none).
    pub fn last_error(&self) -> &str {
        &self.last_error
    }
}

/// What an output record's headers add to its value for a restore: the input record's timestamp
/// (`newsdedup.source.timestamp`) and the sketch of its text (`newsdedup.sketch`). A
/// malformed header counts as none (the sketch is then recomputed from the text).
fn restore_headers(m: &impl Message) -> (Option<i64>, Option<Sketch>) {
    let header = |key: &str| header_value(m, key);
    (
        header(crate::kafka::record::H_SOURCE_TIMESTAMP)
            .and_then(|v| std::str::from_utf8(v).ok()?.parse().ok()),
        header(crate::kafka::record::H_SKETCH).and_then(Sketch::from_bytes),
    )
}

/// The record an output record answers (headers `newsdedup.source.topic`, `.partition`,
/// `.offset`); None if one is missing or malformed.
fn answered(m: &impl Message) -> Option<(String, i32, i64)> {
    use crate::kafka::record::{H_SOURCE_OFFSET, H_SOURCE_PARTITION, H_SOURCE_TOPIC};
    let header = |key: &str| std::str::from_utf8(header_value(m, key)?).ok();
    Some((
        header(H_SOURCE_TOPIC)?.to_owned(),
        header(H_SOURCE_PARTITION)?.parse().ok()?,
        header(H_SOURCE_OFFSET)?.parse().ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::record::{H_SKETCH, H_SOURCE_TIMESTAMP};
    use rdkafka::message::{Header, OwnedHeaders, OwnedMessage, Timestamp};

    fn message(headers: &[(&str, &[u8])]) -> OwnedMessage {
        let headers = headers.iter().fold(OwnedHeaders::new(), |h, (key, value)| {
            h.insert(Header {
                key,
                value: Some(*value),
            })
        });
        OwnedMessage::new(
            Some(b"{}".to_vec()),
            None,
            "articles.unique".into(),
            Timestamp::NotAvailable,
            0,
            7,
            Some(headers),
        )
    }

    #[test]
    fn the_input_time_and_the_sketch_are_read_from_the_headers() {
        let fpr = crate::fingerprint::Fingerprinter::new(
            &crate::fingerprint::FingerprintConfig::default(),
        )
        .unwrap();
        let sketch = fpr.sketch("标题", "国家统计局今天发布十月份居民消费价格数据。");
        let bytes = sketch.to_bytes();
        let m = message(&[(H_SOURCE_TIMESTAMP, b"1700000000000"), (H_SKETCH, &bytes)]);
        assert_eq!(restore_headers(&m), (Some(1_700_000_000_000), Some(sketch)));
        // Malformed or absent: none (the restore recomputes the sketch).
        let m = message(&[(H_SOURCE_TIMESTAMP, b"soon"), (H_SKETCH, &bytes[1..])]);
        assert_eq!(restore_headers(&m), (None, None));
        assert_eq!(restore_headers(&message(&[])), (None, None));
    }
}
