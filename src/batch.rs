//! Running a JSONL stream through the pipeline: lines are read in order, prepared on all cores, and
//! decided and written strictly in input order (one output line per input line).

use crate::article::{InvalidArticle, InvalidReason, ReadRules};
use crate::dedup::{self, Deduper};
use crate::error::IndexError;
use crate::fingerprint::Fingerprinter;
use crate::index::ArticleStore;
use crate::pipeline::{self, Outcome, Prepared};
use std::collections::BTreeMap;
use std::io::{self, BufRead, Write};
use std::time::{Duration, Instant};

/// One line of input as read: its bytes, or its length if it exceeded the limit (then its bytes
/// were skipped, not buffered, so memory stays bounded).
#[derive(Debug)]
pub enum Line {
    Bytes(Vec<u8>),
    TooLong(usize),
}

/// Reads the next line (without its `\n` / `\r\n`), keeping at most `max` bytes in memory.
/// Returns None at end of input.
pub fn read_line_limited(reader: &mut impl BufRead, max: usize) -> io::Result<Option<Line>> {
    let mut buf = Vec::new();
    let mut total = 0usize;
    let mut any = false;
    loop {
        let chunk = match reader.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            break;
        }
        any = true;
        let (part, done) = match memchr::memchr(b'\n', chunk) {
            Some(p) => (&chunk[..p], Some(p + 1)),
            None => (chunk, None),
        };
        total += part.len();
        if total <= max.saturating_add(1) {
            buf.extend_from_slice(part);
        }
        let consumed = done.unwrap_or(part.len());
        reader.consume(consumed);
        if done.is_some() {
            break;
        }
    }
    if !any {
        return Ok(None);
    }
    if buf.last() == Some(&b'\r') {
        buf.pop();
        total -= 1;
    }
    if total > max {
        Ok(Some(Line::TooLong(total)))
    } else {
        Ok(Some(Line::Bytes(buf)))
    }
}

/// Takes items from `next` in order (until it returns None), maps them on `threads` workers,
/// and hands results to `sink` in the order taken. At most `window` items are in flight, which
/// bounds memory whatever the input. Items are numbered from 1.
pub fn ordered_map<X, T, E>(
    mut next: impl FnMut() -> io::Result<Option<X>> + Send,
    threads: usize,
    window: usize,
    work: impl Fn(X) -> T + Sync,
    mut sink: impl FnMut(u64, T) -> Result<(), E>,
) -> Result<u64, E>
where
    X: Send,
    T: Send,
    E: From<io::Error> + Send,
{
    let threads = threads.max(1);
    let window = window.max(threads * 2);
    let (line_tx, line_rx) = crossbeam_channel::bounded::<(u64, X)>(window);
    let (out_tx, out_rx) = crossbeam_channel::unbounded::<(u64, T)>();
    // Credits: the reader takes one per line, the sink returns one per line written.
    let (credit_tx, credit_rx) = crossbeam_channel::bounded::<()>(window);
    for _ in 0..window {
        let _ = credit_tx.send(());
    }
    std::thread::scope(|scope| {
        let reader_handle = scope.spawn(move || -> io::Result<u64> {
            let mut n = 0u64;
            while credit_rx.recv().is_ok() {
                match next()? {
                    None => break,
                    Some(line) => {
                        n += 1;
                        if line_tx.send((n, line)).is_err() {
                            break;
                        }
                    }
                }
            }
            Ok(n)
        });
        for _ in 0..threads {
            let rx = line_rx.clone();
            let tx = out_tx.clone();
            let work = &work;
            scope.spawn(move || {
                for (n, line) in rx {
                    if tx.send((n, work(line))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(line_rx);
        drop(out_tx);
        let mut pending: BTreeMap<u64, T> = BTreeMap::new();
        let mut next = 1u64;
        let mut result: Result<(), E> = Ok(());
        for (n, item) in out_rx.iter() {
            pending.insert(n, item);
            while let Some(item) = pending.remove(&next) {
                if result.is_ok() {
                    result = sink(next, item);
                }
                next += 1;
                let _ = credit_tx.send(());
            }
            if result.is_err() {
                break;
            }
        }
        // Unblock the reader if we stopped early, then collect its outcome.
        drop(credit_tx);
        drop(out_rx);
        let read = reader_handle
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("reader thread panicked")));
        result?;
        Ok(read?)
    })
}

/// Counters of a batch run.
#[derive(Debug, Clone, Default)]
pub struct BatchSummary {
    pub lines: u64,
    pub unique: u64,
    pub duplicate: u64,
    pub replayed: u64,
    pub invalid: BTreeMap<&'static str, u64>,
    pub bytes: u64,
    pub elapsed: Duration,
}

impl BatchSummary {
    pub fn invalid_total(&self) -> u64 {
        self.invalid.values().sum()
    }

    pub fn articles_per_sec(&self) -> f64 {
        self.lines as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "lines": self.lines,
            "unique": self.unique,
            "duplicate": self.duplicate,
            "replayed": self.replayed,
            "invalid": self.invalid_total(),
            "invalid_by_reason": self.invalid,
            "seconds": (self.elapsed.as_secs_f64() * 1000.0).round() / 1000.0,
            "articles_per_sec": self.articles_per_sec().round(),
            "mb_per_sec": ((self.bytes as f64 / 1e6) / self.elapsed.as_secs_f64().max(1e-9) * 10.0).round() / 10.0,
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
    let mut last_progress = Instant::now();
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
            match &outcome {
                Outcome::Decided { decision, .. } => {
                    if decision.replayed {
                        summary.replayed += 1;
                    }
                    if decision.is_duplicate() {
                        summary.duplicate += 1;
                    } else {
                        summary.unique += 1;
                    }
                }
                Outcome::Invalid { error, .. } => {
                    *summary.invalid.entry(error.reason.as_str()).or_default() += 1
                }
            }
            output.write_all(outcome.record())?;
            output.write_all(b"\n")?;
            if let Some(every) = opts.progress_every {
                if last_progress.elapsed() >= every {
                    last_progress = Instant::now();
                    let secs = start.elapsed().as_secs_f64();
                    eprintln!(
                        "batch: {} lines ({:.0}/s): {} unique, {} duplicate, {} invalid",
                        summary.lines,
                        summary.lines as f64 / secs,
                        summary.unique,
                        summary.duplicate,
                        summary.invalid_total()
                    );
                }
            }
            Ok(())
        },
    )?;
    output.flush()?;
    summary.elapsed = start.elapsed();
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], max: usize) -> Vec<String> {
        let mut r = input;
        let mut out = Vec::new();
        while let Some(l) = read_line_limited(&mut r, max).unwrap() {
            out.push(match l {
                Line::Bytes(b) => String::from_utf8_lossy(&b).into_owned(),
                Line::TooLong(n) => format!("<{n}>"),
            });
        }
        out
    }

    #[test]
    fn line_reader_handles_crlf_limits_and_missing_final_newline() {
        assert_eq!(lines(b"a\r\nbb\n\nccc", 10), ["a", "bb", "", "ccc"]);
        assert_eq!(lines(b"abcdef\nab\n", 3), ["<6>", "ab"]);
        assert_eq!(lines(b"", 3), Vec::<String>::new());
        // Limits are checked across buffer refills too.
        let big = vec![b'x'; 100_000];
        let mut r = io::BufReader::with_capacity(16, &big[..]);
        assert!(matches!(
            read_line_limited(&mut r, 1000).unwrap(),
            Some(Line::TooLong(100_000))
        ));
    }

    #[test]
    fn ordered_map_keeps_order_with_many_threads() {
        let input: String = (0..5000).map(|i| format!("{i}\n")).collect();
        let mut got = Vec::new();
        let mut reader = input.as_bytes();
        let n = ordered_map(
            || read_line_limited(&mut reader, 100),
            4,
            16,
            |l| match l {
                Line::Bytes(b) => String::from_utf8(b).unwrap(),
                Line::TooLong(_) => unreachable!(),
            },
            |n, s| -> Result<(), io::Error> {
                got.push((n, s));
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(n, 5000);
        for (i, (n, s)) in got.iter().enumerate() {
            assert_eq!(*n, i as u64 + 1);
            assert_eq!(s, &i.to_string());
        }
    }

    #[test]
    fn ordered_map_stops_on_sink_error() {
        let input: String = (0..10_000).map(|i| format!("{i}\n")).collect();
        let mut reader = input.as_bytes();
        let r = ordered_map(
            || read_line_limited(&mut reader, 100),
            2,
            8,
            |_| (),
            |n, _| {
                if n == 10 {
                    Err(io::Error::other("stop"))
                } else {
                    Ok(())
                }
            },
        );
        assert!(r.is_err());
    }
}
