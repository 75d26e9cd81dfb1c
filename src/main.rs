//! The `newsdedup` command line. Thin: parses arguments, wires the library together, reports
//! errors with context.

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use newsdedup::article::{Article, DEFAULT_MAX_ARTICLE_BYTES};
use newsdedup::batch::{self, BatchOptions, Line};
use newsdedup::config::{Config, DedupConfig};
use newsdedup::dedup::Deduper;
use newsdedup::fingerprint::{Feature, Fingerprinter};
use newsdedup::index::RocksIndex;
use newsdedup::simhash::GUARANTEED_DISTANCE;
use serde_json::{json, Value};
use std::collections::HashMap;
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
        args: Box<newsdedup::service::RunArgs>,
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
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = run(cli) {
        eprintln!("newsdedup: error: {e:#}");
        std::process::exit(1);
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

fn check_threshold(threshold: u32) -> Result<u32> {
    if threshold > 64 {
        bail!("--threshold {threshold} is out of range 0..=64");
    }
    if threshold > GUARANTEED_DISTANCE {
        eprintln!(
            "newsdedup: warning: threshold {threshold} > {GUARANTEED_DISTANCE}: only candidates sharing a 16-bit block are seen, so some pairs within {threshold} will be missed"
        );
    }
    Ok(threshold)
}

fn threads(requested: Option<usize>) -> usize {
    requested.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Fingerprint {
            input,
            explain,
            top,
            common,
        } => {
            let config = load_config(&common)?;
            let fp = fingerprinter(&config)?;
            let mut out = open_output(Path::new("-"))?;
            batch::ordered_map(
                open_input(input.as_deref())?,
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
        Command::Compare {
            a,
            b,
            threshold,
            top,
            explain,
            common,
        } => {
            let config = load_config(&common)?;
            let threshold = check_threshold(threshold.unwrap_or(config.dedup.threshold))?;
            let fp = fingerprinter(&config)?;
            let rule = DedupConfig {
                threshold,
                ..config.dedup.clone()
            };
            let report = compare(&fp, &a, &b, &rule, top, explain)?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            Ok(())
        }
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
            let config = load_config(&common)?;
            let threshold = check_threshold(threshold.unwrap_or(config.dedup.threshold))?;
            let fp = fingerprinter(&config)?;
            let index = RocksIndex::open(&index_dir, fp.identity(), &config.index)?;
            let mut deduper = Deduper::with_config(
                index,
                DedupConfig {
                    threshold,
                    ..config.dedup.clone()
                },
            );
            let mut out = open_output(&output)?;
            let opts = BatchOptions {
                threads: threads(t),
                max_article_bytes,
                progress_every: (!quiet).then_some(Duration::from_secs(5)),
            };
            let summary = batch::run_batch(open_input(Some(&input))?, &mut out, &fp, &mut deduper, &opts)
                .with_context(|| format!("batch over {} failed; the index in {} holds every decision written so far, so re-running the same command resumes with identical decisions", input.display(), index_dir.display()))?;
            deduper.store().sync()?;
            eprintln!("batch: done: {}", summary.to_json());
            Ok(())
        }
        Command::Run { args, common } => newsdedup::service::run(*args, load_config(&common)?),
        Command::Index { command } => match command {
            IndexCommand::Stats {
                index_dir,
                top,
                json,
            } => {
                ensure_index_exists(&index_dir)?;
                let index = RocksIndex::open_raw(&index_dir, &Default::default())?;
                let stats = index.stats(top)?;
                if json {
                    println!("{}", serde_json::to_string_pretty(&stats)?);
                } else {
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
                        let largest: Vec<String> =
                            f.largest.iter().map(|(b, n)| format!("{b}:{n}")).collect();
                        println!(
                            "{}: {} simhash block entries in {} of 65536 buckets, mean {:.2}, max {}; largest {}",
                            f.family,
                            f.entries,
                            f.buckets_used,
                            f.mean_bucket,
                            f.max_bucket,
                            largest.join(" ")
                        );
                    }
                    let b = &stats.bands;
                    let largest: Vec<String> =
                        b.largest.iter().map(|(k, n)| format!("{k}:{n}")).collect();
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
                }
                Ok(())
            }
            IndexCommand::Verify { index_dir } => {
                ensure_index_exists(&index_dir)?;
                let index = RocksIndex::open_raw(&index_dir, &Default::default())?;
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
        },
    }
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

fn feature_json(f: &Feature) -> Value {
    json!({"word": f.word, "weight": (f.weight * 1000.0).round() / 1000.0, "tf": f.tf, "in_title": f.in_title})
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
fn read_compare_input(path: &Path) -> Result<(String, String, String)> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    if let Ok(a) = Article::parse(&bytes, usize::MAX) {
        return Ok((
            a.id().to_owned(),
            a.title().to_owned(),
            a.content().to_owned(),
        ));
    }
    let text = String::from_utf8(bytes).with_context(|| {
        format!(
            "{} is neither an article JSON object nor UTF-8 text",
            path.display()
        )
    })?;
    Ok((path.display().to_string(), String::new(), text))
}

fn compare(
    fp: &Fingerprinter,
    a: &Path,
    b: &Path,
    rule: &DedupConfig,
    top: usize,
    explain: bool,
) -> Result<Value> {
    let (id_a, title_a, content_a) = read_compare_input(a)?;
    let (id_b, title_b, content_b) = read_compare_input(b)?;
    let (fa, feats_a) = fp
        .analyze(&title_a, &content_a)
        .with_context(|| format!("{}", a.display()))?;
    let (fb, feats_b) = fp
        .analyze(&title_b, &content_b)
        .with_context(|| format!("{}", b.display()))?;
    let distance = fa.fingerprint.distance(fb.fingerprint);
    let sim = fa.sketch.similarity(&fb.sketch);
    let shares_block = fa
        .fingerprint
        .blocks()
        .iter()
        .zip(fb.fingerprint.blocks())
        .any(|(x, y)| *x == y);
    let shares_band = rule.sketch_search
        && fa
            .sketch
            .bands()
            .any(|band| fb.sketch.bands().any(|other| other == band));
    // The index only sees candidates that share a 16-bit simhash block (always, within distance 3)
    // or, with sketch_search, a content-sketch band.
    let found = shares_block || shares_band;
    let weights_b: HashMap<&str, f64> = feats_b
        .iter()
        .map(|f| (f.word.as_str(), f.weight))
        .collect();
    let weights_a: HashMap<&str, f64> = feats_a
        .iter()
        .map(|f| (f.word.as_str(), f.weight))
        .collect();
    let shared: Vec<Value> = feats_a
        .iter()
        .filter(|f| weights_b.contains_key(f.word.as_str()))
        .take(top)
        .map(|f| json!({"word": f.word, "weight_a": round3(f.weight), "weight_b": round3(weights_b[f.word.as_str()])}))
        .collect();
    let only = |feats: &[Feature], other: &HashMap<&str, f64>| -> Vec<Value> {
        feats
            .iter()
            .filter(|f| !other.contains_key(f.word.as_str()))
            .take(top)
            .map(feature_json)
            .collect()
    };
    let total_a: f64 = feats_a.iter().map(|f| f.weight).sum();
    let total_b: f64 = feats_b.iter().map(|f| f.weight).sum();
    let shared_weight: f64 = feats_a
        .iter()
        .filter_map(|f| weights_b.get(f.word.as_str()).map(|wb| f.weight.min(*wb)))
        .sum();
    let mut report = json!({
        "a": {"id": id_a, "fingerprint": fa.fingerprint.to_hex(), "features": fa.features},
        "b": {"id": id_b, "fingerprint": fb.fingerprint.to_hex(), "features": fb.features},
        "distance": distance,
        "threshold": rule.threshold,
        "second_check": {"jaccard": round3(sim.jaccard), "containment": round3(sim.containment)},
        "shares_block": shares_block,
        "shares_sketch_band": shares_band,
        "verdict": if found && rule.accepts(distance, Some(sim)) { "duplicate" } else { "distinct" },
        "rule": rule,
        "weighted_feature_overlap": round3(shared_weight / total_a.max(total_b).max(1e-9)),
        "top_shared": shared,
        "top_only_in_a": only(&feats_a, &weights_b),
        "top_only_in_b": only(&feats_b, &weights_a),
    });
    if explain {
        if let Some(obj) = report.as_object_mut() {
            obj.insert(
                "features_a".into(),
                Value::Array(feats_a.iter().map(feature_json).collect()),
            );
            obj.insert(
                "features_b".into(),
                Value::Array(feats_b.iter().map(feature_json).collect()),
            );
        }
    }
    Ok(report)
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
