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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{html, Header, Pair, Reason, Report, SampleKind};
    use crate::dedup::DedupConfig;
    use crate::fingerprint::{FingerprintConfig, Fingerprinter};
    use serde_json::{json, Value};
    use std::io::Cursor;

    const TEXT_A: &str = "国家统计局今天发布数据，十月份全国居民消费价格同比上涨百分之二点一，环比持平。其中食品价格上涨百分之三点五，非食品价格上涨百分之一点八。";
    const TEXT_B: &str = "中国气象局发布暴雨预警，预计未来三天南方多个省份将出现强降雨天气，局部地区有大暴雨，请公众注意防范山洪和地质灾害。";
    const TEXT_C: &str = "教育部召开新闻发布会，介绍今年高校毕业生就业工作进展，各地已组织专场招聘活动一千多场，提供岗位两百余万个。";

    fn article(id: &str, content: &str, published: &str, dedup: Value) -> Value {
        json!({"id": id, "title": "标题", "content": content, "source": "s",
               "published_at": published, "dedup": dedup})
    }

    fn unique(id: &str, content: &str, published: &str) -> Value {
        article(
            id,
            content,
            published,
            json!({"decision": "unique", "fingerprint": "00000000000000aa"}),
        )
    }

    fn matched(of: &str, containment: f64, rule: &str) -> Value {
        json!({"id": of, "url": null, "title": "标题", "fingerprint": "00000000000000aa",
               "distance": 1, "containment": containment, "rule": rule, "relation": "copy"})
    }

    fn duplicate(id: &str, of: &str, content: &str, published: &str) -> Value {
        article(
            id,
            content,
            published,
            json!({"decision": "duplicate", "fingerprint": "00000000000000ab",
                   "match": matched(of, 0.9, "simhash")}),
        )
    }

    /// A release of `id` (a duplicate of `of`) as `correct release` publishes it.
    fn released(id: &str, of: &str, content: &str, published: &str, by: &str, at: &str) -> Value {
        article(
            id,
            content,
            published,
            json!({"decision": "unique", "fingerprint": "00000000000000ab",
                   "correction": {"kind": "release", "by": by, "reason": "不是同一事件 <见原文>",
                                  "at": at, "previous": {"decision": "duplicate",
                                                         "match": matched(of, 0.9, "simhash")}}}),
        )
    }

    /// A merge of the unique `id` into `into` as `correct merge` publishes it.
    fn merged(id: &str, into: &str, content: &str, published: &str, at: &str) -> Value {
        article(
            id,
            content,
            published,
            json!({"decision": "duplicate", "fingerprint": "00000000000000ac",
                   "match": matched(into, 0.2, "editor"),
                   "correction": {"kind": "merge", "by": "李编辑", "reason": "同一新闻的改写",
                                  "at": at, "previous": {"decision": "unique"}}}),
        )
    }

    /// The report of a `batch` output made of `lines`.
    fn report(lines: &[Value]) -> Report {
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let plan = collect(Cursor::new(text), AuditOptions::default(), 1 << 20, None).unwrap();
        let fp = Fingerprinter::new(&FingerprintConfig::default()).unwrap();
        plan.finish(&fp, &DedupConfig::default(), Header::default())
    }

    fn pair<'a>(r: &'a Report, id: &str) -> &'a Pair {
        r.pairs.iter().find(|p| p.duplicate.id == id).unwrap()
    }

    #[test]
    fn corrections_are_listed_once_and_pairs_say_how_to_correct_them() {
        let release = released(
            "d9",
            "a1",
            TEXT_A,
            "2024-03-03T08:00:00Z",
            "王编辑",
            "2024-03-05T10:00:00Z",
        );
        let r = report(&[
            unique("a1", TEXT_A, "2024-03-01T08:00:00Z"),
            duplicate("d'1 <x>", "a1", TEXT_A, "2024-03-02T08:00:00Z"),
            unique("late", TEXT_B, "2024-03-09T08:00:00Z"),
            duplicate("early", "late", TEXT_B, "2024-03-02T08:00:00Z"),
            duplicate("d9", "a1", TEXT_A, "2024-03-03T08:00:00Z"),
            release.clone(),
            merged(
                "m2",
                "a1",
                TEXT_C,
                "2024-03-04T08:00:00Z",
                "2024-03-04T09:00:00Z",
            ),
            // A replay of the released article repeats its correction.
            release,
        ]);

        // Each correction once, by the time it was made, with who and why.
        let rows: Vec<_> = r
            .corrections
            .iter()
            .map(|c| {
                (
                    c.kind.as_str(),
                    c.id.as_str(),
                    c.at.as_str(),
                    c.by.as_deref(),
                    c.reason.as_deref(),
                    c.into.as_deref(),
                    c.previous_decision.as_str(),
                    c.previous_match.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            rows,
            vec![
                (
                    "merge",
                    "m2",
                    "2024-03-04T09:00:00Z",
                    Some("李编辑"),
                    Some("同一新闻的改写"),
                    Some("a1"),
                    "unique",
                    None
                ),
                (
                    "release",
                    "d9",
                    "2024-03-05T10:00:00Z",
                    Some("王编辑"),
                    Some("不是同一事件 <见原文>"),
                    None,
                    "duplicate",
                    Some("a1")
                ),
            ]
        );
        assert_eq!(r.summary_json()["corrections"], 2);

        // The exact command, quoted for the shell.
        let quoted = pair(&r, "d'1 <x>");
        assert_eq!(
            quoted.commands,
            vec![r"newsdedup correct release --id='d'\''1 <x>'"]
        );
        assert_eq!(quoted.to_json()["commands"], json!(quoted.commands));
        // The original came later: release, then merge the later article into the earlier.
        let early = pair(&r, "early");
        assert_eq!(early.reasons, vec![Reason::PublishedLater]);
        assert_eq!(
            early.commands,
            vec![
                "newsdedup correct release --id=early",
                "newsdedup correct merge --id=late --into=early"
            ]
        );
        // Released already: who did it instead of a command.
        let d9 = pair(&r, "d9");
        assert!(d9.commands.is_empty(), "{:?}", d9.commands);
        assert_eq!(
            d9.notes,
            vec!["released by 王编辑 at 2024-03-05T10:00:00Z: 不是同一事件 <见原文>"]
        );
        // A merge is a pair like any other, not suspicious for what the texts share.
        let m2 = pair(&r, "m2");
        assert_eq!(
            (m2.sample, m2.reasons.is_empty()),
            (SampleKind::Random, true)
        );
        assert_eq!(m2.commands, vec!["newsdedup correct release --id=m2"]);
        assert_eq!(r.suspicious.len(), 1);

        let page = html::render(&r);
        let at = |needle: &str| {
            page.find(needle)
                .unwrap_or_else(|| panic!("{needle:?} not in the page"))
        };
        let section = at("<section id=\"corrections\">");
        assert!(
            at("<section id=\"suspicious\">") < section && section < at("<section id=\"pairs\">")
        );
        let corrections = &page[section..at("<section id=\"pairs\">")];
        assert!(corrections.contains("<h2>Corrections (2)</h2>"));
        assert!(corrections.contains("<td>王编辑</td>"));
        assert!(corrections.contains("不是同一事件 &lt;见原文&gt;"));
        assert!(corrections.find("m2") < corrections.find("d9"));
        assert!(page.contains(
            "<pre class=\"commands\"><code>newsdedup correct release --id=&#39;d&#39;\\&#39;&#39;1 &lt;x&gt;&#39;</code></pre>"
        ));
        assert!(page.contains(
            "<code>newsdedup correct release --id=early\nnewsdedup correct merge --id=late --into=early</code>"
        ));
        assert!(!page.contains("<x>") && !page.contains("<见原文>"));
        assert!(!page.contains("--id=d9"));
    }

    #[test]
    fn no_corrections_in_the_range_says_so() {
        let r = report(&[
            unique("a1", TEXT_A, "2024-03-01T08:00:00Z"),
            duplicate("d1", "a1", TEXT_A, "2024-03-02T08:00:00Z"),
        ]);
        assert!(r.corrections.is_empty());
        assert_eq!(r.summary_json()["corrections"], 0);
        let page = html::render(&r);
        assert!(
            page.contains("<h2>Corrections (0)</h2>\n<p class=\"muted\">None in this range.</p>")
        );
        assert!(page.contains("<code>newsdedup correct release --id=d1</code>"));
    }

    #[test]
    fn a_merge_after_a_release_stands() {
        // Released from a1, later merged into a0: the merge is the decision now, so its pair
        // gets its command and no note of the older release.
        let r = report(&[
            unique("a0", TEXT_C, "2024-02-28T08:00:00Z"),
            unique("a1", TEXT_A, "2024-03-01T08:00:00Z"),
            released(
                "r2",
                "a1",
                TEXT_C,
                "2024-03-02T08:00:00Z",
                "王编辑",
                "2024-03-03T10:00:00Z",
            ),
            merged(
                "r2",
                "a0",
                TEXT_C,
                "2024-03-02T08:00:00Z",
                "2024-03-04T10:00:00Z",
            ),
        ]);
        assert_eq!(r.corrections.len(), 2);
        let r2 = pair(&r, "r2");
        assert_eq!(r2.commands, vec!["newsdedup correct release --id=r2"]);
        assert!(r2.notes.is_empty(), "{:?}", r2.notes);
    }
}
