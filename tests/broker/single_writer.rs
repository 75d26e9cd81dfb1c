//! One active instance per consumer group, against a real broker (Tansu): a second `run` in the
//! group of a running one decides nothing (it fetches only while it holds every partition) and
//! stops with an error after the grace period; the first one then decides every record.

use crate::common;

use common::kafka::{produce, start_service, Broker, Input, Reader};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::process::Command;
use std::time::{Duration, Instant};

fn inputs(tag: &str, n: usize) -> Vec<Input> {
    common::corpus_articles_cycled("peoples_daily_2019_2020.jsonl", n)
        .into_iter()
        .map(|mut a| {
            let id = format!("{tag}-{}", common::str_field(&a, "id"));
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

#[test]
fn a_second_instance_in_the_group_decides_nothing_and_stops() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    broker.create_topics(&[
        "articles.raw:2",
        "articles.unique:1",
        "articles.duplicate:1",
        "articles.dlq:1",
    ]);
    let b = broker.bootstrap.as_str();
    let grace = ["--exclusive-grace-ms", "8000"];

    let log_a = dir.path().join("a.log");
    let mut a = start_service(b, &dir.path().join("index-a"), &log_a, &grace);
    let first = produce(b, "articles.raw", &inputs("one", 30), None);
    let mut reader = Reader::new(b, &[("articles.unique", 1), ("articles.duplicate", 1)]);
    reader.wait_covered(
        &first.iter().copied().collect(),
        Duration::from_secs(120),
        &|| a.log(),
    );

    // A second instance, its own index, the same group; records keep arriving meanwhile.
    let index_b = dir.path().join("index-b");
    let log_b = dir.path().join("b.log");
    let mut second = start_service(b, &index_b, &log_b, &grace);
    let started = Instant::now();
    let during = produce(b, "articles.raw", &inputs("two", 30), None);
    let status = second.wait(Duration::from_secs(90)).unwrap_or_else(|| {
        panic!(
            "the second instance kept running: {}\nfirst instance: {}",
            second.log(),
            a.log()
        )
    });
    assert!(
        !status.success(),
        "second instance exited 0: {}",
        second.log()
    );
    let log = second.log();
    assert!(
        log.contains("another instance is active in consumer group \"newsdedup\""),
        "{log}"
    );
    eprintln!("second instance stopped after {:?}", started.elapsed());

    // It decided nothing; the first one decides everything, during and after.
    let out = Command::new(env!("CARGO_BIN_EXE_newsdedup"))
        .args(["index", "stats", "--json", "--index-dir"])
        .arg(&index_b)
        .output()
        .expect("index stats");
    let stats: Value = serde_json::from_slice(&out.stdout).expect("stats JSON");
    assert_eq!(stats["articles"], json!(0), "{log}");
    let after = produce(b, "articles.raw", &inputs("three", 30), None);
    let want: HashSet<(i32, i64)> = during.iter().chain(&after).copied().collect();
    reader.wait_covered(&want, Duration::from_secs(120), &|| a.log());
    assert_eq!(a.http("/health").map(|r| r.0), Some(200), "{}", a.log());
    let (status, _) = a.terminate(Duration::from_secs(30));
    assert!(status.success(), "{}", a.log());
}
