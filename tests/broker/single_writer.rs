//! One active instance per consumer group, against a real broker (Tansu): a second `run` in the
//! group of a running one decides nothing (it fetches only while the group lists no other
//! member) and stops with an error after the grace period, whichever partitions the assignor
//! gives it; the first one then decides every record, and stays even when the newcomer is killed
//! and lingers in the group for a session timeout.

use crate::common;

use common::kafka::{produce, produce_paced, start_service, Broker, Input, Reader, Service};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::path::Path;
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
    broker.create_service_topics(2);
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

/// The number of articles in the index at `dir` (`index stats`).
fn indexed(dir: &Path) -> u64 {
    let out = Command::new(env!("CARGO_BIN_EXE_newsdedup"))
        .args(["index", "stats", "--json", "--index-dir"])
        .arg(dir)
        .output()
        .expect("index stats");
    let stats: Value = serde_json::from_slice(&out.stdout).expect("stats JSON");
    stats["articles"].as_u64().expect("articles count")
}

/// Waits until `service`'s log says it was assigned partitions (the group has settled with it).
fn wait_assigned(service: &Service, limit: Duration) {
    let start = Instant::now();
    while !service.log().contains("assigned; resuming") {
        assert!(
            start.elapsed() < limit,
            "never assigned; log:\n{}",
            service.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One input partition: the assignor gives it to one member of two, often the newcomer. Four
/// times, a newcomer (empty index, same group) joins while 100 verbatim reposts of the
/// incumbent's articles arrive. In two rounds its client id sorts before the incumbent's, so that
/// the range assignor hands it the partition; in the other two the member ids decide. Every
/// repost is flagged duplicate of an original, the newcomer decides nothing and stops, and the
/// incumbent stays.
#[test]
fn a_newcomer_never_decides_even_holding_the_only_partition() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    broker.create_service_topics(1);
    let b = broker.bootstrap.clone();
    let grace = ["--exclusive-grace-ms", "4000"];
    let mut a = start_service(
        &b,
        &dir.path().join("index-a"),
        &dir.path().join("a.log"),
        &grace,
    );
    let originals = inputs("orig", 100);
    let original_ids: HashSet<String> = originals.iter().filter_map(|i| i.id.clone()).collect();
    let coords = produce(&b, "articles.raw", &originals, None);
    let mut reader = Reader::new(&b, &[("articles.unique", 1), ("articles.duplicate", 1)]);
    reader.wait_covered(
        &coords.into_iter().collect(),
        Duration::from_secs(120),
        &|| a.log(),
    );

    let mut newcomer_held_it = 0;
    for round in 0..4 {
        let index = dir.path().join(format!("index-b{round}"));
        let log = dir.path().join(format!("b{round}.log"));
        let client_id = if round % 2 == 0 {
            format!("client.id=a-newcomer-{round}")
        } else {
            "client.id=newsdedup".to_owned()
        };
        let args = [&grace[..], &["-X", &client_id]].concat();
        let mut newcomer = start_service(&b, &index, &log, &args);
        // Verbatim reposts (new ids, the originals' text) arrive while it joins and waits.
        let reposts: Vec<Input> = inputs("orig", 100)
            .into_iter()
            .map(|i| {
                let mut v: serde_json::Map<String, Value> =
                    serde_json::from_slice(&i.value).expect("input JSON");
                let id = format!("r{round}-{}", i.id.unwrap_or_default());
                v.insert("id".into(), json!(id));
                Input {
                    key: Some(id.clone()),
                    value: serde_json::to_vec(&Value::Object(v)).expect("json"),
                    bad: None,
                    id: Some(id),
                }
            })
            .collect();
        let producing = {
            let b = b.clone();
            std::thread::spawn(move || produce_paced(&b, "articles.raw", &reposts, None, Some(12)))
        };
        let status = newcomer.wait(Duration::from_secs(90)).unwrap_or_else(|| {
            panic!(
                "round {round}: the newcomer kept running: {}\nincumbent: {}",
                newcomer.log(),
                a.log()
            )
        });
        let log = newcomer.log();
        assert!(!status.success(), "round {round}: newcomer exited 0: {log}");
        assert!(
            log.contains("another instance is active in consumer group \"newsdedup\""),
            "round {round}: {log}"
        );
        if log.contains("partitions [0] of articles.raw assigned") {
            newcomer_held_it += 1;
        }
        assert_eq!(
            indexed(&index),
            0,
            "round {round}: the newcomer decided: {log}"
        );

        let coords = producing.join().expect("producer thread");
        let want: HashSet<(i32, i64)> = coords.iter().copied().collect();
        reader.wait_covered(&want, Duration::from_secs(120), &|| a.log());
        let mut decisions: HashMap<String, Value> = HashMap::new();
        for o in reader.got.iter().filter(|o| want.contains(&o.source())) {
            let v = o.json();
            decisions.insert(
                v["id"].as_str().unwrap_or_default().to_owned(),
                v["dedup"].clone(),
            );
        }
        assert_eq!(decisions.len(), 100, "round {round}");
        for (id, d) in &decisions {
            assert_eq!(
                d["decision"],
                json!("duplicate"),
                "round {round}: {id}: {d}"
            );
            let matched = d["match"]["id"].as_str().unwrap_or_default();
            assert!(
                original_ids.contains(matched),
                "round {round}: {id} matched {matched}, not an original"
            );
        }
        assert_eq!(
            a.wait(Duration::ZERO),
            None,
            "round {round}: the incumbent exited; log:\n{}",
            a.log()
        );
        eprintln!(
            "round {round}: newcomer {} the partition; 100 reposts flagged duplicate by the incumbent",
            if log.contains("partitions [0] of articles.raw assigned") { "held" } else { "never held" }
        );
    }
    assert!(
        newcomer_held_it >= 2,
        "the newcomer held the only partition in {newcomer_held_it} rounds only: the case is not covered"
    );
    // Each time it took the partition back, the incumbent resumed from its committed offset:
    // no record was decided twice.
    reader.poll_for(Duration::from_secs(2));
    let mut per_coord: HashMap<(i32, i64), usize> = HashMap::new();
    for o in &reader.got {
        *per_coord.entry(o.source()).or_default() += 1;
    }
    let twice = per_coord.values().filter(|n| **n > 1).count();
    assert_eq!(twice, 0, "{twice} records decided twice; log:\n{}", a.log());
    assert_eq!(a.http("/health").map(|r| r.0), Some(200), "{}", a.log());
    let a_log = a.log();
    assert!(!a_log.contains("another instance is active"), "{a_log}");
    let (status, _) = a.terminate(Duration::from_secs(30));
    assert!(status.success(), "{}", a.log());
}

/// A newcomer joins and is killed with SIGKILL shortly before its grace period ends: it stays
/// listed in the group until its session times out, and the rebalance after that takes a few
/// seconds more. The incumbent's own deadline is not used up by it: it stays, and decides
/// every record.
#[test]
fn an_incumbent_outlasts_a_newcomer_killed_in_its_grace_period() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    broker.create_service_topics(2);
    let b = broker.bootstrap.as_str();
    let grace = ["--exclusive-grace-ms", "8000"];
    let mut a = start_service(
        b,
        &dir.path().join("index-a"),
        &dir.path().join("a.log"),
        &grace,
    );
    let first = produce(b, "articles.raw", &inputs("one", 30), None);
    let mut reader = Reader::new(b, &[("articles.unique", 1), ("articles.duplicate", 1)]);
    reader.wait_covered(
        &first.into_iter().collect(),
        Duration::from_secs(120),
        &|| a.log(),
    );

    let mut newcomer = start_service(
        b,
        &dir.path().join("index-b"),
        &dir.path().join("b.log"),
        &grace,
    );
    wait_assigned(&newcomer, Duration::from_secs(60));
    let during = produce(b, "articles.raw", &inputs("two", 30), None);
    std::thread::sleep(Duration::from_millis(6500));
    assert_eq!(newcomer.wait(Duration::ZERO), None, "{}", newcomer.log());
    newcomer.kill9();
    let killed = Instant::now();

    let after = produce(b, "articles.raw", &inputs("three", 30), None);
    let want: HashSet<(i32, i64)> = during.iter().chain(&after).copied().collect();
    reader.wait_covered(&want, Duration::from_secs(120), &|| a.log());
    eprintln!("every record decided {:?} after the kill", killed.elapsed());
    // Past the point where a deadline counted from the newcomer's arrival would have run out.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        a.wait(Duration::ZERO),
        None,
        "the incumbent exited: {}",
        a.log()
    );
    assert_eq!(a.http("/health").map(|r| r.0), Some(200), "{}", a.log());
    assert!(
        !a.log().contains("another instance is active"),
        "{}",
        a.log()
    );
    assert_eq!(
        indexed(&dir.path().join("index-b")),
        0,
        "{}",
        newcomer.log()
    );
    let (status, _) = a.terminate(Duration::from_secs(30));
    assert!(status.success(), "{}", a.log());
}
