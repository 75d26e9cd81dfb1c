//! The three passes of the audit over a `batch` output file: every line is in scope, the
//! originals are in the same file, and the shown pairs are read again by byte offset.

use super::collect::{AuditOptions, Collector, Location, Plan};
use super::record::BadRecord;
use super::AuditError;
use crate::lines::{read_line_limited, Line};
use crate::progress::Progress;
use std::io::{self, BufRead, Read, Seek, SeekFrom};

/// A buffered reader that knows the byte offset of what it hands out.
struct Counting<R> {
    inner: R,
    pos: u64,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Counting<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }

    fn consume(&mut self, amt: usize) {
        self.pos += amt as u64;
        self.inner.consume(amt);
    }
}

impl<R: BufRead + Seek> Counting<R> {
    fn seek_to(&mut self, pos: u64) -> io::Result<()> {
        self.inner.seek(SeekFrom::Start(pos))?;
        self.pos = pos;
        Ok(())
    }

    /// Calls `each(line number, byte offset, line)` for every line from the start.
    fn each_line(
        &mut self,
        max_line: usize,
        mut each: impl FnMut(u64, u64, Line),
    ) -> Result<(), AuditError> {
        self.seek_to(0).map_err(AuditError::Read)?;
        let mut number = 0;
        loop {
            let byte = self.pos;
            let Some(line) = read_line_limited(self, max_line).map_err(AuditError::Read)? else {
                return Ok(());
            };
            number += 1;
            each(number, byte, line);
        }
    }
}

fn blank(bytes: &[u8]) -> bool {
    bytes.iter().all(u8::is_ascii_whitespace)
}

/// Reads a `batch` output (`input` must be seekable: it is read three times) and returns the
/// plan with the shown pairs' records read again. Lines longer than `max_line` and lines that
/// are not decided records are counted as bad; blank lines are skipped.
pub fn collect<R: BufRead + Seek>(
    input: R,
    opts: AuditOptions,
    max_line: usize,
    progress_every: Option<std::time::Duration>,
) -> Result<Plan, AuditError> {
    let mut input = Counting {
        inner: input,
        pos: 0,
    };
    let size = input
        .inner
        .seek(SeekFrom::End(0))
        .map_err(AuditError::Read)?
        .max(1);
    let mut progress = Progress::new("audit", progress_every);
    let share = |pos: u64| pos as f64 * 100.0 / size as f64;

    let mut collector = Collector::new(opts);
    input.each_line(max_line, |number, byte, line| {
        let loc = Location::Line { number, byte };
        match line {
            Line::Bytes(b) if blank(&b) => {}
            Line::Bytes(b) => collector.add(&b, loc, None),
            Line::TooLong(n) => collector.add_bad(&loc, &BadRecord::TooLong(n, max_line)),
        }
        progress.tick(|| {
            let c = collector.counts();
            format!(
                "pass 1 of 3 (decisions): {number} lines ({:.0}%): {} unique, {} duplicate, {} bad",
                share(byte),
                c.unique,
                c.duplicate,
                c.bad
            )
        });
    })?;

    let mut originals = collector.start_originals();
    input.each_line(max_line, |number, byte, line| {
        if let Line::Bytes(b) = line {
            if !blank(&b) {
                originals.add(&b, Location::Line { number, byte });
            }
        }
        progress.tick(|| {
            format!(
                "pass 2 of 3 (originals): {number} lines ({:.0}%)",
                share(byte)
            )
        });
    })?;

    let mut plan = originals.plan();
    for loc in plan.locations() {
        let Location::Line { byte, .. } = loc else {
            continue;
        };
        input.seek_to(byte).map_err(AuditError::Read)?;
        if let Some(Line::Bytes(b)) =
            read_line_limited(&mut input, max_line).map_err(AuditError::Read)?
        {
            plan.fill(loc, b);
        }
    }
    Ok(plan)
}
