//! `newsdedup replay` end to end against a local Tansu broker (scripts/broker.sh): a replay
//! into a fresh index reproduces the live `run`'s decisions on a single-partition topic; the
//! same range replayed twice gives identical decisions (all from the index); a dry run writes
//! JSONL and produces nothing; a replay stops by itself at the end the topic had when it started
//! while records keep arriving; `--from-time` / `--to-time` bound it; an empty range or a missing
//! partition exits non-zero.

use crate::common;

use common::kafka::{
    committed, ends, produce, produce_at, produce_paced, start_service, Broker, Input, Output,
    Reader,
};
use common::stream::{valid, write_jsonl};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// `n` corpus articles from `skip` with an exact-text repost (new id) after every 10th one and
/// one malformed record, ids tagged with `tag`.
fn inputs(skip: usize, n: usize, tag: &str) -> Vec<Input> {
    let mut out = Vec::new();
    let articles = common::corpus_articles_cycled("sina_2018_patrick233.jsonl", skip + n);
    for (i, mut a) in articles.into_iter().skip(skip).enumerate() {
        let id = format!("{tag}-{}", common::str_field(&a, "id"));
        a.insert("id".into(), json!(id));
        out.push(valid(&a));
        if i % 10 == 0 {
            a.insert("id".into(), json!(format!("repost-{id}")));
            out.push(valid(&a));
        }
    }
    out.push(Input {
        key: Some(format!("bad-{tag}")),
        value: b"{not json".to_vec(),
        bad: Some("bad_json"),
        id: None,
    });
    // Invalid, with an id the output names.
    out.push(Input {
        key: Some(format!("empty-{tag}")),
        value: format!(r#"{{"id":"empty-{tag}","content":""}}"#).into_bytes(),
        bad: Some("empty_text"),
        id: None,
    });
    out
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
}

/// Output topics named `{prefix}.unique` / `.duplicate` / `.dlq`.
fn topics(prefix: &str) -> [String; 3] {
    ["unique", "duplicate", "dlq"].map(|k| format!("{prefix}.{k}"))
}

fn topic_args(prefix: &str) -> Vec<String> {
    let [u, d, q] = topics(prefix);
    vec![
        "--unique-topic".into(),
        u,
        "--duplicate-topic".into(),
        d,
        "--dlq-topic".into(),
        q,
    ]
}

struct Replayed {
    success: bool,
    stderr: String,
    /// The `replay: done:` summary, if printed.
    summary: Option<Value>,
}

/// Starts `newsdedup replay` (stderr to `log`).
fn spawn_replay(brokers: &str, index: &Path, log: &Path, extra: &[String]) -> std::process::Child {
    let log_file = std::fs::File::create(log).expect("replay log");
    Command::new(env!("CARGO_BIN_EXE_newsdedup"))
        .arg("replay")
        .args(["--brokers", brokers, "--threads", "2"])
        .arg("--index-dir")
        .arg(index)
        .args(extra)
        .env("NEWSDEDUP_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log_file)
        .spawn()
        .expect("spawn newsdedup replay")
}

fn wait_replay(mut child: std::process::Child, log: &Path, limit: Duration) -> Replayed {
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            break s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "replay did not stop by itself within {limit:?}; log:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = std::fs::read_to_string(log).unwrap_or_default();
    let summary = stderr
        .lines()
        .find_map(|l| l.strip_prefix("replay: done: "))
        .map(|j| serde_json::from_str(j).expect("summary JSON"));
    Replayed {
        success: status.success(),
        stderr,
        summary,
    }
}

fn replay(brokers: &str, index: &Path, log: &Path, extra: &[String]) -> Replayed {
    let child = spawn_replay(brokers, index, log, extra);
    wait_replay(child, log, Duration::from_secs(120))
}

/// Decision per source offset, from the output records of topics `prefix.*`: (kind, record JSON
/// for unique/duplicate, DLQ reason for dlq).
fn decisions(reader: &Reader, prefix: &str) -> BTreeMap<i64, (String, Value)> {
    let mut out = BTreeMap::new();
    for o in reader
        .got
        .iter()
        .filter(|o| o.topic.starts_with(&format!("{prefix}.")))
    {
        let kind = o.topic.rsplit('.').next().expect("kind").to_owned();
        let value = if kind == "dlq" {
            json!(o.headers["newsdedup.error.reason"])
        } else {
            o.json()
        };
        let previous = out.insert(o.source().1, (kind, value));
        assert!(
            previous.is_none(),
            "two outputs for offset {}",
            o.source().1
        );
    }
    out
}

fn read_all(reader: &mut Reader, prefix: &str, want: usize) {
    let start = Instant::now();
    while reader
        .got
        .iter()
        .filter(|o: &&Output| o.topic.starts_with(&format!("{prefix}.")))
        .count()
        < want
    {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "fewer than {want} outputs in {prefix}.*"
        );
        reader.poll_for(Duration::from_millis(200));
    }
    reader.poll_for(Duration::from_millis(300));
}

/// The id of each line of a dry run's file; None for an invalid record (it may name an id too).
fn jsonl_ids(path: &Path) -> Vec<Option<String>> {
    std::fs::read_to_string(path)
        .expect("--output file")
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("JSON line");
            if v["dedup"]["decision"] == "invalid" {
                return None;
            }
            v["id"].as_str().map(str::to_owned)
        })
        .collect()
}

/// Live `run`, then replays of the same single-partition range: into a fresh index (the live
/// decisions again), a second time into that index (identical, all from the index), and a dry
/// run (JSONL, nothing produced). Offsets are committed under the replay's group.
#[test]
fn replay_reproduces_run_and_is_repeatable_and_dry_run_produces_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    let mut specs = vec!["articles.raw:1".to_owned()];
    for prefix in ["articles", "r1", "r2", "dry"] {
        specs.extend(topics(prefix).map(|t| format!("{t}:1")));
    }
    broker.create_topics(&specs.iter().map(String::as_str).collect::<Vec<_>>());
    let b = broker.bootstrap.as_str();
    let inputs = inputs(0, 300, "a");
    let coords = produce(b, "articles.raw", &inputs, Some(0));
    let all_topics: Vec<(String, i32)> = ["articles", "r1", "r2", "dry"]
        .iter()
        .flat_map(|p| topics(p))
        .map(|t| (t, 1))
        .collect();
    let reader_topics: Vec<(&str, i32)> =
        all_topics.iter().map(|(t, n)| (t.as_str(), *n)).collect();
    let mut reader = Reader::new(b, &reader_topics);

    // The live service.
    let live_index = dir.path().join("live-index");
    let log = dir.path().join("service.log");
    let mut service = start_service(b, &live_index, &log, &["--threads", "2"]);
    let want: HashSet<(i32, i64)> = coords.iter().copied().collect();
    reader.wait_covered(&want, Duration::from_secs(120), &|| service.log());
    let (status, _) = service.terminate(Duration::from_secs(40));
    assert!(status.success(), "run: {}", service.log());
    read_all(&mut reader, "articles", inputs.len());
    let live = decisions(&reader, "articles");
    assert_eq!(live.len(), inputs.len());
    assert!(
        live.values().any(|(k, _)| k == "duplicate"),
        "reposts found"
    );

    // A replay into a fresh index: the live decisions again.
    let index = dir.path().join("replay-index");
    let mut args = topic_args("r1");
    args.extend(["--topic".into(), "articles.raw".into()]);
    let first = replay(b, &index, &dir.path().join("r1.log"), &args);
    assert!(first.success, "replay 1:\n{}", first.stderr);
    read_all(&mut reader, "r1", inputs.len());
    assert_eq!(
        decisions(&reader, "r1"),
        live,
        "a fresh replay decides as the live run"
    );
    let s1 = first.summary.expect("summary");
    assert_eq!(s1["records"], inputs.len());
    assert_eq!(s1["dlq"], 2);
    assert_eq!(s1["replayed"], 0);
    assert_eq!(s1["group"], "newsdedup-replay");
    assert_eq!(
        committed(b, "newsdedup-replay", "articles.raw", 1),
        ends(&coords),
        "committed up to the end of the range"
    );
    assert_eq!(
        committed(b, "newsdedup", "articles.raw", 1),
        ends(&coords),
        "run's group is left alone"
    );

    // The same range again, same index: identical decisions, all known to the index.
    let mut args = topic_args("r2");
    args.extend(["--group-id".into(), "second".into()]);
    let second = replay(b, &index, &dir.path().join("r2.log"), &args);
    assert!(second.success, "replay 2:\n{}", second.stderr);
    read_all(&mut reader, "r2", inputs.len());
    assert_eq!(
        decisions(&reader, "r2"),
        live,
        "a second replay decides the same"
    );
    let s2 = second.summary.expect("summary");
    assert_eq!(
        s2["replayed"],
        inputs.len() - 2,
        "every valid record from the index"
    );
    assert_eq!(s2["unique"], s1["unique"]);
    assert_eq!(s2["duplicate"], s1["duplicate"]);

    // Dry run: the same records as JSONL (as `batch` writes them), nothing produced.
    let file = dir.path().join("dry.jsonl");
    let mut args = topic_args("dry");
    args.extend([
        "--group-id".into(),
        "dry".into(),
        "--output".into(),
        file.display().to_string(),
    ]);
    let dry = replay(
        b,
        &dir.path().join("dry-index"),
        &dir.path().join("dry.log"),
        &args,
    );
    assert!(dry.success, "dry run:\n{}", dry.stderr);
    let lines: Vec<Value> = std::fs::read_to_string(&file)
        .expect("--output")
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(lines.len(), inputs.len());
    // An invalid record reads as `batch` writes the same line (without its line number).
    let jsonl = dir.path().join("inputs.jsonl");
    write_jsonl(&jsonl, &inputs);
    let batch = common::run_batch(
        &jsonl,
        &dir.path().join("batch.jsonl"),
        &dir.path().join("bi"),
    );
    for ((line, (_, (kind, value))), batch_line) in lines.iter().zip(&live).zip(&batch) {
        if kind == "dlq" {
            let mut want = batch_line.clone();
            want.as_object_mut().expect("object").remove("line");
            assert_eq!(line, &want, "a dry-run invalid line is batch's");
            let error = line["dedup"]["error"].as_str().expect("error");
            assert!(error.starts_with(&format!("{}:", value.as_str().expect("reason"))));
        } else {
            assert_eq!(line, value, "a dry-run line is the live output record");
        }
    }
    reader.poll_for(Duration::from_secs(2));
    assert_eq!(
        decisions(&reader, "dry").len(),
        0,
        "a dry run produces nothing"
    );
}

/// Records keep arriving while a replay runs: it stops by itself at the end the partitions had
/// when it started. `--from-time` / `--to-time` bound the range; an empty range and an unknown
/// partition exit non-zero with the reason.
#[test]
fn replay_stops_at_the_end_it_started_with_and_honours_time_bounds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    broker.create_service_topics(2);
    let b = broker.bootstrap.as_str();
    let ids = |inputs: &[Input]| -> BTreeSet<String> {
        inputs.iter().filter_map(|i| i.id.clone()).collect()
    };
    let before = inputs(0, 150, "early");
    produce(b, "articles.raw", &before, None);
    std::thread::sleep(Duration::from_millis(1_500));
    let from = now_ms();
    let middle = inputs(150, 150, "middle");
    produce(b, "articles.raw", &middle, None);
    std::thread::sleep(Duration::from_millis(1_500));
    let to = now_ms();
    let after = inputs(300, 150, "late");
    produce(b, "articles.raw", &after, None);

    // More records arrive during the replay: they are not part of it.
    let file = dir.path().join("all.jsonl");
    let log = dir.path().join("all.log");
    let child = spawn_replay(
        b,
        &dir.path().join("index-all"),
        &log,
        &["--output".into(), file.display().to_string()],
    );
    let start = Instant::now();
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("replaying articles.raw")
    {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "replay did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let more = inputs(450, 800, "more");
    let producer = {
        let (b, more) = (b.to_owned(), more.clone());
        std::thread::spawn(move || produce_paced(&b, "articles.raw", &more, None, Some(100)))
    };
    let all = wait_replay(child, &log, Duration::from_secs(60));
    assert!(all.success, "replay:\n{}", all.stderr);
    assert!(
        !producer.is_finished(),
        "stopped while records were still produced"
    );
    let got: BTreeSet<String> = jsonl_ids(&file).into_iter().flatten().collect();
    let expected: BTreeSet<String> = [&before, &middle, &after]
        .iter()
        .flat_map(|i| ids(i))
        .collect();
    assert_eq!(got, expected, "exactly the records there were at the start");
    let _ = producer.join();

    // Time bounds: only the middle batch.
    let file = dir.path().join("middle.jsonl");
    let bounded = replay(
        b,
        &dir.path().join("index-middle"),
        &dir.path().join("middle.log"),
        &[
            "--group-id".into(),
            "middle".into(),
            "--from-time".into(),
            from.to_string(),
            "--to-time".into(),
            to.to_string(),
            "--output".into(),
            file.display().to_string(),
        ],
    );
    assert!(bounded.success, "replay:\n{}", bounded.stderr);
    let got: BTreeSet<String> = jsonl_ids(&file).into_iter().flatten().collect();
    assert_eq!(
        got,
        ids(&middle),
        "only the records between --from-time and --to-time"
    );
    assert_eq!(
        bounded.summary.expect("summary")["records"],
        middle.len(),
        "the malformed record of the middle batch too"
    );

    // Nothing in range; a partition the topic does not have.
    let future = (now_ms() + 3_600_000).to_string();
    for (args, reason) in [
        (vec!["--from-time", future.as_str()], "nothing to replay"),
        (vec!["--from-offset", "0:0,7:0"], "has no partition 7"),
    ] {
        let mut args: Vec<String> = args.into_iter().map(str::to_owned).collect();
        args.extend([
            "--output".into(),
            dir.path().join("x.jsonl").display().to_string(),
        ]);
        let r = replay(
            b,
            &dir.path().join("index-x"),
            &dir.path().join("x.log"),
            &args,
        );
        assert!(!r.success, "{args:?} must fail:\n{}", r.stderr);
        assert!(
            r.stderr.contains(reason),
            "{args:?}: expected {reason:?} in:\n{}",
            r.stderr
        );
    }
}

/// A backfill keeps appending records stamped with their original (old) CreateTime while the
/// replay runs: the replay still ends by itself, with exactly the records there were when it
/// started. Ended by timestamps, it decided every appended record it reached.
#[test]
fn replay_ends_by_offsets_while_records_with_old_timestamps_keep_arriving() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    broker.create_service_topics(1);
    let b = broker.bootstrap.as_str();
    let before = inputs(0, 300, "present");
    produce(b, "articles.raw", &before, None);
    let file = dir.path().join("replayed.jsonl");
    let log = dir.path().join("replay.log");
    let child = spawn_replay(
        b,
        &dir.path().join("index"),
        &log,
        &["--output".into(), file.display().to_string()],
    );
    let start = Instant::now();
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("partition 0: from offset")
    {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "replay did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let backfill = inputs(300, 300, "backfill");
    // 2020-01-01: long before the replay started.
    let old: Vec<i64> = (0..backfill.len() as i64)
        .map(|i| 1_577_836_800_000 + i)
        .collect();
    // Appended after the plan and before the first fetch: the replay is held (SIGSTOP) from
    // its plan's log line while the backfill is produced.
    let signal = |sig: &str| {
        let status = Command::new("kill")
            .args([sig, &child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success(), "kill {sig}");
    };
    signal("-STOP");
    produce_at(b, "articles.raw", &backfill, &old, None);
    signal("-CONT");
    let replayed = wait_replay(child, &log, Duration::from_secs(90));
    assert!(replayed.success, "replay:\n{}", replayed.stderr);
    let got: BTreeSet<String> = jsonl_ids(&file).into_iter().flatten().collect();
    let expected: BTreeSet<String> = before.iter().filter_map(|i| i.id.clone()).collect();
    let extra: Vec<&String> = got.difference(&expected).collect();
    assert!(
        extra.is_empty(),
        "{} records appended after the start were replayed, e.g. {:?}",
        extra.len(),
        extra.iter().take(3).collect::<Vec<_>>()
    );
    assert_eq!(got, expected, "exactly the records there were at the start");
}
