//! An index kept from the service's own output: `index rebuild` (from the output topics or from
//! `batch` output files, after losing the index disk), `standby` (a replica that follows the
//! output topics for ever, ready to take over) and the catch-up `run` does first on a standby's
//! directory. All three apply records with `restore::restore_all`, so they share one rule:
//! idempotent, each record's topic position written with it.

use crate::article::{ReadRules, DEFAULT_MAX_ARTICLE_BYTES};
use crate::components::Components;
use crate::error::IndexError;
use crate::fingerprint::Fingerprinter;
use crate::index::rocks::disk_usage_of;
use crate::index::RocksIndex;
use crate::index::{ArticleStore, StoredArticle};
use crate::kafka::follow::Follower;
use crate::lines::{read_line_limited, Line};
use crate::pipeline::DISK_EVERY;
use crate::progress::Progress;
use crate::restore::{
    apply_rule, restore_all, Apply, RestoreRunError, RestoreSummary, RestoreTarget, Restored,
    SourceRecord,
};
use crate::time::UtcOffset;
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufReader};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest output record read back: the largest article plus its `dedup` member.
pub const MAX_RECORD_BYTES: usize =
    DEFAULT_MAX_ARTICLE_BYTES + crate::output::MAX_DEDUP_MEMBER_BYTES;

/// A reading with no record and no end for this long fails (broker unreachable, say).
const STALL_TIMEOUT: Duration = Duration::from_secs(120);

/// The output topics to read.
#[derive(Debug, Clone)]
pub struct TopicSource {
    /// librdkafka properties of a reader, `bootstrap.servers` included.
    pub properties: BTreeMap<String, String>,
    pub topics: Vec<String>,
    /// The corrections topic of the service that wrote them: a correction's output (its
    /// `newsdedup.source.topic` header names this topic) moves the rebuilt index's corrections
    /// position past that correction, in the same write as the article.
    pub corrections_topic: Option<String>,
}

/// A progress line of a restore, `done` of about `total` (records or bytes; 0: unknown) read.
fn restore_line(s: &RestoreSummary, done: u64, total: u64) -> String {
    format!(
        "{} records ({:.0}/s): {} added, {} replaced, {} already indexed{}",
        s.records,
        s.records_per_sec(),
        s.inserted,
        s.replaced,
        s.already_indexed,
        crate::progress::eta(done, total, s.elapsed)
    )
}

impl RestoreTarget for RocksIndex {
    /// Idempotent (`restore::apply_rule`); the article, the read position and the corrections
    /// position in one write.
    fn apply_restored(
        &mut self,
        restored: Option<&Restored>,
        position: Option<(&str, i32, i64)>,
        correction: Option<(&str, i32, i64)>,
    ) -> Result<Apply, IndexError> {
        let Some(r) = restored else {
            self.write_restored(None, None, position, correction)?;
            return Ok(Apply::Skip);
        };
        let apply = apply_rule(self.get(&r.id)?, &r.article);
        // A correction's pair is applied whatever happens to the article (ordered by its time).
        let pair = r.pair.as_ref().map(|p| (r.id.as_str(), p));
        match &apply {
            Apply::Skip if position.is_none() && pair.is_none() && correction.is_none() => {}
            Apply::Skip => self.write_restored(None, pair, position, correction)?,
            Apply::Insert => self.write_restored(
                Some((&r.id, None, &r.article, r.searchable)),
                pair,
                position,
                correction,
            )?,
            Apply::Replace(previous) => {
                // A correction of the same version changes what a correction changes on the
                // service, the decision alone (dating, sketch and history stay the stored
                // ones); a newer version remembers the one it replaces, as the live decision
                // does.
                let article = if previous.fingerprint == r.article.fingerprint {
                    previous.with_correction_of(&r.article)
                } else {
                    StoredArticle {
                        earlier: previous.history_after(),
                        ..r.article.clone()
                    }
                };
                self.write_restored(
                    Some((&r.id, Some(previous), &article, r.searchable)),
                    pair,
                    position,
                    correction,
                )?
            }
        }
        Ok(apply)
    }
}

/// How records are applied: the workers that parse and fingerprint them, and how their times
/// are read (as the writer read them).
#[derive(Debug, Clone, Copy)]
pub struct ApplyOptions {
    pub threads: usize,
    pub published_at_offset: UtcOffset,
}

impl From<&Components> for ApplyOptions {
    fn from(c: &Components) -> Self {
        ApplyOptions {
            threads: c.threads,
            published_at_offset: c.published_at_offset,
        }
    }
}

/// How restored records are read: any record a writer could have produced.
fn read_rules(published_at_offset: UtcOffset) -> ReadRules {
    ReadRules {
        max_bytes: MAX_RECORD_BYTES,
        published_at_offset,
    }
}

fn run_error(e: RestoreRunError) -> anyhow::Error {
    match e {
        RestoreRunError::Identity(e) => anyhow::Error::new(e).context("refusing to rebuild"),
        other => anyhow::Error::new(other),
    }
}

/// Rebuilds from `batch` output files, in order.
pub fn rebuild_from_files(
    index: &mut RocksIndex,
    fingerprinter: &Fingerprinter,
    inputs: &[PathBuf],
    options: ApplyOptions,
    progress_every: Option<Duration>,
) -> Result<RestoreSummary> {
    let mut files = Vec::with_capacity(inputs.len());
    let mut total_bytes = 0u64;
    for path in inputs {
        let file =
            File::open(path).with_context(|| format!("cannot open input {}", path.display()))?;
        total_bytes += file.metadata().map(|m| m.len()).unwrap_or(0);
        files.push(BufReader::with_capacity(1 << 16, file));
    }
    let read = Arc::new(AtomicU64::new(0));
    let counter = read.clone();
    let mut files = files.into_iter();
    let mut current = files.next();
    let next = move || -> io::Result<Option<SourceRecord>> {
        while let Some(reader) = current.as_mut() {
            match read_line_limited(reader, MAX_RECORD_BYTES)? {
                Some(Line::Bytes(bytes)) => {
                    counter.fetch_add(bytes.len() as u64 + 1, Ordering::Relaxed);
                    return Ok(Some(SourceRecord {
                        bytes,
                        timestamp_ms: None,
                        position: None,
                        correction: None,
                        input_time_ms: None,
                        sketch: None,
                    }));
                }
                // Not a record `batch` writes: reported as unreadable.
                Some(Line::TooLong(n)) => {
                    counter.fetch_add(n as u64 + 1, Ordering::Relaxed);
                    return Ok(Some(SourceRecord {
                        bytes: Vec::new(),
                        timestamp_ms: None,
                        position: None,
                        correction: None,
                        input_time_ms: None,
                        sketch: None,
                    }));
                }
                None => current = files.next(),
            }
        }
        Ok(None)
    };
    let mut progress = Progress::new("rebuild", progress_every);
    restore_all(
        next,
        index,
        fingerprinter,
        &read_rules(options.published_at_offset),
        options.threads,
        |s| {
            let done = read.load(Ordering::Relaxed);
            progress.tick(|| restore_line(s, done, total_bytes));
        },
    )
    .map_err(run_error)
}

/// Reads the output topics from the index's stored positions up to their ends (as they are
/// when reading starts), applying every record. Used by `index rebuild --brokers` and by `run`
/// before it takes over a standby's directory.
pub fn rebuild_from_topics(
    index: &mut RocksIndex,
    fingerprinter: &Fingerprinter,
    source: &TopicSource,
    options: ApplyOptions,
    progress_every: Option<Duration>,
    label: &'static str,
) -> Result<RestoreSummary> {
    let positions = index.positions()?;
    if !positions.is_empty() {
        tracing::info!("{label}: resuming from the stored positions {positions:?}");
    }
    let mut follower = Follower::start(
        &source.properties,
        &source.topics,
        source.corrections_topic.as_deref(),
        &positions,
        label,
    )?;
    let total = follower.remaining_at_start;
    let next = move || -> io::Result<Option<SourceRecord>> {
        loop {
            if let Some(record) = follower.poll(Duration::from_millis(200)) {
                return Ok(Some(record));
            }
            if follower.caught_up() {
                return Ok(None);
            }
            if follower.idle() > STALL_TIMEOUT {
                return Err(io::Error::other(format!(
                    "no record from the output topics for {}s and not at their end (is the broker reachable? last error: {})",
                    STALL_TIMEOUT.as_secs(),
                    if follower.last_error().is_empty() { "none" } else { follower.last_error() }
                )));
            }
        }
    };
    let mut progress = Progress::new(label, progress_every);
    let summary = restore_all(
        next,
        index,
        fingerprinter,
        &read_rules(options.published_at_offset),
        options.threads,
        |s| progress.tick(|| restore_line(s, s.records, total.max(0) as u64)),
    )
    .map_err(run_error)?;
    index.sync()?;
    Ok(summary)
}

/// What a standby reports on /metrics and /ready.
#[derive(Debug, Default)]
pub struct StandbyStatus {
    /// Records behind the ends of the output topics at the last measurement.
    pub lag: AtomicU64,
    /// Set once the standby has read every output topic to its end.
    pub caught_up_once: AtomicBool,
    /// Set when the standby failed (the reason is logged).
    pub failed: AtomicBool,
}

/// Follows the output topics until `stop` is set, keeping `index` current; measures the lag every
/// `lag_every`, and the index's disk use as often as `run` does.
pub fn follow(
    index: &mut RocksIndex,
    fingerprinter: &Fingerprinter,
    source: &TopicSource,
    options: ApplyOptions,
    stop: &AtomicBool,
    status: &StandbyStatus,
    lag_every: Duration,
) -> Result<RestoreSummary> {
    use crate::metrics as m;
    let positions = index.positions()?;
    if positions.is_empty() && crate::index::ArticleStore::counts(index).articles > 0 {
        bail!(
            "{} holds an index `run` built (no output-topic positions): a standby keeps its own directory; give it an empty --index-dir (it reads the output topics from their beginning)",
            index.dir().display()
        );
    }
    tracing::info!(
        "standby: following {:?} from {}",
        source.topics,
        if positions.is_empty() {
            "their beginning".to_owned()
        } else {
            format!("the stored positions {positions:?}")
        }
    );
    let mut follower = Follower::start(
        &source.properties,
        &source.topics,
        source.corrections_topic.as_deref(),
        &positions,
        "standby",
    )?;
    let mut last_lag = Instant::now() - lag_every;
    let mut last_disk = Instant::now() - DISK_EVERY;
    let dir = index.dir().to_owned();
    let applied = metrics::counter!(m::STANDBY_RECORDS);
    let next = move || -> io::Result<Option<SourceRecord>> {
        loop {
            if stop.load(Ordering::SeqCst) {
                return Ok(None);
            }
            if last_lag.elapsed() >= lag_every {
                last_lag = Instant::now();
                match follower.lag() {
                    Ok(lags) => {
                        let mut total = 0;
                        for (topic, partition, lag) in lags {
                            total += lag;
                            metrics::gauge!(m::STANDBY_LAG, "topic" => topic.to_string(), "partition" => partition.to_string())
                                .set(lag as f64);
                        }
                        status.lag.store(total as u64, Ordering::Relaxed);
                    }
                    Err(e) => tracing::warn!("standby: cannot measure the lag: {e:#}"),
                }
            }
            // As often as `run` measures it: the size is a walk of the directory.
            if last_disk.elapsed() >= DISK_EVERY {
                last_disk = Instant::now();
                m::record_disk_usage(&disk_usage_of(&dir));
            }
            if let Some(record) = follower.poll(Duration::from_millis(200)) {
                return Ok(Some(record));
            }
            if follower.caught_up() && !status.caught_up_once.swap(true, Ordering::SeqCst) {
                tracing::info!("standby: caught up with the output topics");
                metrics::gauge!(m::STANDBY_CAUGHT_UP).set(1.0);
            }
        }
    };
    let summary = restore_all(
        next,
        index,
        fingerprinter,
        &read_rules(options.published_at_offset),
        options.threads,
        // Counted once written: a record read but not yet applied is read again after a crash.
        |s| applied.absolute(s.records),
    )
    .map_err(run_error);
    if summary.is_err() {
        status.failed.store(true, Ordering::SeqCst);
    }
    index.sync()?;
    summary
}
