//! Input read in order, and mapped on all cores in that order: the two building blocks of every
//! file runner (`batch`, `fingerprint`, `index rebuild`, the restore of output records). Bounded
//! memory whatever the input: a line over the limit is measured, not buffered, and at most a
//! window of items is in flight.

use std::collections::BTreeMap;
use std::io::{self, BufRead};

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
