//! The output side: an [`OutputSink`] on rdkafka's `FutureProducer`. Each record's delivery
//! future is awaited by a tokio task that marks the input offset done in the tracker once the
//! broker has acknowledged it. Nothing is ever skipped: a failed delivery is produced again with
//! exponential backoff (logged), and a record the broker refuses as too large goes to the DLQ
//! instead (reason `oversized`, value truncated, source headers pointing at the original).

use super::config::Topics;
use super::engine::OutputSink;
use super::record::{self, OutputKind, OutputRecord, Ticket};
use super::tracker::OffsetTracker;
use super::ServiceClientContext;
use crate::metrics as m;
use parking_lot::Mutex;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord, Producer};
use rdkafka::ClientConfig;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub type OutputProducer = FutureProducer<ServiceClientContext>;

/// DLQ fallback values are cut to this size when the broker refuses a record as too large.
pub const FALLBACK_MAX_BYTES: usize = 64 * 1024;
const RETRY_BACKOFF_START: Duration = Duration::from_millis(200);
const RETRY_BACKOFF_MAX: Duration = Duration::from_secs(30);
const QUEUE_FULL_WAIT: Duration = Duration::from_millis(5);

pub fn create_producer(
    properties: &BTreeMap<String, String>,
    context: ServiceClientContext,
) -> Result<OutputProducer, KafkaError> {
    let mut config = ClientConfig::new();
    for (k, v) in properties {
        config.set(k, v);
    }
    config.create_with_context(context)
}

/// Marks input offsets done when their output is acknowledged.
pub struct Acks {
    pub tracker: Arc<Mutex<OffsetTracker>>,
    latency: metrics::Histogram,
    delivered: [metrics::Counter; 3],
    retries: metrics::Counter,
}

impl Acks {
    pub fn new(tracker: Arc<Mutex<OffsetTracker>>) -> Self {
        Acks {
            tracker,
            latency: metrics::histogram!(m::PROCESSING_LATENCY),
            delivered: [OutputKind::Unique, OutputKind::Duplicate, OutputKind::Dlq]
                .map(|k| metrics::counter!(m::RECORDS_DELIVERED, "kind" => k.as_str())),
            retries: metrics::counter!(m::DELIVERY_RETRIES),
        }
    }

    fn delivered(&self, kind: OutputKind, ticket: &Ticket) {
        self.delivered[kind as usize].increment(1);
        self.latency.record(ticket.received.elapsed().as_secs_f64());
        self.tracker
            .lock()
            .done(ticket.partition, ticket.epoch, ticket.offset);
    }
}

/// The producer-backed sink. `send` runs on the decision thread; deliveries are awaited on tokio.
pub struct ProducerSink {
    producer: OutputProducer,
    topics: Arc<Topics>,
    runtime: tokio::runtime::Handle,
    acks: Arc<Acks>,
    abandon: Arc<AtomicBool>,
}

impl ProducerSink {
    pub fn new(
        producer: OutputProducer,
        topics: Topics,
        runtime: tokio::runtime::Handle,
        acks: Arc<Acks>,
        abandon: Arc<AtomicBool>,
    ) -> Self {
        ProducerSink {
            producer,
            topics: Arc::new(topics),
            runtime,
            acks,
            abandon,
        }
    }
}

fn topic_of(topics: &Topics, kind: OutputKind) -> &str {
    match kind {
        OutputKind::Unique => &topics.unique,
        OutputKind::Duplicate => &topics.duplicate,
        OutputKind::Dlq => &topics.dlq,
    }
}

fn owned_headers(headers: &[(String, Vec<u8>)]) -> OwnedHeaders {
    headers.iter().fold(
        OwnedHeaders::new_with_capacity(headers.len()),
        |h, (k, v)| {
            h.insert(Header {
                key: k,
                value: Some(v),
            })
        },
    )
}

fn is_size_error(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(RDKafkaErrorCode::MessageSizeTooLarge) | Some(RDKafkaErrorCode::InvalidMessageSize)
    )
}

/// What to do with a record whose enqueue or delivery failed.
enum Next {
    /// The same record again (after a wait).
    Retry(OutputRecord),
    /// A replacement record (DLQ fallback), right away.
    Replace(OutputRecord),
}

fn on_failure(record: OutputRecord, error: &KafkaError) -> Next {
    if is_size_error(error) {
        let limit = if record.kind == OutputKind::Dlq {
            // Already a DLQ record: halve until it fits.
            (record.payload.len() / 2).min(FALLBACK_MAX_BYTES)
        } else {
            FALLBACK_MAX_BYTES
        };
        tracing::warn!(
            "the broker refused a {} record of {} bytes as too large ({error}); sending it to the DLQ truncated to {limit} bytes",
            record.kind.as_str(),
            record.payload.len()
        );
        Next::Replace(record::oversized_fallback(
            record,
            &error.to_string(),
            limit,
        ))
    } else {
        Next::Retry(record)
    }
}

fn try_enqueue(
    producer: &OutputProducer,
    topics: &Topics,
    record: &OutputRecord,
) -> Result<DeliveryFuture, KafkaError> {
    let mut fr: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(topic_of(topics, record.kind))
        .payload(record.payload.as_slice())
        .headers(owned_headers(&record.headers));
    if let Some(k) = &record.key {
        fr = fr.key(k.as_slice());
    }
    producer.send_result(fr).map_err(|(e, _)| e)
}

fn is_queue_full(e: &KafkaError) -> bool {
    matches!(e.rdkafka_error_code(), Some(RDKafkaErrorCode::QueueFull))
}

/// Enqueues from a plain thread, waiting while the local queue is full. Returns None if the
/// engine abandoned its work meanwhile.
fn enqueue_blocking(
    producer: &OutputProducer,
    topics: &Topics,
    mut record: OutputRecord,
    abandon: &AtomicBool,
) -> Option<(DeliveryFuture, OutputRecord)> {
    let mut backoff = RETRY_BACKOFF_START;
    loop {
        if abandon.load(Ordering::Relaxed) {
            return None;
        }
        match try_enqueue(producer, topics, &record) {
            Ok(f) => return Some((f, record)),
            Err(e) if is_queue_full(&e) => std::thread::sleep(QUEUE_FULL_WAIT),
            Err(e) => match on_failure(record, &e) {
                Next::Replace(r) => record = r,
                Next::Retry(r) => {
                    tracing::warn!(
                        "cannot produce to {}: {e}; retrying in {backoff:?}",
                        topic_of(topics, r.kind)
                    );
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(RETRY_BACKOFF_MAX);
                    record = r;
                }
            },
        }
    }
}

/// Awaits a delivery; produces again until the broker acknowledges the record.
async fn deliver(
    producer: OutputProducer,
    topics: Arc<Topics>,
    acks: Arc<Acks>,
    abandon: Arc<AtomicBool>,
    mut future: DeliveryFuture,
    mut record: OutputRecord,
    ticket: Ticket,
) {
    let mut backoff = RETRY_BACKOFF_START;
    loop {
        let error = match future.await {
            Ok(Ok(_delivery)) => {
                acks.delivered(record.kind, &ticket);
                return;
            }
            Ok(Err((e, _msg))) => e,
            // The producer was dropped (shutdown): never acknowledged, never committed.
            Err(_canceled) => return,
        };
        if abandon.load(Ordering::Relaxed) {
            return;
        }
        record = match on_failure(record, &error) {
            Next::Replace(r) => r,
            Next::Retry(r) => {
                acks.retries.increment(1);
                tracing::warn!(
                    "delivery to {} failed: {error}; producing it again in {backoff:?} (input {}/{} stays uncommitted until delivered)",
                    topic_of(&topics, r.kind),
                    ticket.partition,
                    ticket.offset
                );
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(RETRY_BACKOFF_MAX);
                r
            }
        };
        future = loop {
            if abandon.load(Ordering::Relaxed) {
                return;
            }
            match try_enqueue(&producer, &topics, &record) {
                Ok(f) => break f,
                Err(e) if is_queue_full(&e) => tokio::time::sleep(QUEUE_FULL_WAIT).await,
                Err(e) => match on_failure(record, &e) {
                    Next::Replace(r) => record = r,
                    Next::Retry(r) => {
                        tracing::warn!(
                            "cannot produce to {}: {e}; retrying in {backoff:?}",
                            topic_of(&topics, r.kind)
                        );
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(RETRY_BACKOFF_MAX);
                        record = r;
                    }
                },
            }
        };
    }
}

impl OutputSink for ProducerSink {
    fn send(&mut self, record: OutputRecord, ticket: Ticket) {
        let Some((future, record)) =
            enqueue_blocking(&self.producer, &self.topics, record, &self.abandon)
        else {
            return;
        };
        self.runtime.spawn(deliver(
            self.producer.clone(),
            self.topics.clone(),
            self.acks.clone(),
            self.abandon.clone(),
            future,
            record,
            ticket,
        ));
    }
}

/// Flushes the producer, waiting at most `timeout`.
pub fn flush(producer: &OutputProducer, timeout: Duration) -> Result<(), KafkaError> {
    producer.flush(timeout)
}
