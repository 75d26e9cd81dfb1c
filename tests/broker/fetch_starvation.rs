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
//! * With `-X fetch.wait.max.ms=10` (fetches come back empty) the member says so: `/ready` and
//!   then `/health` answer 503 `falling_behind`, and the log names the setting.

use crate::common;

use common::kafka::{committed, http_get, produce_paced, start_service, Broker, Input};
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

#[test]
fn a_member_whose_fetches_come_back_empty_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    broker.create_service_topics(1);
    let b = broker.bootstrap.clone();
    prefill(&b, "articles.raw", &articles("pre", PREFILL));

    // The former default: on this broker, past ~10,000 records, fetches come back empty.
    let mut service = start_service(
        &b,
        &dir.path().join("index"),
        &dir.path().join("run.log"),
        &[
            "-X",
            "fetch.wait.max.ms=10",
            "--progress-timeout-ms",
            "20000",
        ],
    );
    service.wait_http();
    // Records keep arriving meanwhile.
    let trickle = {
        let b = b.clone();
        let more = articles("more", 2_000);
        std::thread::spawn(move || produce_paced(&b, "articles.raw", &more, Some(0), Some(50)))
    };
    let started = Instant::now();
    let limit = Duration::from_secs(75);
    let (mut ready_503, mut health_503) = (None, None);
    while health_503.is_none() {
        assert!(
            started.elapsed() < limit,
            "no /health 503 after {limit:?} (ready 503 after {ready_503:?}; committed {}); /health: {:?}; log:\n{}",
            committed_of_0(&b),
            service.http("/health"),
            service.log()
        );
        if ready_503.is_none() && service.http("/ready").is_some_and(|r| r.0 == 503) {
            ready_503 = Some(started.elapsed());
        }
        if let Some((503, body)) = http_get(&service.metrics, "/health") {
            health_503 = Some((started.elapsed(), body));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let (at, body) = health_503.unwrap_or_default();
    eprintln!("/ready 503 after {ready_503:?}, /health 503 after {at:?}: {body}");
    let v: Value = serde_json::from_str(&body).expect("health JSON");
    assert_eq!(v["status"], json!("falling_behind"), "{body}");
    assert!(ready_503.is_some(), "/ready never said 503 first: {body}");
    let what = v["falling_behind"].as_str().unwrap_or_default();
    assert!(what.contains("fetch.wait.max.ms"), "{body}");
    let log = service.log();
    assert!(log.contains("falling behind"), "{log}");
    assert!(
        committed_of_0(&b) < PREFILL as i64,
        "it decided everything after all: {log}"
    );
    let _ = trickle.join();
    let (status, _) = service.terminate(Duration::from_secs(30));
    assert!(status.success(), "{}", service.log());
}
