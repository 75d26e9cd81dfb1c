//! The librdkafka properties of the service's clients and their rules: the user's properties
//! (`[service.kafka]` < `NEWSDEDUP_KAFKA_*` < `-X`, secrets read from `<property>.file`), the
//! ones refused (those with a flag of their own and those that would break the commit protocol),
//! the service's defaults and what it controls itself, and the routing of each property to the
//! consumer, the producer or both. Values of secret properties are never echoed.

use crate::config::ServiceConfig;
use std::collections::BTreeMap;

/// A librdkafka property the service cannot use as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PropertyError(pub String);

fn invalid(msg: impl Into<String>) -> PropertyError {
    PropertyError(msg.into())
}

/// The user's librdkafka properties: `[service.kafka]` < `NEWSDEDUP_KAFKA_*` < `-X`.
pub fn user_properties(
    file: &BTreeMap<String, toml::Value>,
    env: impl IntoIterator<Item = (String, String)>,
    flags: &[String],
) -> Result<BTreeMap<String, String>, PropertyError> {
    let mut user: BTreeMap<String, String> = BTreeMap::new();
    for (key, value) in file {
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
    for p in flags {
        let (k, v) = parse_property(p)?;
        user.insert(k, v);
    }
    read_secret_files(&mut user)?;
    Ok(user)
}

/// The properties librdkafka marks sensitive (`_RK_SENSITIVE` in its rdkafka_conf.c, 2.12):
/// librdkafka itself never logs them, and neither does the service.
const SENSITIVE: [&str; 13] = [
    "sasl.username",
    "sasl.password",
    "sasl.oauthbearer.config",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.assertion.private.key.file",
    "sasl.oauthbearer.assertion.private.key.passphrase",
    "sasl.oauthbearer.assertion.private.key.pem",
    "ssl.key.location",
    "ssl.key.password",
    "ssl.key.pem",
    "ssl.keystore.password",
    "ssl.ca.pem",
    "ssl_key",
];

/// librdkafka properties whose own names end in `.file`: passed on as given, never read as
/// `<property>.file`.
const NAMED_FILE: [&str; 3] = [
    "sasl.oauthbearer.assertion.file",
    "sasl.oauthbearer.assertion.jwt.template.file",
    "sasl.oauthbearer.assertion.private.key.file",
];

/// Whether a librdkafka property holds a secret: its value is never printed, and it can be read
/// from a file (`<property>.file`). Every property librdkafka marks sensitive, and any other whose
/// name says password or secret (a later librdkafka's, a plugin's).
pub fn is_secret_property(key: &str) -> bool {
    SENSITIVE.contains(&key) || key.contains("password") || key.contains("secret")
}

/// The warning for each secret given with `-X`: the command line is readable by every local user
/// (`/proc/<pid>/cmdline`, `ps`) and stays in shell history.
pub fn secrets_on_command_line(flags: &[String]) -> Vec<String> {
    flags
        .iter()
        .filter_map(|p| parse_property(p).ok())
        .map(|(key, _)| key)
        // A path (`<secret>.file`, `*.file`, `*.location`) or a user name is not the secret.
        .filter(|key| {
            is_secret_property(key)
                && !key.ends_with(".file")
                && !key.ends_with(".location")
                && key != "sasl.username"
        })
        .map(|key| {
            format!(
                "-X {key}=... puts a secret on the command line, readable by every local user and kept in shell history; use -X {key}.file=PATH or the variable {}",
                env_variable_name(&key)
            )
        })
        .collect()
}

/// `message` with the value of every secret property in `properties` replaced, for errors that
/// quote a client's configuration.
pub fn redact_secrets(message: &str, properties: &BTreeMap<String, String>) -> String {
    let mut out = message.to_owned();
    for (key, value) in properties {
        if is_secret_property(key) && !value.is_empty() {
            out = out.replace(value.as_str(), "<redacted>");
        }
    }
    out
}

/// Replaces each `<secret property>.file` (e.g. `sasl.password.file=/run/secrets/kafka`) with the
/// property read from that file (one trailing newline dropped), so a password need not be on the
/// command line (visible in /proc) or in the configuration file.
fn read_secret_files(user: &mut BTreeMap<String, String>) -> Result<(), PropertyError> {
    let files: Vec<(String, String)> = user
        .iter()
        .filter(|(k, _)| k.ends_with(".file") && !NAMED_FILE.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (key, path) in files {
        let property = key.trim_end_matches(".file");
        if !is_secret_property(property) {
            return Err(invalid(format!(
                "{key}: only a secret property (a password, a secret, a key; see docs/OPERATIONS.md) can be read from a file; set {property} itself"
            )));
        }
        let text = std::fs::read_to_string(path.trim()).map_err(|e| {
            invalid(format!(
                "{key}: cannot read {property} from {}: {e}",
                path.trim()
            ))
        })?;
        let secret = text
            .strip_suffix('\n')
            .map(|t| t.strip_suffix('\r').unwrap_or(t))
            .unwrap_or(&text);
        user.remove(&key);
        user.insert(property.to_owned(), secret.to_owned());
    }
    Ok(())
}

/// Refuses properties that have a flag or that would break the service's guarantees.
pub fn check_user_properties(
    user: &BTreeMap<String, String>,
    service: &ServiceConfig,
) -> Result<(), PropertyError> {
    for (key, value) in user {
        let value = value.trim();
        if let Some((_, flag)) = HAVE_FLAGS.iter().find(|(k, _)| k == key) {
            return Err(invalid(format!(
                "set {key} with {flag}, not as a librdkafka property"
            )));
        }
        let refused = match key.as_str() {
            "enable.auto.commit" | "enable.auto.offset.store" | "auto.commit.enable" => {
                (value != "false").then_some(
                    "the service commits offsets itself, only after the index write and the delivery",
                )
            }
            "acks" | "request.required.acks" => (value != "all" && value != "-1").then_some(
                "an output acknowledged by fewer than all in-sync replicas can be lost after its input offset is committed; use all (or -1)",
            ),
            "enable.idempotence" => (value != "true").then_some(
                "the producer retries failed sends; without idempotence a retry can write an output twice or out of order within its partition, and the standby and `index rebuild` read the output topics back in order",
            ),
            "auto.offset.reset" => matches!(value, "latest" | "largest" | "end").then_some(
                "a partition without a committed offset (a new group, offsets expired, or committed offsets that could not be read) would start at its end, and the records before it would never be decided; keep earliest (the default), or error to stop on such a partition",
            ),
            "transactional.id" => Some(
                "the service does not use Kafka transactions: its guarantee comes from committing only indexed and acknowledged records",
            ),
            _ => None,
        };
        if let Some(why) = refused {
            return Err(invalid(format!(
                "librdkafka property {key}={value} is not allowed: {why}"
            )));
        }
    }
    // librdkafka's default max.poll.interval.ms is 300000.
    let max_poll = match user.get("max.poll.interval.ms") {
        Some(v) => v.trim().parse::<u64>().map_err(|_| {
            invalid(format!(
                "max.poll.interval.ms={v:?} is not a number of milliseconds"
            ))
        })?,
        None => 300_000,
    };
    if service.rebalance_timeout_ms >= max_poll {
        return Err(invalid(format!(
            "--rebalance-timeout-ms {} must be below max.poll.interval.ms ({max_poll}): the revoke callback waits that long without polling, and a consumer that does not poll within max.poll.interval.ms is removed from the group",
            service.rebalance_timeout_ms
        )));
    }
    Ok(())
}

/// The consumer's and the producer's final librdkafka configuration: the service's defaults,
/// then the user's properties (each to the client it applies to), then what the service must
/// control itself.
pub fn client_properties(
    service: &ServiceConfig,
    user: &BTreeMap<String, String>,
) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let owned = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    let mut consumer = owned(&[
        ("client.id", "newsdedup"),
        ("auto.offset.reset", "earliest"),
        ("enable.partition.eof", "false"),
        // How long the broker may hold a fetch when no record is waiting. Apache Kafka answers
        // as soon as a record arrives whatever this is. Tansu (the test broker) holds a fetch
        // for up to half of it even when records wait (latency), and answers it with nothing
        // once reading the partition takes longer than this; its reads slow down as a partition
        // grows (~1 ms per 1,000 records of 3 KB). At 10 ms every fetch came back empty past
        // ~10,000 records a partition and the service silently decided 8 records/s (issue 52);
        // 250 ms still reads ~700 records/s at 90,000 a partition (an hour at 100/s on four).
        ("fetch.wait.max.ms", "250"),
        ("statistics.interval.ms", "5000"),
        // librdkafka's prefetch queue (64 MiB per partition by default) is memory outside
        // max_in_flight_bytes: keep it small, the pipeline holds the rest.
        ("queued.max.messages.kbytes", "16384"),
    ]);
    let mut producer = owned(&[
        ("client.id", "newsdedup"),
        ("acks", "all"),
        // No duplicate or reordered outputs from retried sends (a fatal idempotence error
        // stops the service: see kafka::producer).
        ("enable.idempotence", "true"),
        ("linger.ms", "5"),
        ("message.timeout.ms", "60000"),
        // Kafka's default max.message.bytes (1 MiB + 12): outputs are the input + ~0.3 KB.
        ("message.max.bytes", "1048576"),
    ]);
    for (k, v) in user {
        if !PRODUCER_ONLY.contains(&k.as_str()) {
            consumer.insert(k.clone(), v.clone());
        }
        if !CONSUMER_ONLY.contains(&k.as_str()) {
            producer.insert(k.clone(), v.clone());
        }
    }
    consumer.insert("bootstrap.servers".into(), service.brokers.clone());
    consumer.insert("group.id".into(), service.group_id.clone());
    consumer.insert("enable.auto.commit".into(), "false".into());
    consumer.insert("enable.auto.offset.store".into(), "false".into());
    producer.insert("bootstrap.servers".into(), service.brokers.clone());
    (consumer, producer)
}

/// librdkafka properties of a plain reader of the service's topics (`newsdedup audit`): the
/// user's properties that apply to a consumer (`[service.kafka]` < `NEWSDEDUP_KAFKA_*` < `-X`,
/// as for `run`), then `bootstrap.servers`.
pub fn reader_properties(
    service: &ServiceConfig,
    brokers: &str,
    env: impl IntoIterator<Item = (String, String)>,
    flags: &[String],
) -> Result<BTreeMap<String, String>, PropertyError> {
    plain_client_properties(service, brokers, env, flags, &PRODUCER_ONLY)
}

/// The properties of a plain reader of topics (audit, replay's plan, the standby's and the
/// rebuild's follower), `client_id` naming it: `properties` over the reader's defaults, then what
/// a reader must be: never a member of the service's group, never a commit, never a skip, and no
/// librdkafka statistics (a reader has no use for them, and librdkafka's default handler would
/// log each one at INFO, ~10 KB every `statistics.interval.ms`, which the service's properties
/// set).
pub fn plain_reader(
    properties: &BTreeMap<String, String>,
    client_id: &str,
) -> BTreeMap<String, String> {
    let mut reader: BTreeMap<String, String> = [("client.id", client_id)]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    reader.extend(properties.iter().map(|(k, v)| (k.clone(), v.clone())));
    reader.insert("fetch.wait.max.ms".into(), reader_fetch_wait_ms(properties));
    for (k, v) in [
        ("group.id", client_id),
        ("enable.auto.commit", "false"),
        ("enable.auto.offset.store", "false"),
        // A position past what retention kept restarts at the oldest record, never skips.
        ("auto.offset.reset", "earliest"),
        ("statistics.interval.ms", "0"),
    ] {
        reader.insert(k.to_owned(), v.to_owned());
    }
    reader
}

/// The shortest fetch wait of a reader that is not the service's consumer: 250 ms, as the
/// service's default (see `client_properties`).
pub const READER_FETCH_WAIT_MIN_MS: u64 = 250;

/// `fetch.wait.max.ms` of every reader that is not the service's consumer (audit, replay's plan,
/// the standby's and the rebuild's follower, the corrections reader): the user's value, but never
/// below [`READER_FETCH_WAIT_MIN_MS`]. A user lowers the wait for the service's latency; a reader
/// reads whole partitions, and on Tansu a short wait turns every fetch of a long partition empty
/// (a reader at 100 ms read one slowly), so a lowered wait is the service's only.
pub fn reader_fetch_wait_ms(properties: &BTreeMap<String, String>) -> String {
    let given = properties
        .get("fetch.wait.max.ms")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(READER_FETCH_WAIT_MIN_MS);
    given.max(READER_FETCH_WAIT_MIN_MS).to_string()
}

/// The user's properties (layered as for `run`) but those in `other_kind` (the properties of the
/// other kind of client), then `bootstrap.servers`.
fn plain_client_properties(
    service: &ServiceConfig,
    brokers: &str,
    env: impl IntoIterator<Item = (String, String)>,
    flags: &[String],
    other_kind: &[&str],
) -> Result<BTreeMap<String, String>, PropertyError> {
    if brokers.trim().is_empty() {
        return Err(invalid("--brokers must not be empty"));
    }
    let mut properties: BTreeMap<String, String> = user_properties(&service.kafka, env, flags)?
        .into_iter()
        .filter(|(k, _)| !other_kind.contains(&k.as_str()))
        .collect();
    properties.insert("bootstrap.servers".into(), brokers.to_owned());
    Ok(properties)
}

/// The properties of `properties` that are neither a consumer's nor a producer's own: those a
/// client needs to reach the brokers and log in (`kafka::login`), without warnings from
/// librdkafka about properties the client would ignore.
pub(crate) fn connection_properties(
    properties: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    properties
        .iter()
        .filter(|(k, _)| {
            !CONSUMER_ONLY.contains(&k.as_str()) && !PRODUCER_ONLY.contains(&k.as_str())
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// librdkafka properties of a plain writer to the service's topics (`newsdedup correct`): the
/// user's properties that apply to a producer, layered as for `run`, then `bootstrap.servers`,
/// with acknowledgement by every in-sync replica and idempotence, as `run` produces.
pub fn writer_properties(
    service: &ServiceConfig,
    brokers: &str,
    env: impl IntoIterator<Item = (String, String)>,
    flags: &[String],
) -> Result<BTreeMap<String, String>, PropertyError> {
    let mut properties = plain_client_properties(service, brokers, env, flags, &CONSUMER_ONLY)?;
    properties.insert("acks".into(), "all".into());
    properties.insert("enable.idempotence".into(), "true".into());
    Ok(properties)
}

/// `KEY=VALUE` of `-X`.
pub fn parse_property(text: &str) -> Result<(String, String), PropertyError> {
    match text.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.to_owned())),
        // The text is not echoed: it may be a mistyped `sasl.password=...`.
        _ => Err(invalid(format!(
            "an -X argument ({} characters) is not KEY=VALUE, e.g. -X security.protocol=SSL",
            text.chars().count()
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

/// `sasl.password` -> `NEWSDEDUP_KAFKA_SASL_PASSWORD`, the inverse of [`env_property_name`].
pub fn env_variable_name(property: &str) -> String {
    format!(
        "{KAFKA_ENV_PREFIX}{}",
        property
            .to_ascii_uppercase()
            .replace('_', "__")
            .replace('.', "_")
    )
}

/// Prefix of environment variables that set librdkafka properties:
/// `NEWSDEDUP_KAFKA_SECURITY_PROTOCOL=SSL` sets `security.protocol=SSL` (`_` -> `.`, `__` -> `_`).
pub const KAFKA_ENV_PREFIX: &str = "NEWSDEDUP_KAFKA_";

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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every reader's fetch wait is the user's when longer than the floor, the floor otherwise
    /// (also for a value that is not a number: librdkafka would refuse it for the service).
    #[test]
    fn a_reader_waits_at_least_the_floor() {
        let with = |v: Option<&str>| -> String {
            let properties: BTreeMap<String, String> = v
                .map(|v| ("fetch.wait.max.ms".to_owned(), v.to_owned()))
                .into_iter()
                .collect();
            reader_fetch_wait_ms(&properties)
        };
        assert_eq!(with(None), "250");
        assert_eq!(with(Some("10")), "250");
        assert_eq!(with(Some("1000")), "1000");
        assert_eq!(with(Some("soon")), "250");
    }

    /// A reader built from the service's consumer properties keeps the connection settings but
    /// neither joins the group, commits, nor asks for statistics it would only log, and a fetch
    /// wait lowered for the service's latency is not a reader's.
    #[test]
    fn a_plain_reader_never_joins_commits_or_asks_for_statistics() {
        let given: BTreeMap<String, String> = [
            ("bootstrap.servers", "b:9092"),
            ("group.id", "newsdedup"),
            ("statistics.interval.ms", "5000"),
            ("enable.auto.commit", "true"),
            ("auto.offset.reset", "latest"),
            ("fetch.wait.max.ms", "10"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let reader = plain_reader(&given, "newsdedup-standby");
        for (k, v) in [
            ("bootstrap.servers", "b:9092"),
            ("fetch.wait.max.ms", "250"),
            ("client.id", "newsdedup-standby"),
            ("group.id", "newsdedup-standby"),
            ("enable.auto.commit", "false"),
            ("enable.auto.offset.store", "false"),
            ("statistics.interval.ms", "0"),
            ("auto.offset.reset", "earliest"),
        ] {
            assert_eq!(reader.get(k).map(String::as_str), Some(v), "{k}");
        }
    }

    /// `latest` would skip records silently; `earliest` and `error` never do.
    #[test]
    fn an_offset_reset_that_skips_records_is_refused() {
        let service = ServiceConfig::default();
        for value in ["latest", "largest", "end", " latest "] {
            let user = BTreeMap::from([("auto.offset.reset".to_owned(), value.to_owned())]);
            let e = check_user_properties(&user, &service).expect_err(value);
            assert!(e.to_string().contains("never be decided"), "{e}");
        }
        for value in ["earliest", "smallest", "beginning", "error"] {
            let user = BTreeMap::from([("auto.offset.reset".to_owned(), value.to_owned())]);
            assert!(check_user_properties(&user, &service).is_ok(), "{value}");
        }
    }

    #[test]
    fn secrets_come_from_files_and_are_never_echoed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("password");
        std::fs::write(&path, "s3cret-value\n").unwrap();
        let mut user =
            BTreeMap::from([("sasl.password.file".to_owned(), path.display().to_string())]);
        read_secret_files(&mut user).unwrap();
        assert_eq!(
            user,
            BTreeMap::from([("sasl.password".to_owned(), "s3cret-value".to_owned())])
        );
        let mut not_secret = BTreeMap::from([(
            "session.timeout.ms.file".to_owned(),
            path.display().to_string(),
        )]);
        assert!(read_secret_files(&mut not_secret).is_err());
        let mut missing = BTreeMap::from([(
            "ssl.key.password.file".to_owned(),
            "/nonexistent/newsdedup-secret".to_owned(),
        )]);
        let e = read_secret_files(&mut missing).unwrap_err().to_string();
        assert!(e.contains("/nonexistent/newsdedup-secret"), "{e}");
        let e = parse_property("sasl.password:hunter2")
            .unwrap_err()
            .to_string();
        assert!(!e.contains("hunter2"), "{e}");
        let props = BTreeMap::from([("sasl.password".to_owned(), "hunter2".to_owned())]);
        let redacted = redact_secrets("Invalid value \"hunter2\" for property", &props);
        assert!(!redacted.contains("hunter2"), "{redacted}");
    }
    /// Every property librdkafka marks sensitive is redacted and readable from a file; a
    /// librdkafka property named `*.file` is passed on, not read.
    #[test]
    fn every_sensitive_property_is_a_secret() {
        for key in SENSITIVE {
            assert!(is_secret_property(key), "{key}");
            let props = BTreeMap::from([(key.to_owned(), "pem-or-passphrase".to_owned())]);
            let redacted = redact_secrets("bad value pem-or-passphrase", &props);
            assert_eq!(redacted, "bad value <redacted>", "{key}");
        }
        assert!(!is_secret_property("sasl.mechanisms"));
        let dir = tempfile::tempdir().unwrap();
        let pem = dir.path().join("key.pem");
        std::fs::write(&pem, "-----BEGIN PRIVATE KEY-----\n").unwrap();
        let mut user = BTreeMap::from([
            (
                "sasl.oauthbearer.assertion.private.key.pem.file".to_owned(),
                pem.display().to_string(),
            ),
            (
                "sasl.oauthbearer.assertion.private.key.file".to_owned(),
                "/etc/key.pem".to_owned(),
            ),
        ]);
        read_secret_files(&mut user).unwrap();
        assert_eq!(
            user,
            BTreeMap::from([
                (
                    "sasl.oauthbearer.assertion.private.key.pem".to_owned(),
                    "-----BEGIN PRIVATE KEY-----".to_owned()
                ),
                (
                    "sasl.oauthbearer.assertion.private.key.file".to_owned(),
                    "/etc/key.pem".to_owned()
                ),
            ])
        );
    }

    /// A secret given with -X is warned about, naming the safer ways; other flags are not.
    #[test]
    fn a_secret_on_the_command_line_is_warned_about() {
        let flags = [
            "security.protocol=SASL_SSL".to_owned(),
            "sasl.password=hunter2".to_owned(),
            "sasl.oauthbearer.assertion.private.key.passphrase=pp".to_owned(),
            "ssl.key.password.file=/run/secrets/key".to_owned(),
        ];
        let warnings = secrets_on_command_line(&flags);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(
            warnings[0].contains("sasl.password.file=PATH"),
            "{}",
            warnings[0]
        );
        assert!(
            warnings[0].contains("NEWSDEDUP_KAFKA_SASL_PASSWORD"),
            "{}",
            warnings[0]
        );
        assert!(warnings
            .iter()
            .all(|w| !w.contains("hunter2") && !w.contains("=pp")));
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
        for property in [
            "security.protocol",
            "ssl_key",
            "sasl.oauthbearer.client.secret",
        ] {
            let var = env_variable_name(property);
            assert_eq!(env_property_name(&var).as_deref(), Some(property), "{var}");
        }
        assert_eq!(env_property_name("NEWSDEDUP_BROKERS"), None);
    }
}
