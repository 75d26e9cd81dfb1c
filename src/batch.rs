//! Running a JSONL stream through the pipeline: lines are read in order, prepared on all cores, and
//! decided and written strictly in input order (one output line per input line).

use crate::article::{InvalidArticle, InvalidReason, ReadRules};
use crate::dedup::{self, Deduper};
use crate::error::IndexError;
use crate::fingerprint::Fingerprinter;
use crate::index::ArticleStore;
use crate::ordered::{ordered_map, read_line_limited, Line};
use crate::pipeline::{self, OutcomeCounts, Prepared};
use crate::progress::Progress;
use std::io::{self, BufRead, Write};
use std::time::{Duration, Instant};

/// Counters of a batch run.
#[derive(Debug, Clone, Default)]
pub struct BatchSummary {
    pub lines: u64,
    pub outcomes: OutcomeCounts,
    pub bytes: u64,
    pub elapsed: Duration,
    /// From the process's start (`BatchOptions::process_start`) to the first line decided.
    pub first_decision: Option<Duration>,
}

impl BatchSummary {
    pub fn articles_per_sec(&self) -> f64 {
        self.lines as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "lines": self.lines,
            "unique": self.outcomes.unique,
            "duplicate": self.outcomes.duplicate,
            "replayed": self.outcomes.replayed,
            "invalid": self.outcomes.invalid_total(),
            "invalid_by_reason": self.outcomes.invalid,
            "seconds": (self.elapsed.as_secs_f64() * 1000.0).round() / 1000.0,
            "articles_per_sec": self.articles_per_sec().round(),
            "mb_per_sec": ((self.bytes as f64 / 1e6) / self.elapsed.as_secs_f64().max(1e-9) * 10.0).round() / 10.0,
            "first_decision_ms": self.first_decision.map(|d| (d.as_secs_f64() * 10_000.0).round() / 10.0),
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    #[error(transparent)]
    Index(#[from] IndexError),
}

/// Options of a batch run.
#[derive(Debug, Clone)]
pub struct BatchOptions {
    pub threads: usize,
    pub max_article_bytes: usize,
    /// The UTC offset of a `published_at` written without one.
    pub published_at_offset: crate::time::UtcOffset,
    /// Print progress to stderr every this often (None: never).
    pub progress_every: Option<Duration>,
    /// When the process started (for the start-up time in the summary).
    pub process_start: Instant,
}

/// Runs `input` through prepare (parallel) and decide (serial, in order), writing one JSON line per
/// input line to `output`.
pub fn run_batch<S: ArticleStore>(
    input: impl BufRead + Send,
    output: &mut impl Write,
    fingerprinter: &Fingerprinter,
    deduper: &mut Deduper<S>,
    opts: &BatchOptions,
) -> Result<BatchSummary, BatchError> {
    let start = Instant::now();
    let mut summary = BatchSummary::default();
    let mut progress = Progress::new("batch", opts.progress_every);
    let max = opts.max_article_bytes;
    let rules = ReadRules {
        max_bytes: max,
        published_at_offset: opts.published_at_offset,
    };
    let mut input = input;
    ordered_map(
        || read_line_limited(&mut input, max),
        opts.threads,
        opts.threads * 64,
        |line| match line {
            Line::Bytes(bytes) => (
                bytes.len(),
                pipeline::prepare(&bytes, fingerprinter, &rules),
            ),
            Line::TooLong(len) => (
                len,
                Prepared::Invalid(InvalidArticle::new(
                    InvalidReason::Oversized,
                    format!("line is {len} bytes; the limit is {max} (--max-article-bytes)"),
                )),
            ),
        },
        |n, (len, prepared)| -> Result<(), BatchError> {
            summary.lines += 1;
            summary.bytes += len as u64;
            let outcome = pipeline::decide(deduper, prepared, Some(n), dedup::now_ms())?;
            if summary.first_decision.is_none() {
                summary.first_decision = Some(opts.process_start.elapsed());
            }
            summary.outcomes.add(&outcome);
            output.write_all(outcome.record())?;
            output.write_all(b"\n")?;
            progress.tick(|| {
                format!(
                    "{} lines ({:.0}/s): {} unique, {} duplicate, {} invalid",
                    summary.lines,
                    crate::progress::rate(summary.lines, start.elapsed()),
                    summary.outcomes.unique,
                    summary.outcomes.duplicate,
                    summary.outcomes.invalid_total()
                )
            });
            Ok(())
        },
    )?;
    output.flush()?;
    summary.elapsed = start.elapsed();
    Ok(summary)
}
