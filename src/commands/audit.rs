//! `newsdedup audit`: the duplicates of a time range of the output topics (each with its
//! original found by key), or of a `batch` output file, collected and sampled, each shown
//! pair's numbers recomputed by the code of `compare`, and the report written as one HTML file
//! (and, with --jsonl, one JSON line per shown pair).

use super::{fingerprinter, open_output, resolve};
use crate::cli::audit::AuditArgs;
use crate::cli::CommonOpts;
use anyhow::{bail, Context, Result};
use newsdedup::article::DEFAULT_MAX_ARTICLE_BYTES;
use newsdedup::audit::{self, AuditOptions, Header, Plan};
use newsdedup::components::Overrides;
use newsdedup::config::Config;
use newsdedup::kafka::audit_source::{self, KafkaAudit};
use std::collections::HashSet;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;
use std::time::Duration;

/// `command_line`: the ids of the flags given on the command line (not from a variable), which
/// --input refuses when they are for reading Kafka.
pub fn execute(a: AuditArgs, common: CommonOpts, command_line: &HashSet<String>) -> Result<()> {
    let (config, components) = resolve(&common, Overrides::default())?;
    if !(0.0..=1.0).contains(&a.low_containment) {
        bail!(
            "--low-containment {} is out of range 0..=1",
            a.low_containment
        );
    }
    let opts = AuditOptions {
        sample: a.sample,
        seed: a.seed,
        low_containment: a.low_containment,
        ..AuditOptions::default()
    };
    let progress = (!a.quiet).then_some(Duration::from_secs(5));
    let fp = fingerprinter(&components)?;
    let (plan, scope) = match &a.input {
        Some(input) => from_file(input, command_line, opts, progress)?,
        None => from_topics(&a, &config, opts, progress)?,
    };
    let header = Header {
        scope,
        generated_ms: newsdedup::dedup::now_ms() as i64,
    };
    let report = plan.finish(&fp, &components.rule, header);
    std::fs::write(&a.html, audit::html::render(&report))
        .with_context(|| format!("cannot write the report {}", a.html.display()))?;
    if let Some(path) = &a.jsonl {
        let mut out = open_output(path)?;
        report
            .write_jsonl(&mut out)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    eprintln!("audit: done: {}", report.summary_json());
    eprintln!("audit: wrote {}", a.html.display());
    Ok(())
}

/// The labelled lines of the report's scope: what was read.
type Scope = Vec<(String, String)>;

/// The pairs of a `batch` output file; the flags for reading Kafka are refused with it.
fn from_file(
    input: &Path,
    command_line: &HashSet<String>,
    opts: AuditOptions,
    progress: Option<Duration>,
) -> Result<(Plan, Scope)> {
    let kafka_only = [
        ("brokers", "--brokers"),
        ("unique_topic", "--unique-topic"),
        ("duplicate_topic", "--duplicate-topic"),
        ("from_time", "--from-time"),
        ("to_time", "--to-time"),
        ("properties", "-X"),
    ];
    if let Some((_, flag)) = kafka_only.iter().find(|(id, _)| command_line.contains(*id)) {
        bail!("{flag} is for reading Kafka; --input audits a whole `batch` output file");
    }
    let file =
        File::open(input).with_context(|| format!("cannot open input {}", input.display()))?;
    let max_line = DEFAULT_MAX_ARTICLE_BYTES + newsdedup::output::MAX_DEDUP_MEMBER_BYTES;
    let plan = audit::jsonl::collect(
        BufReader::with_capacity(1 << 16, file),
        opts,
        max_line,
        progress,
    )
    .with_context(|| format!("cannot audit {}", input.display()))?;
    Ok((
        plan,
        vec![("input".to_owned(), input.display().to_string())],
    ))
}

/// The duplicates of the duplicate topic in the time range, with their originals found by key
/// in the unique topic.
fn from_topics(
    a: &AuditArgs,
    config: &Config,
    opts: AuditOptions,
    progress: Option<Duration>,
) -> Result<(Plan, Scope)> {
    let service = &config.service;
    let brokers = a.brokers.clone().unwrap_or_else(|| service.brokers.clone());
    let duplicate_topic = a
        .duplicate_topic
        .clone()
        .unwrap_or_else(|| service.duplicate_topic.clone());
    let unique_topic = a
        .unique_topic
        .clone()
        .unwrap_or_else(|| service.unique_topic.clone());
    let time = |t: &Option<String>, flag: &str| {
        t.as_deref()
            .map(newsdedup::time::parse_time_arg)
            .transpose()
            .with_context(|| format!("invalid {flag}"))
    };
    let (from_ms, to_ms) = (
        time(&a.from_time, "--from-time")?,
        time(&a.to_time, "--to-time")?,
    );
    if let (Some(f), Some(t)) = (from_ms, to_ms) {
        if f >= t {
            bail!("--from-time must be before --to-time");
        }
    }
    let env = newsdedup::service::process_env();
    super::warn_about_secret_flags(&a.properties);
    let properties =
        newsdedup::kafka::properties::reader_properties(service, &brokers, env, &a.properties)
            .context("invalid Kafka settings for `audit`")?;
    let range = match (from_ms, to_ms) {
        (None, None) => "every record".to_owned(),
        (f, t) => format!(
            "record timestamps from {} to {}",
            f.map_or_else(
                || "the oldest record".to_owned(),
                newsdedup::time::format_utc
            ),
            t.map_or_else(
                || "the end at the start of the audit".to_owned(),
                newsdedup::time::format_utc
            ),
        ),
    };
    let scope = vec![
        (
            "duplicates".to_owned(),
            format!("{duplicate_topic} on {brokers}"),
        ),
        ("originals".to_owned(), format!("{unique_topic} (by key)")),
        ("time range".to_owned(), range),
    ];
    let source = KafkaAudit {
        properties,
        duplicate_topic,
        unique_topic,
        from_ms,
        to_ms,
        progress,
    };
    let plan = audit_source::collect(&source, opts)
        .with_context(|| format!("cannot audit the topics on {brokers}"))?;
    Ok((plan, scope))
}
