//! Settings of `newsdedup run`, defined once: [`ServiceConfig`] is at the same time the
//! `[service]` section of the configuration file (serde), the flags of `run` and their
//! `NEWSDEDUP_*` environment variables (clap). Its `Default` is the only place a default is
//! written; `--help` shows it.
//!
//! Precedence, highest first: command-line flag, environment variable, configuration file,
//! built-in default. clap applies the first two and the last; [`layer`] puts the file between
//! them, key by key, from what clap reports as the source of each value. librdkafka properties
//! are layered the same way: the service's defaults, then `[service.kafka]`, then
//! `NEWSDEDUP_KAFKA_<NAME>` variables, then `-X key=value`; the few properties that would break
//! the commit protocol are refused with the reason.

use crate::components::{Components, Overrides, ThresholdOutOfRange};
use crate::config::{Config, ServiceConfig};
use crate::kafka::consumer::ConsumeParams;
use crate::kafka::producer::Topics;
use crate::kafka::properties::{
    check_user_properties, client_properties, secrets_on_command_line, user_properties,
    PropertyError,
};
use crate::kafka::range::ReplayRange;
use crate::time::TimeSpan;
use clap::Args;
use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// `newsdedup run`: the `[service]` settings plus the flags that are not a `[service]` key.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub service: ServiceConfig,
    /// Near-duplicate threshold (Hamming distance) [default: [dedup] threshold, 3]
    #[arg(long, env = "NEWSDEDUP_THRESHOLD")]
    pub threshold: Option<u32>,
    /// Retention window by event time, e.g. 30d, 2w, 12h: indexed articles older than this
    /// (by `published_at`, else the record timestamp) no longer match and are removed
    /// [default: [index] retention, keep for ever]
    #[arg(long, env = "NEWSDEDUP_RETENTION", value_name = "SPAN")]
    pub retention: Option<TimeSpan>,
    /// librdkafka property (repeatable, as in kcat), e.g. -X security.protocol=SSL; consumer-only
    /// and producer-only properties go to that client, the others to both. Also
    /// NEWSDEDUP_KAFKA_<NAME> variables (SECURITY_PROTOCOL -> security.protocol) and
    /// [service.kafka] in the config file.
    #[arg(short = 'X', value_name = "KEY=VALUE")]
    pub properties: Vec<String>,
}

/// Consumer group of `newsdedup replay` unless `--group-id` or `NEWSDEDUP_REPLAY_GROUP_ID` is
/// given: never `run`'s, so a replay neither moves the live service's offsets nor takes its
/// partitions.
pub const REPLAY_GROUP_ID: &str = "newsdedup-replay";

/// `newsdedup replay`: the settings of `run` (same flags, variables, `[service]` keys and `-X`
/// properties) with four changes made here: `--topic` names the topic to read (alias
/// `--input-topic`), `--group-id` defaults to [`REPLAY_GROUP_ID`] (variable
/// `NEWSDEDUP_REPLAY_GROUP_ID`; `[service] group_id` and `NEWSDEDUP_GROUP_ID` are `run`'s and are
/// not used), `/metrics` is served only when `--metrics-addr` is given on the command line, and
/// the range flags below.
#[derive(Debug, Clone, Args)]
#[command(
    mut_arg("input_topic", |a| a
        .long("topic")
        .visible_alias("input-topic")
        .value_name("TOPIC")
        .hide_default_value(true)
        .help("Topic to replay [default: [service] input_topic, articles.raw]")),
    mut_arg("group_id", |a| a
        .env("NEWSDEDUP_REPLAY_GROUP_ID")
        .default_value(REPLAY_GROUP_ID)
        .help("Consumer group of the replay (its commits record how far it got); never run's group")),
    mut_arg("metrics_addr", |a| a
        .env(None)
        .hide_default_value(true)
        .help("Serve /metrics, /health and /ready on this address during the replay [default: not served]")),
)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// Replay only these partitions, each from offset O: `0:1200,3:0` (partitions not listed are
    /// not read) [default: every partition from its beginning]
    #[arg(
        long,
        value_name = "P:O,...",
        value_delimiter = ',',
        conflicts_with = "from_time"
    )]
    pub from_offset: Vec<String>,
    /// Start each partition at its first record with a timestamp at or after TIME (RFC 3339,
    /// e.g. 2024-03-01T08:00:00Z; also "2024-03-01 08:00" UTC, 2024-03-01, Unix s or ms)
    #[arg(long, value_name = "TIME")]
    pub from_time: Option<String>,
    /// End each partition at its first record with a timestamp at or after TIME (not decided)
    /// [default: the end the partition has when the replay starts]
    #[arg(long, value_name = "TIME")]
    pub to_time: Option<String>,
    /// Dry run: write the output records to FILE as JSONL (one per line, as `batch` writes them)
    /// instead of producing them. The index is still written (decisions are made against it):
    /// give --index-dir a copy to leave the live index untouched
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// No progress bar or progress lines (the summary is still printed)
    #[arg(long)]
    pub quiet: bool,
}

/// Everything `newsdedup replay` needs, resolved and validated.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplaySettings {
    /// The settings shared with `run` (`service.input_topic` is the replayed topic,
    /// `service.group_id` the replay's group).
    pub settings: Settings,
    pub range: ReplayRange,
    /// Serve /metrics, /health and /ready (only when `--metrics-addr` was given).
    pub serve_metrics: bool,
    /// `--output`: dry run into this JSONL file.
    pub output: Option<PathBuf>,
    pub quiet: bool,
}

/// Parses `--from-offset` values, `P:O` each.
fn parse_from_offsets(values: &[String]) -> Result<BTreeMap<i32, i64>, SettingsError> {
    let mut out = BTreeMap::new();
    for v in values.iter().map(|v| v.trim()).filter(|v| !v.is_empty()) {
        let parsed = v
            .split_once(':')
            .and_then(|(p, o)| Some((p.trim().parse::<i32>().ok()?, o.trim().parse::<i64>().ok()?)))
            .filter(|&(p, o)| p >= 0 && o >= 0);
        let Some((p, o)) = parsed else {
            return Err(invalid(format!(
                "--from-offset {v:?}: expected PARTITION:OFFSET with both >= 0, e.g. 0:1200,3:0"
            )));
        };
        if out.insert(p, o).is_some() {
            return Err(invalid(format!("--from-offset lists partition {p} twice")));
        }
    }
    Ok(out)
}

fn parse_time_flag(flag: &str, value: &Option<String>) -> Result<Option<i64>, SettingsError> {
    value
        .as_deref()
        .map(|t| crate::time::parse_time_arg(t).map_err(|e| invalid(format!("{flag}: {e}"))))
        .transpose()
}

impl ReplaySettings {
    /// Resolves `newsdedup replay`'s arguments as [`Settings::resolve`] does `run`'s; `given`
    /// comes from [`given_arguments`], `command_line` holds the ids given on the command line.
    pub fn resolve(
        args: &ReplayArgs,
        given: &HashSet<String>,
        command_line: &HashSet<String>,
        config: &Config,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<ReplaySettings, SettingsError> {
        let mut service = layer(&config.service, &args.run.service, given)?;
        if !given.contains("group_id") {
            service.group_id = REPLAY_GROUP_ID.into();
        }
        if service.group_id == config.service.group_id {
            return Err(invalid(format!(
                "--group-id {:?} is the group of `run` ([service] group_id): a replay would move the live service's offsets; use another group",
                service.group_id
            )));
        }
        let mut settings = Settings::from_service(service, &args.run, config, env)?;
        // The end of a partition is how a replay knows it has read everything there was.
        settings
            .consumer_properties
            .insert("enable.partition.eof".into(), "true".into());
        let range = ReplayRange {
            from_offsets: parse_from_offsets(&args.from_offset)?,
            from_ms: parse_time_flag("--from-time", &args.from_time)?,
            to_ms: parse_time_flag("--to-time", &args.to_time)?,
        };
        if let (Some(from), Some(to)) = (range.from_ms, range.to_ms) {
            if from >= to {
                return Err(invalid("--from-time must be before --to-time"));
            }
        }
        if args
            .output
            .as_ref()
            .is_some_and(|o| o.as_os_str().is_empty())
        {
            return Err(invalid("--output must not be empty"));
        }
        Ok(ReplaySettings {
            settings,
            range,
            serve_metrics: command_line.contains("metrics_addr"),
            output: args.output.clone(),
            quiet: args.quiet,
        })
    }
}

/// The ids of the arguments whose value came from the command line or the environment (not
/// from clap's default), i.e. those that override the configuration file.
pub fn given_arguments(matches: &clap::ArgMatches) -> HashSet<String> {
    use clap::parser::ValueSource;
    matches
        .ids()
        .filter(|id| {
            matches!(
                matches.value_source(id.as_str()),
                Some(ValueSource::CommandLine | ValueSource::EnvVariable)
            )
        })
        .map(|id| id.as_str().to_owned())
        .collect()
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SettingsError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Property(#[from] PropertyError),
    #[error(transparent)]
    Threshold(#[from] ThresholdOutOfRange),
}

fn invalid(msg: impl Into<String>) -> SettingsError {
    SettingsError::Invalid(msg.into())
}

/// Everything `newsdedup run` needs, resolved and validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The layered `[service]` settings (`threads` as given: the resolved count is in
    /// `components`).
    pub service: ServiceConfig,
    /// The engine's parts: fingerprint, rule, index, threads.
    pub components: Components,
    pub metrics_addr: SocketAddr,
    /// Final librdkafka configuration of the consumer.
    pub consumer_properties: BTreeMap<String, String>,
    /// Final librdkafka configuration of the producer.
    pub producer_properties: BTreeMap<String, String>,
}

impl Settings {
    /// Resolves `args` (already merged with their environment variables by clap; `given` holds
    /// the ids of those not left at clap's default, see [`given_arguments`]) over the
    /// configuration file; `env` supplies the `NEWSDEDUP_KAFKA_*` variables.
    pub fn resolve(
        args: &RunArgs,
        given: &HashSet<String>,
        config: &Config,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Settings, SettingsError> {
        let service = layer(&config.service, &args.service, given)?;
        Settings::from_service(service, args, config, env)
    }

    /// Validates the layered `service` and resolves the rest of `args` over `config`.
    fn from_service(
        service: ServiceConfig,
        args: &RunArgs,
        config: &Config,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Settings, SettingsError> {
        let mut components = Components::resolve(
            config,
            Overrides {
                threshold: args.threshold,
                retention: args.retention,
                threads: Some(service.threads),
            },
        )?;
        components
            .warnings
            .extend(secrets_on_command_line(&args.properties));
        let metrics_addr = validate(&service)?;
        let user = user_properties(&service.kafka, env, &args.properties)?;
        check_user_properties(&user, &service)?;
        let (consumer_properties, producer_properties) = client_properties(&service, &user);
        Ok(Settings {
            service,
            components,
            metrics_addr,
            consumer_properties,
            producer_properties,
        })
    }

    pub fn topics(&self) -> Topics {
        Topics {
            unique: self.service.unique_topic.clone(),
            duplicate: self.service.duplicate_topic.clone(),
            dlq: self.service.dlq_topic.clone(),
        }
    }

    /// The consumer loop's parameters.
    pub fn consume_params(&self) -> ConsumeParams {
        ConsumeParams {
            input_topic: self.service.input_topic.clone(),
            group_id: self.service.group_id.clone(),
            commit_interval: self.commit_interval(),
            commit_every: self.service.commit_every,
            session_timeout: self.session_timeout(),
            exclusive_grace: self.exclusive_grace(),
            progress_timeout: self.progress_timeout(),
            max_in_flight: self.service.max_in_flight,
            max_in_flight_bytes: self.service.max_in_flight_bytes,
            decided_before: false,
        }
    }

    pub fn commit_interval(&self) -> Duration {
        Duration::from_millis(self.service.commit_interval_ms)
    }

    pub fn shutdown_timeout(&self) -> Duration {
        Duration::from_millis(self.service.shutdown_timeout_ms)
    }

    pub fn rebalance_timeout(&self) -> Duration {
        Duration::from_millis(self.service.rebalance_timeout_ms)
    }

    /// The producer's `message.max.bytes` (librdkafka's default when not set or not a number).
    pub fn max_output_bytes(&self) -> usize {
        self.producer_properties
            .get("message.max.bytes")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(1_000_000)
    }

    /// The consumer's `session.timeout.ms` (librdkafka's default, 45 s, when not set or not a
    /// number): how long the group keeps a member that has gone silent.
    pub fn session_timeout(&self) -> Duration {
        let ms = self
            .consumer_properties
            .get("session.timeout.ms")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(45_000);
        Duration::from_millis(ms)
    }

    pub fn max_retry(&self) -> Duration {
        Duration::from_millis(self.service.max_retry_ms)
    }

    pub fn progress_timeout(&self) -> Duration {
        Duration::from_millis(self.service.progress_timeout_ms)
    }

    /// Whether a partition without a committed offset is read from its beginning
    /// (`auto.offset.reset`, `earliest` unless set otherwise).
    pub fn starts_at_earliest(&self) -> bool {
        self.offset_reset() == Some(true)
    }

    /// Where a partition without a committed offset starts (`auto.offset.reset`): Some(true) at
    /// its beginning (the default), Some(false) at its end, None for anything else (`error`).
    pub fn offset_reset(&self) -> Option<bool> {
        match self
            .consumer_properties
            .get("auto.offset.reset")
            .map(|v| v.trim())
        {
            None | Some("earliest" | "smallest" | "beginning") => Some(true),
            Some("latest" | "largest" | "end") => Some(false),
            Some(_) => None,
        }
    }

    /// The bootstrap servers when the consumer connects without TLS or SASL.
    pub fn plaintext_bootstrap(&self) -> Option<String> {
        let plain = self
            .consumer_properties
            .get("security.protocol")
            .is_none_or(|v| v.trim().eq_ignore_ascii_case("plaintext"));
        plain.then(|| self.service.brokers.clone())
    }

    /// None: several members are allowed (`exclusive_grace_ms` = 0).
    pub fn exclusive_grace(&self) -> Option<Duration> {
        (self.service.exclusive_grace_ms > 0)
            .then(|| Duration::from_millis(self.service.exclusive_grace_ms))
    }
}

/// `run`'s definition of one `[service]` setting (flag, variable, default, help), for another
/// command that needs the same setting.
fn run_arg(id: &str) -> clap::Arg {
    ServiceConfig::augment_args(clap::Command::new("run"))
        .get_arguments()
        .find(|a| a.get_id() == id)
        .unwrap_or_else(|| panic!("[service] has no setting {id}"))
        .clone()
}

/// One `[service]` setting of `run` taken by another command: the same flag, variable, default
/// and help (`run`'s definition in [`ServiceConfig`], not written again), resolved with `run`'s
/// precedence by `resolve`: the flag or its variable, else the configuration file's
/// `[service]` key, else the default.
macro_rules! service_setting {
    ($(#[$doc:meta])* $name:ident, $field:ident: $ty:ty) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name {
            value: $ty,
            /// Given on the command line or by its variable (it then overrides the file).
            given: bool,
        }

        impl $name {
            /// The setting with `run`'s precedence over `config` (the file, or the defaults).
            pub fn resolve(&self, config: &Config) -> $ty {
                if self.given {
                    self.value.clone()
                } else {
                    config.service.$field.clone()
                }
            }
        }

        impl Args for $name {
            fn augment_args(cmd: clap::Command) -> clap::Command {
                cmd.arg(run_arg(stringify!($field)))
            }
            fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
                Self::augment_args(cmd)
            }
        }

        impl clap::FromArgMatches for $name {
            fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
                let id = stringify!($field);
                let value = m.get_one::<$ty>(id).cloned().ok_or_else(|| {
                    clap::Error::raw(
                        clap::error::ErrorKind::MissingRequiredArgument,
                        format!("--{} is missing", id.replace('_', "-")),
                    )
                })?;
                Ok($name {
                    value,
                    given: given_arguments(m).contains(id),
                })
            }
            fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
                *self = Self::from_arg_matches(m)?;
                Ok(())
            }
        }
    };
}

service_setting!(
    /// `run`'s `--index-dir` (`NEWSDEDUP_INDEX_DIR`, `[service] index_dir`) for the commands that
    /// inspect the service's index (`index stats`, `index verify`).
    IndexDirArg,
    index_dir: PathBuf
);

service_setting!(
    /// `run`'s `--metrics-addr` (`NEWSDEDUP_METRICS_ADDR`, `[service] metrics_addr`) for
    /// `newsdedup health`, which asks the service there.
    MetricsAddrArg,
    metrics_addr: String
);

/// The file's `[service]` with every argument in `given` taken from `flags` instead.
fn layer(
    file: &ServiceConfig,
    flags: &ServiceConfig,
    given: &HashSet<String>,
) -> Result<ServiceConfig, SettingsError> {
    let table = |c: &ServiceConfig| {
        toml::Table::try_from(c).map_err(|e| invalid(format!("cannot layer the settings: {e}")))
    };
    let mut merged = table(file)?;
    for (key, value) in table(flags)? {
        if given.contains(&key) {
            merged.insert(key, value);
        }
    }
    merged
        .try_into()
        .map_err(|e| invalid(format!("cannot layer the settings: {e}")))
}

/// `--metrics-addr` (`[service] metrics_addr`) parsed.
pub fn parse_metrics_addr(addr: &str) -> Result<SocketAddr, SettingsError> {
    addr.parse().map_err(|e| {
        invalid(format!(
            "--metrics-addr {addr:?} is not an IP:PORT socket address ({e}); e.g. 0.0.0.0:9898"
        ))
    })
}

/// Checks every `[service]` value; returns the parsed metrics address.
fn validate(s: &ServiceConfig) -> Result<SocketAddr, SettingsError> {
    let metrics_addr = parse_metrics_addr(&s.metrics_addr)?;
    for (name, value) in [
        ("--max-in-flight", s.max_in_flight as u64),
        ("--max-in-flight-bytes", s.max_in_flight_bytes as u64),
        ("--max-article-bytes", s.max_article_bytes as u64),
        ("--commit-interval-ms", s.commit_interval_ms),
        ("--commit-every", s.commit_every),
        ("--progress-timeout-ms", s.progress_timeout_ms),
    ] {
        if value == 0 {
            return Err(invalid(format!("{name} must be at least 1")));
        }
    }
    for (name, value) in [
        ("--brokers", &s.brokers),
        ("--group-id", &s.group_id),
        ("--input-topic", &s.input_topic),
        ("--unique-topic", &s.unique_topic),
        ("--duplicate-topic", &s.duplicate_topic),
        ("--dlq-topic", &s.dlq_topic),
        ("--corrections-topic", &s.corrections_topic),
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
        if *out == s.corrections_topic {
            return Err(invalid(format!(
                "{name} {out:?} is the corrections topic: the service would read its own output as corrections"
            )));
        }
    }
    if s.corrections_topic == s.input_topic {
        return Err(invalid(format!(
            "--corrections-topic {:?} is the input topic: corrections need a topic of their own",
            s.corrections_topic
        )));
    }
    if s.index_dir.as_os_str().is_empty() {
        return Err(invalid("--index-dir must not be empty"));
    }
    Ok(metrics_addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    use clap::{CommandFactory, FromArgMatches, Parser};

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    /// Parses `run`'s flags as main does, then resolves them over `config`.
    fn resolve(
        args: &[&str],
        config: &Config,
        env: &[(&str, &str)],
    ) -> Result<Settings, SettingsError> {
        let matches = Cli::command()
            .try_get_matches_from(std::iter::once("run").chain(args.iter().copied()))
            .map_err(|e| invalid(e.to_string()))?;
        let cli = Cli::from_arg_matches(&matches).map_err(|e| invalid(e.to_string()))?;
        Settings::resolve(
            &cli.run,
            &given_arguments(&matches),
            config,
            env.iter().map(|(k, v)| (k.to_string(), v.to_string())),
        )
    }

    #[test]
    fn shipped_default_toml_documents_the_defaults() {
        let path = crate::config::shipped_default_toml();
        let cfg = Config::load(&path).unwrap();
        assert_eq!(cfg.service, ServiceConfig::default());
    }

    #[test]
    fn retention_flag_overrides_the_index_section_and_bad_spans_are_refused() {
        let retention = |args: &[&str], config: &Config| {
            resolve(args, config, &[])
                .unwrap()
                .components
                .index
                .retention
        };
        let mut config = Config::default();
        assert_eq!(retention(&[], &config), None);
        config.index.retention = Some("30d".parse().unwrap());
        assert_eq!(retention(&[], &config), Some(TimeSpan::from_days(30)));
        assert_eq!(
            retention(&["--retention", "12h"], &config),
            Some(TimeSpan::from_secs(12 * 3600))
        );
        let err = resolve(&["--retention", "30"], &config, &[]).unwrap_err();
        assert!(err.to_string().contains("e.g. 30d"), "{err}");
        let err = toml::from_str::<Config>("[index]\nretention = \"forever\"\n").unwrap_err();
        assert!(err.to_string().contains("e.g. 30d"), "{err}");
    }

    #[test]
    fn clap_defaults_are_the_struct_defaults() {
        let s = resolve(&[], &Config::default(), &[]).unwrap();
        assert_eq!(s.service, ServiceConfig::default());
    }

    #[test]
    fn defaults_and_precedence() {
        let s = resolve(&[], &Config::default(), &[]).unwrap();
        assert_eq!(s.service.group_id, "newsdedup");
        assert_eq!(s.service.input_topic, "articles.raw");
        assert_eq!(s.service.unique_topic, "articles.unique");
        assert_eq!(s.service.duplicate_topic, "articles.duplicate");
        assert_eq!(s.service.dlq_topic, "articles.dlq");
        assert_eq!(s.components.rule.threshold, 3);
        assert!(s.components.threads >= 1);
        assert_eq!(s.consumer_properties["enable.auto.commit"], "false");
        assert_eq!(s.consumer_properties["auto.offset.reset"], "earliest");

        let mut config: Config = toml::from_str(
            "[dedup]\nthreshold = 2\n[service]\ngroup_id = \"g-file\"\nbrokers = \"file:1\"\ncommit_every = 7\n[service.kafka]\n\"linger.ms\" = 20\n\"fetch.wait.max.ms\" = \"50\"\n",
        )
        .unwrap();
        let s = resolve(&[], &config, &[]).unwrap();
        assert_eq!(
            (
                s.service.group_id.as_str(),
                s.service.brokers.as_str(),
                s.components.rule.threshold
            ),
            ("g-file", "file:1", 2)
        );
        assert_eq!(s.service.commit_every, 7);
        assert_eq!(s.producer_properties["linger.ms"], "20");
        assert_eq!(s.consumer_properties["bootstrap.servers"], "file:1");

        config.service.dlq_topic = "dlq-file".into();
        let s = resolve(
            &[
                "--group-id",
                "g-flag",
                "--threshold",
                "1",
                "--commit-every",
                "5000",
                "-X",
                "fetch.wait.max.ms=10",
            ],
            &config,
            &[
                ("NEWSDEDUP_KAFKA_FETCH_WAIT_MAX_MS", "30"),
                ("NEWSDEDUP_KAFKA_LINGER_MS", "7"),
                ("OTHER", "x"),
            ],
        )
        .unwrap();
        assert_eq!(s.service.group_id, "g-flag");
        assert_eq!(s.components.rule.threshold, 1);
        assert_eq!(s.service.dlq_topic, "dlq-file", "file over default");
        assert_eq!(s.service.brokers, "file:1");
        assert_eq!(
            s.service.commit_every, 5000,
            "a flag equal to the default still wins"
        );
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
        let with = |p: &str| resolve(&["-X", p], &c, &[]);
        assert!(with("enable.auto.commit=true").is_err());
        assert!(with("enable.auto.commit=false").is_ok());
        assert!(with("group.id=x").is_err());
        assert!(with("nonsense").is_err());
        assert!(with("acks=1").is_err());
        assert!(with("acks=all").is_ok());
        assert!(with("acks=-1").is_ok());
        assert!(with("transactional.id=t").is_err());
        let no_idempotence = with("enable.idempotence=false").unwrap_err();
        assert!(
            no_idempotence.to_string().contains("out of order"),
            "{no_idempotence}"
        );
        assert!(with("enable.idempotence=true").is_ok());
        let short_poll = with("max.poll.interval.ms=10000").unwrap_err();
        assert!(
            short_poll.to_string().contains("rebalance-timeout-ms"),
            "{short_poll}"
        );
        assert!(resolve(
            &[
                "-X",
                "max.poll.interval.ms=10000",
                "--rebalance-timeout-ms",
                "5000"
            ],
            &c,
            &[]
        )
        .is_ok());
        assert!(resolve(&["--unique-topic", "articles.raw"], &c, &[]).is_err());
        assert!(resolve(&["--metrics-addr", "localhost"], &c, &[]).is_err());
        assert!(resolve(&["--threshold", "65"], &c, &[]).is_err());
        assert!(resolve(&["--max-in-flight", "0"], &c, &[]).is_err());
    }

    #[derive(Parser)]
    struct ReplayCli {
        #[command(flatten)]
        replay: ReplayArgs,
    }

    /// Parses `replay`'s flags as main does, then resolves them over `config`.
    fn resolve_replay(args: &[&str], config: &Config) -> Result<ReplaySettings, SettingsError> {
        let matches = ReplayCli::command()
            .try_get_matches_from(std::iter::once("replay").chain(args.iter().copied()))
            .map_err(|e| invalid(e.to_string()))?;
        let cli = ReplayCli::from_arg_matches(&matches).map_err(|e| invalid(e.to_string()))?;
        let command_line = matches
            .ids()
            .filter(|id| {
                matches.value_source(id.as_str()) == Some(clap::parser::ValueSource::CommandLine)
            })
            .map(|id| id.as_str().to_owned())
            .collect();
        ReplaySettings::resolve(
            &cli.replay,
            &given_arguments(&matches),
            &command_line,
            config,
            std::iter::empty(),
        )
    }

    #[test]
    fn replay_shares_run_settings_with_its_own_group_and_range() {
        let config: Config = toml::from_str(
            "[service]\ngroup_id = \"live\"\nbrokers = \"file:1\"\nunique_topic = \"u\"\n",
        )
        .unwrap();
        let r = resolve_replay(&["--topic", "archive"], &config).unwrap();
        assert_eq!(
            r.settings.service.group_id, REPLAY_GROUP_ID,
            "not run's group"
        );
        assert_eq!(r.settings.consumer_properties["group.id"], REPLAY_GROUP_ID);
        assert_eq!(
            r.settings.consumer_properties["enable.partition.eof"],
            "true"
        );
        assert_eq!(r.settings.service.input_topic, "archive");
        assert_eq!(
            r.settings.service.brokers, "file:1",
            "run's settings from the file"
        );
        assert_eq!(r.settings.service.unique_topic, "u");
        assert!(!r.serve_metrics, "/metrics only on request");
        assert_eq!(r.range.from_offsets, BTreeMap::new());

        let r = resolve_replay(
            &[
                "--group-id",
                "backfill",
                "--metrics-addr",
                "127.0.0.1:9999",
                "--from-offset",
                "0:12,3:0",
                "--to-time",
                "2024-03-01T00:00:00Z",
            ],
            &config,
        )
        .unwrap();
        assert_eq!(r.settings.service.group_id, "backfill");
        assert!(r.serve_metrics);
        assert_eq!(r.range.from_offsets, BTreeMap::from([(0, 12), (3, 0)]));
        assert_eq!(r.range.to_ms, Some(1_709_251_200_000));

        let refused = |args: &[&str]| resolve_replay(args, &config).unwrap_err().to_string();
        assert!(refused(&["--group-id", "live"]).contains("group of `run`"));
        assert!(refused(&["--from-offset", "0-12"]).contains("PARTITION:OFFSET"));
        assert!(refused(&["--from-offset", "1:2,1:3"]).contains("twice"));
        assert!(refused(&["--from-time", "yesterday"]).contains("--from-time"));
        assert!(
            refused(&["--from-time", "2024-03-02", "--to-time", "2024-03-01"])
                .contains("before --to-time")
        );
        assert!(
            refused(&["--from-offset", "0:1", "--from-time", "2024-03-01"])
                .contains("cannot be used with")
        );
    }
}
