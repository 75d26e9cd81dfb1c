//! `newsdedup index stats`, `verify`, `rebuild` and `delete`: an index's contents described
//! (text or JSON), its column families checked against each other, an index rebuilt from the
//! service's output (topics or `batch` files), and articles removed from it. Each but `rebuild`
//! opens only an existing index, without the fingerprinter.

use super::{fingerprinter_and_index, load_config, resolve};
use crate::cli::index::IndexCommand;
use anyhow::{bail, Context, Result};
use newsdedup::components::{Components, Overrides};
use newsdedup::config::Config;
use newsdedup::index::RocksIndex;
use newsdedup::replica::{self, TopicSource};
use newsdedup::time::TimeSpan;
use serde_json::json;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `command_line`: the ids of the flags given on the command line (not from a variable), which
/// `rebuild --input` refuses when they are for reading Kafka.
pub fn execute(command: IndexCommand, command_line: &HashSet<String>) -> Result<()> {
    match command {
        IndexCommand::Stats {
            index_dir,
            retention,
            top,
            json,
            common,
        } => {
            let index_dir = index_dir.resolve(&load_config(&common)?);
            stats(&index_dir, retention, top, json)
        }
        IndexCommand::Verify { index_dir, common } => {
            verify(&index_dir.resolve(&load_config(&common)?))
        }
        IndexCommand::Delete { index_dir, ids } => delete(&index_dir, &ids),
        IndexCommand::Rebuild {
            index_dir,
            brokers,
            from_topics,
            input,
            threads,
            properties,
            quiet,
            common,
        } => {
            let overrides = Overrides {
                threads,
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
                    bail!(
                        "{flag} is for reading Kafka; --input rebuilds from `batch` output files"
                    );
                }
                Source::Files(input)
            };
            rebuild(&index_dir, source, quiet, &components)
        }
    }
}

fn stats(index_dir: &Path, retention: Option<TimeSpan>, top: usize, json: bool) -> Result<()> {
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

fn verify(index_dir: &Path) -> Result<()> {
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
    super::warn_about_secret_flags(flags);
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
    Ok(TopicSource {
        properties,
        topics,
        corrections_topic: Some(service.corrections_topic.clone()),
    })
}

fn rebuild(index_dir: &Path, source: Source, quiet: bool, components: &Components) -> Result<()> {
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

fn delete(index_dir: &Path, ids: &[String]) -> Result<()> {
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
