//! Editors' corrections through a real broker (Tansu): `newsdedup correct` produces to
//! `articles.corrections`, `run` applies them with its single writer and publishes the corrected
//! records, and every copy of the index agrees afterwards: the live one, a standby promoted to
//! `run`, and an `index rebuild` from the output topics.

use crate::common;

use common::kafka::{produce, start_command, start_service, Broker, Input, Reader};
use common::stream::write_jsonl;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const OUTPUTS: [(&str, i32); 3] = [
    ("articles.unique", 1),
    ("articles.duplicate", 1),
    ("articles.dlq", 1),
];

fn input(id: &str, content: &str, published: &str) -> Input {
    Input {
        key: Some(id.to_owned()),
        value: json!({"id": id, "title": "", "content": content, "published_at": published})
            .to_string()
            .into_bytes(),
        bad: None,
        id: Some(id.to_owned()),
    }
}

/// The five articles of `common::correction_articles`.
fn first_articles() -> Vec<Input> {
    common::correction_articles()
        .iter()
        .map(|(id, content, published)| input(id, content, published))
        .collect()
}

/// Copies of A, M and B under new ids (`tag`), then corpus articles: 100 records in all.
fn next_articles(tag: &str) -> Vec<Input> {
    let first = first_articles();
    let copy = |i: usize, name: &str| {
        let mut v: Value = serde_json::from_slice(&first[i].value).unwrap();
        let id = format!("{name}-{tag}");
        v["id"] = json!(id);
        Input {
            key: Some(id.clone()),
            value: v.to_string().into_bytes(),
            bad: None,
            id: Some(id),
        }
    };
    let mut out = vec![copy(1, "copy-a"), copy(4, "copy-m"), copy(0, "copy-b")];
    let (corpus, _) = common::stream::corpus_inputs(0, 120, tag);
    out.extend(corpus.into_iter().take(100 - out.len()));
    out
}

/// A broker in `d` with the service's topics (2 input partitions) and the corrections topic.
fn broker_with_corrections(d: &Path) -> Broker {
    let broker = Broker::start(d);
    broker.create_service_topics(2);
    broker.create_topics(&["articles.corrections:1"]);
    broker
}

fn newsdedup(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_newsdedup"))
        .args(args)
        .output()
        .expect("newsdedup")
}

fn correct(b: &str, args: &[&str]) -> Output {
    let mut all = vec!["correct"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--brokers", b, "--wait", "60", "--quiet"]);
    newsdedup(&all)
}

/// `correct`'s output says the correction was applied (`log`: the service's, for a failure).
fn assert_applied(out: &Output, log: &str) {
    assert!(
        out.status.success(),
        "{}{log}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said: Value = serde_json::from_slice(&out.stdout).expect("report");
    assert_eq!(said["outcome"], "applied", "{said}");
}

/// The (decision, match id) of each id in `records`, every output of an id agreeing.
fn decisions<'a>(
    records: impl IntoIterator<Item = &'a Value>,
) -> BTreeMap<String, (String, String)> {
    let mut out = BTreeMap::new();
    for v in records {
        let Some(id) = v["id"].as_str() else { continue };
        let d = &v["dedup"];
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

fn latest<'a>(reader: &'a Reader, id: &str) -> Option<&'a common::kafka::Output> {
    reader
        .got
        .iter()
        .rev()
        .find(|o| o.topic != "articles.dlq" && o.key.as_deref() == Some(id))
}

fn wait_until(what: &str, log: &dyn Fn() -> String, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "{what}: {}",
            log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `batch` of `inputs` on a copy of `index` (read only by the copy): the decisions per id.
fn batch_on_copy(
    dir: &Path,
    index: &Path,
    inputs: &[Input],
    name: &str,
) -> BTreeMap<String, (String, String)> {
    let copy = dir.join(format!("{name}-copy"));
    let status = Command::new("cp")
        .arg("-r")
        .arg(index)
        .arg(&copy)
        .status()
        .expect("cp");
    assert!(status.success());
    let _ = std::fs::remove_file(copy.join("LOCK"));
    let path = dir.join(format!("{name}-next.jsonl"));
    write_jsonl(&path, inputs);
    let out = common::run_batch(&path, &dir.join(format!("{name}-next.out")), &copy);
    decisions(out.iter())
}

#[test]
fn editors_release_and_merge_through_the_broker_and_every_copy_of_the_index_agrees() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let broker = broker_with_corrections(d);
    let b = broker.bootstrap.as_str();
    let active_index = d.join("active");
    let standby_index = d.join("standby");
    let mut svc = start_service(b, &active_index, &d.join("run.log"), &[]);
    let mut standby = start_command("standby", b, &standby_index, &d.join("standby.log"), &[]);
    standby.wait_http();
    svc.wait_http();

    let first = first_articles();
    produce(b, "articles.raw", &first, Some(0));
    let mut reader = Reader::new(b, &OUTPUTS);
    reader.wait_outputs(5, Duration::from_secs(120), &|| svc.log());
    let before = decisions(
        reader
            .got
            .iter()
            .map(|o| o.json())
            .collect::<Vec<_>>()
            .iter(),
    );
    assert_eq!(before["a"], ("duplicate".into(), "b".into()), "the setup");
    assert_eq!(before["m"].0, "unique", "the setup");

    // Refused by the command, with the reason, before anything is produced.
    for (args, why) in [
        (vec!["release", "--id", "b"], "is unique"),
        (vec!["release", "--id", "nobody"], "not in the index"),
        (vec!["merge", "--id", "c", "--into", "c"], "into itself"),
        (vec!["merge", "--id", "c", "--into", "o"], "published later"),
        (
            vec!["merge", "--id", "c", "--into", "a"],
            "itself a duplicate of \"b\"",
        ),
        (
            vec!["merge", "--id", "a", "--into", "c"],
            "already a duplicate",
        ),
    ] {
        let out = correct(b, &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(why), "{args:?}: {stderr}");
    }

    // Release A, merge M into O: each applied and published before the command returns.
    // Only the records of this test's first minutes are read.
    let since = (std::time::SystemTime::now() - Duration::from_secs(600))
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis()
        .to_string();
    let release = correct(
        b,
        &[
            "release",
            "--id",
            "a",
            "--by",
            "ed",
            "--reason",
            "two reports",
            "--since",
            &since,
        ],
    );
    assert_applied(&release, &svc.log());
    let merge = correct(b, &["merge", "--id", "m", "--into", "o", "--by", "ed"]);
    assert!(
        merge.status.success(),
        "{}",
        String::from_utf8_lossy(&merge.stderr)
    );
    reader.poll_for(Duration::from_millis(500));
    let a_now = latest(&reader, "a").expect("a").json();
    assert_eq!(a_now["dedup"]["decision"], "unique");
    assert_eq!(a_now["dedup"]["correction"]["previous"]["match"]["id"], "b");
    assert_eq!(a_now["dedup"]["correction"]["by"], "ed");
    let m_now = latest(&reader, "m").expect("m");
    assert_eq!(m_now.topic, "articles.duplicate");
    assert_eq!(m_now.json()["dedup"]["match"]["id"], "o");
    assert_eq!(m_now.json()["dedup"]["match"]["rule"], "editor");

    // Straight to the topic: a correction the index refuses, a record that is not one, and the
    // release of A once more (applying it again changes nothing and publishes the same record).
    let b_out = latest(&reader, "b").expect("b").json();
    let refused = json!({
        "kind": "release", "id": "b", "at": "2026-01-01T00:00:00Z",
        "fingerprint": b_out["dedup"]["fingerprint"],
        "article": String::from_utf8(first[0].value.clone()).unwrap(),
    });
    let corrections_records: Vec<Vec<u8>> = {
        let mut r = Reader::new(b, &[("articles.corrections", 1)]);
        r.wait_outputs(2, Duration::from_secs(30), &|| svc.log());
        r.got.iter().map(|o| o.value.clone()).collect()
    };
    let raw = |key: &str, value: Vec<u8>| Input {
        key: Some(key.to_owned()),
        value,
        bad: None,
        id: None,
    };
    let a_released = a_now.clone();
    produce(
        b,
        "articles.corrections",
        &[
            raw("b", refused.to_string().into_bytes()),
            raw("x", b"{not a correction".to_vec()),
            raw("a", corrections_records[0].clone()),
        ],
        Some(0),
    );
    wait_until("the refusals in the DLQ and A again", &|| svc.log(), || {
        reader.poll_for(Duration::from_millis(100));
        let dlq = reader
            .got
            .iter()
            .filter(|o| o.topic == "articles.dlq")
            .count();
        let a_outputs = reader
            .got
            .iter()
            .filter(|o| o.key.as_deref() == Some("a"))
            .count();
        dlq >= 2 && a_outputs >= 3
    });
    let dlq: Vec<_> = reader
        .got
        .iter()
        .filter(|o| o.topic == "articles.dlq")
        .collect();
    let reasons: Vec<&str> = dlq
        .iter()
        .map(|o| o.headers["newsdedup.error.reason"].as_str())
        .collect();
    assert!(reasons.contains(&"refused_correction"), "{reasons:?}");
    assert!(reasons.contains(&"bad_correction"), "{reasons:?}");
    let refusal = dlq
        .iter()
        .find(|o| o.headers["newsdedup.error.reason"] == "refused_correction")
        .unwrap();
    assert!(
        refusal.headers["newsdedup.error.message"].contains("is unique"),
        "{:?}",
        refusal.headers
    );
    // The refused correction as it was sent, for the operator to read and send again.
    assert_eq!(
        String::from_utf8_lossy(&refusal.value),
        refused.to_string(),
        "the DLQ record's value"
    );
    assert_eq!(
        latest(&reader, "a").unwrap().json(),
        a_released,
        "applied twice"
    );
    // Committed once applied and published: all five correction records.
    wait_until("the corrections offsets committed", &|| svc.log(), || {
        common::kafka::committed(b, "newsdedup.corrections", "articles.corrections", 1)
            .get(&0)
            .copied()
            == Some(5)
    });
    let metrics = svc.http("/metrics").expect("/metrics").1;
    assert_eq!(
        common::kafka::metric(&metrics, "newsdedup_corrections_total{kind=\"merge\"}"),
        1.0
    );
    assert_eq!(
        common::kafka::metric(&metrics, "newsdedup_corrections_total{kind=\"release\"}"),
        2.0
    );

    // Copies now link as the editor said: A's copy to A, M's to O (through M).
    let copies = next_articles("live");
    produce(b, "articles.raw", &copies[..2], Some(1));
    wait_until("the copies decided", &|| svc.log(), || {
        reader.poll_for(Duration::from_millis(100));
        latest(&reader, "copy-a-live").is_some() && latest(&reader, "copy-m-live").is_some()
    });
    let copy_a = latest(&reader, "copy-a-live").unwrap().json();
    assert_eq!(copy_a["dedup"]["match"]["id"], "a", "{copy_a}");
    let copy_m = latest(&reader, "copy-m-live").unwrap().json();
    assert_eq!(copy_m["dedup"]["match"]["id"], "o", "{copy_m}");
    assert_eq!(copy_m["dedup"]["match"]["via"], "m", "{copy_m}");

    // One more refusal, the last correction the live service reads: it leaves no output record.
    produce(
        b,
        "articles.corrections",
        &[raw("b", refused.to_string().into_bytes())],
        Some(0),
    );
    wait_until("the last refusal committed", &|| svc.log(), || {
        common::kafka::committed(b, "newsdedup.corrections", "articles.corrections", 1)
            .get(&0)
            .copied()
            == Some(6)
    });

    // The live index stops; the standby has read every output record.
    let (status, _) = svc.terminate(Duration::from_secs(30));
    assert!(status.success(), "run: {}", svc.log());
    let published = reader
        .got
        .iter()
        .filter(|o| o.topic != "articles.dlq")
        .count();
    wait_until("the standby caught up", &|| standby.log(), || {
        standby
            .http("/metrics")
            .map(|(_, body)| common::kafka::metric(&body, "newsdedup_standby_records_total"))
            .unwrap_or(0.0)
            >= published as f64
    });
    let (status, _) = standby.terminate(Duration::from_secs(30));
    assert!(status.success(), "standby: {}", standby.log());

    // An index rebuilt from the topics passes `index verify`, and it, the live index and the
    // standby decide the next 100 records alike.
    let rebuilt = d.join("rebuilt");
    let out = newsdedup(&[
        "index",
        "rebuild",
        "--brokers",
        b,
        "--quiet",
        "--index-dir",
        rebuilt.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let verify = newsdedup(&["index", "verify", "--index-dir", rebuilt.to_str().unwrap()]);
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
    let next = next_articles("next");
    let live = batch_on_copy(d, &active_index, &next, "live");
    assert_eq!(live["copy-a-next"].1, "a");
    assert_eq!(live["copy-m-next"].1, "o");
    assert_eq!(live["copy-b-next"].1, "b");
    assert_eq!(batch_on_copy(d, &rebuilt, &next, "rebuilt"), live);
    assert_eq!(batch_on_copy(d, &standby_index, &next, "standby"), live);

    // The standby promoted to `run` decides them as the live one would have.
    let mut promoted = start_service(b, &standby_index, &d.join("promoted.log"), &[]);
    let mut reader = Reader::new(b, &OUTPUTS);
    produce(b, "articles.raw", &next, Some(0));
    wait_until(
        "the promoted standby decided the next records",
        &|| promoted.log(),
        || {
            reader.poll_for(Duration::from_millis(100));
            next.iter()
                .all(|i| latest(&reader, i.id.as_deref().unwrap()).is_some())
        },
    );
    let got = decisions(
        next.iter()
            .map(|i| latest(&reader, i.id.as_deref().unwrap()).unwrap().json())
            .collect::<Vec<_>>()
            .iter(),
    );
    assert_eq!(got, live);
    // The standby's index learnt how far corrections are applied from the corrected records
    // (the last, A's release sent again, answers correction 4); the takeover moved it past the
    // refusal after them, which left no record, to the failed instance's committed 6.
    assert!(
        promoted.log().contains(
            "reading corrections from articles.corrections [0] from 6 (the index's position)"
        ),
        "{}",
        promoted.log()
    );
    let (status, _) = promoted.terminate(Duration::from_secs(30));
    assert!(status.success(), "promoted: {}", promoted.log());
}

/// Junk records (not corrections) produced after the forged ones.
const JUNK: usize = 2_000;

/// The keys `[corrections]` of the service: `k1` (what the editors sign with), in `dir`.
fn signing_config(dir: &Path) -> std::path::PathBuf {
    common::write_key(&dir.join("k1"), &[b'k'; 40]);
    let config = dir.join("signed.toml");
    std::fs::write(
        &config,
        format!(
            "[corrections]\nkeys = [{{ id = \"k1\", file = {:?} }}]\nsign_with = \"k1\"\n",
            dir.join("k1")
        ),
    )
    .unwrap();
    config
}

#[test]
fn forged_replayed_and_far_future_corrections_change_nothing_on_the_service_a_standby_or_a_rebuild()
{
    use newsdedup::correction::Correction;
    use newsdedup::signing::SigningKey;
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let config = signing_config(d);
    let config_arg = config.to_str().unwrap();
    let broker = broker_with_corrections(d);
    let b = broker.bootstrap.as_str();
    let active_index = d.join("active");
    let standby_index = d.join("standby");
    let signed = ["--config", config_arg];
    let mut svc = start_service(b, &active_index, &d.join("run.log"), &signed);
    let mut standby = start_command("standby", b, &standby_index, &d.join("standby.log"), &[]);
    standby.wait_http();
    svc.wait_http();
    let first = first_articles();
    produce(b, "articles.raw", &first, Some(0));
    let mut reader = Reader::new(b, &OUTPUTS);
    reader.wait_outputs(5, Duration::from_secs(120), &|| svc.log());

    // The editor's release of A, signed by `correct` with the configured key.
    let release = correct(
        b,
        &["release", "--id", "a", "--by", "ed", "--config", config_arg],
    );
    assert!(
        release.status.success(),
        "{}{}",
        String::from_utf8_lossy(&release.stderr),
        svc.log()
    );
    reader.poll_for(Duration::from_millis(500));
    let a_released = latest(&reader, "a").expect("a").json();
    assert_eq!(a_released["dedup"]["decision"], "unique");
    assert_eq!(a_released["dedup"]["correction"]["key_id"], "k1");
    let genuine: Correction = {
        let mut r = Reader::new(b, &[("articles.corrections", 1)]);
        r.wait_outputs(1, Duration::from_secs(30), &|| svc.log());
        Correction::parse(&r.got[0].value).expect("the command's correction")
    };
    let key = SigningKey::new("k1", &[b'k'; 40]).unwrap();
    let m_out = latest(&reader, "m").expect("m").json();
    let m_article = String::from_utf8(first[4].value.clone()).unwrap();
    let forged_text = {
        let mut v: Value = serde_json::from_str(&genuine.article).unwrap();
        v["content"] = json!(common::numbered_report("伪造区", 500, 20));
        v.to_string()
    };
    let raw = |key: &str, c: &Correction| Input {
        key: Some(key.to_owned()),
        value: c.to_json().into_bytes(),
        bad: None,
        id: None,
    };
    produce(
        b,
        "articles.corrections",
        &[
            // Forged: unsigned; signed, then its text changed; signed but carrying other text
            // than the stored article.
            raw(
                "a",
                &Correction {
                    key_id: None,
                    signature: None,
                    ..genuine.clone()
                },
            ),
            raw(
                "a",
                &Correction {
                    article: forged_text.clone(),
                    ..genuine.clone()
                },
            ),
            raw(
                "a",
                &Correction {
                    article: forged_text.clone(),
                    ..genuine.clone()
                }
                .signed(&key),
            ),
            // Signed, but expired (a copy kept past its time), and signed for another service.
            raw(
                "a",
                &Correction {
                    at: "2026-01-01T00:00:00Z".into(),
                    expires: Some("2026-01-02T00:00:00Z".into()),
                    ..genuine.clone()
                }
                .signed(&key),
            ),
            raw(
                "a",
                &Correction {
                    audience: Some("another-service".into()),
                    ..genuine.clone()
                }
                .signed(&key),
            ),
            // Replayed: the applied release again.
            raw("a", &genuine),
            // Far future: M merged into O by an editor whose clock says 9999.
            raw(
                "m",
                &Correction {
                    kind: newsdedup::index::CorrectionKind::Merge,
                    id: "m".into(),
                    into: Some("o".into()),
                    by: Some("ahead".into()),
                    key_id: None,
                    reason: None,
                    at: "9999-12-31T00:00:00Z".into(),
                    follows: None,
                    audience: genuine.audience.clone(),
                    expires: Some("9999-12-31T12:00:00Z".into()),
                    fingerprint: serde_json::from_value(m_out["dedup"]["fingerprint"].clone())
                        .unwrap(),
                    article: m_article,
                    signature: None,
                }
                .signed(&key),
            ),
        ],
        Some(0),
    );
    // A flood of junk after them: refused in the reader, not waited for one by one.
    let junk: Vec<Input> = (0..JUNK)
        .map(|i| Input {
            key: Some(format!("junk-{i}")),
            value: format!("{{\"kind\":\"release\",\"id\":\"junk-{i}\"}}").into_bytes(),
            bad: None,
            id: None,
        })
        .collect();
    let flooded = std::time::Instant::now();
    produce(b, "articles.corrections", &junk, Some(0));
    wait_until(
        "five refusals, A again, M merged and the junk refused",
        &|| svc.log(),
        || {
            reader.poll_for(Duration::from_millis(100));
            let dlq = reader
                .got
                .iter()
                .filter(|o| o.topic == "articles.dlq")
                .count();
            dlq >= 5 + JUNK && latest(&reader, "m").unwrap().topic == "articles.duplicate"
        },
    );
    eprintln!(
        "{JUNK} junk corrections refused in {:.1} s",
        flooded.elapsed().as_secs_f64()
    );
    let reasons: Vec<(String, String)> = reader
        .got
        .iter()
        .filter(|o| o.topic == "articles.dlq")
        .map(|o| {
            (
                o.headers["newsdedup.error.reason"].clone(),
                o.headers["newsdedup.error.message"].clone(),
            )
        })
        .collect();
    assert_eq!(reasons.len(), 5 + JUNK, "{reasons:?}");
    assert!(reasons[0].0 == "unsigned_correction" && reasons[0].1.contains("not signed"));
    assert!(reasons[1].0 == "unsigned_correction" && reasons[1].1.contains("does not match"));
    assert!(
        reasons[2].0 == "refused_correction"
            && reasons[2].1.contains("not the one the index holds"),
        "{reasons:?}"
    );
    assert!(
        reasons[3].0 == "expired_correction" && reasons[3].1.contains("expired at"),
        "{:?}",
        reasons[3]
    );
    assert!(
        reasons[4].0 == "unsigned_correction" && reasons[4].1.contains("another-service"),
        "{:?}",
        reasons[4]
    );
    assert!(
        reasons[5..].iter().all(|(r, _)| r == "bad_correction"),
        "{:?}",
        &reasons[5..8]
    );
    for (_, message) in &reasons {
        assert!(!message.contains("k1"), "a key id in the DLQ: {message}");
    }
    // Every refusal's position is recorded and committed (in batches): nothing is read again.
    wait_until("the refusals committed", &|| svc.log(), || {
        common::kafka::committed(b, "newsdedup.corrections", "articles.corrections", 1)
            .get(&0)
            .copied()
            == Some(8 + JUNK as i64)
    });
    // The replay published the stored article again, nothing else.
    assert_eq!(latest(&reader, "a").unwrap().json(), a_released);
    let m_merged = latest(&reader, "m").unwrap().json();
    assert_eq!(m_merged["dedup"]["match"]["id"], "o");
    assert_ne!(
        m_merged["dedup"]["correction"]["at"], "9999-12-31T00:00:00.000Z",
        "stamped by the service"
    );
    // Not frozen: an editor releases M again, as any later correction.
    let undo = correct(b, &["release", "--id", "m", "--config", config_arg]);
    assert!(
        undo.status.success(),
        "{}{}",
        String::from_utf8_lossy(&undo.stderr),
        svc.log()
    );
    reader.poll_for(Duration::from_millis(500));
    assert_eq!(
        latest(&reader, "m").unwrap().json()["dedup"]["decision"],
        "unique"
    );

    // The standby follows every record and keeps running; a rebuild finishes, verified; both
    // and the live index decide the next records alike.
    let (status, _) = svc.terminate(Duration::from_secs(30));
    assert!(status.success(), "run: {}", svc.log());
    let published = reader
        .got
        .iter()
        .filter(|o| o.topic != "articles.dlq")
        .count();
    wait_until("the standby caught up", &|| standby.log(), || {
        standby
            .http("/metrics")
            .map(|(_, body)| common::kafka::metric(&body, "newsdedup_standby_records_total"))
            .unwrap_or(0.0)
            >= published as f64
    });
    assert!(standby.http("/health").is_some(), "{}", standby.log());
    let (status, _) = standby.terminate(Duration::from_secs(30));
    assert!(status.success(), "standby: {}", standby.log());
    let rebuilt = d.join("rebuilt");
    let out = newsdedup(&[
        "index",
        "rebuild",
        "--brokers",
        b,
        "--quiet",
        "--index-dir",
        rebuilt.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let verify = newsdedup(&["index", "verify", "--index-dir", rebuilt.to_str().unwrap()]);
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
    let next = next_articles("next");
    let live = batch_on_copy(d, &active_index, &next, "live");
    assert_eq!(live["copy-a-next"].1, "a");
    assert_eq!(live["copy-b-next"].1, "b");
    assert_eq!(batch_on_copy(d, &rebuilt, &next, "rebuilt"), live);
    assert_eq!(batch_on_copy(d, &standby_index, &next, "standby"), live);
    // A takeover of the standby's directory starts and decides.
    let mut promoted = start_service(b, &standby_index, &d.join("promoted.log"), &signed);
    promoted.wait_http();
    let mut reader = Reader::new(b, &OUTPUTS);
    produce(b, "articles.raw", &next[..3], Some(0));
    wait_until("the promoted standby decided", &|| promoted.log(), || {
        reader.poll_for(Duration::from_millis(100));
        next[..3]
            .iter()
            .all(|i| latest(&reader, i.id.as_deref().unwrap()).is_some())
    });
    let (status, _) = promoted.terminate(Duration::from_secs(30));
    assert!(status.success(), "promoted: {}", promoted.log());
}

/// Several members, each with its own index (`--exclusive-grace-ms 0`): every member reads every
/// correction under a position of its own, and only the member whose index holds the article
/// applies it. One outcome per correction: the release is published once, no member that lacks
/// the article sends a refusal to the DLQ, and `correct` reports it applied.
#[test]
fn with_several_members_a_correction_has_one_outcome_from_the_member_holding_its_article() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let broker = broker_with_corrections(d);
    let b = broker.bootstrap.as_str();
    let several = ["--exclusive-grace-ms", "0"];
    let first = start_service(b, &d.join("index-1"), &d.join("run-1.log"), &several);
    first.wait_http();
    let second = start_service(b, &d.join("index-2"), &d.join("run-2.log"), &several);
    second.wait_http();
    let logs = || format!("{}\n---\n{}", first.log(), second.log());
    // Both hold a partition: the second member's assignment is the settled one.
    wait_until("the second member's assignment", &logs, || {
        second.log().contains("resuming from committed offsets")
    });
    std::thread::sleep(Duration::from_secs(2));

    // Every article on partition 0: one member's index holds them all.
    produce(b, "articles.raw", &first_articles(), Some(0));
    let mut reader = Reader::new(b, &OUTPUTS);
    reader.wait_outputs(5, Duration::from_secs(120), &logs);
    let before = decisions(
        reader
            .got
            .iter()
            .map(|o| o.json())
            .collect::<Vec<_>>()
            .iter(),
    );
    assert_eq!(before["a"], ("duplicate".into(), "b".into()), "the setup");

    let release = correct(b, &["release", "--id", "a", "--by", "ed"]);
    assert_applied(&release, &logs());
    // Both members read the correction within a second or two of each other.
    reader.poll_for(Duration::from_secs(5));
    let dead: Vec<(Option<String>, Option<String>)> = reader
        .got
        .iter()
        .filter(|o| o.topic == "articles.dlq")
        .map(|o| {
            (
                o.key.clone(),
                o.headers.get("newsdedup.error.message").cloned(),
            )
        })
        .collect();
    assert!(dead.is_empty(), "refusals: {dead:?}\n{}", logs());
    let releases = reader
        .got
        .iter()
        .filter(|o| o.key.as_deref() == Some("a") && o.json()["dedup"]["correction"].is_object())
        .count();
    assert_eq!(releases, 1, "the release published once\n{}", logs());
    // The member without the article read the correction and passed it over.
    wait_until(
        "the other member passing the correction over",
        &logs,
        || logs().contains("passed over: this member's index does not hold it"),
    );
}

/// The corrections position lives with the index: when the group `<group>.corrections` loses
/// its offsets (Kafka drops a memberless group's offsets after `offsets.retention.minutes`, or an
/// operator resets it), a restarted service resumes where its index stands and re-reads nothing.
#[test]
fn a_restarted_service_resumes_corrections_where_its_index_stands_whatever_the_group_says() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let broker = broker_with_corrections(d);
    let b = broker.bootstrap.as_str();
    let index = d.join("index");
    let mut svc = start_service(b, &index, &d.join("run-1.log"), &[]);
    svc.wait_http();
    produce(b, "articles.raw", &first_articles(), Some(0));
    let mut reader = Reader::new(b, &OUTPUTS);
    reader.wait_outputs(5, Duration::from_secs(120), &|| svc.log());
    let release = correct(b, &["release", "--id", "a", "--by", "ed"]);
    assert_applied(&release, &svc.log());
    let (status, _) = svc.terminate(Duration::from_secs(30));
    assert!(status.success(), "{}", svc.log());

    // The group's position gone back to the topic's start.
    common::kafka::commit_group(b, "newsdedup.corrections", "articles.corrections", 0, 0);
    let svc = start_service(b, &index, &d.join("run-2.log"), &[]);
    svc.wait_http();
    wait_until(
        "the restarted service reading corrections",
        &|| svc.log(),
        || svc.log().contains("reading corrections from"),
    );
    let next = next_articles("after");
    produce(b, "articles.raw", &next, Some(0));
    reader.wait_outputs(5 + 1 + next.len(), Duration::from_secs(120), &|| svc.log());
    // Long enough for a correction read again to be applied and published again.
    reader.poll_for(Duration::from_secs(3));
    let releases = reader
        .got
        .iter()
        .filter(|o| o.key.as_deref() == Some("a") && o.json()["dedup"]["correction"].is_object())
        .count();
    assert_eq!(
        releases,
        1,
        "the release was applied again after the restart\n{}",
        svc.log()
    );
    assert!(
        svc.log().contains(
            "reading corrections from articles.corrections [0] from 1 (the index's position)"
        ),
        "{}",
        svc.log()
    );
}
