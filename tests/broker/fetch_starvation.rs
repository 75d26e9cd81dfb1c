//! The silent slowdown of issue 52's soak: once a partition of the test broker held ~10,000
//! records, `run` decided ~2 records/s a partition against 25/s arriving, logged nothing, and
//! `/health` said 200 throughout. The cause is the broker's fetch (Tansu 0.6 answers a fetch
//! with nothing once reading the partition takes longer than the request's
//! `fetch.wait.max.ms`, and its reads slow down as a partition grows) meeting the service's
//! former default of 10 ms; the newcomer that preceded it in the soak only left a backlog. Both
//! tests start from a partition that already holds 20,000 records, written as one-record
//! batches, as a producer at 100/s writes them.
//!
//! * With the service's defaults every record is decided at full speed.
//!
//! How a member that fetches yet falls behind says so (`/ready`, then `/health` 503
//! `falling_behind`) is tested on its own in `src/kafka/behind.rs`: whether Tansu's fetches come
//! back empty with `fetch.wait.max.ms=10` depends on how fast the machine reads the partition (on
//! a loaded 2-core machine it still decided ~50 records/s), so an end-to-end test of it here would
//! pass or fail with the machine.

use crate::common;

use common::kafka::{committed, start_service, Broker, Input};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::ClientConfig;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Records the partition holds before the service starts.
const PREFILL: usize = 20_000;

fn articles(tag: &str, n: usize) -> Vec<Input> {
    let base = common::corpus_articles_cycled("sina_2018_patrick233.jsonl", 2_000);
    (0..n)
        .map(|i| {
            let mut a = base[i % base.len()].clone();
            let id = format!("{tag}-{i}");
            a.insert("id".into(), json!(id));
            Input {
                key: Some(id.clone()),
                value: serde_json::to_vec(&Value::Object(a)).expect("json"),
                bad: None,
                id: Some(id),
            }
        })
        .collect()
}

/// Writes `inputs` to partition 0 of `topic` as one-record batches (the test harness's
/// producer batches a burst; the soak's producer, at 100/s, does not).
fn prefill(brokers: &str, topic: &str, inputs: &[Input]) {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("linger.ms", "0")
        .set("batch.num.messages", "1")
        .set("enable.idempotence", "true")
        .create()
        .expect("producer");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        for chunk in inputs.chunks(1_000) {
            let mut futures = Vec::with_capacity(chunk.len());
            for input in chunk {
                let mut r: FutureRecord<'_, str, [u8]> = FutureRecord::to(topic)
                    .payload(input.value.as_slice())
                    .partition(0);
                if let Some(k) = &input.key {
                    r = r.key(k.as_str());
                }
                futures.push(
                    producer
                        .send_result(r)
                        .map_err(|(e, _)| e)
                        .expect("enqueue"),
                );
            }
            for f in futures {
                f.await
                    .expect("delivery future")
                    .map_err(|(e, _)| e)
                    .expect("delivered");
            }
        }
    });
}

fn committed_of_0(brokers: &str) -> i64 {
    committed(brokers, "newsdedup", "articles.raw", 1)
        .get(&0)
        .copied()
        .unwrap_or(-1)
}

#[test]
fn a_grown_partition_is_read_at_full_speed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    broker.create_service_topics(1);
    let b = broker.bootstrap.clone();
    let started = Instant::now();
    prefill(&b, "articles.raw", &articles("pre", PREFILL));
    eprintln!("{PREFILL} records written in {:?}", started.elapsed());

    let mut service = start_service(
        &b,
        &dir.path().join("index"),
        &dir.path().join("run.log"),
        &[],
    );
    let started = Instant::now();
    let limit = Duration::from_secs(120);
    loop {
        let c = committed_of_0(&b);
        if c >= PREFILL as i64 {
            break;
        }
        assert!(
            started.elapsed() < limit,
            "committed {c} of {PREFILL} after {limit:?} (the broker's fetches come back empty?); /health: {:?}; log:\n{}",
            service.http("/health"),
            service.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    eprintln!("{PREFILL} records decided in {:?}", started.elapsed());
    assert_eq!(
        service.http("/health").map(|r| r.0),
        Some(200),
        "{}",
        service.log()
    );
    let (status, _) = service.terminate(Duration::from_secs(30));
    assert!(status.success(), "{}", service.log());
}
