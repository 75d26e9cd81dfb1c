//! `newsdedup run` end to end against a local Tansu broker (scripts/broker.sh): real corpus
//! articles with planted reposts, exact replays and malformed records; kill -9 mid-stream and
//! restart; single-partition equivalence with `batch`; DLQ reasons; committed offsets; /metrics
//! and /health over HTTP; SIGTERM exit 0; the index lock; an unreachable broker.
//!
//! Each test starts its own broker (own state dir, own port) and stops it on drop, panics included.
//! Known Tansu gap: a record with an empty value is not delivered to consumers, so the DLQ path
//! of an empty value (reason `bad_json`: "record has no value") cannot be tested here.

use crate::common;

use common::kafka::{
    committed, ends, free_port, metric, produce, produce_paced, start_service, Broker, Input,
    Output, Reader,
};
use common::stream::{check_outputs, corpus_inputs, interleave, malformed, write_jsonl};

use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------------
// Tests

/// 4 partitions, >= 2,000 corpus articles with reposts, replays and malformed records; kill -9
/// mid-stream, restart; nothing lost, nothing changed, offsets committed to the end.
#[test]
fn kafka_run_survives_kill_9_and_decides_every_input_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    broker.create_topics(&[
        "articles.raw:4",
        "articles.unique:2",
        "articles.duplicate:1",
        "articles.dlq:1",
    ]);
    let b = broker.bootstrap.as_str();

    let (articles, pairs) = corpus_inputs(0, 2000, "k");
    // Exact replays: the same record again later gets the same decision.
    let replays: Vec<Input> = articles.iter().step_by(97).cloned().collect();
    let mut extra = malformed("k");
    extra.extend(malformed("k2"));
    let mut inputs = interleave(articles, extra);
    inputs.extend(replays);
    // Inputs before `split` are produced for the first run, the rest after the crash. The first
    // run may get a few more (see below), so `split` moves.
    let mut split = inputs.len() * 3 / 5;

    let mut coords = produce(b, "articles.raw", &inputs[..split], None);
    let index = dir.path().join("index");
    let log = dir.path().join("service.log");
    let args = [
        "--max-article-bytes",
        "200000",
        "--rebalance-timeout-ms",
        "5000",
    ];
    let mut reader = Reader::new(
        b,
        &[
            ("articles.unique", 2),
            ("articles.duplicate", 1),
            ("articles.dlq", 1),
        ],
    );

    // First run: commits every 100 done records. Once outputs flow, freeze it (SIGSTOP) and look
    // at what the broker holds: kill -9 it in a state where some offsets are committed and some
    // outputs are delivered but not committed (those must be processed again, identically).
    let first_args = [
        &args[..],
        &["--commit-every", "100", "--commit-interval-ms", "60000"],
    ]
    .concat();
    let mut first = start_service(b, &index, &log, &first_args);
    reader.wait_outputs(300, Duration::from_secs(90), &|| first.log());
    let mut attempts = 0;
    let uncommitted_at_crash: HashSet<(i32, i64)> = loop {
        first.signal("-STOP");
        reader.poll_for(Duration::from_millis(300));
        let at_crash = committed(b, "newsdedup", "articles.raw", 4);
        let pending: HashSet<(i32, i64)> = reader
            .got
            .iter()
            .map(Output::source)
            .filter(|(p, o)| *o >= at_crash.get(p).copied().unwrap_or(0).max(0))
            .collect();
        if at_crash.values().any(|&o| o > 0) && !pending.is_empty() {
            first.kill9();
            eprintln!(
                "kill -9 with committed {at_crash:?} and {} outputs delivered but not committed",
                pending.len()
            );
            break pending;
        }
        first.signal("-CONT");
        if pending.is_empty() && reader.got.len() >= split {
            // A fast run can finish its share with the last commit covering every record. Feed it
            // a few more: fewer than `--commit-every`, they are done but not committed.
            coords.extend(produce(b, "articles.raw", &inputs[split..split + 5], None));
            split += 5;
        }
        attempts += 1;
        assert!(
            attempts < 40,
            "never caught the first run with committed and uncommitted outputs; log:\n{}",
            first.log()
        );
        // Let it run a little longer each time: a loaded machine may need a while to commit
        // (index fsync, then the broker round trip), and a frozen process makes no progress.
        std::thread::sleep(Duration::from_millis(30 * attempts.min(20)));
    };
    let before_crash = reader.got.len();

    // The rest arrives while the service is down; the restarted service resumes.
    coords.extend(produce(b, "articles.raw", &inputs[split..], None));
    let second_args = [&args[..], &["--commit-interval-ms", "200"]].concat();
    let mut second = start_service(b, &index, &log, &second_args);
    let want: HashSet<(i32, i64)> = coords.iter().copied().collect();
    reader.wait_covered(&want, Duration::from_secs(180), &|| second.log());

    // Metrics and health over HTTP.
    let (status, body) = second.http("/health").expect("/health");
    assert_eq!(status, 200, "{body}");
    let (status, text) = second.http("/metrics").expect("/metrics");
    assert_eq!(status, 200);
    assert!(
        metric(&text, "newsdedup_articles_consumed_total") > 0.0,
        "{text}"
    );
    // The restarted service counts, by reason, the malformed records it read. Only those produced
    // after the crash are sure to be among them (how far the first run committed before the kill
    // varies from run to run).
    let reason = inputs[split..]
        .iter()
        .find_map(|i| i.bad)
        .expect("malformed records after the split");
    assert!(
        metric(
            &text,
            &format!("newsdedup_articles_invalid_total{{reason=\"{reason}\"}}")
        ) >= 1.0,
        "{reason}: {text}"
    );
    assert!(
        text.contains("newsdedup_processing_latency_seconds_bucket"),
        "{text}"
    );
    assert!(
        text.contains("newsdedup_committed_offset{partition="),
        "{text}"
    );

    let (status, took) = second.terminate(Duration::from_secs(40));
    assert!(
        status.success(),
        "exit {status:?} after SIGTERM; log:\n{}",
        second.log()
    );
    eprintln!("SIGTERM -> exit in {took:?}; {before_crash} outputs before kill -9");
    reader.poll_for(Duration::from_millis(500));

    let by_coord: HashMap<(i32, i64), Input> =
        coords.iter().copied().zip(inputs.iter().cloned()).collect();
    // Every output agrees with its input, and all outputs of an id carry the same decision (the
    // records repeated after the crash included).
    let decisions = check_outputs(&by_coord, &reader.got);
    let mut per_coord: HashMap<(i32, i64), usize> = HashMap::new();
    for o in &reader.got {
        *per_coord.entry(o.source()).or_default() += 1;
    }
    let repeated = per_coord.values().filter(|&&n| n > 1).count();
    for c in &uncommitted_at_crash {
        assert!(
            per_coord[c] >= 2,
            "{c:?} was delivered but not committed before kill -9, yet not processed again"
        );
    }
    eprintln!(
        "{} outputs for {} inputs; {repeated} inputs processed twice (after kill -9)",
        reader.got.len(),
        coords.len()
    );
    assert!(
        repeated > 0,
        "kill -9 left nothing uncommitted: the crash path was not exercised"
    );
    let log_text = second.log();
    let resumed = log_text
        .lines()
        .filter(|l| l.contains("resuming from committed offsets"))
        .nth(1)
        .unwrap_or_else(|| panic!("no resume line for the second run:\n{log_text}"));
    assert!(
        resumed.contains('@') && resumed.matches("auto.offset.reset").count() < 4,
        "the restart resumed from committed offsets: {resumed}"
    );
    let valid_ids: HashSet<&str> = inputs.iter().filter_map(|i| i.id.as_deref()).collect();
    assert_eq!(decisions.len(), valid_ids.len(), "every valid id decided");

    // A near-duplicate pair that `batch` (serial, production order) finds must not come out
    // unique twice, whatever the interleaving of partitions.
    let jsonl = dir.path().join("valid.jsonl");
    let valid_inputs: Vec<Input> = inputs.iter().filter(|i| i.bad.is_none()).cloned().collect();
    write_jsonl(&jsonl, &valid_inputs);
    let batch = common::run_batch(
        &jsonl,
        &dir.path().join("batch.jsonl"),
        &dir.path().join("batch-index"),
    );
    let batch_by_id: HashMap<&str, &Value> = batch
        .iter()
        .map(|v| (v["id"].as_str().unwrap_or(""), v))
        .collect();
    let mut checked = 0;
    for (orig, repost) in &pairs {
        if batch_by_id[repost.as_str()]["dedup"]["decision"] == "duplicate" {
            checked += 1;
            let both_unique = decisions[orig]["dedup"]["decision"] == "unique"
                && decisions[repost]["dedup"]["decision"] == "unique";
            assert!(
                !both_unique,
                "{orig} and its repost {repost} both came out unique"
            );
        }
    }
    assert!(
        checked >= pairs.len() / 2,
        "only {checked} of {} reposts detected by batch",
        pairs.len()
    );

    // Offsets committed to the end of every partition.
    assert_eq!(committed(b, "newsdedup", "articles.raw", 4), ends(&coords));
}

/// One partition: the decisions are exactly `batch`'s on the same input; SIGTERM exits 0.
#[test]
fn kafka_single_partition_equals_batch_and_sigterm_exits_0() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    broker.create_service_topics(1);
    let b = broker.bootstrap.as_str();

    let (articles, _) = corpus_inputs(2000, 600, "s");
    let replays: Vec<Input> = articles.iter().step_by(50).cloned().collect();
    let mut inputs = interleave(articles, malformed("s"));
    inputs.extend(replays);
    let coords = produce(b, "articles.raw", &inputs, Some(0));

    let index = dir.path().join("index");
    let log = dir.path().join("service.log");
    let mut service = start_service(
        b,
        &index,
        &log,
        &[
            "--max-article-bytes",
            "200000",
            "--threads",
            "2",
            "--commit-interval-ms",
            "200",
        ],
    );
    let mut reader = Reader::new(
        b,
        &[
            ("articles.unique", 1),
            ("articles.duplicate", 1),
            ("articles.dlq", 1),
        ],
    );
    let want: HashSet<(i32, i64)> = coords.iter().copied().collect();
    reader.wait_covered(&want, Duration::from_secs(120), &|| service.log());

    let (status, body) = service.http("/ready").expect("/ready");
    assert_eq!(status, 200, "{body}");
    let health: Value =
        serde_json::from_str(&service.http("/health").expect("/health").1).expect("health JSON");
    assert_eq!(health["state"], "running");
    let (_, text) = service.http("/metrics").expect("/metrics");
    assert_eq!(
        metric(&text, "newsdedup_articles_consumed_total"),
        inputs.len() as f64,
        "{text}"
    );
    assert_eq!(
        metric(
            &text,
            "newsdedup_articles_invalid_total{reason=\"oversized\"}"
        ),
        1.0
    );

    let (status, took) = service.terminate(Duration::from_secs(40));
    assert!(status.success(), "exit {status:?}; log:\n{}", service.log());
    assert!(took < Duration::from_secs(15), "SIGTERM took {took:?}");
    assert!(service.log().contains("stopped cleanly"));
    reader.poll_for(Duration::from_millis(300));

    // Same input through `batch`: one line per input, in order.
    let jsonl = dir.path().join("input.jsonl");
    write_jsonl(&jsonl, &inputs);
    let batch = common::run_batch(
        &jsonl,
        &dir.path().join("batch.jsonl"),
        &dir.path().join("batch-index"),
    );
    assert_eq!(batch.len(), inputs.len());
    let by_offset: HashMap<i64, &Output> = reader.got.iter().map(|o| (o.source().1, o)).collect();
    for ((_, offset), (line, input)) in coords.iter().zip(batch.iter().zip(&inputs)) {
        let out = by_offset[offset];
        match input.bad {
            None => assert_eq!(
                &out.json(),
                line,
                "offset {offset}: kafka and batch disagree"
            ),
            Some(reason) => {
                let err = line["dedup"]["error"].as_str().expect("batch error");
                assert!(
                    err.starts_with(&format!("{reason}:")),
                    "batch says {err}, expected {reason}"
                );
                assert_eq!(out.headers["newsdedup.error.reason"], reason);
            }
        }
    }
    let decisions = check_outputs(
        &coords.iter().copied().zip(inputs.iter().cloned()).collect(),
        &reader.got,
    );
    assert!(
        decisions
            .values()
            .any(|v| v["dedup"]["decision"] == "duplicate"),
        "reposts found"
    );
    assert_eq!(committed(b, "newsdedup", "articles.raw", 1), ends(&coords));
}

/// No broker at all: the service keeps retrying and says so, `/ready` is 503, a second process on
/// the same index fails at once with a clear message, and SIGTERM still exits 0.
#[test]
fn kafka_unreachable_broker_is_retried_and_index_is_locked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dead = format!("127.0.0.1:{}", free_port());
    let index = dir.path().join("index");
    let mut first = start_service(&dead, &index, &dir.path().join("a.log"), &[]);
    first.wait_http();
    let start = Instant::now();
    while !first.log().contains("unreachable") {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no 'unreachable' in the log:\n{}",
            first.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let (status, body) = first.http("/ready").expect("/ready");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("unreachable"), "{body}");
    let (status, _) = first.http("/health").expect("/health");
    assert_eq!(status, 200, "liveness stays up while the broker is away");

    let mut second = start_service(&dead, &index, &dir.path().join("b.log"), &[]);
    let status = second
        .wait(Duration::from_secs(20))
        .expect("second instance should exit");
    assert!(!status.success());
    let log = second.log();
    assert!(log.contains("already in use by another process"), "{log}");

    let (status, _) = first.terminate(Duration::from_secs(40));
    assert!(status.success(), "exit {status:?}; log:\n{}", first.log());
}

/// A second member joins, then leaves: each time the member losing partitions finishes their
/// in-flight records and commits before releasing them, so no record is processed twice and none
/// is lost; committed offsets reach the end.
#[test]
fn kafka_rebalance_commits_before_releasing_partitions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    broker.create_service_topics(4);
    let b = broker.bootstrap.clone();
    let (inputs, _) = corpus_inputs(2600, 2400, "r");
    let mut reader = Reader::new(
        &b,
        &[
            ("articles.unique", 1),
            ("articles.duplicate", 1),
            ("articles.dlq", 1),
        ],
    );
    // Two members on purpose (the rebalance is what is tested): the one-instance check is off.
    let args = [
        "--rebalance-timeout-ms",
        "5000",
        "--commit-interval-ms",
        "200",
        "--exclusive-grace-ms",
        "0",
    ];

    // Records keep arriving (about 12 s) while members join and leave.
    let producer = {
        let (b, inputs) = (b.clone(), inputs.clone());
        std::thread::spawn(move || produce_paced(&b, "articles.raw", &inputs, None, Some(200)))
    };
    let mut first = start_service(
        &b,
        &dir.path().join("index-a"),
        &dir.path().join("a.log"),
        &args,
    );
    reader.wait_outputs(200, Duration::from_secs(60), &|| first.log());
    let mut second = start_service(
        &b,
        &dir.path().join("index-b"),
        &dir.path().join("b.log"),
        &args,
    );
    let start = Instant::now();
    while !second.log().contains("assigned; resuming") {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "second member got nothing; log:\n{}",
            second.log()
        );
        reader.poll_for(Duration::from_millis(100));
    }
    reader.poll_for(Duration::from_secs(2));
    let (status, _) = second.terminate(Duration::from_secs(40));
    assert!(
        status.success(),
        "second member exit {status:?}; log:\n{}",
        second.log()
    );

    let coords = producer.join().expect("producer thread");
    let want: HashSet<(i32, i64)> = coords.iter().copied().collect();
    reader.wait_covered(&want, Duration::from_secs(120), &|| first.log());
    let (status, _) = first.terminate(Duration::from_secs(40));
    assert!(
        status.success(),
        "first member exit {status:?}; log:\n{}",
        first.log()
    );
    reader.poll_for(Duration::from_millis(500));

    let (a_log, b_log) = (first.log(), second.log());
    assert!(a_log.contains("revoked: finishing"), "{a_log}");
    // The second member's own stop drains and commits its partitions before it leaves.
    assert!(b_log.contains("stopped cleanly"), "{b_log}");
    let b_assigned: Vec<&str> = b_log
        .lines()
        .filter(|l| l.contains("assigned; resuming"))
        .collect();
    eprintln!("second member: {b_assigned:?}");
    assert!(
        b_assigned.iter().any(|l| l.contains("partitions [0")
            || l.contains("partitions [1")
            || l.contains("partitions [2")
            || l.contains("partitions [3")),
        "the second member got no partition: {b_assigned:?}"
    );
    let mut per_coord: HashMap<(i32, i64), usize> = HashMap::new();
    for o in &reader.got {
        *per_coord.entry(o.source()).or_default() += 1;
    }
    let twice: Vec<_> = per_coord
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(c, _)| *c)
        .collect();
    assert!(
        twice.is_empty(),
        "{} records processed twice across rebalances, e.g. {:?}",
        twice.len(),
        &twice[..twice.len().min(5)]
    );
    assert_eq!(per_coord.len(), want.len());
    assert_eq!(committed(&b, "newsdedup", "articles.raw", 4), ends(&coords));
}
