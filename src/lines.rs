//! Lines of a JSONL input read with a limit: a line over it is measured, not buffered, so memory
//! stays bounded whatever the input (`batch`, `fingerprint`, `index rebuild`, the audit).

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
}
