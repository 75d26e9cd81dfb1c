//! The `newsdedup` command line. Thin: parses arguments, wires the library together, reports
//! errors with context.

use anyhow::{bail, Context, Result};
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use newsdedup::article::{Article, DEFAULT_MAX_ARTICLE_BYTES};
use newsdedup::audit::{self, AuditOptions, Header};
use newsdedup::batch::{self, BatchOptions, JsonLine};
use newsdedup::compare::{compare, feature_json, CompareInput};
use newsdedup::components::{Components, Overrides};
use newsdedup::config::Config;
use newsdedup::correct;
use newsdedup::fingerprint::{Fingerprinter, ImageUse};
use newsdedup::index::CorrectionKind;
use newsdedup::index::{ArticleStore, Crowded, RocksIndex};
use newsdedup::kafka::audit_source::{self, KafkaAudit};
use newsdedup::lines::Line;
use newsdedup::replica::{self, TopicSource};
use newsdedup::runner;
use newsdedup::settings::{self, IndexDirArg, MetricsAddrArg, ReplayArgs, RunArgs};
use newsdedup::signing::{SigningKey, SigningKeys};
use newsdedup::time::TimeSpan;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "newsdedup",
    version,
    about = "Near-duplicate news detection: jieba + TF-IDF simhash + RocksDB block index"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Clone)]
struct CommonOpts {
    /// TOML configuration file (see config/default.toml); defaults are built in.
    #[arg(long, global = true, env = "NEWSDEDUP_CONFIG")]
    config: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Print the fingerprint of each article of a JSONL stream.
    Fingerprint {
        /// JSONL articles; `-` or absent: standard input.
        #[arg(long)]
        input: Option<PathBuf>,
        /// Also print the heaviest features with their weights.
        #[arg(long)]
        explain: bool,
        /// Number of features shown with --explain.
        #[arg(long, default_value_t = 20)]
        top: usize,
        #[command(flatten)]
        common: CommonOpts,
    },
    /// Compare two articles (article JSON files or plain text files): distance, verdict, features.
    Compare {
        /// The later article (the one decided: is it a duplicate of B?).
        a: PathBuf,
        /// The earlier, indexed article.
        b: PathBuf,
        /// Near-duplicate threshold (Hamming distance).
        #[arg(long)]
        threshold: Option<u32>,
        /// Number of shared / differing features shown.
        #[arg(long, default_value_t = 10)]
        top: usize,
        /// Show every feature of both articles too.
        #[arg(long)]
        explain: bool,
        /// An index directory: A's sketch bins whose band bucket is crowded there are left out as
        /// template text, exactly as `batch` / `run` on that index do (without it, none are).
        #[arg(long, value_name = "DIR")]
        index_dir: Option<PathBuf>,
        #[command(flatten)]
        common: CommonOpts,
    },
    /// Decide a JSONL stream against a persistent index, in input order (same code as the consumer).
    Batch {
        /// JSONL articles, or `-` for standard input.
        #[arg(long)]
        input: PathBuf,
        /// Output JSONL, or `-` for standard output.
        #[arg(long)]
        output: PathBuf,
        /// Index directory (created if missing; persists across runs).
        #[arg(long)]
        index_dir: PathBuf,
        /// Near-duplicate threshold (Hamming distance) [default: `[dedup] threshold`, 3].
        #[arg(long)]
        threshold: Option<u32>,
        /// Fingerprinting threads (default: all cores).
        #[arg(long)]
        threads: Option<usize>,
        /// Longest accepted input line in bytes.
        #[arg(long, default_value_t = DEFAULT_MAX_ARTICLE_BYTES)]
        max_article_bytes: usize,
        /// No progress lines on stderr (the summary is still printed).
        #[arg(long)]
        quiet: bool,
        /// Retention window by event time, e.g. 30d, 2w, 12h [default: [index] retention, keep
        /// for ever]: older indexed articles no longer match and are removed.
        #[arg(long, value_name = "SPAN")]
        retention: Option<TimeSpan>,
        /// Editors' corrections (JSONL, as `newsdedup correct ... --write FILE` writes them),
        /// applied after the input; one output line each: the corrected record, or the reason it
        /// was refused.
        #[arg(long, value_name = "FILE")]
        corrections: Option<PathBuf>,
        #[command(flatten)]
        common: CommonOpts,
    },
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
        args: Box<AuditArgs>,
        #[command(flatten)]
        common: CommonOpts,
    },
    /// Ask a running `run` or `standby` whether it is healthy: GET /health (or /ready) on the
    /// metrics address it serves, which is resolved as `run` resolves it (--metrics-addr,
    /// NEWSDEDUP_METRICS_ADDR, [service] metrics_addr of --config; 0.0.0.0 and [::] are asked on
    /// the loopback). Prints the answer; exit 0 on 200, 1 otherwise. The container image's
    /// HEALTHCHECK.
    Health {
        #[command(flatten)]
        metrics_addr: MetricsAddrArg,
        /// Ask /ready instead of /health.
        #[arg(long)]
        ready: bool,
        /// Give up after this many seconds.
        #[arg(long, value_name = "SECS", default_value_t = 5)]
        timeout: u64,
        #[command(flatten)]
        common: CommonOpts,
    },
    /// Inspect, verify, rebuild or delete from an index.
    Index {
        #[command(subcommand)]
        command: IndexCommand,
    },
    /// Correct a decision: release a false duplicate, or merge a missed one. The correction goes
    /// through the corrections topic to `run`, which applies it with its single writer and
    /// publishes the article again with `dedup.correction`; standbys and rebuilds see it there.
    Correct {
        #[command(subcommand)]
        command: CorrectCommand,
    },
}

#[derive(Subcommand)]
enum CorrectCommand {
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
struct CorrectArgs {
    /// The article to correct.
    #[arg(long)]
    id: String,
    /// Who makes the correction (shown to auditors) [default: $USER]
    #[arg(long, value_name = "NAME")]
    by: Option<String>,
    /// Why (shown to auditors).
    #[arg(long, value_name = "TEXT")]
    reason: Option<String>,
    /// Kafka bootstrap servers [default: [service] brokers of --config, localhost:9092]
    #[arg(long, env = "NEWSDEDUP_BROKERS", value_name = "HOST:PORT,...")]
    brokers: Option<String>,
    /// Topic the correction is produced to [default: [service] corrections_topic,
    /// articles.corrections]
    #[arg(long, env = "NEWSDEDUP_CORRECTIONS_TOPIC", value_name = "TOPIC")]
    corrections_topic: Option<String>,
    /// Topic of the unique articles, where decisions are looked up and a release is published
    /// [default: [service] unique_topic, articles.unique]
    #[arg(long, env = "NEWSDEDUP_UNIQUE_TOPIC", value_name = "TOPIC")]
    unique_topic: Option<String>,
    /// Topic of the duplicates, where decisions are looked up and a merge is published
    /// [default: [service] duplicate_topic, articles.duplicate]
    #[arg(long, env = "NEWSDEDUP_DUPLICATE_TOPIC", value_name = "TOPIC")]
    duplicate_topic: Option<String>,
    /// Dead-letter topic, where the service puts a correction it refuses [default: [service]
    /// dlq_topic, articles.dlq]
    #[arg(long, env = "NEWSDEDUP_DLQ_TOPIC", value_name = "TOPIC")]
    dlq_topic: Option<String>,
    /// Wait up to this many seconds for the service to apply (or refuse) the correction; 0: only
    /// produce it. Not applied in time: exit status 3 (it is applied when the service reads it).
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    wait: u64,
    /// Retention window of the service's index, e.g. 30d [default: [index] retention]: an article
    /// older than it is refused (it no longer matches anything).
    #[arg(long, value_name = "SPAN")]
    retention: Option<TimeSpan>,
    /// Look for the articles' decisions only in output records of TIME or later (2024-03-01,
    /// RFC 3339, Unix seconds or ms) instead of reading the topics from their beginning: quicker
    /// on long topics; the original of a merge must be decided by then too.
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    /// Read the article's current decision from this `batch` output file instead of the topics.
    #[arg(long, value_name = "FILE")]
    records: Option<PathBuf>,
    /// Append the correction to this JSONL file (for `batch --corrections`) instead of
    /// producing it.
    #[arg(long, value_name = "FILE")]
    write: Option<PathBuf>,
    /// No progress lines on stderr.
    #[arg(long)]
    quiet: bool,
    /// librdkafka property for reading and producing, KEY=VALUE (repeatable), over the config
    /// file's [service.kafka] and NEWSDEDUP_KAFKA_* variables.
    #[arg(short = 'X', value_name = "KEY=VALUE")]
    properties: Vec<String>,
    /// Sign the correction with this key of [corrections] keys (with --key-file: the key in
    /// that file, under this id) [default: [corrections] sign_with; none: unsigned]
    #[arg(long, env = "NEWSDEDUP_CORRECTION_KEY_ID", value_name = "ID")]
    key_id: Option<String>,
    /// The secret of the --key-id key, read from this file (at least 32 bytes).
    #[arg(
        long,
        env = "NEWSDEDUP_CORRECTION_KEY_FILE",
        value_name = "FILE",
        requires = "key_id"
    )]
    key_file: Option<PathBuf>,
    #[command(flatten)]
    common: CommonOpts,
}

#[derive(Args)]
struct AuditArgs {
    /// Kafka bootstrap servers [default: [service] brokers of --config, localhost:9092]
    #[arg(long, env = "NEWSDEDUP_BROKERS", value_name = "HOST:PORT,...")]
    brokers: Option<String>,
    /// Audit this `batch` output file (JSONL) instead of the Kafka topics
    #[arg(long, value_name = "FILE")]
    input: Option<PathBuf>,
    /// Topic of the unique articles, where originals are found by key [default: [service]
    /// unique_topic, articles.unique]
    #[arg(long, env = "NEWSDEDUP_UNIQUE_TOPIC", value_name = "TOPIC")]
    unique_topic: Option<String>,
    /// Topic of the duplicates [default: [service] duplicate_topic, articles.duplicate]
    #[arg(long, env = "NEWSDEDUP_DUPLICATE_TOPIC", value_name = "TOPIC")]
    duplicate_topic: Option<String>,
    /// Only Kafka records whose timestamp is at or after TIME: 2024-03-01T08:00:00Z,
    /// 2024-03-01T16:00:00+08:00, "2024-03-01 08:00" (UTC), 2024-03-01, or Unix seconds or
    /// milliseconds [default: the oldest record]
    #[arg(long, value_name = "TIME")]
    from_time: Option<String>,
    /// Only Kafka records whose timestamp is before TIME [default: up to the end of each
    /// partition when the audit starts]
    #[arg(long, value_name = "TIME")]
    to_time: Option<String>,
    /// Pairs drawn at random from the duplicates that do not look wrong; suspicious pairs are
    /// always shown, first (at most 500 side by side; the first 5,000 in the report's table, all
    /// counted)
    #[arg(long, value_name = "N", default_value_t = 100)]
    sample: usize,
    /// Seed of the random draw: the same records and seed give the same pairs
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A duplicate whose decision's containment is below this looks wrong
    #[arg(long, value_name = "X", default_value_t = 0.5)]
    low_containment: f64,
    /// The report to write (HTML)
    #[arg(long, value_name = "FILE")]
    html: PathBuf,
    /// Also write one JSON line per shown pair (ids, titles, reasons, the decision's and the
    /// recomputed numbers, the share of each text in shared passages)
    #[arg(long, value_name = "FILE")]
    jsonl: Option<PathBuf>,
    /// librdkafka property of the reader (repeatable), e.g. -X security.protocol=SSL; also
    /// [service.kafka] of --config and NEWSDEDUP_KAFKA_<NAME> variables, as for `run`
    #[arg(short = 'X', value_name = "KEY=VALUE")]
    properties: Vec<String>,
    /// No progress lines on stderr (the summary is still printed)
    #[arg(long)]
    quiet: bool,
}

#[derive(Subcommand)]
enum IndexCommand {
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
        #[arg(long)]
        index_dir: PathBuf,
        /// Article ids to remove (repeatable, or several after one --id).
        #[arg(long = "id", required = true, num_args = 1..)]
        ids: Vec<String>,
    },
}

fn main() {
    let started = std::time::Instant::now();
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // Which `run` settings came from a flag or its variable (they override the config file);
    // which flags were given on the command line (`audit`; `replay`'s --metrics-addr).
    let given = match matches.subcommand() {
        Some(("run", m)) | Some(("standby", m)) | Some(("replay", m)) => {
            settings::given_arguments(m)
        }
        _ => HashSet::new(),
    };
    let command_line = match matches.subcommand() {
        // `index rebuild`: the flags of the nested command.
        Some(("index", m)) => m
            .subcommand()
            .map_or_else(HashSet::new, |(_, m)| command_line_arguments(m)),
        Some((_, m)) => command_line_arguments(m),
        None => HashSet::new(),
    };
    if let Err(e) = dispatch(cli, &given, &command_line, started) {
        // A stop that left work for the next start is not an error: nothing is lost.
        if let Some(stop) = e.downcast_ref::<newsdedup::kafka::stop::IncompleteStop>() {
            eprintln!("newsdedup: {stop}");
            std::process::exit(newsdedup::kafka::stop::EXIT_INCOMPLETE_STOP);
        }
        if let Some(pending) = e.downcast_ref::<correct::NotConfirmed>() {
            eprintln!("newsdedup: {pending}");
            std::process::exit(correct::EXIT_NOT_CONFIRMED);
        }
        eprintln!("newsdedup: error: {e:#}");
        std::process::exit(1);
    }
}

fn dispatch(
    cli: Cli,
    given: &HashSet<String>,
    command_line: &HashSet<String>,
    started: std::time::Instant,
) -> Result<()> {
    match cli.command {
        Command::Fingerprint {
            input,
            explain,
            top,
            common,
        } => {
            let (_, components) = resolve(&common, Overrides::default())?;
            cmd_fingerprint(input.as_deref(), explain, top, &components)
        }
        Command::Compare {
            a,
            b,
            threshold,
            top,
            explain,
            index_dir,
            common,
        } => {
            let overrides = Overrides {
                threshold,
                ..Overrides::default()
            };
            let (_, components) = resolve(&common, overrides)?;
            cmd_compare(&a, &b, top, explain, index_dir.as_deref(), &components)
        }
        Command::Batch {
            input,
            output,
            index_dir,
            threshold,
            threads: t,
            max_article_bytes,
            quiet,
            retention,
            corrections,
            common,
        } => {
            let overrides = Overrides {
                threshold,
                retention,
                threads: t,
            };
            let (_, components) = resolve(&common, overrides)?;
            let opts = BatchOptions {
                threads: components.threads,
                max_article_bytes,
                published_at_offset: components.published_at_offset,
                progress_every: (!quiet).then_some(Duration::from_secs(5)),
                process_start: started,
                correction_keys: SigningKeys::load(&components.corrections)
                    .context("invalid [corrections] keys")?,
            };
            cmd_batch(
                &input,
                corrections.as_deref(),
                &output,
                &index_dir,
                &opts,
                &components,
            )
        }
        Command::Run { args, common } => {
            newsdedup::service::run(*args, given, load_config(&common)?)
        }
        Command::Standby {
            args,
            max_ready_lag,
            common,
        } => newsdedup::service::standby(*args, given, load_config(&common)?, max_ready_lag),
        Command::Replay { args, common } => {
            newsdedup::replay::replay(*args, given, command_line, load_config(&common)?)
        }
        Command::Correct { command } => {
            let (kind, into, args) = match command {
                CorrectCommand::Release { args } => (CorrectionKind::Release, None, args),
                CorrectCommand::Merge { into, args } => (CorrectionKind::Merge, Some(into), args),
            };
            cmd_correct(kind, into, *args)
        }
        Command::Audit { args, common } => {
            let (config, components) = resolve(&common, Overrides::default())?;
            cmd_audit(*args, command_line, &config, &components)
        }
        Command::Health {
            metrics_addr,
            ready,
            timeout,
            common,
        } => {
            let addr = metrics_addr.resolve(&load_config(&common)?);
            cmd_health(&addr, ready, Duration::from_secs(timeout))
        }
        Command::Index { command } => match command {
            IndexCommand::Stats {
                index_dir,
                retention,
                top,
                json,
                common,
            } => {
                let index_dir = index_dir.resolve(&load_config(&common)?);
                cmd_index_stats(&index_dir, retention, top, json)
            }
            IndexCommand::Verify { index_dir, common } => {
                cmd_index_verify(&index_dir.resolve(&load_config(&common)?))
            }
            IndexCommand::Delete { index_dir, ids } => cmd_index_delete(&index_dir, &ids),
            IndexCommand::Rebuild {
                index_dir,
                brokers,
                from_topics,
                input,
                threads: t,
                properties,
                quiet,
                common,
            } => {
                let overrides = Overrides {
                    threads: t,
                    ..Overrides::default()
                };
                let (config, components) = resolve(&common, overrides)?;
                let source = if input.is_empty() {
                    Source::Topics(topic_source(&config, brokers, from_topics, &properties)?)
                } else {
                    let kafka_only = [
                        ("brokers", "--brokers"),
                        ("from_topics", "--from-topics"),
                        ("properties", "-X"),
                    ];
                    if let Some((_, flag)) =
                        kafka_only.iter().find(|(id, _)| command_line.contains(*id))
                    {
                        bail!("{flag} is for reading Kafka; --input rebuilds from `batch` output files");
                    }
                    Source::Files(input)
                };
                cmd_index_rebuild(&index_dir, source, quiet, &components)
            }
        },
    }
}

/// The ids of the arguments given on the command line (not from a variable or a default).
fn command_line_arguments(matches: &clap::ArgMatches) -> HashSet<String> {
    matches
        .ids()
        .filter(|id| {
            matches.value_source(id.as_str()) == Some(clap::parser::ValueSource::CommandLine)
        })
        .map(|id| id.as_str().to_owned())
        .collect()
}

fn load_config(common: &CommonOpts) -> Result<Config> {
    match &common.config {
        Some(path) => Ok(Config::load(path)?),
        None => Ok(Config::default()),
    }
}

/// The fingerprinter of `components`; a start-up image that could not be written is worth a
/// warning (every start then builds the tables again).
fn fingerprinter(components: &Components) -> Result<Fingerprinter> {
    let fp = components.fingerprinter()?;
    warn_about_image(&fp);
    Ok(fp)
}

/// The fingerprinter and the index in `dir` of `components` (see [`fingerprinter`]).
fn fingerprinter_and_index(
    components: &Components,
    dir: &Path,
) -> Result<(Fingerprinter, RocksIndex)> {
    let (fp, index) = components.open(dir)?;
    warn_about_image(&fp);
    Ok((fp, index))
}

fn warn_about_image(fp: &Fingerprinter) {
    if let ImageUse::NotWritten { path, error } = fp.image_use() {
        eprintln!(
            "newsdedup: warning: cannot write the start-up image {}: {error} (each start builds the tables again: set [image] dir to a writable directory, or enabled = false)",
            path.display()
        );
    }
}

/// The configuration file and the engine's parts as `overrides` change them; warnings printed.
fn resolve(common: &CommonOpts, overrides: Overrides) -> Result<(Config, Components)> {
    let config = load_config(common)?;
    let components = Components::resolve(&config, overrides)?;
    for w in &components.warnings {
        eprintln!("newsdedup: warning: {w}");
    }
    Ok((config, components))
}

fn open_input(path: Option<&Path>) -> Result<Box<dyn BufRead + Send>> {
    match path {
        None => Ok(Box::new(BufReader::with_capacity(1 << 16, io::stdin()))),
        Some(p) if p.as_os_str() == "-" => {
            Ok(Box::new(BufReader::with_capacity(1 << 16, io::stdin())))
        }
        Some(p) => {
            let f = File::open(p).with_context(|| format!("cannot open input {}", p.display()))?;
            Ok(Box::new(BufReader::with_capacity(1 << 16, f)))
        }
    }
}

fn open_output(path: &Path) -> Result<Box<dyn Write + Send>> {
    if path.as_os_str() == "-" {
        Ok(Box::new(BufWriter::with_capacity(1 << 16, io::stdout())))
    } else {
        let f = File::create(path)
            .with_context(|| format!("cannot create output {}", path.display()))?;
        Ok(Box::new(BufWriter::with_capacity(1 << 16, f)))
    }
}

fn cmd_fingerprint(
    input: Option<&Path>,
    explain: bool,
    top: usize,
    components: &Components,
) -> Result<()> {
    let fp = fingerprinter(components)?;
    let mut out = open_output(Path::new("-"))?;
    let input = open_input(input)?;
    runner::run_to_end(
        batch::json_lines(input, DEFAULT_MAX_ARTICLE_BYTES),
        &|line: &mut JsonLine| fingerprint_line(&fp, line.line.take(), explain, top),
        &mut runner::Map(|line: JsonLine, mut value: Value| {
            if let Some(obj) = value.as_object_mut() {
                if obj.contains_key("error") {
                    obj.insert("line".into(), json!(line.number));
                }
            }
            value
        }),
        |value: Value| -> io::Result<()> {
            serde_json::to_writer(&mut out, &value)?;
            out.write_all(b"\n")
        },
        &runner::Options::file(components.threads),
    )?;
    out.flush()?;
    Ok(())
}

fn cmd_compare(
    a: &Path,
    b: &Path,
    top: usize,
    explain: bool,
    index_dir: Option<&Path>,
    components: &Components,
) -> Result<()> {
    let fp = fingerprinter(components)?;
    let index = index_dir
        .map(|dir| components.open_index(dir, &fp))
        .transpose()?;
    // The lookup's own answer: which of A's band buckets are crowded in that index, and which
    // of its segments are template.
    let lookup_error = std::cell::RefCell::new(None);
    let crowded = |sketch: &newsdedup::sketch::Sketch| -> Crowded {
        let Some(index) = &index else {
            return Crowded::default();
        };
        match index.sketch_lookup(sketch, &mut Vec::new()) {
            Ok(crowded) => crowded,
            Err(e) => {
                *lookup_error.borrow_mut() = Some(e);
                Crowded::default()
            }
        }
    };
    let report = compare(
        &fp,
        &read_compare_input(a)?,
        &read_compare_input(b)?,
        &components.rule,
        top,
        explain,
        &crowded,
    )?;
    if let Some(e) = lookup_error.into_inner() {
        return Err(e.into());
    }
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

fn cmd_batch(
    input: &Path,
    corrections: Option<&Path>,
    output: &Path,
    index_dir: &Path,
    opts: &BatchOptions,
    components: &Components,
) -> Result<()> {
    let corrections = match corrections {
        Some(path) => {
            Some(BufReader::new(File::open(path).with_context(|| {
                format!("cannot open corrections {}", path.display())
            })?))
        }
        None => None,
    };
    let (fp, index) = fingerprinter_and_index(components, index_dir)?;
    let deduper = components.deduper(index);
    let mut out = open_output(output)?;
    let (summary, _deduper) = batch::run_batch(open_input(Some(input))?, corrections, &mut out, &fp, deduper, opts)
        .with_context(|| format!("batch over {} failed; the index in {} keeps every decision written before the failure, so once the cause below is fixed the same command resumes with identical decisions", input.display(), index_dir.display()))?;
    eprintln!("batch: done: {}", summary.to_json());
    Ok(())
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

fn cmd_correct(kind: CorrectionKind, into: Option<String>, a: CorrectArgs) -> Result<()> {
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

fn cmd_audit(
    a: AuditArgs,
    given: &HashSet<String>,
    config: &Config,
    components: &Components,
) -> Result<()> {
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
    let fp = fingerprinter(components)?;
    let (plan, scope) = match &a.input {
        Some(input) => {
            let kafka_only = [
                ("brokers", "--brokers"),
                ("unique_topic", "--unique-topic"),
                ("duplicate_topic", "--duplicate-topic"),
                ("from_time", "--from-time"),
                ("to_time", "--to-time"),
                ("properties", "-X"),
            ];
            if let Some((_, flag)) = kafka_only.iter().find(|(id, _)| given.contains(*id)) {
                bail!("{flag} is for reading Kafka; --input audits a whole `batch` output file");
            }
            let file = File::open(input)
                .with_context(|| format!("cannot open input {}", input.display()))?;
            let max_line = DEFAULT_MAX_ARTICLE_BYTES + newsdedup::output::MAX_DEDUP_MEMBER_BYTES;
            let plan = audit::jsonl::collect(
                BufReader::with_capacity(1 << 16, file),
                opts,
                max_line,
                progress,
            )
            .with_context(|| format!("cannot audit {}", input.display()))?;
            (
                plan,
                vec![("input".to_owned(), input.display().to_string())],
            )
        }
        None => {
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
            let properties = newsdedup::kafka::properties::reader_properties(
                service,
                &brokers,
                env,
                &a.properties,
            )
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
            (plan, scope)
        }
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

fn cmd_health(addr: &str, ready: bool, timeout: Duration) -> Result<()> {
    let addr = settings::parse_metrics_addr(addr)?;
    let path = if ready { "/ready" } else { "/health" };
    let (status, body) = newsdedup::metrics::probe(addr, path, timeout).with_context(|| {
        format!(
            "no answer to {path} on {addr}: is `newsdedup run` serving there (--metrics-addr, NEWSDEDUP_METRICS_ADDR)?"
        )
    })?;
    if status != 200 {
        bail!("{path} on {addr} answered {status}: {}", body.trim());
    }
    println!("{}", body.trim());
    Ok(())
}

fn cmd_index_stats(
    index_dir: &Path,
    retention: Option<TimeSpan>,
    top: usize,
    json: bool,
) -> Result<()> {
    ensure_index_exists(index_dir)?;
    let index = RocksIndex::open_raw(index_dir, &Default::default())?;
    let stats = index.stats(top, retention)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&stats)?);
        return Ok(());
    }
    println!("index:            {}", stats.dir);
    println!(
        "articles:         {} ({} unique, {} duplicate)",
        stats.articles, stats.unique, stats.duplicate
    );
    println!(
        "disk:             {} bytes ({:.0} bytes/article)",
        stats.disk_bytes, stats.bytes_per_article
    );
    if let (Some(available), Some(size)) = (stats.volume_available_bytes, stats.volume_size_bytes) {
        println!(
            "volume:           {available} bytes free of {size} ({:.1}%)",
            available as f64 * 100.0 / size.max(1) as f64
        );
    }
    let per_article = |bytes: u64| bytes as f64 / stats.articles.max(1) as f64;
    let by_family: Vec<String> = stats
        .disk_by_family
        .iter()
        .map(|f| {
            format!(
                "{} {} ({:.0}/article, {} files)",
                f.family,
                f.bytes,
                per_article(f.bytes),
                f.files
            )
        })
        .collect();
    println!("disk by family:   {}", by_family.join(", "));
    println!(
        "disk other:       {} bytes ({:.0}/article: write-ahead log not yet flushed to the families, manifest, logs)",
        stats.disk_other_bytes,
        per_article(stats.disk_other_bytes)
    );
    println!("identity digest:  {}", stats.identity_digest);
    for f in &stats.families {
        let largest: Vec<String> = f.largest.iter().map(|(b, n)| format!("{b}:{n}")).collect();
        println!(
            "{}: {} simhash block entries in {} of 65536 buckets, mean {:.2}, max {}; {} crowded (> {}, read whole by every lookup); largest {}",
            f.family,
            f.entries,
            f.buckets_used,
            f.mean_bucket,
            f.max_bucket,
            f.crowded_buckets,
            newsdedup::index::block_bucket::CROWDED_BUCKET,
            largest.join(" ")
        );
    }
    let b = &stats.bands;
    let largest: Vec<String> = b.largest.iter().map(|(k, n)| format!("{k}:{n}")).collect();
    println!(
        "{}: {} sketch band entries in {} buckets, mean {:.2}, max {}; {} shared by 2+ articles, {} crowded (> {} articles, > {} in a containment band; ignored: {} entries); largest {}",
        b.family,
        b.entries,
        b.buckets_used,
        b.mean_bucket,
        b.max_bucket,
        b.shared_buckets,
        b.crowded_buckets,
        newsdedup::index::bucket::MAX_BAND_BUCKET,
        newsdedup::index::bucket::MAX_CONTAINMENT_BUCKET,
        b.crowded_entries,
        largest.join(" ")
    );
    let age = &stats.age;
    let unknown = || "-".to_owned();
    println!(
        "event time:       oldest {}, newest {}, stream time {}",
        age.oldest.clone().unwrap_or_else(unknown),
        age.newest.clone().unwrap_or_else(unknown),
        age.stream_time.clone().unwrap_or_else(unknown)
    );
    match (&age.retention, &age.expiry_cutoff) {
        (Some(window), Some(cutoff)) => println!(
            "retention {window}:    {} articles due for expiry (event time before {cutoff})",
            age.due_for_expiry
        ),
        _ => println!(
            "retention:        none given (--retention 30d shows what a window would remove)"
        ),
    }
    let rows = if age.per_week.is_empty() {
        ("day", &age.per_day)
    } else {
        ("week from", &age.per_week)
    };
    for (label, n) in rows.1 {
        println!("  {} {label}: {n}", rows.0);
    }
    Ok(())
}

fn cmd_index_verify(index_dir: &Path) -> Result<()> {
    ensure_index_exists(index_dir)?;
    let index = RocksIndex::open_raw(index_dir, &Default::default())?;
    let report = index.verify()?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    if !report.problems.is_empty() {
        bail!(
            "index {} is inconsistent: {} problem(s)",
            index_dir.display(),
            report.problems.len()
        );
    }
    Ok(())
}

/// Where `index rebuild` reads.
enum Source {
    Topics(TopicSource),
    Files(Vec<PathBuf>),
}

/// The output topics to rebuild from, with the reader's properties layered as for `run`.
fn topic_source(
    config: &Config,
    brokers: Option<String>,
    topics: Vec<String>,
    flags: &[String],
) -> Result<TopicSource> {
    let service = &config.service;
    let brokers = brokers.unwrap_or_else(|| service.brokers.clone());
    let env = newsdedup::service::process_env();
    let properties =
        newsdedup::kafka::properties::reader_properties(service, &brokers, env, flags)?;
    let topics: Vec<String> = topics
        .into_iter()
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
        .collect();
    let topics = if topics.is_empty() {
        vec![
            service.unique_topic.clone(),
            service.duplicate_topic.clone(),
        ]
    } else {
        topics
    };
    Ok(TopicSource { properties, topics })
}

fn cmd_index_rebuild(
    index_dir: &Path,
    source: Source,
    quiet: bool,
    components: &Components,
) -> Result<()> {
    let (fp, mut index) = fingerprinter_and_index(components, index_dir)?;
    let progress = (!quiet).then_some(Duration::from_secs(5));
    let summary = match &source {
        Source::Files(inputs) => {
            let s =
                replica::rebuild_from_files(&mut index, &fp, inputs, components.into(), progress)?;
            index.sync()?;
            s
        }
        Source::Topics(topics) => {
            eprintln!(
                "rebuild: reading {} from {} into {}",
                topics.topics.join(", "),
                topics
                    .properties
                    .get("bootstrap.servers")
                    .map_or("", String::as_str),
                index_dir.display()
            );
            replica::rebuild_from_topics(
                &mut index,
                &fp,
                topics,
                components.into(),
                progress,
                "rebuild",
            )?
        }
    };
    let counts = newsdedup::index::ArticleStore::counts(&index);
    for example in &summary.unreadable_examples {
        eprintln!("rebuild: skipped {example}");
    }
    eprintln!(
        "rebuild: done in {:.1}s ({:.0} records/s): {} records, {} articles added, {} replaced by a later revision, {} already indexed, {} invalid inputs, {} unreadable; the index holds {} articles ({} unique)",
        summary.elapsed.as_secs_f64(),
        summary.records_per_sec(),
        summary.records,
        summary.inserted,
        summary.replaced,
        summary.already_indexed,
        summary.invalid_inputs,
        summary.unreadable,
        counts.articles,
        counts.unique
    );
    println!("{}", serde_json::to_string(&summary)?);
    Ok(())
}

fn cmd_index_delete(index_dir: &Path, ids: &[String]) -> Result<()> {
    ensure_index_exists(index_dir)?;
    let mut index = RocksIndex::open_raw(index_dir, &Default::default())?;
    let deleted = index
        .delete(ids)
        .with_context(|| format!("cannot delete from the index in {}", index_dir.display()))?;
    let not_found: Vec<&String> = ids.iter().filter(|id| !deleted.contains(id)).collect();
    println!(
        "{}",
        serde_json::to_string_pretty(&json!({"deleted": deleted, "not_found": not_found}))?
    );
    Ok(())
}

fn ensure_index_exists(dir: &Path) -> Result<()> {
    if !dir.join("CURRENT").exists() {
        bail!(
            "{} is not a newsdedup index (no RocksDB CURRENT file)",
            dir.display()
        );
    }
    Ok(())
}

fn fingerprint_line(fp: &Fingerprinter, line: Option<Line>, explain: bool, top: usize) -> Value {
    let bytes = match line {
        Some(Line::Bytes(b)) => b,
        Some(Line::TooLong(n)) => return json!({"error": format!("oversized: line is {n} bytes")}),
        None => return json!({"error": "the line was already fingerprinted"}),
    };
    let article = match Article::parse(&bytes, DEFAULT_MAX_ARTICLE_BYTES) {
        Ok(a) => a,
        Err(e) => return json!({"id": e.id, "error": e.to_string()}),
    };
    let result = if explain {
        fp.analyze(article.title(), article.content())
            .map(|(f, feats)| (f, Some(feats)))
    } else {
        fp.fingerprint(article.title(), article.content())
            .map(|f| (f, None))
    };
    match result {
        Err(e) => json!({"id": article.id(), "error": format!("no_features: {e}")}),
        Ok((f, feats)) => {
            let mut v = json!({"id": article.id(), "fingerprint": f.fingerprint.to_hex()});
            if let (Some(feats), Some(obj)) = (feats, v.as_object_mut()) {
                obj.insert("feature_count".into(), json!(f.features));
                obj.insert(
                    "features".into(),
                    Value::Array(feats.iter().take(top).map(feature_json).collect()),
                );
            }
            v
        }
    }
}

/// Reads an article for `compare`: a JSON article object, or else the file's text as content.
fn read_compare_input(path: &Path) -> Result<CompareInput> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    if let Ok(a) = Article::parse(&bytes, usize::MAX) {
        return Ok(CompareInput {
            id: a.id().to_owned(),
            title: a.title().to_owned(),
            content: a.content().to_owned(),
        });
    }
    let text = String::from_utf8(bytes).with_context(|| {
        format!(
            "{} is neither an article JSON object nor UTF-8 text",
            path.display()
        )
    })?;
    Ok(CompareInput {
        id: path.display().to_string(),
        title: String::new(),
        content: text,
    })
}
