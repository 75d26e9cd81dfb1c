//! `newsdedup audit --brokers`: the audit's three passes over the service's output topics.
//!
//! 1. The records in the time range (by record timestamp: `offsets_for_times` gives where to
//!    start and stop, and each record's timestamp is checked too) of the duplicate topic, then
//!    of the unique topic (their totals, sources and times).
//! 2. The whole unique topic, for originals: a record is parsed only if its key (the article id)
//!    is one a duplicate matched.
//! 3. The shown pairs' records, read again by partition and offset.
//!
//! Every partition is read up to the end it had when the pass started: its high watermark then.
//! A broker may report a smaller watermark than its last record (Tansu reports the base offset
//! of the last batch + 1), so reading past it goes on while records are older than the start of
//! the audit, until the end of the partition. Plain `assign`: no consumer group is joined and
//! nothing is committed.

use crate::audit::{AuditOptions, Collector, Location, Plan};
use crate::progress::Progress;
use anyhow::{bail, Context, Result};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::ClientConfig;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What to read.
#[derive(Debug, Clone)]
pub struct KafkaAudit {
    /// librdkafka properties, `bootstrap.servers` included (see `properties::reader_properties`).
    pub properties: BTreeMap<String, String>,
    pub duplicate_topic: String,
    pub unique_topic: String,
    /// Records with a timestamp in [from, to) (ms since the epoch).
    pub from_ms: Option<i64>,
    pub to_ms: Option<i64>,
    pub progress: Option<Duration>,
}

/// Metadata, watermark and offset requests.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// A pass fails when no record or end of partition arrives for this long.
const STALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Shown records closer than this (in offsets) are read in one run rather than sought apart.
const RUN_GAP: i64 = 2_000;

/// A range of one partition to read (also `replay`'s, see `kafka::range`).
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub partition: i32,
    pub start: i64,
    /// First offset not to read. Exact: after a known record (the first at or after `--to-time`,
    /// the last there was when the plan was made, a re-read); otherwise a watermark, read past
    /// to the end of the partition (only the plan's own probes).
    pub end: i64,
    pub exact: bool,
}

/// One record handed to a pass.
pub(crate) struct Rec<'a> {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<&'a [u8]>,
    pub value: &'a [u8],
    pub timestamp: Option<i64>,
    /// The timestamp of the input record it answers (header `newsdedup.source.timestamp`).
    pub input_time_ms: Option<i64>,
}

pub(crate) fn create(properties: &BTreeMap<String, String>) -> Result<BaseConsumer> {
    let reader = super::properties::plain_reader(properties, "newsdedup-audit");
    super::login::check(&reader)?;
    let mut config = ClientConfig::new();
    for (k, v) in reader {
        config.set(k, v);
    }
    // The end of a partition is reported so a pass knows when it is done.
    config.set("enable.partition.eof", "true");
    config
        .create()
        .map_err(|e| super::producer::redacted(e, properties))
        .context("cannot create the Kafka consumer (check -X properties)")
}

/// Per partition, the first offset with a timestamp at or after `ms` (None: no such record).
fn offsets_for(
    consumer: &BaseConsumer,
    topic: &str,
    parts: &[i32],
    ms: i64,
) -> Result<BTreeMap<i32, Option<i64>>> {
    let mut tpl = TopicPartitionList::new();
    for &p in parts {
        tpl.add_partition_offset(topic, p, Offset::Offset(ms))
            .with_context(|| format!("offset request for {topic} [{p}]"))?;
    }
    let found = consumer
        .offsets_for_times(tpl, REQUEST_TIMEOUT)
        .with_context(|| format!("cannot look up offsets by time in {topic:?}"))?;
    Ok(found
        .elements_for_topic(topic)
        .iter()
        .map(|e| {
            let o = match e.offset() {
                Offset::Offset(o) => Some(o),
                _ => None,
            };
            (e.partition(), o)
        })
        .collect())
}

/// What to read of `topic` for records with a timestamp in [from, to).
///
/// The offsets a broker gives for a time are checked against the records' own timestamps: the
/// record before the start is older than `from`, the record at the end is not older than its
/// bound, and "no record that recent" is checked against the newest records. A start whose
/// record is older than `from` is early: taken as it is (Tansu 0.6 answers the first offset of
/// the batch holding the record: a few records more to read, which every reader filters by
/// timestamp); at the partition's first record it may mean none (Tansu answers 0 then, where
/// Kafka answers none): the partition is left out when its newest records are older too. A start
/// after a record that is already recent is late: read from the beginning instead. A wrong
/// answer costs a longer read, never records.
pub(crate) fn spans(
    consumer: &BaseConsumer,
    topic: &str,
    from: Option<i64>,
    to: Option<i64>,
) -> Result<Vec<Span>> {
    let parts = super::topic_partitions(consumer, topic)?;
    let mut marks = BTreeMap::new();
    for &p in &parts {
        let (low, high) = consumer
            .fetch_watermarks(topic, p, REQUEST_TIMEOUT)
            .with_context(|| format!("cannot read the offsets of {topic} [{p}]"))?;
        marks.insert(p, (low, high));
    }
    let starts = match from {
        Some(t) => offsets_for(consumer, topic, &parts, t)?,
        None => BTreeMap::new(),
    };
    let ends = match to {
        Some(t) => offsets_for(consumer, topic, &parts, t)?,
        None => BTreeMap::new(),
    };
    // The timestamps around the broker's answers, one short read per kind over all partitions.
    let (mut around_start, mut around_end) = (Vec::new(), Vec::new());
    for (&p, &(low, _)) in &marks {
        if let Some(Some(o)) = starts.get(&p) {
            around_start.push(Span {
                partition: p,
                start: (o - 1).max(low),
                end: o + 1,
                exact: true,
            });
        }
        if let Some(Some(o)) = ends.get(&p) {
            around_end.push(Span {
                partition: p,
                start: *o,
                end: o + 1,
                exact: true,
            });
        }
    }
    let mut stamps: BTreeMap<(i32, i64), Option<i64>> = BTreeMap::new();
    let mut newest: BTreeMap<i32, i64> = BTreeMap::new();
    let mut quiet = Progress::new("audit", None);
    for probe in [&around_start, &around_end] {
        scan(consumer, topic, probe, &mut quiet, "offset check", |r| {
            stamps.insert((r.partition, r.offset), r.timestamp);
        })?;
    }
    let stamp = |p: i32, o: i64| stamps.get(&(p, o)).copied().flatten();
    // Whether anything is that recent, where the broker said none or gave a start older than
    // `from`.
    let newest_of: Vec<Span> = marks
        .iter()
        .filter(|&(&p, &(low, high))| {
            high > low
                && match (from, starts.get(&p).copied().flatten()) {
                    (Some(_), None) => true,
                    (Some(from), Some(o)) => o <= low && stamp(p, o).is_some_and(|t| t < from),
                    (None, _) => false,
                }
        })
        .map(|(&p, &(low, high))| Span {
            partition: p,
            start: (high - 1).max(low),
            end: high,
            exact: false,
        })
        .collect();
    // A soft end that never stops on time: the newest records up to the end of the partition.
    scan(
        consumer,
        topic,
        &newest_of,
        &mut quiet,
        "offset check",
        |r| {
            if let Some(t) = r.timestamp {
                let n = newest.entry(r.partition).or_insert(t);
                *n = (*n).max(t);
            }
        },
    )?;

    let mut out = Vec::new();
    for (&p, &(low, high)) in &marks {
        let start = match (from, starts.get(&p).copied().flatten()) {
            (None, _) => low,
            (Some(from), Some(o)) => {
                let before = o <= low || stamp(p, o - 1).is_none_or(|t| t < from);
                let at = stamp(p, o).is_none_or(|t| t >= from);
                match (before, at) {
                    (true, true) => o.max(low),
                    // The first record: "none" answered as offset 0, unless newer ones follow.
                    (true, false) if o <= low => match newest.get(&p) {
                        Some(&n) if n >= from => low,
                        _ => continue,
                    },
                    // Early: a batch's first offset.
                    (true, false) => o,
                    (false, _) => low,
                }
            }
            // Nothing at or after --from-time, if the newest records agree.
            (Some(from), None) => match newest.get(&p) {
                Some(&n) if n >= from => low,
                _ => continue,
            },
        };
        let (end, exact) = match (to, ends.get(&p).copied().flatten()) {
            (Some(to), Some(o)) if stamp(p, o).is_none_or(|t| t >= to) => (o, true),
            _ => (high, false),
        };
        if exact && start >= end {
            continue;
        }
        out.push(Span {
            partition: p,
            start,
            end,
            exact,
        });
    }
    // A watermark end made exact: the last record there is now (a broker may give a watermark
    // below its last record: Tansu, the last batch's base offset + 1), read up to the end of
    // the partition once. Ended by offsets, a reading stops where the topic ended when it began,
    // whatever timestamps the records appended since carry (a backfill's old CreateTime).
    let soft: Vec<Span> = out
        .iter()
        .filter(|s| !s.exact)
        .map(|s| Span {
            partition: s.partition,
            start: (s.end - 1).max(s.start),
            end: s.end,
            exact: false,
        })
        .collect();
    let mut last: BTreeMap<i32, i64> = BTreeMap::new();
    scan(consumer, topic, &soft, &mut quiet, "end check", |r| {
        let l = last.entry(r.partition).or_insert(r.offset);
        *l = (*l).max(r.offset);
    })?;
    for s in out.iter_mut().filter(|s| !s.exact) {
        if let Some(&l) = last.get(&s.partition) {
            s.end = s.end.max(l + 1);
        }
        s.exact = true;
    }
    out.retain(|s| !(s.exact && s.start >= s.end));
    Ok(out)
}

/// Reads `spans` of `topic` and hands each record to `visit`; `label` names the pass in progress
/// lines. A partition is done at its span's end: an exact end, or for a watermark end the end of
/// the partition (which librdkafka reports once the reading reaches it, even while records keep
/// arriving).
/// Returns the number of records handed over.
pub(crate) fn scan(
    consumer: &BaseConsumer,
    topic: &str,
    spans: &[Span],
    progress: &mut Progress,
    label: &str,
    mut visit: impl FnMut(Rec),
) -> Result<u64> {
    if spans.is_empty() {
        return Ok(0);
    }
    let mut tpl = TopicPartitionList::new();
    for s in spans {
        tpl.add_partition_offset(topic, s.partition, Offset::Offset(s.start))
            .with_context(|| format!("cannot assign {topic} [{}]", s.partition))?;
    }
    consumer
        .assign(&tpl)
        .with_context(|| format!("cannot read {topic:?}"))?;
    let expected: i64 = spans.iter().map(|s| (s.end - s.start).max(0)).sum();
    let mut open: HashSet<i32> = spans.iter().map(|s| s.partition).collect();
    let mut seen = 0u64;
    let mut last_event = Instant::now();
    let mut last_error = String::new();
    while !open.is_empty() {
        let event = consumer.poll(Duration::from_millis(200));
        match event {
            None => {
                if last_event.elapsed() > STALL_TIMEOUT {
                    let _ = consumer.unassign();
                    bail!(
                        "{label}: no record from {topic:?} partition(s) {:?} for {}s{}",
                        open,
                        STALL_TIMEOUT.as_secs(),
                        if last_error.is_empty() {
                            String::new()
                        } else {
                            format!(" (last error: {last_error})")
                        }
                    );
                }
            }
            Some(Err(KafkaError::PartitionEOF(p))) => {
                last_event = Instant::now();
                open.remove(&p);
            }
            Some(Err(e)) => {
                // Transient (broker restarting, leader moving): librdkafka retries by itself.
                let text = e.to_string();
                if text != last_error {
                    eprintln!("audit: {topic}: {text} (retrying)");
                    last_error = text;
                }
            }
            Some(Ok(m)) => {
                last_event = Instant::now();
                let p = m.partition();
                let Some(span) = spans.iter().find(|s| s.partition == p) else {
                    continue;
                };
                if !open.contains(&p) {
                    continue;
                }
                let offset = m.offset();
                let timestamp = m.timestamp().to_millis();
                let past_end = offset >= span.end;
                if past_end && span.exact {
                    open.remove(&p);
                    continue;
                }
                seen += 1;
                let input_time_ms =
                    super::record::header_value(&m, super::record::H_SOURCE_TIMESTAMP)
                        .and_then(|v| std::str::from_utf8(v).ok()?.parse().ok());
                visit(Rec {
                    partition: p,
                    offset,
                    key: m.key(),
                    value: m.payload().unwrap_or_default(),
                    timestamp,
                    input_time_ms,
                });
                if span.exact && offset + 1 >= span.end {
                    open.remove(&p);
                }
                progress.tick(|| {
                    let pct = if expected > 0 {
                        format!(
                            " (~{:.0}%)",
                            (seen as f64 * 100.0 / expected as f64).min(100.0)
                        )
                    } else {
                        String::new()
                    };
                    format!("{label}: {seen} of ~{expected} records of {topic}{pct}")
                });
            }
        }
    }
    consumer
        .unassign()
        .with_context(|| format!("cannot release {topic:?}"))?;
    Ok(seen)
}

/// Runs the three passes and returns the plan with the shown pairs' records read again.
pub fn collect(a: &KafkaAudit, opts: AuditOptions) -> Result<Plan> {
    let consumer = create(&a.properties)?;
    let mut progress = Progress::new("audit", a.progress);
    let in_range = |ts: Option<i64>| match (a.from_ms, a.to_ms, ts) {
        (None, None, _) => true,
        (_, _, None) => false,
        (from, to, Some(t)) => from.is_none_or(|f| t >= f) && to.is_none_or(|e| t < e),
    };
    let topics: [Arc<str>; 2] = [
        a.duplicate_topic.as_str().into(),
        a.unique_topic.as_str().into(),
    ];
    let location = |topic: &Arc<str>, r: &Rec| Location::Record {
        topic: topic.clone(),
        partition: r.partition,
        offset: r.offset,
    };

    // Pass 1: the decisions in the time range.
    let mut collector = Collector::new(opts);
    for (topic, what) in topics.iter().zip(["duplicates", "unique articles"]) {
        let spans = spans(&consumer, topic, a.from_ms, a.to_ms)?;
        let label = format!("pass 1 of 3 ({what})");
        scan(&consumer, topic, &spans, &mut progress, &label, |r| {
            if in_range(r.timestamp) {
                collector.add(r.value, location(topic, &r), r.timestamp);
            }
        })?;
    }

    // Pass 2: the originals, anywhere in the unique topic.
    let mut originals = collector.start_originals();
    if originals.wanted() > 0 {
        let topic = &topics[1];
        let spans = spans(&consumer, topic, None, None)?;
        scan(
            &consumer,
            topic,
            &spans,
            &mut progress,
            "pass 2 of 3 (originals)",
            |r| {
                // The key is the article id; a record without a usable key is looked at in full.
                let wanted = match r.key.map(std::str::from_utf8) {
                    Some(Ok(id)) => originals.wants(id),
                    _ => true,
                };
                if wanted {
                    originals.add(r.value, location(topic, &r));
                }
            },
        )?;
    }

    // Pass 3: the shown pairs' records, by runs of nearby offsets per partition.
    let mut plan = originals.plan();
    let mut wanted: BTreeMap<(Arc<str>, i32), Vec<i64>> = BTreeMap::new();
    for loc in plan.locations() {
        if let Location::Record {
            topic,
            partition,
            offset,
        } = loc
        {
            wanted.entry((topic, partition)).or_default().push(offset);
        }
    }
    for topic in &topics {
        // Runs per partition; round k reads the k-th run of every partition.
        let mut runs: Vec<Vec<Span>> = Vec::new();
        for ((t, partition), offsets) in &wanted {
            if t != topic {
                continue;
            }
            let mut k = 0;
            let mut i = 0;
            while i < offsets.len() {
                let mut j = i;
                while j + 1 < offsets.len() && offsets[j + 1] - offsets[j] <= RUN_GAP {
                    j += 1;
                }
                if runs.len() <= k {
                    runs.push(Vec::new());
                }
                runs[k].push(Span {
                    partition: *partition,
                    start: offsets[i],
                    end: offsets[j] + 1,
                    exact: true,
                });
                k += 1;
                i = j + 1;
            }
        }
        let want: HashSet<(i32, i64)> = wanted
            .iter()
            .filter(|((t, _), _)| t == topic)
            .flat_map(|((_, p), offsets)| offsets.iter().map(move |o| (*p, *o)))
            .collect();
        for round in &runs {
            scan(
                &consumer,
                topic,
                round,
                &mut progress,
                "pass 3 of 3 (shown pairs)",
                |r| {
                    if want.contains(&(r.partition, r.offset)) {
                        plan.fill(location(topic, &r), r.value.to_vec());
                    }
                },
            )?;
        }
    }
    Ok(plan)
}
