//! The `newsdedup` command line. Thin: parses arguments, wires the library together, reports
//! errors with context.

use anyhow::{bail, Context, Result};
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use newsdedup::article::{Article, DEFAULT_MAX_ARTICLE_BYTES};
use newsdedup::audit::{self, AuditOptions, Header};
use newsdedup::batch::{self, BatchOptions, Line};
use newsdedup::compare::{compare, feature_json, CompareInput};
use newsdedup::config::{Config, DedupConfig};
use newsdedup::dedup::Deduper;
use newsdedup::fingerprint::Fingerprinter;
use newsdedup::index::RocksIndex;
use newsdedup::kafka::audit_source::{self, KafkaAudit};
use newsdedup::settings::{self, RunArgs};
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
        /// Near-duplicate threshold (Hamming distance, default 3).
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
    /// Inspect an index.
    Index {
        #[command(subcommand)]
        command: IndexCommand,
    },
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
    /// always shown, first (at most 500 side by side, all listed)
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
    /// Articles, disk size and bucket occupancy (largest buckets) of an index.
    Stats {
        #[arg(long)]
        index_dir: PathBuf,
        /// Largest buckets listed per block family.
        #[arg(long, default_value_t = 5)]
        top: usize,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Check that the column families agree (after a crash, say). Exit 1 if they do not.
    Verify {
        #[arg(long)]
        index_dir: PathBuf,
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
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // Which `run` settings came from a flag or its variable (they override the config file);
    // which `audit` flags were given on the command line.
    let given = match matches.subcommand() {
        Some(("run", m)) => settings::given_arguments(m),
        Some(("audit", m)) => command_line_arguments(m),
        _ => HashSet::new(),
    };
    if let Err(e) = dispatch(cli, &given) {
        eprintln!("newsdedup: error: {e:#}");
        std::process::exit(1);
    }
}

fn dispatch(cli: Cli, given: &HashSet<String>) -> Result<()> {
    match cli.command {
        Command::Fingerprint {
            input,
            explain,
            top,
            common,
        } => cmd_fingerprint(input.as_deref(), explain, top, &load_config(&common)?),
        Command::Compare {
            a,
            b,
            threshold,
            top,
            explain,
            common,
        } => cmd_compare(&a, &b, threshold, top, explain, &load_config(&common)?),
        Command::Batch {
            input,
            output,
            index_dir,
            threshold,
            threads: t,
            max_article_bytes,
            quiet,
            common,
        } => {
            let opts = BatchOptions {
                threads: threads(t),
                max_article_bytes,
                progress_every: (!quiet).then_some(Duration::from_secs(5)),
            };
            cmd_batch(
                &input,
                &output,
                &index_dir,
                threshold,
                &opts,
                &load_config(&common)?,
            )
        }
        Command::Run { args, common } => {
            newsdedup::service::run(*args, given, load_config(&common)?)
        }
        Command::Audit { args, common } => cmd_audit(*args, given, &load_config(&common)?),
        Command::Index { command } => match command {
            IndexCommand::Stats {
                index_dir,
                top,
                json,
            } => cmd_index_stats(&index_dir, top, json),
            IndexCommand::Verify { index_dir } => cmd_index_verify(&index_dir),
            IndexCommand::Delete { index_dir, ids } => cmd_index_delete(&index_dir, &ids),
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

fn fingerprinter(config: &Config) -> Result<Fingerprinter> {
    Fingerprinter::new(&config.fingerprint).context("cannot load the fingerprint resources")
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

fn open_output(path: &Path) -> Result<Box<dyn Write>> {
    if path.as_os_str() == "-" {
        Ok(Box::new(BufWriter::with_capacity(
            1 << 16,
            io::stdout().lock(),
        )))
    } else {
        let f = File::create(path)
            .with_context(|| format!("cannot create output {}", path.display()))?;
        Ok(Box::new(BufWriter::with_capacity(1 << 16, f)))
    }
}

/// The decision rule: `[dedup]` with the threshold overridden by `--threshold`.
fn dedup_rule(config: &Config, threshold: Option<u32>) -> Result<DedupConfig> {
    let threshold = settings::resolve_threshold(threshold.unwrap_or(config.dedup.threshold))?;
    if let Some(w) = settings::threshold_warning(threshold) {
        eprintln!("newsdedup: warning: {w}");
    }
    Ok(DedupConfig {
        threshold,
        ..config.dedup.clone()
    })
}

fn threads(requested: Option<usize>) -> usize {
    requested.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
}

fn cmd_fingerprint(input: Option<&Path>, explain: bool, top: usize, config: &Config) -> Result<()> {
    let fp = fingerprinter(config)?;
    let mut out = open_output(Path::new("-"))?;
    batch::ordered_map(
        open_input(input)?,
        DEFAULT_MAX_ARTICLE_BYTES,
        threads(None),
        256,
        |line| fingerprint_line(&fp, line, explain, top),
        |n, mut value: Value| -> Result<(), io::Error> {
            if let Some(obj) = value.as_object_mut() {
                if obj.contains_key("error") {
                    obj.insert("line".into(), json!(n));
                }
            }
            serde_json::to_writer(&mut out, &value)?;
            out.write_all(b"\n")
        },
    )?;
    out.flush()?;
    Ok(())
}

fn cmd_compare(
    a: &Path,
    b: &Path,
    threshold: Option<u32>,
    top: usize,
    explain: bool,
    config: &Config,
) -> Result<()> {
    let rule = dedup_rule(config, threshold)?;
    let fp = fingerprinter(config)?;
    let report = compare(
        &fp,
        &read_compare_input(a)?,
        &read_compare_input(b)?,
        &rule,
        top,
        explain,
    )?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

fn cmd_batch(
    input: &Path,
    output: &Path,
    index_dir: &Path,
    threshold: Option<u32>,
    opts: &BatchOptions,
    config: &Config,
) -> Result<()> {
    let rule = dedup_rule(config, threshold)?;
    let fp = fingerprinter(config)?;
    let index = RocksIndex::open(index_dir, fp.identity(), &config.index)?;
    let mut deduper = Deduper::with_config(index, rule);
    let mut out = open_output(output)?;
    let summary = batch::run_batch(open_input(Some(input))?, &mut out, &fp, &mut deduper, opts)
        .with_context(|| format!("batch over {} failed; the index in {} holds every decision written so far, so re-running the same command resumes with identical decisions", input.display(), index_dir.display()))?;
    deduper.store().sync()?;
    eprintln!("batch: done: {}", summary.to_json());
    Ok(())
}

fn cmd_audit(a: AuditArgs, given: &HashSet<String>, config: &Config) -> Result<()> {
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
    let rule = dedup_rule(config, None)?;
    let fp = fingerprinter(config)?;
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
                    .map(audit::parse_time_arg)
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
            let env = std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
            let properties = settings::reader_properties(service, &brokers, env, &a.properties)
                .context("invalid Kafka settings for `audit`")?;
            let range = match (from_ms, to_ms) {
                (None, None) => "every record".to_owned(),
                (f, t) => format!(
                    "record timestamps from {} to {}",
                    f.map_or_else(|| "the oldest record".to_owned(), audit::time::format_utc),
                    t.map_or_else(
                        || "the end at the start of the audit".to_owned(),
                        audit::time::format_utc
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
    let report = plan.finish(&fp, &rule, header);
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

fn cmd_index_stats(index_dir: &Path, top: usize, json: bool) -> Result<()> {
    ensure_index_exists(index_dir)?;
    let index = RocksIndex::open_raw(index_dir, &Default::default())?;
    let stats = index.stats(top)?;
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
    println!("identity digest:  {}", stats.identity_digest);
    for f in &stats.families {
        let largest: Vec<String> = f.largest.iter().map(|(b, n)| format!("{b}:{n}")).collect();
        println!(
            "{}: {} simhash block entries in {} of 65536 buckets, mean {:.2}, max {}; {} crowded (> {}, searched by seeks); largest {}",
            f.family,
            f.entries,
            f.buckets_used,
            f.mean_bucket,
            f.max_bucket,
            f.crowded_buckets,
            newsdedup::index::rocks::SCAN_BEFORE_SEEK,
            largest.join(" ")
        );
    }
    let b = &stats.bands;
    let largest: Vec<String> = b.largest.iter().map(|(k, n)| format!("{k}:{n}")).collect();
    println!(
        "{}: {} sketch band entries in {} buckets, mean {:.2}, max {}; {} shared by 2+ articles, {} crowded (> {} articles, ignored: {} entries); largest {}",
        b.family,
        b.entries,
        b.buckets_used,
        b.mean_bucket,
        b.max_bucket,
        b.shared_buckets,
        b.crowded_buckets,
        newsdedup::index::rocks::MAX_BAND_BUCKET,
        b.crowded_entries,
        largest.join(" ")
    );
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

fn fingerprint_line(fp: &Fingerprinter, line: Line, explain: bool, top: usize) -> Value {
    let bytes = match line {
        Line::Bytes(b) => b,
        Line::TooLong(n) => return json!({"error": format!("oversized: line is {n} bytes")}),
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
