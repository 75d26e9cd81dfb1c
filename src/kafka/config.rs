//! Settings of `newsdedup run`: the `[service]` section of the configuration file, the command
//! line (`RunArgs`) and the environment, resolved into one `Settings` value.
//!
//! Precedence, highest first: command-line flag, environment variable, configuration file,
//! built-in default. librdkafka properties are layered the same way: built-in defaults, then
//! `[service.kafka]`, then `NEWSDEDUP_KAFKA_<NAME>` variables, then `-X key=value`.

use crate::config::Config;
use crate::simhash::GUARANTEED_DISTANCE;
use clap::Args;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Prefix of environment variables that set librdkafka properties:
/// `NEWSDEDUP_KAFKA_SECURITY_PROTOCOL=SSL` sets `security.protocol=SSL` (`_` -> `.`, `__` -> `_`).
pub const KAFKA_ENV_PREFIX: &str = "NEWSDEDUP_KAFKA_";

/// Properties the service must control itself: overriding them would break the
/// "commit only what is indexed and delivered" guarantee.
const PROTECTED: [(&str, &str); 2] = [
    (
        "enable.auto.commit",
        "the service commits offsets itself, only after the index write and the delivery",
    ),
    (
        "enable.auto.offset.store",
        "the service stores offsets itself, only after the index write and the delivery",
    ),
];

/// Properties that have a dedicated flag.
const HAVE_FLAGS: [(&str, &str); 3] = [
    (
        "bootstrap.servers",
        "--brokers / NEWSDEDUP_BROKERS / service.brokers",
    ),
    (
        "metadata.broker.list",
        "--brokers / NEWSDEDUP_BROKERS / service.brokers",
    ),
    (
        "group.id",
        "--group-id / NEWSDEDUP_GROUP_ID / service.group_id",
    ),
];

/// librdkafka properties that only apply to a consumer (from librdkafka's CONFIGURATION.md, scope
/// C): given only to the consumer, so the producer does not warn about them.
const CONSUMER_ONLY: [&str; 32] = [
    "group.id",
    "group.instance.id",
    "partition.assignment.strategy",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "group.protocol.type",
    "group.protocol",
    "group.remote.assignor",
    "coordinator.query.interval.ms",
    "max.poll.interval.ms",
    "enable.auto.commit",
    "auto.commit.interval.ms",
    "enable.auto.offset.store",
    "queued.min.messages",
    "queued.max.messages.kbytes",
    "fetch.wait.max.ms",
    "fetch.queue.backoff.ms",
    "fetch.message.max.bytes",
    "max.partition.fetch.bytes",
    "fetch.max.bytes",
    "fetch.min.bytes",
    "fetch.error.backoff.ms",
    "offset.store.method",
    "isolation.level",
    "enable.partition.eof",
    "check.crcs",
    "auto.commit.enable",
    "auto.offset.reset",
    "offset.store.path",
    "offset.store.sync.interval.ms",
    "consume.callback.max.messages",
    "statistics.interval.ms",
];

/// librdkafka properties that only apply to a producer (scope P): given only to the producer.
const PRODUCER_ONLY: [&str; 29] = [
    "transactional.id",
    "transaction.timeout.ms",
    "enable.idempotence",
    "enable.gapless.guarantee",
    "queue.buffering.max.messages",
    "queue.buffering.max.kbytes",
    "queue.buffering.max.ms",
    "linger.ms",
    "message.send.max.retries",
    "retries",
    "queue.buffering.backpressure.threshold",
    "compression.codec",
    "compression.type",
    "batch.num.messages",
    "batch.size",
    "delivery.report.only.error",
    "sticky.partitioning.linger.ms",
    "request.required.acks",
    "acks",
    "request.timeout.ms",
    "message.timeout.ms",
    "delivery.timeout.ms",
    "queuing.strategy",
    "produce.offset.report",
    "partitioner",
    "compression.level",
    "dr_cb",
    "dr_msg_cb",
    "msg_order_cmp",
];

/// The `[service]` section of the configuration file (every key optional; see
/// config/default.toml).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServiceConfig {
    /// Kafka bootstrap servers, `host:port[,host:port...]`.
    pub brokers: String,
    /// Consumer group id.
    pub group_id: String,
    /// Topic of raw articles.
    pub input_topic: String,
    /// Topic for unique articles.
    pub unique_topic: String,
    /// Topic for duplicates.
    pub duplicate_topic: String,
    /// Dead-letter topic for records that are not valid articles.
    pub dlq_topic: String,
    /// Index directory (RocksDB), owned by one running instance.
    pub index_dir: PathBuf,
    /// `IP:PORT` of the HTTP listener for `/metrics`, `/health` and `/ready`.
    pub metrics_addr: String,
    /// Fingerprinting threads; 0 = one per core.
    pub threads: usize,
    /// Largest accepted message value in bytes; larger ones go to the DLQ as `oversized`.
    pub max_article_bytes: usize,
    /// Messages consumed but not yet indexed + delivered before fetching pauses.
    pub max_in_flight: usize,
    /// Commit done offsets at least this often (milliseconds).
    pub commit_interval_ms: u64,
    /// ... or as soon as this many messages are done since the last commit.
    pub commit_every: u64,
    /// On SIGINT/SIGTERM, wait at most this long for in-flight work before committing and exiting.
    pub shutdown_timeout_ms: u64,
    /// On partition revocation, wait at most this long for in-flight work of the revoked
    /// partitions before committing and releasing them (the rest is abandoned, never committed).
    pub rebalance_timeout_ms: u64,
    /// librdkafka properties for both the consumer and the producer, e.g.
    /// `"security.protocol" = "SSL"` (quote keys with dots).
    pub kafka: BTreeMap<String, toml::Value>,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        ServiceConfig {
            brokers: "localhost:9092".into(),
            group_id: "newsdedup".into(),
            input_topic: "articles.raw".into(),
            unique_topic: "articles.unique".into(),
            duplicate_topic: "articles.duplicate".into(),
            dlq_topic: "articles.dlq".into(),
            index_dir: PathBuf::from("/var/lib/newsdedup/index"),
            metrics_addr: "0.0.0.0:9898".into(),
            threads: 0,
            max_article_bytes: 900_000,
            max_in_flight: 5_000,
            commit_interval_ms: 1_000,
            commit_every: 5_000,
            shutdown_timeout_ms: 30_000,
            rebalance_timeout_ms: 20_000,
            kafka: BTreeMap::new(),
        }
    }
}

/// `newsdedup run`: every setting of the `[service]` section as a flag and an environment variable.
#[derive(Debug, Clone, Default, Args)]
pub struct RunArgs {
    /// Kafka bootstrap servers, host:port[,host:port...] [default: localhost:9092]
    #[arg(long, env = "NEWSDEDUP_BROKERS", value_name = "HOST:PORT,...")]
    pub brokers: Option<String>,
    /// Consumer group id [default: newsdedup]
    #[arg(long, env = "NEWSDEDUP_GROUP_ID")]
    pub group_id: Option<String>,
    /// Topic of raw articles [default: articles.raw]
    #[arg(long, env = "NEWSDEDUP_INPUT_TOPIC")]
    pub input_topic: Option<String>,
    /// Topic for unique articles [default: articles.unique]
    #[arg(long, env = "NEWSDEDUP_UNIQUE_TOPIC")]
    pub unique_topic: Option<String>,
    /// Topic for near-duplicates [default: articles.duplicate]
    #[arg(long, env = "NEWSDEDUP_DUPLICATE_TOPIC")]
    pub duplicate_topic: Option<String>,
    /// Dead-letter topic for invalid records [default: articles.dlq]
    #[arg(long, env = "NEWSDEDUP_DLQ_TOPIC")]
    pub dlq_topic: Option<String>,
    /// Index directory, locked by this process [default: /var/lib/newsdedup/index]
    #[arg(long, env = "NEWSDEDUP_INDEX_DIR")]
    pub index_dir: Option<PathBuf>,
    /// Near-duplicate threshold (Hamming distance) [default: [dedup] threshold = 3]
    #[arg(long, env = "NEWSDEDUP_THRESHOLD")]
    pub threshold: Option<u32>,
    /// HTTP listen address for /metrics, /health and /ready [default: 0.0.0.0:9898]
    #[arg(long, env = "NEWSDEDUP_METRICS_ADDR", value_name = "IP:PORT")]
    pub metrics_addr: Option<String>,
    /// Fingerprinting threads, 0 = one per core [default: 0]
    #[arg(long, env = "NEWSDEDUP_THREADS")]
    pub threads: Option<usize>,
    /// Largest accepted message value in bytes (larger: DLQ, reason oversized) [default: 900000]
    #[arg(long, env = "NEWSDEDUP_MAX_ARTICLE_BYTES")]
    pub max_article_bytes: Option<usize>,
    /// Consumed but not yet done messages before fetching pauses [default: 5000]
    #[arg(long, env = "NEWSDEDUP_MAX_IN_FLIGHT")]
    pub max_in_flight: Option<usize>,
    /// Commit done offsets at least this often, in ms [default: 1000]
    #[arg(long, env = "NEWSDEDUP_COMMIT_INTERVAL_MS")]
    pub commit_interval_ms: Option<u64>,
    /// Commit as soon as this many messages are done since the last commit [default: 5000]
    #[arg(long, env = "NEWSDEDUP_COMMIT_EVERY")]
    pub commit_every: Option<u64>,
    /// Longest wait for in-flight work on SIGINT/SIGTERM, in ms [default: 30000]
    #[arg(long, env = "NEWSDEDUP_SHUTDOWN_TIMEOUT_MS")]
    pub shutdown_timeout_ms: Option<u64>,
    /// Longest wait for in-flight work of revoked partitions, in ms [default: 20000]
    #[arg(long, env = "NEWSDEDUP_REBALANCE_TIMEOUT_MS")]
    pub rebalance_timeout_ms: Option<u64>,
    /// librdkafka property (repeatable, as in kcat), e.g. -X security.protocol=SSL; consumer-only
    /// and producer-only properties go to that client, the others to both. Also
    /// NEWSDEDUP_KAFKA_<NAME> variables (SECURITY_PROTOCOL -> security.protocol) and
    /// [service.kafka] in the config file.
    #[arg(short = 'X', value_name = "KEY=VALUE")]
    pub properties: Vec<String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SettingsError {
    #[error("{0}")]
    Invalid(String),
}

fn invalid(msg: impl Into<String>) -> SettingsError {
    SettingsError::Invalid(msg.into())
}

/// Everything `newsdedup run` needs, resolved and validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub brokers: String,
    pub group_id: String,
    pub input_topic: String,
    pub unique_topic: String,
    pub duplicate_topic: String,
    pub dlq_topic: String,
    pub index_dir: PathBuf,
    pub threshold: u32,
    pub metrics_addr: SocketAddr,
    pub threads: usize,
    pub max_article_bytes: usize,
    pub max_in_flight: usize,
    pub commit_interval: Duration,
    pub commit_every: u64,
    pub shutdown_timeout: Duration,
    pub rebalance_timeout: Duration,
    /// Final librdkafka configuration of the consumer.
    pub consumer_properties: BTreeMap<String, String>,
    /// Final librdkafka configuration of the producer.
    pub producer_properties: BTreeMap<String, String>,
    /// Warnings to log once logging is up (e.g. threshold above the exhaustive range).
    pub warnings: Vec<String>,
}

/// Output topics, by kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topics {
    pub unique: String,
    pub duplicate: String,
    pub dlq: String,
}

impl Settings {
    /// Resolves flags (already merged with their environment variables by clap) over the
    /// configuration file; `env` supplies the `NEWSDEDUP_KAFKA_*` variables.
    pub fn resolve(
        args: &RunArgs,
        config: &Config,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Settings, SettingsError> {
        let file = &config.service;
        let pick =
            |flag: &Option<String>, file: &str| flag.clone().unwrap_or_else(|| file.to_owned());
        let mut warnings = Vec::new();

        let threshold = args.threshold.unwrap_or(config.dedup.threshold);
        if threshold > 64 {
            return Err(invalid(format!(
                "--threshold {threshold} is out of range 0..=64"
            )));
        }
        if threshold > GUARANTEED_DISTANCE {
            warnings.push(format!(
                "threshold {threshold} > {GUARANTEED_DISTANCE}: only candidates sharing a 16-bit block are seen, so some pairs within {threshold} will be missed"
            ));
        }
        let metrics_addr_text = pick(&args.metrics_addr, &file.metrics_addr);
        let metrics_addr: SocketAddr = metrics_addr_text.parse().map_err(|e| {
            invalid(format!(
                "--metrics-addr {metrics_addr_text:?} is not an IP:PORT socket address ({e}); e.g. 0.0.0.0:9898"
            ))
        })?;
        let threads = match args.threads.unwrap_or(file.threads) {
            0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
            n => n,
        };
        let max_in_flight = args.max_in_flight.unwrap_or(file.max_in_flight);
        if max_in_flight == 0 {
            return Err(invalid("--max-in-flight must be at least 1"));
        }
        let max_article_bytes = args.max_article_bytes.unwrap_or(file.max_article_bytes);
        if max_article_bytes == 0 {
            return Err(invalid("--max-article-bytes must be at least 1"));
        }

        let s = Settings {
            brokers: pick(&args.brokers, &file.brokers),
            group_id: pick(&args.group_id, &file.group_id),
            input_topic: pick(&args.input_topic, &file.input_topic),
            unique_topic: pick(&args.unique_topic, &file.unique_topic),
            duplicate_topic: pick(&args.duplicate_topic, &file.duplicate_topic),
            dlq_topic: pick(&args.dlq_topic, &file.dlq_topic),
            index_dir: args
                .index_dir
                .clone()
                .unwrap_or_else(|| file.index_dir.clone()),
            threshold,
            metrics_addr,
            threads,
            max_article_bytes,
            max_in_flight,
            commit_interval: Duration::from_millis(
                args.commit_interval_ms
                    .unwrap_or(file.commit_interval_ms)
                    .max(1),
            ),
            commit_every: args.commit_every.unwrap_or(file.commit_every).max(1),
            shutdown_timeout: Duration::from_millis(
                args.shutdown_timeout_ms.unwrap_or(file.shutdown_timeout_ms),
            ),
            rebalance_timeout: Duration::from_millis(
                args.rebalance_timeout_ms
                    .unwrap_or(file.rebalance_timeout_ms),
            ),
            consumer_properties: BTreeMap::new(),
            producer_properties: BTreeMap::new(),
            warnings,
        };
        for (name, value) in [
            ("--brokers", &s.brokers),
            ("--group-id", &s.group_id),
            ("--input-topic", &s.input_topic),
            ("--unique-topic", &s.unique_topic),
            ("--duplicate-topic", &s.duplicate_topic),
            ("--dlq-topic", &s.dlq_topic),
        ] {
            if value.trim().is_empty() {
                return Err(invalid(format!("{name} must not be empty")));
            }
        }
        for (name, out) in [
            ("--unique-topic", &s.unique_topic),
            ("--duplicate-topic", &s.duplicate_topic),
            ("--dlq-topic", &s.dlq_topic),
        ] {
            if *out == s.input_topic {
                return Err(invalid(format!(
                    "{name} {out:?} is the input topic: the service would consume its own output"
                )));
            }
        }
        if s.index_dir.as_os_str().is_empty() {
            return Err(invalid("--index-dir must not be empty"));
        }

        // librdkafka properties: user layers first (file < env < -X), then the service's own.
        let mut user: BTreeMap<String, String> = BTreeMap::new();
        for (key, value) in &file.kafka {
            let text = match value {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(f) => f.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                other => {
                    return Err(invalid(format!(
                        "[service.kafka] {key:?} must be a string, number or boolean, got {}",
                        other.type_str()
                    )))
                }
            };
            user.insert(key.clone(), text);
        }
        let mut env_props: Vec<(String, String)> = env
            .into_iter()
            .filter_map(|(k, v)| env_property_name(&k).map(|name| (name, v)))
            .collect();
        env_props.sort();
        user.extend(env_props);
        for p in &args.properties {
            let (k, v) = parse_property(p)?;
            user.insert(k, v);
        }
        for (key, value) in &user {
            if let Some((_, why)) = PROTECTED.iter().find(|(k, _)| k == key) {
                if value != "false" {
                    return Err(invalid(format!(
                        "librdkafka property {key}={value} is not allowed: {why}"
                    )));
                }
            }
            if let Some((_, flag)) = HAVE_FLAGS.iter().find(|(k, _)| k == key) {
                return Err(invalid(format!(
                    "set {key} with {flag}, not as a librdkafka property"
                )));
            }
        }

        let mut consumer = BTreeMap::new();
        let mut producer = BTreeMap::new();
        for (k, v) in [
            ("client.id", "newsdedup"),
            ("auto.offset.reset", "earliest"),
            ("enable.partition.eof", "false"),
            ("fetch.wait.max.ms", "100"),
            ("statistics.interval.ms", "5000"),
        ] {
            consumer.insert(k.to_owned(), v.to_owned());
        }
        for (k, v) in [
            ("client.id", "newsdedup"),
            ("acks", "all"),
            ("linger.ms", "5"),
            ("message.timeout.ms", "60000"),
            // Kafka's default max.message.bytes (1 MiB + 12): outputs are the input + ~0.3 KB.
            ("message.max.bytes", "1048576"),
        ] {
            producer.insert(k.to_owned(), v.to_owned());
        }
        for (k, v) in &user {
            if !PRODUCER_ONLY.contains(&k.as_str()) {
                consumer.insert(k.clone(), v.clone());
            }
            if !CONSUMER_ONLY.contains(&k.as_str()) {
                producer.insert(k.clone(), v.clone());
            }
        }
        consumer.insert("bootstrap.servers".into(), s.brokers.clone());
        consumer.insert("group.id".into(), s.group_id.clone());
        consumer.insert("enable.auto.commit".into(), "false".into());
        consumer.insert("enable.auto.offset.store".into(), "false".into());
        producer.insert("bootstrap.servers".into(), s.brokers.clone());
        Ok(Settings {
            consumer_properties: consumer,
            producer_properties: producer,
            ..s
        })
    }

    pub fn topics(&self) -> Topics {
        Topics {
            unique: self.unique_topic.clone(),
            duplicate: self.duplicate_topic.clone(),
            dlq: self.dlq_topic.clone(),
        }
    }
}

/// `KEY=VALUE` of `-X`.
pub fn parse_property(text: &str) -> Result<(String, String), SettingsError> {
    match text.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.to_owned())),
        _ => Err(invalid(format!(
            "-X {text:?}: expected KEY=VALUE, e.g. -X security.protocol=SSL"
        ))),
    }
}

/// `NEWSDEDUP_KAFKA_SASL_MECHANISMS` -> `sasl.mechanisms` (`__` stands for a literal `_`).
pub fn env_property_name(var: &str) -> Option<String> {
    let rest = var.strip_prefix(KAFKA_ENV_PREFIX)?;
    if rest.is_empty() {
        return None;
    }
    Some(
        rest.to_ascii_lowercase()
            .replace("__", "\u{0}")
            .replace('_', ".")
            .replace('\u{0}', "_"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(
        args: RunArgs,
        config: &Config,
        env: &[(&str, &str)],
    ) -> Result<Settings, SettingsError> {
        Settings::resolve(
            &args,
            config,
            env.iter().map(|(k, v)| (k.to_string(), v.to_string())),
        )
    }

    #[test]
    fn shipped_default_toml_documents_the_defaults() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/default.toml");
        let cfg = Config::load(&path).unwrap();
        assert_eq!(cfg.service, ServiceConfig::default());
    }

    #[test]
    fn defaults_and_precedence() {
        let s = resolve(RunArgs::default(), &Config::default(), &[]).unwrap();
        assert_eq!(s.group_id, "newsdedup");
        assert_eq!(s.input_topic, "articles.raw");
        assert_eq!(s.unique_topic, "articles.unique");
        assert_eq!(s.duplicate_topic, "articles.duplicate");
        assert_eq!(s.dlq_topic, "articles.dlq");
        assert_eq!(s.threshold, 3);
        assert_eq!(s.consumer_properties["enable.auto.commit"], "false");
        assert_eq!(s.consumer_properties["auto.offset.reset"], "earliest");

        let mut config: Config = toml::from_str(
            "[dedup]\nthreshold = 2\n[service]\ngroup_id = \"g-file\"\nbrokers = \"file:1\"\n[service.kafka]\n\"linger.ms\" = 20\n\"fetch.wait.max.ms\" = \"50\"\n",
        )
        .unwrap();
        let s = resolve(RunArgs::default(), &config, &[]).unwrap();
        assert_eq!(
            (s.group_id.as_str(), s.brokers.as_str(), s.threshold),
            ("g-file", "file:1", 2)
        );
        assert_eq!(s.producer_properties["linger.ms"], "20");
        assert_eq!(s.consumer_properties["bootstrap.servers"], "file:1");

        config.service.dlq_topic = "dlq-file".into();
        let args = RunArgs {
            group_id: Some("g-flag".into()),
            threshold: Some(1),
            properties: vec!["fetch.wait.max.ms=10".into()],
            ..Default::default()
        };
        let s = resolve(
            args,
            &config,
            &[
                ("NEWSDEDUP_KAFKA_FETCH_WAIT_MAX_MS", "30"),
                ("NEWSDEDUP_KAFKA_LINGER_MS", "7"),
                ("OTHER", "x"),
            ],
        )
        .unwrap();
        assert_eq!(s.group_id, "g-flag");
        assert_eq!(s.threshold, 1);
        assert_eq!(s.dlq_topic, "dlq-file");
        assert_eq!(s.consumer_properties["fetch.wait.max.ms"], "10");
        assert_eq!(s.producer_properties["linger.ms"], "7");
        assert!(
            !s.producer_properties.contains_key("fetch.wait.max.ms"),
            "consumer-only"
        );
        assert!(
            !s.consumer_properties.contains_key("linger.ms"),
            "producer-only"
        );
    }

    #[test]
    fn rejects_what_would_break_guarantees() {
        let c = Config::default();
        let with = |p: &str| RunArgs {
            properties: vec![p.into()],
            ..Default::default()
        };
        assert!(resolve(with("enable.auto.commit=true"), &c, &[]).is_err());
        assert!(resolve(with("enable.auto.commit=false"), &c, &[]).is_ok());
        assert!(resolve(with("group.id=x"), &c, &[]).is_err());
        assert!(resolve(with("nonsense"), &c, &[]).is_err());
        let loop_args = RunArgs {
            unique_topic: Some("articles.raw".into()),
            ..Default::default()
        };
        assert!(resolve(loop_args, &c, &[]).is_err());
        let bad_addr = RunArgs {
            metrics_addr: Some("localhost".into()),
            ..Default::default()
        };
        assert!(resolve(bad_addr, &c, &[]).is_err());
        let bad_threshold = RunArgs {
            threshold: Some(65),
            ..Default::default()
        };
        assert!(resolve(bad_threshold, &c, &[]).is_err());
    }

    #[test]
    fn env_property_names() {
        assert_eq!(
            env_property_name("NEWSDEDUP_KAFKA_SECURITY_PROTOCOL").as_deref(),
            Some("security.protocol")
        );
        assert_eq!(
            env_property_name("NEWSDEDUP_KAFKA_A__B_C").as_deref(),
            Some("a_b.c")
        );
        assert_eq!(env_property_name("NEWSDEDUP_KAFKA_"), None);
        assert_eq!(env_property_name("NEWSDEDUP_BROKERS"), None);
    }
}
