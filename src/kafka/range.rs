//! `newsdedup replay`'s range: where each partition of the replayed topic starts, and where it
//! stops by itself.
//!
//! The start and end offsets are planned once, before consuming, by the audit's reader
//! (`audit_source::spans`): every partition from its low watermark (or `--from-offset`, or the
//! first record at or after `--from-time`) to its last record when the replay starts (or the
//! first record at or after `--to-time`). While consuming, [`RangeBounds`] ends a partition at
//! the first record at or after `--to-time`, at its planned end, or when librdkafka reports the
//! end of the partition. The ends are offsets: records appended after the start are never
//! replayed, whatever their timestamps (a backfill's old CreateTime included).

use super::audit_source::{self, Span};
use super::consumer::{Admit, Bounds};
use anyhow::{bail, Result};
use std::collections::{BTreeMap, BTreeSet};

/// What a replay reads: where each partition starts, and the time bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayRange {
    /// `--from-offset`: start offset per partition (only these are read); empty: all partitions.
    pub from_offsets: BTreeMap<i32, i64>,
    /// `--from-time`, ms since the epoch.
    pub from_ms: Option<i64>,
    /// `--to-time`, ms since the epoch.
    pub to_ms: Option<i64>,
}

/// The ranges to replay, one per partition with something to read; partitions with nothing in
/// range are left out. Errors name the topic (missing, unreachable broker) or the partition.
pub fn plan(
    properties: &BTreeMap<String, String>,
    topic: &str,
    range: &ReplayRange,
) -> Result<Vec<Span>> {
    let reader = audit_source::create(properties)?;
    let mut spans = audit_source::spans(&reader, topic, range.from_ms, range.to_ms)?;
    if !range.from_offsets.is_empty() {
        let partitions = super::topic_partitions(&reader, topic)?;
        for p in range.from_offsets.keys() {
            if !partitions.contains(p) {
                bail!("--from-offset: topic {topic:?} has no partition {p} (its partitions: {partitions:?})");
            }
        }
        spans.retain(|s| range.from_offsets.contains_key(&s.partition));
        for s in &mut spans {
            let from = range.from_offsets[&s.partition];
            if from < s.start {
                tracing::warn!(
                    "--from-offset {}:{from}: the partition's first record is at offset {}; starting there",
                    s.partition,
                    s.start
                );
            } else {
                s.start = from;
            }
        }
    }
    spans.retain(|s| !(s.exact && s.start >= s.end));
    Ok(spans)
}

/// Where each partition of a replay stops (see the module docs).
#[derive(Debug)]
pub struct RangeBounds {
    spans: BTreeMap<i32, Span>,
    open: BTreeSet<i32>,
    from_ms: Option<i64>,
    to_ms: Option<i64>,
}

impl RangeBounds {
    pub fn new(spans: &[Span], range: &ReplayRange) -> RangeBounds {
        RangeBounds {
            spans: spans.iter().map(|s| (s.partition, s.clone())).collect(),
            open: spans.iter().map(|s| s.partition).collect(),
            from_ms: range.from_ms,
            to_ms: range.to_ms,
        }
    }

    /// Partitions not yet done.
    pub fn open(&self) -> Vec<i32> {
        self.open.iter().copied().collect()
    }

    /// Records in range by the planned offsets.
    pub fn planned_records(&self) -> u64 {
        self.spans
            .values()
            .map(|s| (s.end - s.start).max(0) as u64)
            .sum()
    }

    pub fn span(&self, partition: i32) -> Option<&Span> {
        self.spans.get(&partition)
    }
}

impl Bounds for RangeBounds {
    fn admit(&mut self, partition: i32, offset: i64, timestamp_ms: Option<i64>) -> Admit {
        let Some(span) = self.spans.get(&partition) else {
            return Admit::End;
        };
        if !self.open.contains(&partition) {
            return Admit::End;
        }
        let at_or_after = |bound: Option<i64>| bound.zip(timestamp_ms).is_some_and(|(b, t)| t >= b);
        let past_end = span.exact && offset >= span.end;
        if at_or_after(self.to_ms) || past_end {
            self.open.remove(&partition);
            return Admit::End;
        }
        // A broker that cannot seek by time starts earlier: pass over what is before the range.
        let before = offset < span.start
            || self
                .from_ms
                .zip(timestamp_ms)
                .is_some_and(|(from, t)| t < from);
        if before {
            return Admit::Skip;
        }
        if span.exact && offset + 1 >= span.end {
            self.open.remove(&partition);
        }
        Admit::Decide
    }

    fn end_of_partition(&mut self, partition: i32) {
        self.open.remove(&partition);
    }

    fn complete(&self) -> bool {
        self.open.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(partition: i32, start: i64, end: i64, exact: bool) -> Span {
        Span {
            partition,
            start,
            end,
            exact,
        }
    }

    fn range(from_ms: Option<i64>, to_ms: Option<i64>) -> ReplayRange {
        ReplayRange {
            from_offsets: BTreeMap::new(),
            from_ms,
            to_ms,
        }
    }

    #[test]
    fn exact_end_closes_after_its_last_record() {
        let mut b = RangeBounds::new(&[span(0, 5, 7, true)], &range(None, None));
        assert_eq!(b.admit(0, 5, Some(1)), Admit::Decide);
        assert!(!b.complete());
        assert_eq!(b.admit(0, 6, Some(1)), Admit::Decide);
        assert!(b.complete());
        assert_eq!(b.admit(0, 7, Some(1)), Admit::End);
    }

    /// An end by offset holds whatever a record's timestamp says; a watermark end (none planned
    /// now) lasts to the end of the partition.
    #[test]
    fn an_end_is_an_offset_whatever_the_timestamps() {
        let mut b = RangeBounds::new(
            &[span(0, 0, 2, true), span(1, 0, 0, false)],
            &range(None, None),
        );
        assert_eq!(b.admit(0, 1, Some(10)), Admit::Decide);
        assert_eq!(
            b.admit(0, 2, Some(1)),
            Admit::End,
            "an old timestamp past the end"
        );
        assert_eq!(b.admit(1, 5, Some(1)), Admit::Decide, "no end planned");
        assert!(!b.complete());
        b.end_of_partition(1);
        assert!(b.complete());
    }

    #[test]
    fn time_bounds() {
        let mut b = RangeBounds::new(&[span(0, 0, 100, false)], &range(Some(50), Some(80)));
        assert_eq!(b.admit(0, 0, Some(10)), Admit::Skip);
        assert_eq!(b.admit(0, 1, Some(50)), Admit::Decide);
        assert_eq!(b.admit(0, 2, None), Admit::Decide);
        assert_eq!(b.admit(0, 3, Some(80)), Admit::End);
        assert!(b.complete());
        assert_eq!(
            b.admit(7, 0, Some(60)),
            Admit::End,
            "not a replayed partition"
        );
    }
}
