//! The flags of `newsdedup audit`: where the decisions are read (the output topics in a time
//! range, or a `batch` output file), how the shown pairs are drawn, and the files written. Its
//! help text and examples are on `Command::Audit`.

use clap::Args;
use std::path::PathBuf;

#[derive(Args)]
pub struct AuditArgs {
    /// Kafka bootstrap servers [default: [service] brokers of --config, localhost:9092]
    #[arg(long, env = "NEWSDEDUP_BROKERS", value_name = "HOST:PORT,...")]
    pub brokers: Option<String>,
    /// Audit this `batch` output file (JSONL) instead of the Kafka topics
    #[arg(long, value_name = "FILE")]
    pub input: Option<PathBuf>,
    /// Topic of the unique articles, where originals are found by key [default: [service]
    /// unique_topic, articles.unique]
    #[arg(long, env = "NEWSDEDUP_UNIQUE_TOPIC", value_name = "TOPIC")]
    pub unique_topic: Option<String>,
    /// Topic of the duplicates [default: [service] duplicate_topic, articles.duplicate]
    #[arg(long, env = "NEWSDEDUP_DUPLICATE_TOPIC", value_name = "TOPIC")]
    pub duplicate_topic: Option<String>,
    /// Only Kafka records whose timestamp is at or after TIME: 2024-03-01T08:00:00Z,
    /// 2024-03-01T16:00:00+08:00, "2024-03-01 08:00" (UTC), 2024-03-01, or Unix seconds or
    /// milliseconds [default: the oldest record]
    #[arg(long, value_name = "TIME")]
    pub from_time: Option<String>,
    /// Only Kafka records whose timestamp is before TIME [default: up to the end of each
    /// partition when the audit starts]
    #[arg(long, value_name = "TIME")]
    pub to_time: Option<String>,
    /// Pairs drawn at random from the duplicates that do not look wrong; suspicious pairs are
    /// always shown, first (at most 500 side by side; the first 5,000 in the report's table, all
    /// counted)
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub sample: usize,
    /// Seed of the random draw: the same records and seed give the same pairs
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// A duplicate whose decision's containment is below this looks wrong
    #[arg(long, value_name = "X", default_value_t = 0.5)]
    pub low_containment: f64,
    /// The report to write (HTML)
    #[arg(long, value_name = "FILE")]
    pub html: PathBuf,
    /// Also write one JSON line per shown pair (ids, titles, reasons, the decision's and the
    /// recomputed numbers, the share of each text in shared passages)
    #[arg(long, value_name = "FILE")]
    pub jsonl: Option<PathBuf>,
    /// librdkafka property of the reader (repeatable), e.g. -X security.protocol=SSL; also
    /// [service.kafka] of --config and NEWSDEDUP_KAFKA_<NAME> variables, as for `run`
    #[arg(short = 'X', value_name = "KEY=VALUE")]
    pub properties: Vec<String>,
    /// No progress lines on stderr (the summary is still printed)
    #[arg(long)]
    pub quiet: bool,
}
