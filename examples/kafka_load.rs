//! Load generator and output meter for `newsdedup run` (used by scripts/bench_kafka.sh).
//!
//! ```sh
//! cargo run --release --example kafka_load -- produce --brokers B --topic articles.raw --count 10000
//! cargo run --release --example kafka_load -- produce --brokers B --input articles.jsonl
//! cargo run --release --example kafka_load -- measure --brokers B --expect 10000
//! cargo run --release --example kafka_load -- latency --brokers B --rate 500 --seconds 20 --skip 10000
//! cargo run --release --example kafka_load -- results --brokers B --expect 54
//! ```
//!
//! Articles come from the corpus (`NEWSDEDUP_CORPUS_DIR`, default ../shared/data/corpus), all
//! files in name order, key = article id; without the corpus, from the in-repo sample
//! (examples/sample_articles.jsonl, its valid records over and over, each round with new ids).
//! `produce --input FILE` produces a JSONL file's lines as they are instead (malformed ones
//! included; key = the line's `id` when it has a readable one). `measure` reads the output topics
//! from the beginning and reports throughput from the output records' timestamps (first to last)
//! and latency from each output's `newsdedup.source.timestamp` header (input create time) to the
//! output record's timestamp and to its receipt by this consumer. `results` reads them until every
//! input has an output and prints the decisions for a person: counts, each duplicate with the
//! article it repeats, each invalid record's reason.

use clap::{Parser, Subcommand};
use newsdedup::kafka::record::{
    H_DECISION, H_ERROR_MESSAGE, H_ERROR_REASON, H_SOURCE_OFFSET, H_SOURCE_PARTITION,
};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::ClientConfig;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[path = "../tests/common/repo.rs"]
mod repo;
use repo::repo_file;

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Produce corpus articles (or the lines of --input) as fast as possible (or at --rate per
    /// second).
    Produce {
        #[arg(long)]
        brokers: String,
        #[arg(long, default_value = "articles.raw")]
        topic: String,
        /// How many (with --input: at most this many lines; default all).
        #[arg(long, required_unless_present = "input")]
        count: Option<usize>,
        /// Produce this JSONL file's lines as they are (empty lines skipped: the broker would not
        /// deliver an empty record), key = the line's `id` if it is a JSON object with a string
        /// `id`, no key otherwise.
        #[arg(long)]
        input: Option<PathBuf>,
        /// Skip this many corpus articles (lines of --input) first.
        #[arg(long, default_value_t = 0)]
        skip: usize,
        /// Articles per second (0: unlimited).
        #[arg(long, default_value_t = 0)]
        rate: u64,
    },
    /// Read the output topics until --expect records arrived; report throughput and latency.
    Measure {
        #[arg(long)]
        brokers: String,
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "articles.unique,articles.duplicate,articles.dlq"
        )]
        topics: Vec<String>,
        #[arg(long)]
        expect: usize,
        /// Give up after this many seconds without progress.
        #[arg(long, default_value_t = 60)]
        idle_timeout: u64,
    },
    /// Produce at --rate for --seconds while measuring the outputs of those records.
    Latency {
        #[arg(long)]
        brokers: String,
        #[arg(long, default_value = "articles.raw")]
        topic: String,
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "articles.unique,articles.duplicate,articles.dlq"
        )]
        topics: Vec<String>,
        #[arg(long, default_value_t = 500)]
        rate: u64,
        #[arg(long, default_value_t = 20)]
        seconds: u64,
        #[arg(long, default_value_t = 0)]
        skip: usize,
        /// Also write every record's times to this file, one line each: input create time,
        /// output record time, receipt time (ms since the epoch), to see when the tail happens.
        #[arg(long)]
        samples: Option<PathBuf>,
    },
    /// Read the output topics until every one of --expect inputs has an output; print the
    /// decisions: counts, each duplicate and what it repeats, each invalid record's reason.
    Results {
        #[arg(long)]
        brokers: String,
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "articles.unique,articles.duplicate,articles.dlq"
        )]
        topics: Vec<String>,
        /// Number of input records (distinct input offsets) to wait for.
        #[arg(long)]
        expect: usize,
        /// Give up after this many seconds without a new output.
        #[arg(long, default_value_t = 60)]
        idle_timeout: u64,
    },
}

/// A produced record: key and value.
type Record = (Option<String>, Vec<u8>);

fn corpus_dir() -> PathBuf {
    std::env::var("NEWSDEDUP_CORPUS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| repo_file("../shared/data/corpus"))
}

const SAMPLE: &str = "examples/sample_articles.jsonl";

/// The corpus files in name order, or None (and a note on stderr) when there are none.
fn corpus_files() -> Option<Vec<PathBuf>> {
    let dir = corpus_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
                .collect()
        })
        .unwrap_or_default();
    if files.is_empty() {
        eprintln!(
            "corpus not found at {}: using the in-repo sample {SAMPLE}",
            dir.display()
        );
        return None;
    }
    files.sort();
    Some(files)
}

/// (id, line) of corpus articles, skipping `skip`, at most `count`. Without the corpus: the
/// sample's valid records, over and over; round k > 1 gets ids `ID~k` (copies of the first round:
/// the service finds them duplicates).
fn corpus(skip: usize, count: usize) -> Vec<(String, String)> {
    let Some(files) = corpus_files() else {
        return sample_cycled(skip, count);
    };
    let mut out = Vec::with_capacity(count);
    let mut seen = 0usize;
    for f in files {
        for line in BufReader::new(std::fs::File::open(&f).expect("corpus file")).lines() {
            let line = line.expect("corpus line");
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            let Some(id) = v.get("id").and_then(Value::as_str) else {
                continue;
            };
            seen += 1;
            if seen <= skip {
                continue;
            }
            out.push((id.to_owned(), line));
            if out.len() == count {
                return out;
            }
        }
    }
    assert!(
        out.len() == count,
        "the corpus has only {} articles after skipping {skip}",
        out.len()
    );
    out
}

fn sample_cycled(skip: usize, count: usize) -> Vec<(String, String)> {
    let path = repo_file(SAMPLE);
    let text = std::fs::read_to_string(&path).expect("the in-repo sample");
    let valid: Vec<serde_json::Map<String, Value>> = text
        .lines()
        .filter_map(|l| match serde_json::from_str(l) {
            Ok(Value::Object(m)) => Some(m),
            _ => None,
        })
        .filter(|m| {
            m.get("id").and_then(Value::as_str).is_some()
                && m.get("content")
                    .and_then(Value::as_str)
                    .is_some_and(|c| c.chars().any(char::is_alphanumeric))
        })
        .collect();
    assert!(!valid.is_empty(), "{SAMPLE} has no valid record");
    (skip..skip + count)
        .map(|i| {
            let mut m = valid[i % valid.len()].clone();
            let round = i / valid.len() + 1;
            let id = match m.get("id").and_then(Value::as_str) {
                Some(id) if round > 1 => format!("{id}~{round}"),
                Some(id) => id.to_owned(),
                None => String::new(),
            };
            m.insert("id".into(), Value::String(id.clone()));
            (id, Value::Object(m).to_string())
        })
        .collect()
}

/// The non-empty lines of a JSONL file as records, keyed by their `id` where one is readable.
/// Returns the records and the number of empty lines skipped.
fn file_records(path: &Path, skip: usize, count: Option<usize>) -> (Vec<Record>, usize) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| {
        eprintln!("kafka_load: cannot read {}: {e}", path.display());
        std::process::exit(2);
    });
    let mut empty = 0;
    let records = bytes
        .split(|&b| b == b'\n')
        .filter(|l| {
            let blank = l.iter().all(u8::is_ascii_whitespace);
            empty += usize::from(blank);
            !blank
        })
        .skip(skip)
        .take(count.unwrap_or(usize::MAX))
        .map(|line| {
            let key = match serde_json::from_slice::<Value>(line) {
                Ok(Value::Object(m)) => m.get("id").and_then(Value::as_str).map(str::to_owned),
                _ => None,
            };
            (key, line.to_vec())
        })
        .collect();
    // The split yields one empty piece after a final newline: not a skipped line.
    if bytes.last() == Some(&b'\n') {
        empty -= 1;
    }
    (records, empty)
}

fn keyed(articles: Vec<(String, String)>) -> Vec<Record> {
    articles
        .into_iter()
        .map(|(id, line)| (Some(id), line.into_bytes()))
        .collect()
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn produce(brokers: &str, topic: &str, records: &[Record], rate: u64) -> f64 {
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("linger.ms", "5")
        .set("queue.buffering.max.messages", "200000")
        .create()
        .expect("producer");
    let start = Instant::now();
    for (i, (key, value)) in records.iter().enumerate() {
        if rate > 0 {
            let due = start + Duration::from_secs_f64(i as f64 / rate as f64);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        let mut record = BaseRecord::<str, [u8]>::to(topic).payload(value.as_slice());
        if let Some(key) = key {
            record = record.key(key.as_str());
        }
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((_, r)) => {
                    record = r;
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
        }
    }
    producer.flush(Duration::from_secs(60)).expect("flush");
    start.elapsed().as_secs_f64()
}

struct Sample {
    source_ts: i64,
    output_ts: i64,
    received_ms: i64,
}

/// A consumer assigned to every partition of `topics`, from the beginning or from the end.
fn reader(brokers: &str, topics: &[String], from_end: bool) -> BaseConsumer {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", "kafka-load")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "10")
        .create()
        .expect("consumer");
    let start = if from_end {
        Offset::End
    } else {
        Offset::Beginning
    };
    let mut tpl = TopicPartitionList::new();
    let md = consumer
        .fetch_metadata(None, Duration::from_secs(10))
        .expect("metadata");
    for t in md.topics() {
        if topics.iter().any(|x| x == t.name()) {
            for p in t.partitions() {
                tpl.add_partition_offset(t.name(), p.id(), start)
                    .expect("tpl");
            }
        }
    }
    consumer.assign(&tpl).expect("assign");
    consumer
}

/// Collects output records until `expect` arrived (or nothing came for `idle`); keeps those whose
/// input was created at or after `since_ms`.
fn measure(consumer: &BaseConsumer, expect: usize, idle: Duration, since_ms: i64) -> Vec<Sample> {
    let mut samples = Vec::with_capacity(expect);
    let mut last = Instant::now();
    while samples.len() < expect && last.elapsed() < idle {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                last = Instant::now();
                let source_ts = m
                    .headers()
                    .and_then(|h| {
                        h.iter()
                            .find(|h| h.key == "newsdedup.source.timestamp")
                            .and_then(|h| h.value)
                            .and_then(|v| std::str::from_utf8(v).ok()?.parse::<i64>().ok())
                    })
                    .unwrap_or(0);
                if source_ts >= since_ms {
                    samples.push(Sample {
                        source_ts,
                        output_ts: m.timestamp().to_millis().unwrap_or(0),
                        received_ms: now_ms(),
                    });
                }
            }
            Some(Err(e)) => eprintln!("measure: {e}"),
            None => {}
        }
    }
    samples
}

fn pct(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn report(samples: &[Sample], expect: usize) -> Value {
    let mut out_ts: Vec<i64> = samples.iter().map(|s| s.output_ts).collect();
    out_ts.sort_unstable();
    let span_ms = (pct(&out_ts, 1.0) - pct(&out_ts, 0.0)).max(1);
    let mut to_output: Vec<i64> = samples.iter().map(|s| s.output_ts - s.source_ts).collect();
    let mut to_receipt: Vec<i64> = samples
        .iter()
        .map(|s| s.received_ms - s.source_ts)
        .collect();
    to_output.sort_unstable();
    to_receipt.sort_unstable();
    json!({
        "records": samples.len(),
        "expected": expect,
        "output_span_s": span_ms as f64 / 1000.0,
        "articles_per_sec": (samples.len() as f64 / (span_ms as f64 / 1000.0)).round(),
        "latency_to_output_record_ms": {"p50": pct(&to_output, 0.5), "p99": pct(&to_output, 0.99), "max": pct(&to_output, 1.0)},
        "latency_to_downstream_receipt_ms": {"p50": pct(&to_receipt, 0.5), "p99": pct(&to_receipt, 0.99), "max": pct(&to_receipt, 1.0)},
    })
}

/// One output record, as `results` keeps it.
struct Decided {
    key: Option<String>,
    value: Vec<u8>,
    decision: String,
    reason: String,
    message: String,
}

fn header(m: &impl Message, name: &str) -> Option<String> {
    m.headers().and_then(|h| {
        h.iter()
            .find(|h| h.key == name)
            .and_then(|h| h.value)
            .map(|v| String::from_utf8_lossy(v).into_owned())
    })
}

/// Reads outputs until `expect` distinct inputs (source partition and offset) have one, or nothing
/// new came for `idle`. Keeps the first output of each input, in input order.
fn collect(
    consumer: &BaseConsumer,
    expect: usize,
    idle: Duration,
) -> BTreeMap<(i32, i64), Decided> {
    let mut got = BTreeMap::new();
    let mut last = Instant::now();
    while got.len() < expect && last.elapsed() < idle {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                last = Instant::now();
                let coord = (
                    header(&m, H_SOURCE_PARTITION).and_then(|p| p.parse().ok()),
                    header(&m, H_SOURCE_OFFSET).and_then(|o| o.parse().ok()),
                );
                let (Some(p), Some(o)) = coord else {
                    eprintln!("results: an output without source headers in {}", m.topic());
                    continue;
                };
                got.entry((p, o)).or_insert_with(|| Decided {
                    key: m.key().map(|k| String::from_utf8_lossy(k).into_owned()),
                    value: m.payload().unwrap_or_default().to_vec(),
                    decision: header(&m, H_DECISION).unwrap_or_default(),
                    reason: header(&m, H_ERROR_REASON).unwrap_or_default(),
                    message: header(&m, H_ERROR_MESSAGE).unwrap_or_default(),
                });
            }
            Some(Err(e)) => eprintln!("results: {e}"),
            None => {}
        }
    }
    got
}

/// A title for people: the article's title, or its id when it has none.
fn title_of(v: &Value) -> String {
    match v.get("title").and_then(Value::as_str).map(str::trim) {
        Some(t) if !t.is_empty() => t.to_owned(),
        _ => format!(
            "(id {})",
            v.get("id").and_then(Value::as_str).unwrap_or("?")
        ),
    }
}

/// At most `n` characters of `s` on one line.
fn excerpt(s: &str, n: usize) -> String {
    let one_line: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= n {
        one_line
    } else {
        one_line.chars().take(n).collect::<String>() + "…"
    }
}

/// The decisions, for a person: counts, duplicates, invalid records.
fn print_results(got: &BTreeMap<(i32, i64), Decided>, expect: usize) {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
    for d in got.values() {
        *counts.entry(d.decision.as_str()).or_default() += 1;
        if d.decision == "invalid" {
            *reasons.entry(d.reason.as_str()).or_default() += 1;
        }
    }
    let n = |k: &str| counts.get(k).copied().unwrap_or(0);
    let by_reason: Vec<String> = reasons.iter().map(|(r, c)| format!("{r} {c}")).collect();
    println!(
        "{expect} records in, {} decided: {} unique, {} duplicate, {} invalid{}",
        got.len(),
        n("unique"),
        n("duplicate"),
        n("invalid"),
        if by_reason.is_empty() {
            String::new()
        } else {
            format!(" ({})", by_reason.join(", "))
        }
    );

    println!("\nduplicates ({}):", n("duplicate"));
    for d in got.values().filter(|d| d.decision == "duplicate") {
        let Ok(v) = serde_json::from_slice::<Value>(&d.value) else {
            println!("  (output is not JSON: key {:?})", d.key);
            continue;
        };
        let m = &v["dedup"]["match"];
        let containment = match m.get("containment").and_then(Value::as_f64) {
            Some(c) => format!("{c:.2}"),
            None => "n/a".to_owned(),
        };
        println!(
            "  {}  ⇐ duplicate of  {}  (distance {}, containment {containment})",
            title_of(&v),
            title_of(m),
            m.get("distance").and_then(Value::as_u64).unwrap_or(0),
        );
    }

    println!("\ninvalid records, in the DLQ ({}):", n("invalid"));
    for ((p, o), d) in got.iter().filter(|(_, d)| d.decision == "invalid") {
        let what = match &d.key {
            Some(k) => format!("key {k}"),
            None => format!("\"{}\"", excerpt(&String::from_utf8_lossy(&d.value), 24)),
        };
        println!(
            "  partition {p} offset {o}, {what}: {}: {}",
            d.reason,
            excerpt(&d.message, 100)
        );
    }
}

fn main() {
    match Cli::parse().command {
        Cmd::Produce {
            brokers,
            topic,
            count,
            input,
            skip,
            rate,
        } => {
            let (records, empty) = match (&input, count) {
                (Some(path), _) => file_records(path, skip, count),
                (None, Some(count)) => (keyed(corpus(skip, count)), 0),
                (None, None) => unreachable!("clap requires --count without --input"),
            };
            let secs = produce(&brokers, &topic, &records, rate);
            let n = records.len();
            let mut summary =
                json!({"produced": n, "seconds": secs, "per_sec": (n as f64 / secs).round()});
            if input.is_some() {
                summary["keyed"] = json!(records.iter().filter(|r| r.0.is_some()).count());
                summary["empty_lines_skipped"] = json!(empty);
            }
            println!("{summary}");
        }
        Cmd::Measure {
            brokers,
            topics,
            expect,
            idle_timeout,
        } => {
            let consumer = reader(&brokers, &topics, false);
            let samples = measure(&consumer, expect, Duration::from_secs(idle_timeout), 0);
            println!("{}", report(&samples, expect));
            if samples.len() < expect {
                std::process::exit(1);
            }
        }
        Cmd::Results {
            brokers,
            topics,
            expect,
            idle_timeout,
        } => {
            let consumer = reader(&brokers, &topics, false);
            let got = collect(&consumer, expect, Duration::from_secs(idle_timeout));
            print_results(&got, expect);
            if got.len() < expect {
                eprintln!(
                    "results: only {} of {expect} inputs have an output after {idle_timeout} s without news",
                    got.len()
                );
                std::process::exit(1);
            }
        }
        Cmd::Latency {
            brokers,
            topic,
            topics,
            rate,
            seconds,
            skip,
            samples: samples_file,
        } => {
            let count = (rate * seconds) as usize;
            let articles = keyed(corpus(skip, count));
            // Start at the end of the outputs (older ones would only cost CPU while measuring),
            // once the end offsets are resolved; records of this run are told apart by time.
            let consumer = reader(&brokers, &topics, true);
            let settle = Instant::now();
            while settle.elapsed() < Duration::from_secs(1) {
                let _ = consumer.poll(Duration::from_millis(100));
            }
            let start_ms = now_ms();
            let b = brokers.clone();
            let producer = std::thread::spawn(move || produce(&b, &topic, &articles, rate));
            let samples = measure(&consumer, count, Duration::from_secs(60), start_ms);
            let secs = producer.join().expect("producer thread");
            let mut r = report(&samples, count);
            r["offered_rate"] = json!(rate);
            r["produce_seconds"] = json!(secs);
            if let Some(path) = samples_file {
                let lines: String = samples
                    .iter()
                    .map(|s| format!("{} {} {}\n", s.source_ts, s.output_ts, s.received_ms))
                    .collect();
                std::fs::write(&path, lines).expect("write --samples file");
            }
            println!("{r}");
            if samples.len() < count {
                std::process::exit(1);
            }
        }
    }
}
