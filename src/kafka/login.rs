//! The SASL login, checked before a command's Kafka clients are used.
//!
//! librdkafka treats a refused login like a broker that went away: it logs the refusal, waits
//! and tries again, for ever. A command that reads or writes a few records would then wait for
//! its own timeouts and end with "is the broker reachable?", which names neither the setting at
//! fault nor what to do. So before creating its clients, a command whose properties ask for SASL
//! (`security.protocol=SASL_PLAINTEXT` or `SASL_SSL`) logs in once with a throwaway client and
//! asks for the cluster's metadata: a refusal (wrong user or password, a mechanism the broker
//! does not enable) ends the command with a [`LoginError`] that names the setting; a broker that
//! does not answer in time is left to the command's own handling, as without SASL.
//!
//! `run` and `standby`, which keep running while the broker is away, say the same in their log
//! and in `/ready` ([`advice`], used by `ServiceClientContext`), and keep retrying: a user
//! created on the broker after the service started is then picked up without a restart.

use parking_lot::Mutex;
use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::ClientConfig;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long the check waits for the broker to answer at all; a broker that refuses a login does
/// so within a round trip of the connection.
const LOGIN_WAIT: Duration = Duration::from_secs(10);
/// One metadata request of the check, between which refusals are looked at.
const METADATA_SLICE: Duration = Duration::from_millis(500);

/// The broker refused this client's SASL login.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoginError {
    /// The mechanism of `sasl.mechanisms` is not enabled on the broker.
    #[error(
        "the Kafka broker does not accept sasl.mechanisms={mechanism}: {reason}; {}",
        MECHANISM_ADVICE
    )]
    Mechanism { mechanism: String, reason: String },
    /// The user is unknown or the password wrong.
    #[error("the Kafka broker refused the SASL login of sasl.username={username:?} (sasl.mechanisms={mechanism}): {reason}; {}", CREDENTIALS_ADVICE)]
    Credentials {
        username: String,
        mechanism: String,
        reason: String,
    },
}

const MECHANISM_ADVICE: &str = "set sasl.mechanisms to one of the mechanisms the broker lists";
const CREDENTIALS_ADVICE: &str = "check sasl.username and sasl.password (or the file sasl.password.file names) against the user the broker holds for this mechanism";

/// What to do about a refused login, from librdkafka's reason: names the setting at fault.
pub fn advice(reason: &str) -> &'static str {
    if is_mechanism_refusal(reason) {
        MECHANISM_ADVICE
    } else {
        CREDENTIALS_ADVICE
    }
}

/// librdkafka's "SASL <mechanism> mechanism handshake failed: ...: broker's supported
/// mechanisms: ..." (the refusal of the mechanism, before any credential is sent).
fn is_mechanism_refusal(reason: &str) -> bool {
    reason.contains("mechanism handshake failed")
}

/// Whether `properties` (a client's librdkafka properties) log in with SASL.
fn uses_sasl(properties: &BTreeMap<String, String>) -> bool {
    properties
        .get("security.protocol")
        .is_some_and(|p| p.trim().to_ascii_lowercase().starts_with("sasl"))
}

/// Logs in once with `properties` (a client's librdkafka properties, `bootstrap.servers`
/// included) when they ask for SASL; see the module documentation.
pub fn check(properties: &BTreeMap<String, String>) -> Result<(), LoginError> {
    if !uses_sasl(properties) {
        return Ok(());
    }
    let mut config = ClientConfig::new();
    for (k, v) in super::properties::connection_properties(properties) {
        config.set(k, v);
    }
    let Ok(client) = config.create_with_context::<_, BaseConsumer<Probe>>(Probe::default()) else {
        // The command's own client creation reports the configuration error.
        return Ok(());
    };
    let refused = |client: &BaseConsumer<Probe>| -> Option<String> {
        // Serves the client's error events (to `Probe::error`).
        while client.poll(Duration::ZERO).is_some() {}
        client.context().refusal()
    };
    let start = Instant::now();
    while start.elapsed() < LOGIN_WAIT {
        if client.fetch_metadata(None, METADATA_SLICE).is_ok() {
            return Ok(());
        }
        if let Some(reason) = refused(&client) {
            return Err(refusal(properties, &reason));
        }
    }
    match refused(&client) {
        Some(reason) => Err(refusal(properties, &reason)),
        None => {
            tracing::debug!("no answer from the Kafka broker within {LOGIN_WAIT:?} to check the SASL login; going on");
            Ok(())
        }
    }
}

fn refusal(properties: &BTreeMap<String, String>, reason: &str) -> LoginError {
    let get = |k: &str| properties.get(k).cloned().unwrap_or_default();
    // librdkafka's default mechanism.
    let mechanism = properties
        .get("sasl.mechanisms")
        .or_else(|| properties.get("sasl.mechanism"))
        .cloned()
        .unwrap_or_else(|| "GSSAPI".to_owned());
    let reason = super::properties::redact_secrets(reason, properties);
    if is_mechanism_refusal(&reason) {
        LoginError::Mechanism { mechanism, reason }
    } else {
        LoginError::Credentials {
            username: get("sasl.username"),
            mechanism,
            reason,
        }
    }
}

/// The check's client context: keeps librdkafka's reason for a refused login and keeps
/// librdkafka's own log lines about it out of the command's log (the command reports it once).
#[derive(Default)]
struct Probe {
    refused: Mutex<Option<String>>,
}

impl Probe {
    fn refusal(&self) -> Option<String> {
        self.refused.lock().clone()
    }
}

impl ClientContext for Probe {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        tracing::debug!("librdkafka (login check) {level:?} {fac}: {log_message}");
    }

    fn error(&self, error: KafkaError, reason: &str) {
        if error.rdkafka_error_code() == Some(RDKafkaErrorCode::Authentication) {
            self.refused.lock().get_or_insert_with(|| reason.to_owned());
        } else {
            tracing::debug!("Kafka login check: {error}: {reason}");
        }
    }
}

impl ConsumerContext for Probe {}

#[cfg(test)]
mod tests {
    use super::*;

    fn properties(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// librdkafka's two refusals (rdkafka_broker.c, rdkafka_request.c) name their setting, and
    /// the password never shows.
    #[test]
    fn a_refusal_names_the_setting_at_fault() {
        let p = properties(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanisms", "SCRAM-SHA-256"),
            ("sasl.username", "svc"),
            ("sasl.password", "hunter2-secret"),
        ]);
        let e = refusal(&p, "127.0.0.1:9092/bootstrap: SASL authentication error: Authentication failed (hunter2-secret)").to_string();
        assert!(e.contains("sasl.username=\"svc\""), "{e}");
        assert!(e.contains("sasl.password"), "{e}");
        assert!(!e.contains("hunter2-secret"), "{e}");
        let e = refusal(&p, "127.0.0.1:9092/bootstrap: SASL SCRAM-SHA-256 mechanism handshake failed: Broker: Unsupported SASL mechanism: broker's supported mechanisms: PLAIN").to_string();
        assert!(e.contains("sasl.mechanisms=SCRAM-SHA-256"), "{e}");
        assert!(e.contains("supported mechanisms: PLAIN"), "{e}");
        assert!(!e.contains("sasl.password"), "{e}");
    }

    #[test]
    fn only_sasl_protocols_are_checked() {
        assert!(uses_sasl(&properties(&[("security.protocol", "sasl_ssl")])));
        assert!(uses_sasl(&properties(&[(
            "security.protocol",
            "SASL_PLAINTEXT"
        )])));
        assert!(!uses_sasl(&properties(&[("security.protocol", "SSL")])));
        assert!(!uses_sasl(&properties(&[])));
        // Nothing to check: no client is made, whatever the brokers.
        assert_eq!(
            check(&properties(&[("bootstrap.servers", "127.0.0.1:1")])),
            Ok(())
        );
    }
}
