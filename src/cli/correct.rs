//! The flags of `newsdedup correct release` and `correct merge`: the article and who corrects
//! it and why, where its decision is read and the correction sent (topics, or files), and how
//! long to wait for the service to apply it.

use super::CommonOpts;
use clap::{Args, Subcommand};
use newsdedup::time::TimeSpan;
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum CorrectCommand {
    /// Release a false duplicate: it is published to the unique topic and indexed as unique, and
    /// it and the article it was linked to never link again, in either direction.
    Release {
        #[command(flatten)]
        args: Box<CorrectArgs>,
    },
    /// Merge a missed duplicate into ORIGINAL: it is published to the duplicate topic with
    /// ORIGINAL as its match, stops being a match itself, and later copies of it link to
    /// ORIGINAL.
    Merge {
        /// The earlier article it repeats (a unique one).
        #[arg(long, value_name = "ORIGINAL")]
        into: String,
        #[command(flatten)]
        args: Box<CorrectArgs>,
    },
}

#[derive(Args)]
pub struct CorrectArgs {
    /// The article to correct.
    #[arg(long)]
    pub id: String,
    /// Who makes the correction (shown to auditors) [default: $USER]
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
    /// Why (shown to auditors).
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
    /// Kafka bootstrap servers [default: [service] brokers of --config, localhost:9092]
    #[arg(long, env = "NEWSDEDUP_BROKERS", value_name = "HOST:PORT,...")]
    pub brokers: Option<String>,
    /// Topic the correction is produced to [default: [service] corrections_topic,
    /// articles.corrections]
    #[arg(long, env = "NEWSDEDUP_CORRECTIONS_TOPIC", value_name = "TOPIC")]
    pub corrections_topic: Option<String>,
    /// Topic of the unique articles, where decisions are looked up and a release is published
    /// [default: [service] unique_topic, articles.unique]
    #[arg(long, env = "NEWSDEDUP_UNIQUE_TOPIC", value_name = "TOPIC")]
    pub unique_topic: Option<String>,
    /// Topic of the duplicates, where decisions are looked up and a merge is published
    /// [default: [service] duplicate_topic, articles.duplicate]
    #[arg(long, env = "NEWSDEDUP_DUPLICATE_TOPIC", value_name = "TOPIC")]
    pub duplicate_topic: Option<String>,
    /// Dead-letter topic, where the service puts a correction it refuses [default: [service]
    /// dlq_topic, articles.dlq]
    #[arg(long, env = "NEWSDEDUP_DLQ_TOPIC", value_name = "TOPIC")]
    pub dlq_topic: Option<String>,
    /// Wait up to this many seconds for the service to apply (or refuse) the correction; 0: only
    /// produce it. Not applied in time: exit status 3 (it is applied when the service reads it).
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub wait: u64,
    /// Retention window of the service's index, e.g. 30d [default: [index] retention]: an article
    /// older than it is refused (it no longer matches anything).
    #[arg(long, value_name = "SPAN")]
    pub retention: Option<TimeSpan>,
    /// Look for the articles' decisions only in output records of TIME or later (2024-03-01,
    /// RFC 3339, Unix seconds or ms) instead of reading the topics from their beginning: quicker
    /// on long topics; the original of a merge must be decided by then too.
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Read the article's current decision from this `batch` output file instead of the topics.
    #[arg(long, value_name = "FILE")]
    pub records: Option<PathBuf>,
    /// Append the correction to this JSONL file (for `batch --corrections`) instead of
    /// producing it.
    #[arg(long, value_name = "FILE")]
    pub write: Option<PathBuf>,
    /// No progress lines on stderr.
    #[arg(long)]
    pub quiet: bool,
    /// librdkafka property for reading and producing, KEY=VALUE (repeatable), over the config
    /// file's [service.kafka] and NEWSDEDUP_KAFKA_* variables.
    #[arg(short = 'X', value_name = "KEY=VALUE")]
    pub properties: Vec<String>,
    /// Sign the correction with this key of [corrections] keys (with --key-file: the key in
    /// that file, under this id) [default: [corrections] sign_with; none: unsigned]
    #[arg(long, env = "NEWSDEDUP_CORRECTION_KEY_ID", value_name = "ID")]
    pub key_id: Option<String>,
    /// The service the correction is for: the consumer group of its `run` (signed; a service of
    /// another group refuses it) [default: [service] group_id, newsdedup]
    #[arg(long, env = "NEWSDEDUP_GROUP_ID", value_name = "GROUP")]
    pub audience: Option<String>,
    /// How long the correction may apply after it is made, e.g. 12h, 7d (at most 31d; signed:
    /// past it, the service refuses it, DLQ reason expired_correction)
    #[arg(long, value_name = "SPAN", default_value = "1d")]
    pub valid_for: TimeSpan,
    /// The secret of the --key-id key, read from this file (at least 32 bytes).
    #[arg(
        long,
        env = "NEWSDEDUP_CORRECTION_KEY_FILE",
        value_name = "FILE",
        requires = "key_id"
    )]
    pub key_file: Option<PathBuf>,
    #[command(flatten)]
    pub common: CommonOpts,
}
