//! An index kept from the service's own output, against a real broker (Tansu) and real RocksDB:
//! `index rebuild` from the output topics after the index is lost, and a `standby` that follows
//! them and takes over after the active instance is killed with SIGKILL. Both must end with the
//! decisions an uninterrupted run makes (`batch` over the same stream: a single-partition `run`
//! decides exactly as `batch`, see tests/broker/kafka_service.rs) and an index `index verify` accepts.

use crate::common;

use common::kafka::{produce, start_command, start_service, Broker, Input, Reader};
use common::stream::{valid as input, write_jsonl};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const TOPICS: [&str; 4] = [
    "articles.raw:1",
    "articles.unique:1",
    "articles.duplicate:1",
    "articles.dlq:1",
];
const OUTPUTS: [(&str, i32); 2] = [("articles.unique", 1), ("articles.duplicate", 1)];

/// A stream in two halves: articles with reposts, then more articles with reposts of articles
/// of the first half (so the second half is decided against what the first half indexed), exact
/// replays of first-half ids and reposts of second-half articles.
fn stream(n: usize) -> (Vec<Input>, Vec<Input>) {
    let articles = common::corpus_articles_cycled("sina_2018_patrick233.jsonl", n);
    let repost = |a: &serde_json::Map<String, Value>, tag: &str| {
        let id = format!("{tag}-{}", common::str_field(a, "id"));
        let r = json!({
            "id": id,
            "title": common::str_field(a, "title"),
            "content": format!("<p>{}</p>\n（来源：转载）", common::str_field(a, "content")),
        });
        input(r.as_object().expect("object"))
    };
    let (first, second) = articles.split_at(n / 2);
    let mut a = Vec::new();
    for (i, art) in first.iter().enumerate() {
        a.push(input(art));
        if i % 7 == 3 {
            a.push(repost(art, "early"));
        }
    }
    let mut b = Vec::new();
    for (i, art) in second.iter().enumerate() {
        b.push(input(art));
        if i % 4 == 1 {
            b.push(repost(&first[i], "late"));
        }
        if i % 9 == 2 {
            b.push(input(&first[i]));
        }
        // Reposts of second-half articles: decided right only with everything before them.
        if i % 5 == 4 && i >= 10 {
            b.push(repost(&second[i - 10], "echo"));
        }
    }
    (a, b)
}

/// (decision, matched id) per article id, from output records; every output of an id carries
/// the same `dedup` member (a replayed decision, after a rebuild or a takeover too, is the stored
/// one, match and all).
fn decisions<'a>(
    records: impl IntoIterator<Item = &'a Value>,
) -> BTreeMap<String, (String, String)> {
    let mut out: BTreeMap<String, (String, String)> = BTreeMap::new();
    let mut members: BTreeMap<String, Value> = BTreeMap::new();
    for v in records {
        let Some(id) = v["id"].as_str() else { continue };
        let d = &v["dedup"];
        if let Some(old) = members.insert(id.to_owned(), d.clone()) {
            assert_eq!(&old, d, "two outputs of {id} disagree");
        }
        out.insert(
            id.to_owned(),
            (
                d["decision"].as_str().unwrap_or("").to_owned(),
                d["match"]["id"].as_str().unwrap_or("").to_owned(),
            ),
        );
    }
    out
}

/// What an uninterrupted run decides for `inputs`.
fn reference(dir: &Path, inputs: &[Input]) -> BTreeMap<String, (String, String)> {
    let path = dir.join("all.jsonl");
    write_jsonl(&path, inputs);
    let out = common::run_batch(&path, &dir.join("reference.jsonl"), &dir.join("ref-index"));
    decisions(&out)
}

fn newsdedup(args: &[&str], index: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_newsdedup"))
        .args(args)
        .arg("--index-dir")
        .arg(index)
        .output()
        .expect("newsdedup")
}

fn assert_verifies(index: &Path) {
    let out = newsdedup(&["index", "verify"], index);
    assert!(
        out.status.success(),
        "index verify failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Polls `done` every 200 ms until it gives None; fails with its last message after 60 s.
fn wait_for(standby: &common::kafka::Service, mut done: impl FnMut() -> Option<String>) {
    let start = Instant::now();
    while let Some(waiting) = done() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{waiting}: {}",
            standby.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Waits for a standby's /ready to say it is caught up.
fn wait_ready(standby: &common::kafka::Service) {
    wait_for(standby, || match standby.http("/ready") {
        Some((200, body)) => {
            assert!(body.contains("caught up"), "{body}");
            None
        }
        _ => Some("standby never ready".into()),
    });
}

/// Waits until the standby has applied `n` records (its counter counts applied records only).
fn wait_applied(standby: &common::kafka::Service, n: usize) {
    wait_for(standby, || {
        let applied = standby
            .http("/metrics")
            .map(|(_, body)| common::kafka::metric(&body, "newsdedup_standby_records_total"))
            .unwrap_or(0.0);
        (applied < n as f64).then(|| format!("standby applied {applied} of {n} records"))
    });
}

fn covered(coords: &[(i32, i64)]) -> HashSet<(i32, i64)> {
    coords.iter().copied().collect()
}

fn output_values(reader: &Reader) -> Vec<Value> {
    reader.got.iter().map(|o| o.json()).collect()
}

#[test]
fn rebuild_from_the_output_topics_after_losing_the_index_gives_the_uninterrupted_decisions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    broker.create_topics(&TOPICS);
    let b = broker.bootstrap.as_str();
    let (first, second) = stream(160);
    let all: Vec<Input> = first.iter().chain(&second).cloned().collect();
    let want = reference(dir.path(), &all);

    // The first half through the service, which then stops; its index is lost.
    let index = dir.path().join("index");
    let log = dir.path().join("run.log");
    let mut svc = start_service(b, &index, &log, &[]);
    let coords = produce(b, "articles.raw", &first, Some(0));
    let mut reader = Reader::new(b, &OUTPUTS);
    reader.wait_covered(&covered(&coords), Duration::from_secs(120), &|| svc.log());
    let (status, _) = svc.terminate(Duration::from_secs(30));
    assert!(status.success(), "run: {}", svc.log());
    std::fs::remove_dir_all(&index).expect("lose the index");

    let out = Command::new(env!("CARGO_BIN_EXE_newsdedup"))
        .args(["index", "rebuild", "--brokers", b, "--index-dir"])
        .arg(&index)
        .output()
        .expect("rebuild");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "rebuild failed: {stderr}");
    let summary: Value = serde_json::from_slice(&out.stdout).expect("summary JSON");
    let first_ids: HashSet<&str> = first.iter().filter_map(|i| i.id.as_deref()).collect();
    assert_eq!(summary["inserted"], json!(first_ids.len()), "{stderr}");
    assert_eq!(summary["unreadable"], json!(0), "{stderr}");
    assert_verifies(&index);
    // Again: nothing new, nothing changed.
    let again = newsdedup(&["index", "rebuild", "--brokers", b, "--quiet"], &index);
    let again: Value = serde_json::from_slice(&again.stdout).expect("summary JSON");
    assert_eq!(again["inserted"], json!(0));

    // The rest of the stream on the rebuilt index.
    let mut svc = start_service(b, &index, &log, &[]);
    let coords = produce(b, "articles.raw", &second, Some(0));
    reader.wait_covered(&covered(&coords), Duration::from_secs(120), &|| svc.log());
    let (status, _) = svc.terminate(Duration::from_secs(30));
    assert!(status.success(), "run: {}", svc.log());
    let got = decisions(&output_values(&reader));
    assert_eq!(got.len(), want.len());
    for (id, d) in &want {
        assert_eq!(got.get(id), Some(d), "decision of {id}");
    }
    let late = got.keys().filter(|id| id.starts_with("late-")).count();
    assert!(
        late > 0
            && got
                .iter()
                .any(|(id, (d, _))| id.starts_with("late-") && d == "duplicate")
    );
    assert_verifies(&index);
}

#[test]
fn rebuild_refuses_records_of_another_fingerprint_identity() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (first, _) = stream(40);
    let input = dir.path().join("in.jsonl");
    write_jsonl(&input, &first);
    let decided = dir.path().join("decided.jsonl");
    common::run_batch(&input, &decided, &dir.path().join("index"));
    let config = dir.path().join("other.toml");
    std::fs::write(&config, "[fingerprint]\nhmm = false\ntitle_weight = 7.0\n").expect("config");
    let out = Command::new(env!("CARGO_BIN_EXE_newsdedup"))
        .args(["index", "rebuild", "--config"])
        .arg(&config)
        .arg("--input")
        .arg(&decided)
        .arg("--index-dir")
        .arg(dir.path().join("other-index"))
        .output()
        .expect("rebuild");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "rebuild accepted other fingerprints: {stderr}"
    );
    assert!(
        stderr.contains("another fingerprint configuration"),
        "unclear refusal: {stderr}"
    );
    // With the configuration the records were made with, the same files rebuild.
    let out = newsdedup(
        &[
            "index",
            "rebuild",
            "--quiet",
            "--input",
            decided.to_str().expect("path"),
        ],
        &dir.path().join("same-index"),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_verifies(&dir.path().join("same-index"));
}

#[test]
fn a_standby_takes_over_after_kill_9_with_the_uninterrupted_decisions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    broker.create_topics(&TOPICS);
    let b = broker.bootstrap.as_str();
    let (first, second) = stream(200);
    let all: Vec<Input> = first.iter().chain(&second).cloned().collect();
    let want = reference(dir.path(), &all);

    let active_index = dir.path().join("active");
    let standby_index = dir.path().join("standby");
    let log = dir.path().join("active.log");
    let standby_log = dir.path().join("standby.log");
    let mut active = start_service(b, &active_index, &log, &[]);
    let mut standby = start_command("standby", b, &standby_index, &standby_log, &[]);
    standby.wait_http();

    let coords = produce(b, "articles.raw", &first, Some(0));
    let mut reader = Reader::new(b, &OUTPUTS);
    reader.wait_covered(&covered(&coords), Duration::from_secs(120), &|| {
        active.log()
    });
    // The standby catches up and says so. It may have said so before the first record arrived,
    // so wait until it has applied every output record too.
    wait_ready(&standby);
    wait_applied(&standby, reader.got.len());
    let metrics = standby.http("/metrics").expect("standby /metrics").1;
    assert!(
        metrics.contains("newsdedup_standby_lag_records{"),
        "{metrics}"
    );
    assert!(common::kafka::metric(&metrics, "newsdedup_standby_records_total") > 0.0);
    // Its index's disk use and the space on its volume, as the service exports them.
    for name in [
        "newsdedup_index_disk_bytes",
        "newsdedup_index_volume_size_bytes",
    ] {
        assert!(
            common::kafka::metric(&metrics, name) > 0.0,
            "{name}: {metrics}"
        );
    }

    // The standby survives its own kill -9: it resumes at the positions its index stored, so
    // it reads nothing again.
    standby.kill9();
    let mut standby = start_command("standby", b, &standby_index, &standby_log, &[]);
    standby.wait_http();
    wait_ready(&standby);
    assert!(
        standby.log().contains("from the stored positions"),
        "{}",
        standby.log()
    );
    let metrics = standby.http("/metrics").expect("standby /metrics").1;
    assert_eq!(
        common::kafka::metric(&metrics, "newsdedup_standby_records_total"),
        0.0,
        "records read again after kill -9: {}",
        standby.log()
    );

    // The standby falls behind (stopped here, so the test knows it is behind), and the active
    // instance dies mid-stream (the second half is produced at 30 records/s): the takeover must
    // catch up with what the active instance committed after the standby stopped.
    let (status, _) = standby.terminate(Duration::from_secs(30));
    assert!(status.success(), "standby: {}", standby.log());
    let producer = {
        let (b, second) = (b.to_owned(), second.clone());
        std::thread::spawn(move || {
            common::kafka::produce_paced(&b, "articles.raw", &second, Some(0), Some(30))
        })
    };
    std::thread::sleep(Duration::from_millis(1500));
    active.kill9();
    let killed = Instant::now();
    reader.poll_for(Duration::from_millis(300));
    let decided_before: HashSet<(i32, i64)> = reader.got.iter().map(|o| o.source()).collect();
    // `run` starts on the standby's directory: it catches up with the output topics, then joins
    // the group and resumes from the committed offsets.
    let takeover_log = dir.path().join("takeover.log");
    let mut takeover = start_service(b, &standby_index, &takeover_log, &[]);
    let first_new = loop {
        reader.poll_for(Duration::from_millis(100));
        if reader.got.iter().any(|o| {
            o.headers.contains_key("newsdedup.source.offset")
                && !decided_before.contains(&o.source())
        }) {
            break killed.elapsed();
        }
        assert!(
            killed.elapsed() < Duration::from_secs(120),
            "no decision after the takeover: {}",
            takeover.log()
        );
    };
    let rest = producer.join().expect("producer");
    assert!(
        rest.iter().any(|c| !decided_before.contains(c)),
        "the active instance decided everything before the kill: the test must kill it earlier"
    );
    reader.wait_covered(&covered(&rest), Duration::from_secs(180), &|| {
        takeover.log()
    });
    eprintln!("takeover: first new decision {first_new:?} after the kill (run started, caught up, joined the group)");
    let (status, _) = takeover.terminate(Duration::from_secs(30));
    assert!(status.success(), "takeover: {}", takeover.log());

    // Every id decided as an uninterrupted run decides it; repeated outputs agree (checked by
    // `decisions`).
    let got = decisions(&output_values(&reader));
    assert_eq!(got.len(), want.len(), "ids decided");
    for (id, d) in &want {
        assert_eq!(got.get(id), Some(d), "decision of {id}");
    }
    assert_verifies(&standby_index);
    assert!(
        takeover.log().contains("catching up with articles.unique"),
        "{}",
        takeover.log()
    );
}
