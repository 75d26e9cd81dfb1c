//! The command line's definitions: every command, flag and help text of `newsdedup`, as clap
//! reads them, and nothing that acts on them. `Command` names the commands (its variants' doc
//! comments are their help); each command with flags of its own defines them in the file of its
//! name, and `crate::commands` turns them into what the command runs. `run`, `standby` and
//! `replay` take the service's settings (`newsdedup::settings`), defined beside the code that
//! layers them over the configuration file.

pub mod audit;
pub mod batch;
pub mod compare;
pub mod correct;
pub mod fingerprint;
pub mod health;
pub mod index;

use clap::{Args, Parser, Subcommand};
use newsdedup::settings::{ReplayArgs, RunArgs};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "newsdedup",
    version,
    about = "Near-duplicate news detection: jieba + TF-IDF simhash + RocksDB block index"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Args, Clone)]
pub struct CommonOpts {
    /// TOML configuration file (see config/default.toml); defaults are built in.
    #[arg(long, global = true, env = "NEWSDEDUP_CONFIG")]
    pub config: Option<PathBuf>,
}

#[derive(Subcommand)]
pub enum Command {
    /// Print the fingerprint of each article of a JSONL stream.
    Fingerprint(fingerprint::FingerprintArgs),
    /// Compare two articles (article JSON files or plain text files): distance, verdict, features.
    Compare(compare::CompareArgs),
    /// Decide a JSONL stream against a persistent index, in input order (same code as the consumer).
    Batch(batch::BatchArgs),
    /// Kafka consumer service: articles.raw -> articles.unique / articles.duplicate / articles.dlq.
    Run {
        #[command(flatten)]
        args: Box<RunArgs>,
        #[command(flatten)]
        common: CommonOpts,
    },
    /// Warm standby: keeps its own index current by following the output topics (never joins the
    /// input topic's group); serves its lag on /metrics and /ready. Takes the same settings as
    /// `run` (flags, variables, --config): `newsdedup run` with them on its --index-dir takes over.
    Standby {
        #[command(flatten)]
        args: Box<RunArgs>,
        /// /ready answers 200 once caught up and at most this many records behind the output
        /// topics
        #[arg(long, value_name = "N", default_value_t = 1000)]
        max_ready_lag: u64,
        #[command(flatten)]
        common: CommonOpts,
    },
    /// Bounded backfill: decide a range of a topic with `run`'s settings, index and output topics
    /// (or into a JSONL file), commit as `run` does, and stop at the end of the range.
    ///
    /// Reads with its own consumer group (default newsdedup-replay), every partition in range
    /// assigned at its start offset; stops at the end each partition had when the replay started
    /// (or at its first record at or after --to-time), then prints a summary and exits 0. Exits
    /// non-zero when the range is empty, the broker or topic cannot be read, or on SIGINT/SIGTERM
    /// (after draining and committing; the error says which --from-offset goes on from there).
    #[command(after_help = "Examples:
  newsdedup replay --config prod.toml --topic articles.raw --from-time 2024-03-01T00:00:00Z --to-time 2024-03-02T00:00:00Z
  newsdedup replay --brokers kafka:9092 --topic articles.raw --from-offset 0:120000,1:118500
  newsdedup replay --brokers kafka:9092 --topic articles.raw --index-dir /tmp/index-copy --output dry-run.jsonl")]
    Replay {
        #[command(flatten)]
        args: Box<ReplayArgs>,
        #[command(flatten)]
        common: CommonOpts,
    },
    /// Audit report of the duplicates, for editors: totals and rates, distance and containment
    /// histograms, duplicates by source and over time, and pairs side by side with their shared
    /// passages highlighted (pairs that look wrong first), in one self-contained HTML file.
    ///
    /// Reads the duplicate topic (in the time range) and finds each duplicate's original in the
    /// unique topic by key; or, with --input, reads a `batch` output file (originals in the same
    /// file). The numbers of each shown pair are recomputed from both texts by the code of
    /// `compare`, with the [fingerprint] and [dedup] settings of --config. A pair looks wrong when
    /// its containment is low, its original was published later, or its original is missing.
    #[command(after_help = "Examples:
  newsdedup audit --brokers kafka:9092 --from-time 2024-03-01 --to-time 2024-03-02 --html report.html
  newsdedup audit --input decided.jsonl --sample 50 --html report.html --jsonl pairs.jsonl")]
    Audit {
        #[command(flatten)]
        args: Box<audit::AuditArgs>,
        #[command(flatten)]
        common: CommonOpts,
    },
    /// Ask a running `run` or `standby` whether it is healthy: GET /health (or /ready) on the
    /// metrics address it serves, which is resolved as `run` resolves it (--metrics-addr,
    /// NEWSDEDUP_METRICS_ADDR, [service] metrics_addr of --config; 0.0.0.0 and [::] are asked on
    /// the loopback). Prints the answer; exit 0 on 200, 1 otherwise. The container image's
    /// HEALTHCHECK.
    Health(health::HealthArgs),
    /// Inspect, verify, rebuild or delete from an index.
    Index {
        #[command(subcommand)]
        command: index::IndexCommand,
    },
    /// Correct a decision: release a false duplicate, or merge a missed one. The correction goes
    /// through the corrections topic to `run`, which applies it with its single writer and
    /// publishes the article again with `dedup.correction`; standbys and rebuilds see it there.
    Correct {
        #[command(subcommand)]
        command: correct::CorrectCommand,
    },
}
