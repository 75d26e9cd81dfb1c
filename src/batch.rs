//! `batch`: the runner over a JSONL file. Lines are read in order (a line over the limit is
//! measured, not buffered), prepared on all cores, and decided and written strictly in input order
//! (one output line per input line); then the lines of a corrections file, if given, are applied
//! the same way (one output line each: the corrected record, or why it was refused); the index is
//! synced once at the end.

use crate::article::{InvalidArticle, InvalidReason, ReadRules};
use crate::correction::Acceptance;
use crate::error::IndexError;
use crate::fingerprint::Fingerprinter;
use crate::lines::{read_line_limited, Line};
use crate::output;
use crate::pipeline::{self, Decide, DecisionStage, Envelope, Outcome, OutcomeCounts, Prepared};
use crate::progress::Progress;
use crate::runner::{self, RunError};
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
            "corrections": self.outcomes.corrected,
            "seconds": (self.elapsed.as_secs_f64() * 1000.0).round() / 1000.0,
            "articles_per_sec": self.articles_per_sec().round(),
            "mb_per_sec": ((self.bytes as f64 / 1e6) / self.elapsed.as_secs_f64().max(1e-9) * 10.0).round() / 10.0,
            "first_decision_ms": self.first_decision.map(|d| (d.as_secs_f64() * 10_000.0).round() / 10.0),
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    #[error("cannot read the input")]
    Input(#[source] io::Error),
    /// Writing the output failed (a full volume, say); the index holds the decisions, so a
    /// re-run writes the whole output again.
    #[error("cannot write the output")]
    Output(#[source] io::Error),
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error("{0}")]
    Stopped(String),
}

impl From<RunError<IndexError>> for BatchError {
    fn from(e: RunError<IndexError>) -> Self {
        match e {
            RunError::Stage(e) => BatchError::Index(e),
            RunError::Sink(e) => BatchError::Output(e),
            RunError::Source(e) => BatchError::Input(e),
            RunError::Failed(why) => BatchError::Stopped(why),
        }
    }
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
    /// What the `--corrections` lines must be (signed with its keys, none: not checked; for its
    /// audience, unexpired).
    pub correction_acceptance: Acceptance,
}

/// One input line: its number (from 1 in its file) and length, and its bytes until they are
/// prepared.
pub struct JsonLine {
    pub number: u64,
    pub len: usize,
    pub line: Option<Line>,
    /// A line of the corrections file (`correction::Correction`), not an article.
    pub correction: bool,
}

/// What `batch` writes for one line: the output line and the input's length.
pub struct LineOutput {
    pub record: Vec<u8>,
    pub input_len: usize,
}

impl Envelope for JsonLine {
    type Output = LineOutput;

    fn output(self, outcome: Outcome) -> LineOutput {
        let record = match outcome {
            Outcome::Decided { record, .. } => record,
            // With its line number, which only a file source knows.
            Outcome::Invalid { error, .. } => output::invalid_line(Some(self.number), &error),
        };
        LineOutput {
            record,
            input_len: self.len,
        }
    }
}

/// Reads numbered lines of at most `max` bytes.
pub fn json_lines(
    input: impl BufRead + Send,
    max: usize,
) -> impl FnMut() -> io::Result<Option<JsonLine>> + Send {
    numbered_lines(input, max, false)
}

fn numbered_lines(
    mut input: impl BufRead + Send,
    max: usize,
    correction: bool,
) -> impl FnMut() -> io::Result<Option<JsonLine>> + Send {
    let mut number = 0u64;
    move || {
        Ok(read_line_limited(&mut input, max)?.map(|line| {
            number += 1;
            let len = match &line {
                Line::Bytes(b) => b.len(),
                Line::TooLong(n) => *n,
            };
            JsonLine {
                number,
                len,
                line: Some(line),
                correction,
            }
        }))
    }
}

/// Prepares a line: the article, or why it is invalid (a line over the limit is `oversized`).
pub fn prepare_line(
    line: &mut JsonLine,
    fingerprinter: &Fingerprinter,
    rules: &ReadRules,
    correction_acceptance: &Acceptance,
) -> Prepared {
    match line.line.take() {
        Some(Line::Bytes(bytes)) if line.correction => {
            pipeline::prepare_correction(&bytes, fingerprinter, rules, correction_acceptance)
        }
        Some(Line::Bytes(bytes)) => pipeline::prepare(&bytes, fingerprinter, rules),
        Some(Line::TooLong(len)) if line.correction => Prepared::Invalid(InvalidArticle::new(
            InvalidReason::Oversized,
            format!(
                "correction line is {len} bytes; the limit is {} (what a correction of an article of --max-article-bytes {} can take)",
                crate::correction::max_line_bytes(rules.max_bytes),
                rules.max_bytes
            ),
        )),
        Some(Line::TooLong(len)) => Prepared::Invalid(InvalidArticle::new(
            InvalidReason::Oversized,
            format!(
                "line is {len} bytes; the limit is {} (--max-article-bytes)",
                rules.max_bytes
            ),
        )),
        None => Prepared::Invalid(InvalidArticle::new(
            InvalidReason::BadJson,
            "the line was already prepared",
        )),
    }
}

/// Runs `input` through prepare (parallel) and decide (serial, in order), writing one JSON line per
/// input line to `output`, then applies the `corrections` lines (if any) the same way. Returns
/// the summary and the decider (its index synced).
pub fn run_batch<D: DecisionStage>(
    input: impl BufRead + Send,
    corrections: Option<impl BufRead + Send>,
    output: &mut (impl Write + Send),
    fingerprinter: &Fingerprinter,
    decider: D,
    opts: &BatchOptions,
) -> Result<(BatchSummary, D), BatchError> {
    let start = Instant::now();
    let mut summary = BatchSummary::default();
    let mut progress = Progress::new("batch", opts.progress_every);
    let rules = ReadRules {
        max_bytes: opts.max_article_bytes,
        published_at_offset: opts.published_at_offset,
    };
    let mut stage = Decide::new(decider, ());
    let counts = stage.counts();
    let process_start = opts.process_start;
    let mut articles = Some(json_lines(input, opts.max_article_bytes));
    // A correction line embeds an escaped article: its limit is the article's worst case.
    let correction_line_max = crate::correction::max_line_bytes(opts.max_article_bytes);
    let mut corrections = corrections.map(|c| numbered_lines(c, correction_line_max, true));
    let source = move || {
        if let Some(next) = articles.as_mut() {
            match next()? {
                Some(line) => return Ok(Some(line)),
                None => articles = None,
            }
        }
        match corrections.as_mut() {
            Some(next) => next(),
            None => Ok(None),
        }
    };
    runner::run_to_end(
        source,
        &|line: &mut JsonLine| {
            prepare_line(line, fingerprinter, &rules, &opts.correction_acceptance)
        },
        &mut stage,
        |line: LineOutput| -> io::Result<()> {
            summary.lines += 1;
            summary.bytes += line.input_len as u64;
            if summary.first_decision.is_none() {
                summary.first_decision = Some(process_start.elapsed());
            }
            output.write_all(&line.record)?;
            output.write_all(b"\n")?;
            progress.tick(|| {
                let c = counts.snapshot();
                format!(
                    "{} lines ({:.0}/s): {} unique, {} duplicate, {} invalid, {} corrections",
                    summary.lines,
                    crate::progress::rate(summary.lines, start.elapsed()),
                    c.unique,
                    c.duplicate,
                    c.invalid_total(),
                    c.corrected_total()
                )
            });
            Ok(())
        },
        &runner::Options::file(opts.threads),
    )?;
    output.flush().map_err(BatchError::Output)?;
    summary.outcomes = counts.snapshot();
    summary.elapsed = start.elapsed();
    Ok((summary, stage.into_decider()))
}
