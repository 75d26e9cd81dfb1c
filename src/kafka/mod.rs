//! The Kafka edge: `newsdedup run` reads `articles.raw`, decides each record with the core
//! (`pipeline::prepare` in parallel, `pipeline::decide` on one thread), writes it to
//! `articles.unique` / `articles.duplicate` / `articles.dlq`, and commits an input offset only
//! once that record and every earlier one of its partition are in the index (WAL synced) and
//! their outputs are acknowledged by the broker.
//!
//! ```text
//!  consumer thread ── submit ──► engine: prepare pool ─► reorder ─► decide thread ── send ──► producer
//!   (BaseConsumer,                 (any order)            (seq)      (Deduper<RocksIndex>)     (FutureProducer)
//!    rebalance cb,                                                                                │ delivery
//!    committer)  ◄──────────── tracker (per-partition done offsets) ◄── ack task (tokio) ◄─────────┘
//! ```
//!
//! * [`tracker`]: which offsets are done and committable (pure).
//! * [`record`]: input message / output record / headers (pure).
//! * [`engine`]: `run`'s configuration of the runner: prepare, decide, group commit, sink (no Kafka client).
//! * [`producer`]: the `OutputSink` on rdkafka, with delivery retries.
//! * [`consumer`]: the consumer's shared state, client and context; bounded by
//!   [`consumer::Bounds`] for `replay`.
//! * [`poll_loop`]: the consumer loop, backpressure, the drain and final commit.
//! * [`commit`]: the committer thread and `commit_done` (sync, then commit).
//! * [`rebalance`]: the rebalance callbacks.
//! * [`group_rules`]: the group rules, the pause state, the falling-behind check.
//! * [`corrections`]: the corrections topic, whose records `run` hands to the engine.
//! * [`range`]: where `replay` starts and stops in each partition.
//! * [`stop`]: the shutdown budget and its phases' deadlines (pure, but for two thread helpers).
//! * [`behind`]: a member that fetches yet falls behind (a broker handing out too little) says so.

pub mod audit_source;
pub mod behind;
pub mod commit;
pub mod consumer;
pub mod corrections;
pub mod engine;
pub mod exclusive;
pub mod follow;
pub mod group;
pub mod group_rules;
pub mod login;
pub mod poll_loop;
pub mod producer;
pub mod properties;
pub mod range;
pub mod rebalance;
pub mod record;
pub mod stop;
pub mod tracker;
pub mod watch;

use crate::metrics::Asker;
use parking_lot::Mutex;
use rdkafka::client::ClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Lifecycle state reported by `/health`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum State {
    Starting = 0,
    Running = 1,
    Draining = 2,
    Failed = 3,
    Stopped = 4,
}

impl State {
    fn from_u8(v: u8) -> State {
        match v {
            1 => State::Running,
            2 => State::Draining,
            3 => State::Failed,
            4 => State::Stopped,
            _ => State::Starting,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            State::Starting => "starting",
            State::Running => "running",
            State::Draining => "draining",
            State::Failed => "failed",
            State::Stopped => "stopped",
        }
    }
}

/// Health of the running service, shared by the consumer loop, the Kafka clients' callbacks and
/// the HTTP endpoints.
#[derive(Debug)]
pub struct Health {
    state: AtomicU8,
    broker_up: AtomicBool,
    started: Instant,
    last_poll_ms: AtomicU64,
    /// When a record was last finished (its output acknowledged), ms since `started`.
    last_progress_ms: AtomicU64,
    /// Records in flight with no progress for this long (broker up) fail liveness.
    progress_timeout: Duration,
    pub assigned: AtomicUsize,
    pub in_flight: AtomicUsize,
    /// How long this member has fetched nothing while records wait in the input, and what it
    /// makes of that (`exclusive::Waiting`, set by the consumer loop).
    waiting: Mutex<exclusive::WaitState>,
    /// Whether this member falls behind although it fetches (`behind::Behind`, set by the
    /// consumer loop).
    behind: Mutex<behind::BehindState>,
    failure: Mutex<Option<String>>,
    last_broker_error: Mutex<Option<String>>,
    /// The last broker error is a refused SASL login (until a broker is reachable again): the
    /// "all brokers down" that follows it must not hide the cause.
    login_refused: AtomicBool,
    /// Last time each (client, error code) was logged, to rate-limit repeated errors.
    logged: Mutex<HashMap<String, Instant>>,
}

/// A consumer loop that has not polled for this long is reported unhealthy.
const STALL: Duration = Duration::from_secs(30);
/// Repeated librdkafka errors of one kind are logged at most this often.
const ERROR_LOG_EVERY: Duration = Duration::from_secs(10);

impl Health {
    pub fn new(progress_timeout: Duration) -> Self {
        Health {
            state: AtomicU8::new(State::Starting as u8),
            // Not up until a broker has answered: a service that cannot log in, or whose
            // brokers are all away from its start, is never ready.
            broker_up: AtomicBool::new(false),
            started: Instant::now(),
            last_poll_ms: AtomicU64::new(0),
            last_progress_ms: AtomicU64::new(0),
            progress_timeout,
            assigned: AtomicUsize::new(0),
            waiting: Mutex::new(exclusive::WaitState::default()),
            behind: Mutex::new(behind::BehindState::default()),
            in_flight: AtomicUsize::new(0),
            failure: Mutex::new(None),
            last_broker_error: Mutex::new(None),
            login_refused: AtomicBool::new(false),
            logged: Mutex::new(HashMap::new()),
        }
    }
}

impl Health {
    pub fn state(&self) -> State {
        State::from_u8(self.state.load(Ordering::Relaxed))
    }

    pub fn set_state(&self, s: State) {
        self.state.store(s as u8, Ordering::Relaxed);
    }

    pub fn fail(&self, why: String) {
        *self.failure.lock() = Some(why);
        self.set_state(State::Failed);
    }

    pub fn polled(&self) {
        self.last_poll_ms
            .store(self.started.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// A record was finished (its output acknowledged).
    pub fn progressed(&self) {
        self.last_progress_ms
            .store(self.started.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    fn progress_age(&self) -> Duration {
        let last = self.last_progress_ms.load(Ordering::Relaxed);
        self.started
            .elapsed()
            .saturating_sub(Duration::from_millis(last))
    }

    /// Records wait while the broker is up, yet none has finished for `progress_timeout`.
    fn stuck(&self) -> bool {
        self.in_flight.load(Ordering::Relaxed) > 0
            && self.broker_is_up()
            && self.progress_age() > self.progress_timeout
    }

    pub fn set_waiting(&self, state: exclusive::WaitState) {
        *self.waiting.lock() = state;
    }

    pub fn set_behind(&self, state: behind::BehindState) {
        *self.behind.lock() = state;
    }

    pub fn broker_ok(&self) {
        self.login_refused.store(false, Ordering::Relaxed);
        if !self.broker_up.swap(true, Ordering::Relaxed) {
            if self.last_broker_error.lock().is_some() {
                tracing::info!("Kafka broker reachable again");
            }
            metrics::gauge!(crate::metrics::BROKER_UP).set(1.0);
        }
    }

    pub fn broker_down(&self, why: String) {
        self.broker_up.store(false, Ordering::Relaxed);
        metrics::gauge!(crate::metrics::BROKER_UP).set(0.0);
        *self.last_broker_error.lock() = Some(why);
    }

    /// The broker refused the SASL login: said until a broker is reachable again, whatever
    /// "all brokers down" follows.
    pub fn login_refused(&self, why: String) {
        self.broker_down(why);
        self.login_refused.store(true, Ordering::Relaxed);
    }

    pub fn broker_is_up(&self) -> bool {
        self.broker_up.load(Ordering::Relaxed)
    }

    /// True if a message of this kind should be logged now (at most once per 10 s per kind).
    pub fn should_log(&self, kind: &str) -> bool {
        let mut logged = self.logged.lock();
        match logged.get(kind) {
            Some(t) if t.elapsed() < ERROR_LOG_EVERY => false,
            _ => {
                logged.insert(kind.to_owned(), Instant::now());
                true
            }
        }
    }

    fn poll_age(&self) -> Duration {
        let last = self.last_poll_ms.load(Ordering::Relaxed);
        self.started
            .elapsed()
            .saturating_sub(Duration::from_millis(last))
    }

    /// The answer's body: the status and the counts for anyone, the texts (see [`Asker`]) for
    /// a client on the loopback only.
    fn body(&self, status: &str, asker: Asker) -> String {
        let waiting = self.waiting.lock().clone();
        let mut body = serde_json::json!({
            "status": status,
            "state": self.state().as_str(),
            "broker": if self.broker_is_up() { "up" } else { "unreachable" },
            "assigned_partitions": self.assigned.load(Ordering::Relaxed),
            "in_flight": self.in_flight.load(Ordering::Relaxed),
            "last_poll_age_ms": self.poll_age().as_millis() as u64,
            "last_progress_age_ms": self.progress_age().as_millis() as u64,
            "waiting_ms": waiting.waited.map(|w| w.as_millis() as u64),
        });
        let texts = [
            ("last_broker_error", self.last_broker_error.lock().clone()),
            ("failure", self.failure.lock().clone()),
            ("waiting_for", waiting.what),
            ("falling_behind", self.behind.lock().what.clone()),
        ];
        if let Some(fields) = body.as_object_mut() {
            match asker {
                Asker::Loopback => {
                    for (key, text) in texts {
                        fields.insert(key.to_owned(), text.into());
                    }
                }
                Asker::Remote => {
                    let hidden = texts.iter().any(|(_, text)| text.is_some());
                    if hidden {
                        fields.insert(
                            "detail".to_owned(),
                            "in the log, and in this answer to a client on the loopback".into(),
                        );
                    }
                }
            }
        }
        body.to_string()
    }

    /// Liveness: 200 unless the service failed, its consumer loop stalled, records wait in
    /// flight without progress while the broker is up, this member has fetched nothing for
    /// `progress_timeout` while records wait in the input (`waiting`), or it fetches yet the
    /// records waiting beyond its position have not shrunk for that long (`falling_behind`).
    pub fn liveness(&self, asker: Asker) -> (u16, String) {
        let state = self.state();
        if state == State::Failed {
            return (503, self.body("failed", asker));
        }
        if state == State::Running && self.poll_age() > STALL {
            return (503, self.body("stalled", asker));
        }
        if state == State::Running && self.stuck() {
            return (503, self.body("no_progress", asker));
        }
        if state == State::Running && self.waiting.lock().unhealthy {
            return (503, self.body("waiting", asker));
        }
        if state == State::Running && self.behind.lock().unhealthy {
            return (503, self.body("falling_behind", asker));
        }
        (200, self.body("ok", asker))
    }

    /// Readiness: 200 while running with a reachable broker, unless this member has fetched
    /// nothing for a session timeout while records wait in the input, or falls behind although
    /// it fetches.
    pub fn readiness(&self, asker: Asker) -> (u16, String) {
        if self.state() == State::Running
            && self.broker_is_up()
            && !self.waiting.lock().unready
            && !self.behind.lock().unready
        {
            (200, self.body("ready", asker))
        } else {
            (503, self.body("not_ready", asker))
        }
    }
}

/// Client context of both Kafka clients: routes librdkafka errors to the log (rate-limited),
/// the metrics and the health state.
#[derive(Clone)]
pub struct ServiceClientContext {
    pub client: &'static str,
    pub health: Arc<Health>,
}

impl ServiceClientContext {
    pub fn report(&self, error: &KafkaError, reason: &str) {
        let code = error.rdkafka_error_code();
        let code_name = code.map_or_else(|| "other".to_owned(), |c| format!("{c:?}"));
        metrics::counter!(crate::metrics::KAFKA_ERRORS, "client" => self.client, "code" => code_name.clone())
            .increment(1);
        let unreachable = matches!(
            code,
            Some(RDKafkaErrorCode::AllBrokersDown)
                | Some(RDKafkaErrorCode::BrokerTransportFailure)
                | Some(RDKafkaErrorCode::Resolve)
        );
        let refused_login = code == Some(RDKafkaErrorCode::Authentication);
        if refused_login {
            // The refusal arrives through the client's error callback (with librdkafka's reason)
            // or through a consumer's poll (the code alone): either way it names SASL.
            self.health.login_refused(format!(
                "the Kafka broker refused the SASL login ({error}: {reason}); {}",
                login::advice(reason)
            ));
        } else if matches!(code, Some(RDKafkaErrorCode::AllBrokersDown)) {
            // The refused login is the reason no broker is up: keep saying so.
            let refusal_stands =
                self.health.login_refused.load(Ordering::Relaxed) && !self.health.broker_is_up();
            if !refusal_stands {
                self.health.broker_down(format!("{error}: {reason}"));
            }
        }
        if !self
            .health
            .should_log(&format!("{}:{code_name}", self.client))
        {
            return;
        }
        if refused_login {
            tracing::warn!(
                "Kafka broker refused the SASL login ({} client: {reason}): {}; librdkafka keeps retrying: nothing is read or written until a login succeeds",
                self.client,
                login::advice(reason)
            );
        } else if unreachable {
            tracing::warn!(
                "Kafka broker unreachable ({} client: {error}: {reason}); librdkafka keeps reconnecting with backoff; nothing is skipped: work resumes where it stopped",
                self.client
            );
        } else {
            tracing::warn!("Kafka {} client error: {error}: {reason}", self.client);
        }
    }
}

impl ClientContext for ServiceClientContext {
    fn error(&self, error: KafkaError, reason: &str) {
        self.report(&error, reason);
    }
}

/// The partitions of `topic` (sorted), or an error naming the topic: shared by every reader of
/// a topic's partitions (audit, replay, the output-topic follower, the one-instance watch).
pub(crate) fn topic_partitions<C: rdkafka::consumer::ConsumerContext>(
    consumer: &impl rdkafka::consumer::Consumer<C>,
    topic: &str,
) -> anyhow::Result<Vec<i32>> {
    topic_partitions_within(consumer, topic, Duration::from_secs(30))
}

/// As [`topic_partitions`], waiting at most `timeout` for the broker.
pub(crate) fn topic_partitions_within<C: rdkafka::consumer::ConsumerContext>(
    consumer: &impl rdkafka::consumer::Consumer<C>,
    topic: &str,
    timeout: Duration,
) -> anyhow::Result<Vec<i32>> {
    use anyhow::Context;
    let md = consumer
        .fetch_metadata(Some(topic), timeout)
        .with_context(|| {
            format!("cannot read the metadata of topic {topic:?} (is the broker reachable?)")
        })?;
    let t = md
        .topics()
        .iter()
        .find(|t| t.name() == topic)
        .ok_or_else(|| anyhow::anyhow!("topic {topic:?} does not exist"))?;
    if let Some(e) = t.error() {
        anyhow::bail!("topic {topic:?} cannot be read: {e:?} (does it exist?)");
    }
    let mut ps: Vec<i32> = t.partitions().iter().map(|p| p.id()).collect();
    if ps.is_empty() {
        anyhow::bail!("topic {topic:?} does not exist or has no partitions");
    }
    ps.sort_unstable();
    Ok(ps)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refused login said through a consumer's poll (the code alone, no "SASL" in the text) is
    /// still what the health says after the "all brokers down" that follows; a broker reachable
    /// again clears it.
    #[test]
    fn a_refused_login_stays_the_reason_whichever_way_it_arrives() {
        let health = Arc::new(Health::new(Duration::from_secs(60)));
        let ctx = ServiceClientContext {
            client: "consumer",
            health: health.clone(),
        };
        let down = KafkaError::MessageConsumption(RDKafkaErrorCode::AllBrokersDown);
        let refused = KafkaError::MessageConsumption(RDKafkaErrorCode::Authentication);
        ctx.report(&down, "while consuming");
        ctx.report(&refused, "while consuming");
        ctx.report(&down, "while consuming");
        let said = health.last_broker_error.lock().clone().unwrap_or_default();
        assert!(
            said.contains("refused the SASL login") && said.contains("sasl.password"),
            "{said}"
        );
        health.broker_ok();
        ctx.report(&down, "while consuming");
        let said = health.last_broker_error.lock().clone().unwrap_or_default();
        assert!(said.contains("AllBrokersDown"), "{said}");
    }

    /// A broker's error text and a failure's cause go to a client on the loopback only; any other
    /// gets the status, the counts and where to look.
    #[test]
    fn texts_of_the_health_answer_go_to_the_loopback_only() {
        let health = Health::new(Duration::from_secs(60));
        health.broker_down("broker-7.internal:9092: Connection refused".to_owned());
        health.fail("cannot write the index /var/lib/newsdedup".to_owned());
        let (status, local) = health.liveness(Asker::Loopback);
        assert_eq!(status, 503);
        assert!(
            local.contains("broker-7.internal") && local.contains("/var/lib"),
            "{local}"
        );
        let (status, remote) = health.liveness(Asker::Remote);
        assert_eq!(status, 503);
        assert!(
            !remote.contains("broker-7") && !remote.contains("/var/lib"),
            "{remote}"
        );
        let remote: serde_json::Value = serde_json::from_str(&remote).unwrap();
        assert_eq!(remote["status"], "failed");
        assert_eq!(remote["broker"], "unreachable");
        assert!(
            remote["detail"].as_str().unwrap_or("").contains("log"),
            "{remote}"
        );
        let (_, ready) = health.readiness(Asker::Remote);
        assert!(!ready.contains("broker-7"), "{ready}");
    }
}
