//! The flags of `newsdedup index stats`, `verify`, `rebuild` and `delete`: the index each
//! works on and what each reads or shows.

use super::CommonOpts;
use clap::Subcommand;
use newsdedup::settings::IndexDirArg;
use newsdedup::time::TimeSpan;
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum IndexCommand {
    /// Articles, disk size, bucket occupancy (largest buckets) and age distribution (articles per
    /// day and week of event time, stream time, what is due for removal) of an index.
    Stats {
        #[command(flatten)]
        index_dir: IndexDirArg,
        /// Retention window the "due for expiry" count is for, e.g. 30d (the window is not stored
        /// in the index: give the one the service runs with).
        #[arg(long, value_name = "SPAN")]
        retention: Option<TimeSpan>,
        /// Largest buckets listed per block family.
        #[arg(long, default_value_t = 5)]
        top: usize,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        common: CommonOpts,
    },
    /// Check that the column families agree (after a crash, say). Exit 1 if they do not.
    Verify {
        #[command(flatten)]
        index_dir: IndexDirArg,
        #[command(flatten)]
        common: CommonOpts,
    },
    /// Rebuild an index from the service's own output (after losing the index disk): the output
    /// topics (default) or `batch` output files (--input). Unique articles become searchable
    /// again, duplicates keep their decisions; fingerprints are checked against the configured
    /// identity. Resumes where it stopped when run again on the same --index-dir.
    Rebuild {
        /// The index to build (new or partly rebuilt; stop the service first)
        #[arg(long)]
        index_dir: PathBuf,
        /// Kafka bootstrap servers [default: [service] brokers of --config, localhost:9092]
        #[arg(long, env = "NEWSDEDUP_BROKERS", value_name = "HOST:PORT,...")]
        brokers: Option<String>,
        /// Output topics to read, comma-separated [default: [service] unique_topic and
        /// duplicate_topic: articles.unique,articles.duplicate]
        #[arg(long, value_name = "TOPIC,...", value_delimiter = ',')]
        from_topics: Vec<String>,
        /// `batch` output file(s) to read instead of Kafka, in order (repeatable)
        #[arg(long, value_name = "FILE")]
        input: Vec<PathBuf>,
        /// Fingerprint threads [default: number of CPUs]
        #[arg(long)]
        threads: Option<usize>,
        /// librdkafka property of the reader (repeatable), as for `run`
        #[arg(short = 'X', value_name = "KEY=VALUE")]
        properties: Vec<String>,
        /// No progress lines on stderr (the summary is still printed)
        #[arg(long)]
        quiet: bool,
        #[command(flatten)]
        common: CommonOpts,
    },
    /// Remove articles (a publisher's takedown, a retraction) from every family, atomically; later
    /// copies are then judged against what remains. Stop the service first (the index is locked).
    Delete {
        /// Index directory to delete from (stop the service first: it is locked)
        #[arg(long)]
        index_dir: PathBuf,
        /// Article ids to remove (repeatable, or several after one --id).
        #[arg(long = "id", required = true, num_args = 1..)]
        ids: Vec<String>,
    },
}
