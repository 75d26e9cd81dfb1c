//! Load generator and output meter for `newsdedup run` (used by scripts/bench_kafka.sh).
//!
//! ```sh
//! cargo run --release --example kafka_load -- produce --brokers B --topic articles.raw --count 10000
//! cargo run --release --example kafka_load -- measure --brokers B --expect 10000
//! cargo run --release --example kafka_load -- latency --brokers B --rate 500 --seconds 20 --skip 10000
//! ```
//!
//! Articles come from the corpus (`NEWSDEDUP_CORPUS_DIR`, default ../shared/data/corpus), all
//! files in name order, key = article id. `measure` reads the output topics from the beginning and
//! reports throughput from the output records' timestamps (first to last) and latency from each
//! output's `newsdedup.source.timestamp` header (input create time) to the output record's
//! timestamp and to its receipt by this consumer.

use clap::{Parser, Subcommand};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::ClientConfig;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Produce corpus articles as fast as possible (or at --rate per second).
    Produce {
        #[arg(long)]
        brokers: String,
        #[arg(long, default_value = "articles.raw")]
        topic: String,
        #[arg(long)]
        count: usize,
        /// Skip this many corpus articles first.
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
    },
}

fn corpus_dir() -> PathBuf {
    std::env::var("NEWSDEDUP_CORPUS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data/corpus"))
}

/// (id, line) of corpus articles, skipping `skip`, at most `count`.
fn corpus(skip: usize, count: usize) -> Vec<(String, String)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .expect("corpus dir (set NEWSDEDUP_CORPUS_DIR)")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
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

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn produce(brokers: &str, topic: &str, articles: &[(String, String)], rate: u64) -> f64 {
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("linger.ms", "5")
        .set("queue.buffering.max.messages", "200000")
        .create()
        .expect("producer");
    let start = Instant::now();
    for (i, (id, line)) in articles.iter().enumerate() {
        if rate > 0 {
            let due = start + Duration::from_secs_f64(i as f64 / rate as f64);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        let mut record = BaseRecord::to(topic)
            .key(id.as_str())
            .payload(line.as_str());
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

fn main() {
    match Cli::parse().command {
        Cmd::Produce {
            brokers,
            topic,
            count,
            skip,
            rate,
        } => {
            let articles = corpus(skip, count);
            let secs = produce(&brokers, &topic, &articles, rate);
            println!(
                "{}",
                json!({"produced": count, "seconds": secs, "per_sec": (count as f64 / secs).round()})
            );
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
        Cmd::Latency {
            brokers,
            topic,
            topics,
            rate,
            seconds,
            skip,
        } => {
            let count = (rate * seconds) as usize;
            let articles = corpus(skip, count);
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
            println!("{r}");
            if samples.len() < count {
                std::process::exit(1);
            }
        }
    }
}
