//! The output side: an [`OutputSink`] on rdkafka's `FutureProducer`. Each record's delivery
//! future is awaited by a tokio task that marks the input offset done in the tracker once the
//! broker has acknowledged it. Nothing is ever skipped. Failures are classified:
//!
//! * retriable (broker down, leader change, timeouts): produced again with exponential backoff,
//!   for at most `max_retry` per record;
//! * too large: the record goes to the DLQ instead (reason `oversized`), as a record whose total
//!   size is bounded (`record::oversized_fallback`);
//! * permanent (unknown topic, authorization, fatal producer error, a refused fallback, retries
//!   exhausted): the engine is failed ([`RunnerHandle::fail`]), so the service stops deciding,
//!   reports it on /health, commits what is done and exits non-zero. The record is never
//!   acknowledged, so no offset passes it.

use super::engine::OutputSink;
use super::record::{self, OutputKind, OutputRecord, Ticket};
use super::tracker::OffsetTracker;
use super::ServiceClientContext;
use crate::metrics as m;
use crate::runner::RunnerHandle;
use parking_lot::Mutex;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord, Producer};
use rdkafka::ClientConfig;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Output topics, by kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topics {
    pub unique: String,
    pub duplicate: String,
    pub dlq: String,
}

pub type OutputProducer = FutureProducer<ServiceClientContext>;

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
    config
        .create_with_context(context)
        .map_err(|e| redacted(e, properties))
}

/// A client creation error with secret property values taken out: librdkafka may quote a value,
/// and a property it does not know (a misspelt secret, `ssl.truststore.password` from a Java
/// client's settings) is reported with its value.
pub(crate) fn redacted(e: KafkaError, properties: &BTreeMap<String, String>) -> KafkaError {
    use super::properties::{is_secret_property, redact_secrets};
    match e {
        KafkaError::ClientCreation(message) => {
            KafkaError::ClientCreation(redact_secrets(&message, properties))
        }
        KafkaError::ClientConfig(code, description, key, value) => {
            let value = if is_secret_property(&key) {
                "<redacted>".to_owned()
            } else {
                redact_secrets(&value, properties)
            };
            KafkaError::ClientConfig(code, redact_secrets(&description, properties), key, value)
        }
        other => other,
    }
}

/// Marks input offsets done when their output is acknowledged.
pub struct Acks {
    pub tracker: Arc<Mutex<OffsetTracker>>,
    health: Arc<super::Health>,
    latency: metrics::Histogram,
    delivered: [metrics::Counter; 3],
    retries: metrics::Counter,
    /// Where the acknowledgements of corrections go (the corrections loop, which commits their
    /// offsets): (partition, offset, topic kind).
    corrections: Option<crossbeam_channel::Sender<(i32, i64, OutputKind)>>,
}

impl Acks {
    pub fn new(tracker: Arc<Mutex<OffsetTracker>>, health: Arc<super::Health>) -> Self {
        Acks {
            tracker,
            health,
            latency: metrics::histogram!(m::PROCESSING_LATENCY),
            delivered: [OutputKind::Unique, OutputKind::Duplicate, OutputKind::Dlq]
                .map(|k| metrics::counter!(m::RECORDS_DELIVERED, "kind" => k.as_str())),
            retries: metrics::counter!(m::DELIVERY_RETRIES),
            corrections: None,
        }
    }

    /// Sends the acknowledgements of corrections to `tx`.
    pub fn with_corrections(
        mut self,
        tx: crossbeam_channel::Sender<(i32, i64, OutputKind)>,
    ) -> Self {
        self.corrections = Some(tx);
        self
    }

    /// The output of `ticket`'s input is acknowledged (by the broker, or written by a dry run).
    pub fn delivered(&self, kind: OutputKind, ticket: &Ticket) {
        self.delivered[kind as usize].increment(1);
        self.latency.record(ticket.received.elapsed().as_secs_f64());
        if ticket.correction {
            if let Some(tx) = &self.corrections {
                let _ = tx.send((ticket.partition, ticket.offset, kind));
            }
        } else {
            self.tracker
                .lock()
                .done(ticket.partition, ticket.epoch, ticket.offset);
        }
        self.health.progressed();
    }
}

/// The producer-backed sink. `send` runs on the decision thread; deliveries are awaited on tokio.
pub struct ProducerSink {
    out: Arc<Output>,
    runtime: tokio::runtime::Handle,
    acks: Arc<Acks>,
}

/// What every delivery needs: the client, where records go, and whom to tell when one can never
/// be delivered.
struct Output {
    producer: OutputProducer,
    topics: Topics,
    abandon: Arc<AtomicBool>,
    /// Longest time one record is retried (None: for ever).
    max_retry: Option<Duration>,
    /// Set by `attach`, before the first record.
    engine: std::sync::OnceLock<RunnerHandle>,
}

impl ProducerSink {
    /// `max_retry`: how long one record's retriable failures are retried before the service
    /// stops (zero: for ever).
    pub fn new(
        producer: OutputProducer,
        topics: Topics,
        runtime: tokio::runtime::Handle,
        acks: Arc<Acks>,
        abandon: Arc<AtomicBool>,
        max_retry: Duration,
    ) -> Self {
        ProducerSink {
            out: Arc::new(Output {
                producer,
                topics,
                abandon,
                max_retry: (!max_retry.is_zero()).then_some(max_retry),
                engine: std::sync::OnceLock::new(),
            }),
            runtime,
            acks,
        }
    }
}

impl Output {
    fn abandoned(&self) -> bool {
        self.abandon.load(Ordering::Relaxed)
    }

    /// A record that can never be delivered: stop the service (see the module docs).
    fn fail(&self, why: String) {
        match self.engine.get() {
            Some(engine) => {
                engine.fail(why);
            }
            None => tracing::error!("{why}"),
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

/// Why an error can never go away by producing the same record again, if it cannot.
fn permanent(e: &KafkaError) -> Option<&'static str> {
    use RDKafkaErrorCode as C;
    Some(match e.rdkafka_error_code()? {
        C::UnknownTopic | C::UnknownTopicOrPartition => {
            "the topic does not exist and the broker does not create it: create the topic, then restart the service"
        }
        C::TopicAuthorizationFailed
        | C::ClusterAuthorizationFailed
        | C::SaslAuthenticationFailed
        | C::Authentication => {
            "the broker refuses this client: fix its ACLs or credentials, then restart the service"
        }
        C::Fatal => "the producer hit a fatal error: restart the service",
        C::InvalidTopic => "the topic name is invalid: fix the topic setting",
        C::PolicyViolation | C::InvalidRequiredAcks | C::InvalidConfig => {
            "the broker refuses the producer's configuration: fix the -X properties"
        }
        _ => return None,
    })
}

/// What to do with a record whose enqueue or delivery failed.
enum Next {
    /// The same record again (after a wait).
    Retry(OutputRecord),
    /// A replacement record (DLQ fallback), right away.
    Replace(OutputRecord),
    /// Never deliverable: the reason (the record is dropped unacknowledged).
    Fail(String),
}

fn on_failure(
    out: &Output,
    record: OutputRecord,
    error: &KafkaError,
    ticket: &Ticket,
    first_failure: Instant,
) -> Next {
    let topic = topic_of(&out.topics, record.kind);
    let input = format!("input {}/{}", ticket.partition, ticket.offset);
    if is_size_error(error) {
        if record::is_fallback(&record) {
            return Next::Fail(format!(
                "the broker refused even the size-bounded dead-letter record of {input} ({} bytes) as too large ({error}): check max.message.bytes of topic {topic}; stopped, nothing after {input} is committed",
                record::record_bytes(&record)
            ));
        }
        tracing::warn!(
            "the broker refused the {} record of {input} ({} bytes) as too large ({error}); sending it to {} cut to at most {} bytes of value",
            record.kind.as_str(),
            record::record_bytes(&record),
            out.topics.dlq,
            record::FALLBACK_MAX_VALUE_BYTES
        );
        return Next::Replace(record::oversized_fallback(record, &error.to_string()));
    }
    if let Some(why) = permanent(error) {
        return Next::Fail(format!(
            "cannot produce the output of {input} to {topic}: {error}: {why}; stopped, nothing after {input} is committed"
        ));
    }
    if let Some(max) = out.max_retry {
        if first_failure.elapsed() >= max {
            return Next::Fail(format!(
                "cannot produce the output of {input} to {topic}: still failing after {max:?} of retries (last error: {error}); stopped, nothing after {input} is committed (raise max_retry_ms to wait longer)"
            ));
        }
    }
    Next::Retry(record)
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

/// What [`enqueue_blocking`] did with a record.
enum Enqueued {
    /// In the producer's queue.
    Sent(DeliveryFuture, OutputRecord),
    /// Refused at once as too large: the decided article must be taken out of the index before
    /// its DLQ fallback goes out, which only the runtime can wait for (the apply thread may be
    /// the one calling).
    TakeBackFirst {
        fallback: OutputRecord,
        indexed: record::Indexed,
    },
}

/// Enqueues from a plain thread, waiting while the local queue is full. Returns None if the
/// engine abandoned its work meanwhile, or the record can never be delivered.
fn enqueue_blocking(out: &Output, mut record: OutputRecord, ticket: &Ticket) -> Option<Enqueued> {
    let mut backoff = RETRY_BACKOFF_START;
    let mut first_failure = None;
    loop {
        if out.abandoned() {
            return None;
        }
        match try_enqueue(&out.producer, &out.topics, &record) {
            Ok(f) => return Some(Enqueued::Sent(f, record)),
            Err(e) if is_queue_full(&e) => std::thread::sleep(QUEUE_FULL_WAIT),
            Err(e) => {
                let since = *first_failure.get_or_insert_with(Instant::now);
                let indexed = record.indexed.clone();
                match on_failure(out, record, &e, ticket, since) {
                    Next::Replace(fallback) => match indexed {
                        Some(indexed) => {
                            return Some(Enqueued::TakeBackFirst { fallback, indexed })
                        }
                        None => record = fallback,
                    },
                    Next::Retry(r) => {
                        tracing::warn!(
                            "cannot produce to {}: {e}; retrying in {backoff:?}",
                            topic_of(&out.topics, r.kind)
                        );
                        std::thread::sleep(backoff);
                        backoff = (backoff * 2).min(RETRY_BACKOFF_MAX);
                        record = r;
                    }
                    Next::Fail(why) => {
                        out.fail(why);
                        return None;
                    }
                }
            }
        }
    }
}

/// Awaits a delivery; produces again until the broker acknowledges the record, or fails the
/// engine if it never can.
async fn deliver(
    out: Arc<Output>,
    acks: Arc<Acks>,
    mut future: DeliveryFuture,
    mut record: OutputRecord,
    ticket: Ticket,
) {
    let mut backoff = RETRY_BACKOFF_START;
    let mut first_failure = None;
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
        if out.abandoned() {
            return;
        }
        let since = *first_failure.get_or_insert_with(Instant::now);
        let indexed = record.indexed.clone();
        record = match on_failure(&out, record, &error, &ticket, since) {
            Next::Replace(r) => {
                // The decided article will never be in its topic: take it out of the index first
                // (durably), so the offset is never committed with it indexed; a correction's
                // record is undone instead (its article was published before).
                if let Some(indexed) = indexed {
                    if let Err(why) = take_back(&out, indexed).await {
                        out.fail(why);
                        return;
                    }
                }
                r
            }
            Next::Retry(r) => {
                acks.retries.increment(1);
                tracing::warn!(
                    "delivery to {} failed: {error}; producing it again in {backoff:?} (input {}/{} stays uncommitted until delivered)",
                    topic_of(&out.topics, r.kind),
                    ticket.partition,
                    ticket.offset
                );
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(RETRY_BACKOFF_MAX);
                r
            }
            Next::Fail(why) => {
                out.fail(why);
                return;
            }
        };
        match enqueue_async(&out, record, &ticket, since).await {
            Some((f, r)) => (future, record) = (f, r),
            None => return,
        }
    }
}

/// Enqueues from the runtime, waiting while the local queue is full; a decided article whose
/// record is replaced by its DLQ fallback is taken out of the index first. None if the engine
/// abandoned its work meanwhile, or the record can never be delivered.
async fn enqueue_async(
    out: &Output,
    mut record: OutputRecord,
    ticket: &Ticket,
    first_failure: Instant,
) -> Option<(DeliveryFuture, OutputRecord)> {
    let mut backoff = RETRY_BACKOFF_START;
    loop {
        if out.abandoned() {
            return None;
        }
        match try_enqueue(&out.producer, &out.topics, &record) {
            Ok(f) => return Some((f, record)),
            Err(e) if is_queue_full(&e) => tokio::time::sleep(QUEUE_FULL_WAIT).await,
            Err(e) => {
                let indexed = record.indexed.clone();
                match on_failure(out, record, &e, ticket, first_failure) {
                    Next::Replace(fallback) => {
                        if let Some(indexed) = indexed {
                            if let Err(why) = take_back(out, indexed).await {
                                out.fail(why);
                                return None;
                            }
                        }
                        record = fallback;
                    }
                    Next::Retry(r) => {
                        tracing::warn!(
                            "cannot produce to {}: {e}; retrying in {backoff:?}",
                            topic_of(&out.topics, r.kind)
                        );
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(RETRY_BACKOFF_MAX);
                        record = r;
                    }
                    Next::Fail(why) => {
                        out.fail(why);
                        return None;
                    }
                }
            }
        }
    }
}

/// Longest wait for the decision thread to withdraw an article.
const WITHDRAW_TIMEOUT: Duration = Duration::from_secs(60);

/// [`undo`] off the async runtime (it blocks on the decision thread); the failure to report if
/// it cannot be done.
async fn take_back(out: &Output, indexed: record::Indexed) -> Result<(), String> {
    let Some(engine) = out.engine.get().cloned() else {
        return Err(format!(
            "cannot take article {:?} back from the index: no decision stage attached",
            indexed.id
        ));
    };
    let id = indexed.id.clone();
    match tokio::task::spawn_blocking(move || undo(&engine, indexed, WITHDRAW_TIMEOUT)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!(
            "cannot take article {id:?}, whose output the broker refused, back from the index: {e}; stopped, nothing after it is committed"
        )),
        Err(e) => Err(format!("taking article {id:?} back from the index failed: {e}")),
    }
}

/// What the index must forget when the output record of `indexed` can never be published, so
/// that it agrees with the output topics (what a standby or a rebuild reads): exactly what its
/// decision wrote (a new article withdrawn, a revision's previous version put back, a
/// correction reverted), nothing when it wrote nothing (a replay of a published version).
/// Blocks on the decision thread for at most `timeout`; true if the index changed.
pub fn undo(
    engine: &RunnerHandle,
    indexed: record::Indexed,
    timeout: Duration,
) -> Result<bool, crate::runner::ControlError> {
    match indexed.written {
        Some(write) => engine.undo(&indexed.id, write, timeout),
        None => Ok(false),
    }
}

impl OutputSink for ProducerSink {
    fn attach(&mut self, engine: &RunnerHandle) {
        let _ = self.out.engine.set(engine.clone());
    }

    fn send(&mut self, record: OutputRecord, ticket: Ticket) {
        let Some(enqueued) = enqueue_blocking(&self.out, record, &ticket) else {
            return;
        };
        let (out, acks) = (self.out.clone(), self.acks.clone());
        self.runtime.spawn(async move {
            // A panic here would leave the record in flight for ever: fail visibly instead.
            let _guard = out.engine.get().map(|e| e.fail_on_panic("delivery"));
            let (future, record) = match enqueued {
                Enqueued::Sent(future, record) => (future, record),
                Enqueued::TakeBackFirst { fallback, indexed } => {
                    if let Err(why) = take_back(&out, indexed).await {
                        out.fail(why);
                        return;
                    }
                    match enqueue_async(&out, fallback, &ticket, Instant::now()).await {
                        Some(sent) => sent,
                        None => return,
                    }
                }
            };
            deliver(out, acks, future, record, ticket).await
        });
    }
}

/// Flushes the producer, waiting at most `timeout`.
pub fn flush(producer: &OutputProducer, timeout: Duration) -> Result<(), KafkaError> {
    producer.flush(timeout)
}
