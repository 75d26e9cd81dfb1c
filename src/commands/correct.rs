//! `newsdedup correct release` and `correct merge`: an editor's correction of one decision,
//! checked against the article's current decision (read from the output topics or a `batch`
//! output file), then produced to the corrections topic (waiting for the service to apply it)
//! or appended to a file for `batch --corrections`; the outcome printed as one JSON line.

use super::resolve;
use crate::cli::correct::{CorrectArgs, CorrectCommand};
use anyhow::{bail, Context, Result};
use newsdedup::article::DEFAULT_MAX_ARTICLE_BYTES;
use newsdedup::components::Overrides;
use newsdedup::correct;
use newsdedup::index::CorrectionKind;
use newsdedup::signing::{SigningKey, SigningKeys};
use serde_json::json;
use std::time::Duration;

pub fn execute(command: CorrectCommand) -> Result<()> {
    let (kind, into, args) = match command {
        CorrectCommand::Release { args } => (CorrectionKind::Release, None, args),
        CorrectCommand::Merge { into, args } => (CorrectionKind::Merge, Some(into), args),
    };
    correct_one(kind, into, *args)
}

/// The key `correct` signs with: --key-id (its secret from --key-file, else from [corrections]
/// keys), else [corrections] sign_with.
fn signing_key(
    a: &CorrectArgs,
    config: &newsdedup::config::CorrectionsConfig,
) -> Result<Option<SigningKey>> {
    let Some(id) = a.key_id.as_ref().or(config.sign_with.as_ref()) else {
        return Ok(None);
    };
    let key = match &a.key_file {
        Some(path) => SigningKey::read(id, path)?,
        None => SigningKeys::load(config)
            .context("invalid [corrections] keys")?
            .get(id)?
            .clone(),
    };
    Ok(Some(key))
}

/// The correction `kind` of the article of `a` (into `into`, for a merge), sent and reported.
fn correct_one(kind: CorrectionKind, into: Option<String>, a: CorrectArgs) -> Result<()> {
    let (config, components) = resolve(&a.common, Overrides::default())?;
    let service = &config.service;
    let pick =
        |flag: &Option<String>, default: &str| flag.clone().unwrap_or_else(|| default.to_owned());
    let topics = correct::Topics {
        unique: pick(&a.unique_topic, &service.unique_topic),
        duplicate: pick(&a.duplicate_topic, &service.duplicate_topic),
        dlq: pick(&a.dlq_topic, &service.dlq_topic),
        corrections: pick(&a.corrections_topic, &service.corrections_topic),
    };
    let brokers = pick(&a.brokers, &service.brokers);
    let env = || newsdedup::service::process_env();
    super::warn_about_secret_flags(&a.properties);
    let reader = || {
        newsdedup::kafka::properties::reader_properties(service, &brokers, env(), &a.properties)
            .context("invalid Kafka settings for `correct`")
    };
    if a.records.is_some() && a.since.is_some() {
        bail!("--since bounds the reading of the output topics; --records reads a whole file");
    }
    let records = match &a.records {
        Some(path) => correct::Records::File(path.clone()),
        None => correct::Records::Kafka {
            properties: reader()?,
            topics: topics.clone(),
        },
    };
    let destination = match &a.write {
        Some(path) => correct::Destination::File(path.clone()),
        None => correct::Destination::Kafka {
            reader: reader()?,
            writer: newsdedup::kafka::properties::writer_properties(
                service,
                &brokers,
                env(),
                &a.properties,
            )
            .context("invalid Kafka settings for `correct`")?,
            topics: topics.clone(),
            wait: Duration::from_secs(a.wait),
        },
    };
    let request = correct::Request {
        kind,
        id: a.id.clone(),
        into,
        by: a.by.clone().or_else(|| std::env::var("USER").ok()),
        reason: a.reason.clone(),
        signing_key: signing_key(&a, &components.corrections)?,
        audience: pick(&a.audience, &service.group_id),
        valid_for_ms: a.valid_for.as_ms(),
    };
    let rules = correct::Rules {
        retention: a.retention.or(components.index.retention),
        published_at_offset: components.published_at_offset,
        max_record_bytes: DEFAULT_MAX_ARTICLE_BYTES + newsdedup::output::MAX_DEDUP_MEMBER_BYTES,
        progress: !a.quiet,
        since_ms: a
            .since
            .as_deref()
            .map(newsdedup::time::parse_time_arg)
            .transpose()
            .context("invalid --since")?,
    };
    let (correction, outcome) = correct::correct(&request, &records, &destination, &rules)?;
    let mut report = json!({"kind": kind.as_str(), "id": request.id});
    if let Some(c) = &correction {
        report["into"] = json!(c.into);
        report["by"] = json!(c.by);
        if let Some(key_id) = &c.key_id {
            report["key_id"] = json!(key_id);
        }
        report["reason"] = json!(c.reason);
        report["at"] = json!(c.at);
    }
    let (outcome_name, result) = match &outcome {
        correct::Outcome::Refused(r) => ("refused", Err(anyhow::anyhow!("refused: {r}"))),
        correct::Outcome::RefusedByService { reason, message } => {
            report["reason_code"] = json!(reason);
            (
                "refused",
                Err(anyhow::anyhow!(
                    "the service refused the correction: {message}"
                )),
            )
        }
        correct::Outcome::Written(path) => {
            report["file"] = json!(path.display().to_string());
            ("written", Ok(()))
        }
        correct::Outcome::Applied {
            topic,
            partition,
            offset,
        } => {
            report["record"] = json!({"topic": topic, "partition": partition, "offset": offset});
            ("applied", Ok(()))
        }
        correct::Outcome::Produced {
            partition,
            offset,
            waited,
        } => {
            report["produced"] =
                json!({"topic": topics.corrections, "partition": partition, "offset": offset});
            if *waited {
                (
                    "produced",
                    Err(anyhow::Error::new(correct::NotConfirmed {
                        topic: topics.corrections.clone(),
                        partition: *partition,
                        offset: *offset,
                        secs: a.wait,
                    })),
                )
            } else {
                ("produced", Ok(()))
            }
        }
    };
    report["outcome"] = json!(outcome_name);
    println!("{report}");
    result
}
