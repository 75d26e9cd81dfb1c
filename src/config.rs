//! The configuration file: one TOML section per concern, each defined next to the code it
//! configures (see config/default.toml for every key), except `[service]`, defined here because it
//! is also the flags of `run`, `standby` and `replay` (resolved by `settings`).

pub use crate::article::InputConfig;
pub use crate::dedup::DedupConfig;
pub use crate::fingerprint::{FingerprintConfig, ImageConfig};
pub use crate::index::IndexConfig;
pub use crate::signing::CorrectionsConfig;
use clap::Args;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The whole configuration file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub input: InputConfig,
    pub fingerprint: FingerprintConfig,
    pub index: IndexConfig,
    pub dedup: DedupConfig,
    /// Start-up images of the fingerprint tables.
    pub image: ImageConfig,
    /// Service settings (`newsdedup run`, resolved by `settings`).
    pub service: ServiceConfig,
    /// Editors' corrections: the keys they are signed with.
    pub corrections: CorrectionsConfig,
}

/// The `[service]` section of the configuration file and the flags of `newsdedup run` (every
/// key optional; see config/default.toml).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Args)]
#[serde(default, deny_unknown_fields)]
pub struct ServiceConfig {
    /// Kafka bootstrap servers, host:port[,host:port...]
    #[arg(long, env = "NEWSDEDUP_BROKERS", value_name = "HOST:PORT,...", default_value_t = defaults().brokers)]
    pub brokers: String,
    /// Consumer group id
    #[arg(long, env = "NEWSDEDUP_GROUP_ID", default_value_t = defaults().group_id)]
    pub group_id: String,
    /// Topic of raw articles
    #[arg(long, env = "NEWSDEDUP_INPUT_TOPIC", default_value_t = defaults().input_topic)]
    pub input_topic: String,
    /// Topic for unique articles
    #[arg(long, env = "NEWSDEDUP_UNIQUE_TOPIC", default_value_t = defaults().unique_topic)]
    pub unique_topic: String,
    /// Topic for near-duplicates
    #[arg(long, env = "NEWSDEDUP_DUPLICATE_TOPIC", default_value_t = defaults().duplicate_topic)]
    pub duplicate_topic: String,
    /// Dead-letter topic for records that are not valid articles
    #[arg(long, env = "NEWSDEDUP_DLQ_TOPIC", default_value_t = defaults().dlq_topic)]
    pub dlq_topic: String,
    /// Topic of editors' corrections (`newsdedup correct` produces them, `run` applies them);
    /// read by `run` as consumer group `<group-id>.corrections`
    #[arg(long, env = "NEWSDEDUP_CORRECTIONS_TOPIC", default_value_t = defaults().corrections_topic)]
    pub corrections_topic: String,
    /// Index directory (RocksDB), locked by the one running instance
    #[arg(long, env = "NEWSDEDUP_INDEX_DIR", default_value_os_t = defaults().index_dir)]
    pub index_dir: PathBuf,
    /// HTTP listen address for /metrics, /health and /ready
    #[arg(long, env = "NEWSDEDUP_METRICS_ADDR", value_name = "IP:PORT", default_value_t = defaults().metrics_addr)]
    pub metrics_addr: String,
    /// Fingerprinting threads, 0 = one per core
    #[arg(long, env = "NEWSDEDUP_THREADS", default_value_t = defaults().threads)]
    pub threads: usize,
    /// Largest accepted message value in bytes; larger ones go to the DLQ as `oversized`
    #[arg(long, env = "NEWSDEDUP_MAX_ARTICLE_BYTES", default_value_t = defaults().max_article_bytes)]
    pub max_article_bytes: usize,
    /// Messages consumed but not yet indexed and delivered before fetching pauses (it resumes at
    /// half: what is left must cover the fetch that follows)
    #[arg(long, env = "NEWSDEDUP_MAX_IN_FLIGHT", default_value_t = defaults().max_in_flight)]
    pub max_in_flight: usize,
    /// Bytes of consumed records (value, key and headers) not yet indexed and delivered before fetching
    /// pauses: bounds memory with large records
    #[arg(long, env = "NEWSDEDUP_MAX_IN_FLIGHT_BYTES", default_value_t = defaults().max_in_flight_bytes)]
    pub max_in_flight_bytes: usize,
    /// Commit done offsets at least this often (milliseconds)
    #[arg(long, env = "NEWSDEDUP_COMMIT_INTERVAL_MS", default_value_t = defaults().commit_interval_ms)]
    pub commit_interval_ms: u64,
    /// ... or as soon as this many messages are done since the last commit
    #[arg(long, env = "NEWSDEDUP_COMMIT_EVERY", default_value_t = defaults().commit_every)]
    pub commit_every: u64,
    /// On SIGINT/SIGTERM, the whole stop (finishing in-flight records, the final commit, leaving
    /// the group, closing the index) ends within this many ms; work not finished by then is not
    /// committed (processed again after a restart) and the exit status is 75
    #[arg(long, env = "NEWSDEDUP_SHUTDOWN_TIMEOUT_MS", default_value_t = defaults().shutdown_timeout_ms)]
    pub shutdown_timeout_ms: u64,
    /// On partition revocation, wait at most this long (ms) for the revoked partitions' in-flight
    /// work before committing and releasing them; must be below max.poll.interval.ms
    #[arg(long, env = "NEWSDEDUP_REBALANCE_TIMEOUT_MS", default_value_t = defaults().rebalance_timeout_ms)]
    pub rebalance_timeout_ms: u64,
    /// How long one output record's retriable produce failures (broker down, timeouts) are
    /// retried before the service stops with an error, in ms; 0 = for ever
    #[arg(long, env = "NEWSDEDUP_MAX_RETRY_MS", default_value_t = defaults().max_retry_ms)]
    pub max_retry_ms: u64,
    /// /health fails when records are in flight but none is finished for this long (ms) while
    /// the broker is reachable (a stuck pipeline), or when this member has fetched nothing for
    /// this long while records wait beyond the group's committed offsets (a member left without
    /// work): for the orchestrator to restart
    #[arg(long, env = "NEWSDEDUP_PROGRESS_TIMEOUT_MS", default_value_t = defaults().progress_timeout_ms)]
    pub progress_timeout_ms: u64,
    /// One active instance: decide only while the consumer group lists no other member, and stop
    /// (exit non-zero after committing) once a settled group has listed another member for this
    /// long (ms; for a member that decided before, twice as long plus session.timeout.ms);
    /// 0 = allow several members
    #[arg(long, env = "NEWSDEDUP_EXCLUSIVE_GRACE_MS", default_value_t = defaults().exclusive_grace_ms)]
    pub exclusive_grace_ms: u64,
    /// librdkafka properties (consumer-only ones go to the consumer, producer-only ones to the
    /// producer, the rest to both), e.g.
    /// `"security.protocol" = "SSL"` (quote keys with dots). File only; `-X` on the command line.
    #[arg(skip)]
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
            corrections_topic: "articles.corrections".into(),
            index_dir: PathBuf::from("/var/lib/newsdedup/index"),
            metrics_addr: "0.0.0.0:9898".into(),
            threads: 0,
            max_article_bytes: 900_000,
            max_in_flight: 20_000,
            max_in_flight_bytes: 256 << 20,
            commit_interval_ms: 1_000,
            commit_every: 5_000,
            shutdown_timeout_ms: 30_000,
            rebalance_timeout_ms: 20_000,
            max_retry_ms: 600_000,
            progress_timeout_ms: 120_000,
            exclusive_grace_ms: 60_000,
            kafka: BTreeMap::new(),
        }
    }
}

fn defaults() -> ServiceConfig {
    ServiceConfig::default()
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    // The cause is in the message, not chained as a source: printed with its causes it would be
    // told twice.
    #[error("cannot read config file {path}: {error}")]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    /// Says where and what, never the offending text (a line may hold a password).
    #[error("invalid config file {path}{}: {message}", line.map(|l| format!(", line {l}")).unwrap_or_default())]
    Parse {
        path: PathBuf,
        line: Option<usize>,
        message: String,
    },
}

impl Config {
    pub fn load(path: &std::path::Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            error: source,
        })?;
        toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            line: e
                .span()
                .map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1),
            message: e.message().to_owned(),
        })
    }
}

/// Every key the configuration file accepts, as (section, key): `("dedup", "threshold")`, and
/// `("service", "kafka")` for the `[service.kafka]` table. Read from the sections' own
/// `Deserialize` definitions (the field names serde matches, `deny_unknown_fields` refusing any
/// other), so it cannot drift from what a file may hold.
pub fn keys() -> Vec<(&'static str, &'static str)> {
    let sections: [(&'static str, &'static [&'static str]); 7] = [
        ("input", struct_fields::<InputConfig>()),
        ("fingerprint", struct_fields::<FingerprintConfig>()),
        ("index", struct_fields::<IndexConfig>()),
        ("dedup", struct_fields::<DedupConfig>()),
        ("image", struct_fields::<ImageConfig>()),
        ("service", struct_fields::<ServiceConfig>()),
        ("corrections", struct_fields::<CorrectionsConfig>()),
    ];
    assert_eq!(
        struct_fields::<Config>(),
        sections.map(|(name, _)| name).as_slice(),
        "a section of Config is missing from config::keys"
    );
    sections
        .into_iter()
        .flat_map(|(section, fields)| fields.iter().map(move |key| (section, *key)))
        .collect()
}

/// The field names a struct's derived `Deserialize` asks for: a deserializer that records them
/// and stops.
fn struct_fields<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    use serde::de::{self, Visitor};

    #[derive(Debug)]
    struct Stop;
    impl std::fmt::Display for Stop {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("field names recorded")
        }
    }
    impl std::error::Error for Stop {}
    impl de::Error for Stop {
        fn custom<M: std::fmt::Display>(_: M) -> Self {
            Stop
        }
    }

    struct Fields<'a>(&'a mut &'static [&'static str]);
    impl<'de> de::Deserializer<'de> for Fields<'_> {
        type Error = Stop;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
            Err(Stop)
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _name: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Stop> {
            *self.0 = fields;
            Err(Stop)
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
            option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
            ignored_any
        }
    }

    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Fields(&mut fields));
    fields
}

/// The shipped config/default.toml, for the tests that hold it against the built-in defaults.
/// Cargo sets `CARGO_MANIFEST_DIR` for the tests it runs; the compile-time value can name another
/// clone that shares the target directory.
#[cfg(test)]
pub(crate) fn shipped_default_toml() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(
            || env!("CARGO_MANIFEST_DIR").into(),
            std::path::PathBuf::from,
        )
        .join("config/default.toml")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_default_toml_matches_code_defaults() {
        let path = shipped_default_toml();
        let cfg = Config::load(&path).unwrap();
        assert_eq!(cfg.input, InputConfig::default());
        assert_eq!(cfg.fingerprint, FingerprintConfig::default());
        assert_eq!(cfg.index, IndexConfig::default());
        assert_eq!(cfg.dedup, DedupConfig::default());
    }

    #[test]
    fn a_syntax_error_names_the_line_but_never_prints_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.toml");
        std::fs::write(
            &path,
            "[service.kafka]\n\"sasl.username\" = \"svc\"\n\"sasl.password\" = \"hunter2-secret\n",
        )
        .unwrap();
        let message = Config::load(&path).unwrap_err().to_string();
        assert!(message.contains("line 3"), "{message}");
        assert!(!message.contains("hunter2"), "{message}");
    }

    #[test]
    fn keys_lists_every_section_and_its_fields() {
        let keys = keys();
        for key in [
            ("input", "published_at_offset"),
            ("dedup", "threshold"),
            ("index", "retention"),
            ("image", "dir"),
            ("service", "corrections_topic"),
            ("service", "kafka"),
        ] {
            assert!(keys.contains(&key), "{key:?} missing from {keys:?}");
        }
        // A listed key is one the file accepts (its value aside); another is refused.
        for (section, key) in keys.iter().chain([&("dedup", "treshold")]) {
            let text = format!("[{section}]\n{key} = []\n");
            let unknown = toml::from_str::<Config>(&text)
                .err()
                .is_some_and(|e| e.to_string().contains("unknown field"));
            assert_eq!(unknown, *key == "treshold", "{text}");
        }
    }

    #[test]
    fn unknown_keys_are_rejected() {
        assert!(toml::from_str::<Config>("[fingerprint]\ntitle_wieght = 3.0\n").is_err());
    }
}
