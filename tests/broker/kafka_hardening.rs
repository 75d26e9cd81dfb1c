//! `newsdedup run` against records and broker answers that used to stall it: a record too large
//! for the broker even as a dead letter (a 1 MB key), hostile records of every kind, and an output
//! topic that does not exist (a permanent produce error). Real Tansu broker (scripts/broker.sh).
//!
//! What each test checks is the operator's view: every input has exactly one output (or the
//! service stopped visibly: /health 503 with the reason, exit non-zero), and no committed offset
//! passes a record without an output.

use crate::common;

use common::kafka::{
    committed, produce, produce_with_headers, start_service, wait_committed, Broker, Input, Reader,
    Service,
};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::time::{Duration, Instant};

const OUTPUTS: [(&str, i32); 3] = [
    ("articles.unique", 1),
    ("articles.duplicate", 1),
    ("articles.dlq", 1),
];

/// `n` distinct short articles (different subjects and numbers, so most are unique).
fn articles(tag: &str, n: usize) -> Vec<Input> {
    let cities = [
        "北京", "上海", "广州", "成都", "武汉", "西安", "杭州", "南京",
    ];
    let subjects = [
        "地铁新线开通运营，沿线居民出行时间明显缩短",
        "秋季农产品丰收，合作社订单同比增长",
        "新建图书馆对市民免费开放，首日接待读者",
        "马拉松比赛顺利举行，参赛选手刷新赛会纪录",
        "科技企业发布新款芯片，功耗降低三成",
        "暴雨预警发布，气象部门提醒注意防范",
    ];
    (0..n)
        .map(|i| {
            let id = format!("{tag}-{i}");
            let city = cities[i % cities.len()];
            let subject = subjects[(i / cities.len()) % subjects.len()];
            let content = format!(
                "{city}消息（第{i}期）：{subject}。据{city}市统计，本期共有{}人参与，{}家单位提供支持，累计投入{}万元。相关负责人表示，将在{}月继续推进后续工作，并接受社会监督。",
                1000 + i * 37,
                20 + i % 90,
                300 + i * 11,
                1 + i % 12
            );
            let value = json!({"id": id, "title": format!("{city}{subject}"), "content": content});
            Input {
                key: Some(id.clone()),
                value: serde_json::to_vec(&value).expect("json"),
                bad: None,
                id: Some(id),
            }
        })
        .collect()
}

/// Produces `inputs` to one partition, runs the service on them and waits until every input has
/// an output. Returns the service, the reader of the outputs and each input's coordinates.
fn decide_all(broker: &Broker, dir: &Path, inputs: &[Input]) -> (Service, Reader, Vec<(i32, i64)>) {
    let b = broker.bootstrap.as_str();
    let coords = produce(b, "articles.raw", inputs, Some(0));
    let service = start_service(
        b,
        &dir.join("index"),
        &dir.join("service.log"),
        &["--commit-interval-ms", "200"],
    );
    let mut reader = Reader::new(b, &OUTPUTS);
    let want: HashSet<(i32, i64)> = coords.iter().copied().collect();
    reader.wait_covered(&want, Duration::from_secs(90), &|| service.log());
    (service, reader, coords)
}

fn topics(broker: &Broker, dlq: bool) {
    let mut specs = vec![
        "articles.raw:1",
        "articles.unique:1",
        "articles.duplicate:1",
    ];
    if dlq {
        specs.push("articles.dlq:1");
    }
    broker.create_topics(&specs);
}

/// The operator's report, reproduced: 100 articles, one record whose key is 1.1 MB (value
/// `{not json`), 100 more. The dead letter of that record cannot carry its key (the broker's
/// limit is 1 MiB), so it goes with the key dropped and a header saying so, and the stream goes
/// on: every record has an output, offsets reach the end.
#[test]
fn a_record_too_large_even_for_the_dlq_is_bounded_and_the_stream_goes_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    topics(&broker, true);
    let b = broker.bootstrap.as_str();

    let mut inputs = articles("a", 100);
    inputs.push(Input {
        key: Some("k".repeat(1_100_000)),
        value: b"{not json".to_vec(),
        bad: Some("bad_json"),
        id: None,
    });
    inputs.extend(articles("b", 100));
    let (service, reader, coords) = decide_all(&broker, dir.path(), &inputs);

    let bad = coords[100];
    let dead = reader
        .got
        .iter()
        .find(|o| o.source() == bad)
        .expect("output of the bad record");
    assert_eq!(dead.topic, "articles.dlq");
    assert_eq!(dead.key, None, "the 1.1 MB key is dropped");
    assert_eq!(
        dead.headers
            .get("newsdedup.error.key_dropped_bytes")
            .map(String::as_str),
        Some("1100000")
    );
    assert_eq!(dead.headers["newsdedup.error.reason"], "oversized");
    assert_eq!(dead.value, b"{not json");

    // Offsets committed to the end, and the log did not fill with retries.
    let end = BTreeMap::from([(0, inputs.len() as i64)]);
    wait_committed(b, &end, Duration::from_secs(20), &|| service.log());
    let lines = service.log().lines().count();
    assert!(lines < 200, "{lines} log lines:\n{}", service.log());
}

/// Records of every hostile kind, each with exactly one output; the service stays up.
#[test]
fn hostile_records_each_get_one_output_and_the_service_stays_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    topics(&broker, true);

    let deep = format!("{}{}", "[".repeat(50_000), "]".repeat(50_000));
    let many_fields: String = (0..20_000)
        .map(|i| format!("\"f{i}\":{i},"))
        .collect::<String>();
    let hostile: Vec<(Vec<u8>, &str)> = vec![
        (
            (0..4096).map(|i| (i * 7919 % 251) as u8).collect(),
            "random bytes",
        ),
        (
            format!(r#"{{"id":"deep","content":"正文","k":{deep}}}"#).into_bytes(),
            "50k-deep nesting",
        ),
        (
            br#"{"id":"sur","content":"\ud800 lone surrogate"}"#.to_vec(),
            "lone surrogate",
        ),
        (
            "{\"id\":\"punct\",\"content\":\"，。！？😀🎉……\"}"
                .as_bytes()
                .to_vec(),
            "only punctuation and emoji",
        ),
        (
            br#"{"id":"dup","content":"first","content":"second"}"#.to_vec(),
            "duplicate keys",
        ),
        (
            format!(r#"{{{many_fields}"id":"wide","content":"二万个字段的记录"}}"#).into_bytes(),
            "20k fields",
        ),
        (
            "\u{feff}{\"id\":\"bom\",\"content\":\"带字节顺序标记的记录\"}"
                .as_bytes()
                .to_vec(),
            "BOM",
        ),
        (
            br#"{"id":"trail","content":"x"} trailing"#.to_vec(),
            "trailing garbage",
        ),
        (
            format!(r#"{{"id":"over","content":"{}"}}"#, "长".repeat(300_000)).into_bytes(),
            "just over the limit",
        ),
    ];
    let mut inputs = articles("h", 20);
    for (i, (value, what)) in hostile.into_iter().enumerate() {
        inputs.push(Input {
            key: Some(format!("hostile-{i}: {what}")),
            value,
            bad: Some("hostile"),
            id: None,
        });
    }
    inputs.extend(articles("t", 20));
    let (service, mut reader, _) = decide_all(&broker, dir.path(), &inputs);
    // 200 KB of headers on a valid article (they pass through to its output).
    let names: Vec<String> = (0..200).map(|i| format!("x-pad-{i}")).collect();
    let headers: Vec<(&str, Vec<u8>)> = names
        .iter()
        .map(|n| (n.as_str(), vec![b'h'; 1000]))
        .collect();
    let padded = produce_with_headers(
        &broker.bootstrap,
        "articles.raw",
        &articles("hdr", 1),
        &headers,
        Some(0),
    );
    let want: HashSet<(i32, i64)> = padded.into_iter().collect();
    reader.wait_covered(&want, Duration::from_secs(60), &|| service.log());
    reader.poll_for(Duration::from_secs(1));

    let mut seen = HashSet::new();
    for o in &reader.got {
        assert!(
            seen.insert(o.source()),
            "two outputs for input {:?}",
            o.source()
        );
        if o.topic != "articles.dlq" {
            // The `dedup` member is last; read it alone (the 50k-deep record passes through as
            // it came, deeper than serde_json's default recursion limit).
            let text = String::from_utf8_lossy(&o.value);
            let at = text.rfind("\"dedup\":").expect("a dedup member");
            let tail = text[at + 8..].strip_suffix('}').expect("closing brace");
            let dedup: Value = serde_json::from_str(tail).expect("dedup member is JSON");
            assert!(dedup["decision"].is_string(), "{dedup}");
        } else {
            assert!(o.headers.contains_key("newsdedup.error.reason"));
        }
    }
    let (status, body) = service.http("/health").expect("/health");
    assert_eq!(status, 200, "{body}");
}

/// An output topic that does not exist is a permanent error: the service says so on /health,
/// commits nothing past the record it could not deliver, and exits non-zero; once the topic
/// exists, a restart resumes with nothing lost.
#[test]
fn a_missing_output_topic_stops_the_service_visibly_and_a_restart_resumes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    topics(&broker, false);
    let b = broker.bootstrap.as_str();

    let mut inputs = articles("m", 30);
    inputs.insert(
        10,
        Input {
            key: Some("bad".into()),
            value: b"not an article".to_vec(),
            bad: Some("bad_json"),
            id: None,
        },
    );
    let coords = produce(b, "articles.raw", &inputs, Some(0));

    let index = dir.path().join("index");
    let log = dir.path().join("service.log");
    let mut service = start_service(
        b,
        &index,
        &log,
        &[
            "--commit-interval-ms",
            "200",
            "--shutdown-timeout-ms",
            "5000",
            "-X",
            "topic.metadata.propagation.max.ms=2000",
            "-X",
            "allow.auto.create.topics=false",
        ],
    );
    // /health turns 503 with the reason while it commits what is done, then it exits.
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut reported = None;
    let status = loop {
        if let Some(status) = service.wait(Duration::from_millis(100)) {
            break status;
        }
        if let Some((503, body)) = service.http("/health") {
            reported.get_or_insert(body);
        }
        assert!(
            Instant::now() < deadline,
            "still running with no DLQ topic; log:\n{}",
            service.log()
        );
    };
    let body: Value =
        serde_json::from_str(&reported.expect("/health was never 503")).expect("health JSON");
    assert_eq!(body["state"], "failed", "{body}");
    assert!(
        body["failure"]
            .as_str()
            .is_some_and(|f| f.contains("articles.dlq")),
        "{body}"
    );
    assert!(
        !status.success(),
        "exit {status:?}; log:\n{}",
        service.log()
    );
    let text = service.log();
    assert!(
        text.contains("articles.dlq") && text.contains("does not exist"),
        "the error names the topic and the cause; log:\n{text}"
    );
    let c = committed(b, "newsdedup", "articles.raw", 1);
    let at = c.get(&0).copied().unwrap_or(-1);
    assert!(
        at <= 10,
        "committed {at}: past the undeliverable record at offset 10"
    );

    // Fix it and restart: every input gets its output.
    broker.create_topics(&["articles.dlq:1"]);
    let service = start_service(b, &index, &log, &["--commit-interval-ms", "200"]);
    let mut reader = Reader::new(b, &OUTPUTS);
    let want: HashSet<(i32, i64)> = coords.iter().copied().collect();
    reader.wait_covered(&want, Duration::from_secs(90), &|| service.log());
}

/// Through Kafka as through `batch`: the same id with other content is a new revision (decided
/// afresh, `dedup.revision`), the same content again replays it unchanged, and an id reused for
/// a repost of another story is still caught as a duplicate.
#[test]
fn revisions_through_kafka() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    topics(&broker, true);

    let mut base = articles("r", 3);
    let story = |i: usize| -> Value { serde_json::from_slice(&base[i].value).expect("json") };
    let (a0, a1) = (story(0), story(1));
    let input = |value: Value| Input {
        key: value["id"].as_str().map(str::to_owned),
        value: serde_json::to_vec(&value).expect("json"),
        bad: None,
        id: value["id"].as_str().map(str::to_owned),
    };
    // r-0 is revised to carry a copy of r-1 (an id reused to get past dedup), then replayed.
    let reused = json!({"id": "r-0", "title": a1["title"], "content": format!("{}\n责任编辑：王五", a1["content"].as_str().unwrap_or_default())});
    base.push(input(reused.clone()));
    base.push(input(reused));
    assert_ne!(a0["content"], a1["content"]);
    let (_service, reader, coords) = decide_all(&broker, dir.path(), &base);

    let dedup_of = |coord: (i32, i64)| -> Value {
        let o = reader
            .got
            .iter()
            .find(|o| o.source() == coord)
            .expect("output");
        o.json()["dedup"].clone()
    };
    let first = dedup_of(coords[0]);
    assert_eq!(first["decision"], "unique");
    let revised = dedup_of(coords[3]);
    assert_eq!(revised["decision"], "duplicate", "{revised}");
    assert_eq!(revised["match"]["id"], "r-1");
    assert_eq!(revised["revision"], 1);
    assert_eq!(revised["previous_fingerprint"], first["fingerprint"]);
    assert_eq!(
        dedup_of(coords[4]),
        revised,
        "the same content again replays the revision"
    );
}

/// The peak resident set (VmHWM) of a running process, in MiB.
fn peak_rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    kb / 1024.0
}

/// 430 MiB of ~900 KB records (valid articles and invalid JSON) with `--max-in-flight-bytes
/// 32 MiB`: every record gets one output and the service's peak RSS stays bounded by the byte
/// limit, not by what the topic holds (without the limit it reads far ahead: the record limit
/// alone is 5,000 records, 4.5 GB of these).
#[test]
fn rss_stays_bounded_with_900_kb_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    topics(&broker, true);
    let b = broker.bootstrap.as_str();

    let paragraph = "本报讯 记者从市交通运输局获悉，今年以来全市新增公交线路十二条，优化调整线路三十五条，公交出行分担率稳步提升。";
    let inputs: Vec<Input> = (0..500)
        .map(|i| {
            let id = format!("big-{i}");
            if i % 3 == 0 {
                // A valid article: its own number in every paragraph, so texts differ.
                let content: String = (0..5_000)
                    .map(|j| format!("{paragraph}（{i}-{j}）"))
                    .collect();
                let value = json!({"id": id, "title": format!("长文{i}"), "content": content});
                Input {
                    key: Some(id.clone()),
                    value: serde_json::to_vec(&value).expect("json"),
                    bad: None,
                    id: Some(id),
                }
            } else {
                let mut value = format!("{{\"id\":\"{id}\",\"content\":\"").into_bytes();
                value.resize(900_000, b'x');
                Input {
                    key: Some(id),
                    value,
                    bad: Some("bad_json"),
                    id: None,
                }
            }
        })
        .collect();
    let total: usize = inputs.iter().map(|i| i.value.len()).sum();
    let coords = produce(b, "articles.raw", &inputs, Some(0));
    let service = start_service(
        b,
        &dir.path().join("index"),
        &dir.path().join("service.log"),
        &["--max-in-flight-bytes", &(32 << 20).to_string()],
    );
    let mut reader = Reader::new(b, &OUTPUTS);
    let want: HashSet<(i32, i64)> = coords.iter().copied().collect();
    reader.wait_covered(&want, Duration::from_secs(240), &|| service.log());
    let peak = peak_rss_mib(service.child.id());
    eprintln!(
        "peak RSS {peak:.0} MiB for {} records, {:.0} MiB in all",
        inputs.len(),
        total as f64 / f64::from(1 << 20)
    );
    assert_eq!(reader.got.len(), inputs.len(), "one output per record");
    // Measured: ~170 MiB with the byte limit, ~340 MiB without it already at 280 MiB of records.
    assert!(
        peak < 280.0,
        "peak RSS {peak:.0} MiB with 32 MiB in flight; log:\n{}",
        service.log()
    );
}
