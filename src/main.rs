//! The `newsdedup` command line. Thin: parses arguments, wires the library together, reports
//! errors with context.

use anyhow::{bail, Context, Result};
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use newsdedup::article::{Article, DEFAULT_MAX_ARTICLE_BYTES};
use newsdedup::batch::{self, BatchOptions, Line};
use newsdedup::compare::{compare, feature_json, CompareInput};
use newsdedup::config::{Config, DedupConfig};
use newsdedup::dedup::Deduper;
use newsdedup::fingerprint::Fingerprinter;
use newsdedup::index::RocksIndex;
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
        a: PathBuf,
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
    /// Inspect an index.
    Index {
        #[command(subcommand)]
        command: IndexCommand,
    },
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
    // Which `run` settings came from a flag or its variable (they override the config file).
    let given = matches
        .subcommand_matches("run")
        .map(settings::given_arguments)
        .unwrap_or_default();
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
