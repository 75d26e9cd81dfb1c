//! The `newsdedup` binary end to end: batch over real corpus articles and every bad-input class,
//! persistence and replays, kill -9 mid-run, index stats/verify, fingerprint and compare.

mod common;

use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_newsdedup"))
}

fn run_batch(input: &Path, output: &Path, index: &Path) -> std::process::Output {
    let out = bin()
        .args(["batch", "--input"])
        .arg(input)
        .arg("--output")
        .arg(output)
        .arg("--index-dir")
        .arg(index)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "batch failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `index verify` must pass; returns its report.
fn verify_index(index: &Path) -> Value {
    let verify = bin()
        .args(["index", "verify", "--index-dir"])
        .arg(index)
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "index verify: {}",
        String::from_utf8_lossy(&verify.stdout)
    );
    serde_json::from_slice(&verify.stdout).unwrap()
}

fn read_jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Articles with planted reposts, as JSONL lines.
fn corpus_stream(articles: Vec<serde_json::Map<String, Value>>) -> Vec<String> {
    let mut lines = Vec::new();
    for (i, a) in articles.into_iter().enumerate() {
        let content = common::str_field(&a, "content").to_owned();
        let title = common::str_field(&a, "title").to_owned();
        let id = common::str_field(&a, "id").to_owned();
        lines.push(serde_json::to_string(&Value::Object(a)).unwrap());
        if i % 10 == 0 && content.chars().count() > 300 {
            let repost = json!({
                "id": format!("repost-{id}"),
                "title": title,
                "content": format!("<p>{content}</p>\n责任编辑：李四"),
                "url": format!("https://mirror.example/{i}"),
            });
            lines.push(repost.to_string());
        }
    }
    lines
}

#[test]
fn batch_decides_every_line_in_order_and_reports_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    // Without the corpus: the sample's ~40 stories, so ~4 planted reposts (every bad record still
    // goes in; those the stream has no room for go at the end).
    let mut lines = corpus_stream(common::corpus_articles("sina_2018_patrick233.jsonl", 300));
    let min_reposts = if common::corpus_available() { 10 } else { 3 };
    let mut bad = common::malformed_records();
    // An empty line is a record too.
    bad.push((b"".to_vec(), "bad_json"));
    let mut input = Vec::new();
    let mut expected_invalid = Vec::new();
    for (i, l) in lines.drain(..).enumerate() {
        input.extend_from_slice(l.as_bytes());
        input.push(b'\n');
        if i % 30 == 5 && !bad.is_empty() {
            let k = expected_invalid.len();
            if let Some((b, reason)) = bad.get(k) {
                input.extend_from_slice(b);
                input.push(b'\n');
                expected_invalid.push(*reason);
            }
        }
    }
    for (b, reason) in bad.iter().skip(expected_invalid.len()) {
        input.extend_from_slice(b);
        input.push(b'\n');
        expected_invalid.push(*reason);
    }
    // A one-line alert that cleaning empties: fingerprinted from its characters, not invalid.
    input.extend_from_slice("{\"id\":\"alert\",\"content\":\"【大风蓝色预警信号】\"}\n".as_bytes());
    // An oversized line at the end (limit lowered for the test), without a trailing newline.
    let oversized = format!("{{\"id\":\"big\",\"content\":\"{}\"}}", "长".repeat(50_000));
    input.extend_from_slice(oversized.as_bytes());
    let input_path = dir.path().join("in.jsonl");
    std::fs::write(&input_path, &input).unwrap();
    let out_path = dir.path().join("out.jsonl");
    let index = dir.path().join("index");
    let status = bin()
        .args(["batch", "--max-article-bytes", "100000", "--input"])
        .arg(&input_path)
        .args(["--output"])
        .arg(&out_path)
        .arg("--index-dir")
        .arg(&index)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&status.stderr);
    assert!(status.status.success(), "{stderr}");
    assert!(
        stderr.contains("\"articles_per_sec\""),
        "summary missing: {stderr}"
    );

    let input_lines: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
    let out = read_jsonl(&out_path);
    assert_eq!(
        out.len(),
        input_lines.len(),
        "one output line per input line"
    );
    let mut invalid_seen = Vec::new();
    let mut dup_reposts = 0;
    let mut reposts = 0;
    for (n, (o, raw)) in out.iter().zip(&input_lines).enumerate() {
        let dedup = &o["dedup"];
        match dedup["decision"].as_str().unwrap() {
            "invalid" => {
                assert_eq!(o["line"], json!(n + 1));
                let err = dedup["error"].as_str().unwrap();
                invalid_seen.push(err.split(':').next().unwrap().to_owned());
            }
            decision => {
                // The input object is echoed unchanged, plus `dedup`.
                let input: Value = serde_json::from_slice(raw).unwrap();
                let mut echoed = o.clone();
                echoed.as_object_mut().unwrap().remove("dedup");
                assert_eq!(echoed, input);
                assert_eq!(dedup["fingerprint"].as_str().unwrap().len(), 16);
                let id = o["id"].as_str().unwrap();
                if id.starts_with("repost-") {
                    reposts += 1;
                    if decision == "duplicate" {
                        dup_reposts += 1;
                        let m = &dedup["match"];
                        assert_eq!(format!("repost-{}", m["id"].as_str().unwrap()), id);
                        assert!(m["distance"].as_u64().unwrap() <= 3);
                        assert!(
                            m["title"].is_string()
                                && m["fingerprint"].is_string()
                                && m.get("url").is_some()
                        );
                        // What kind of repeat it is, always named.
                        assert!(
                            ["copy", "rewrite", "excerpt", "extension"]
                                .contains(&m["relation"].as_str().unwrap_or("")),
                            "{m}"
                        );
                    }
                } else if decision == "unique" {
                    assert!(dedup.get("match").is_none());
                }
            }
        }
    }
    let mut expected: Vec<String> = expected_invalid.iter().map(|s| s.to_string()).collect();
    expected.push("oversized".into());
    assert_eq!(invalid_seen, expected);
    assert!(
        reposts >= min_reposts && dup_reposts == reposts,
        "{dup_reposts}/{reposts} reposts caught"
    );
    let alert = out.iter().find(|o| o["id"] == "alert").unwrap();
    assert_eq!(alert["dedup"]["decision"], "unique", "{alert}");

    // Second run over the same input and index: identical decisions (replays).
    let out2_path = dir.path().join("out2.jsonl");
    let status = bin()
        .args(["batch", "--max-article-bytes", "100000", "--input"])
        .arg(&input_path)
        .args(["--output"])
        .arg(&out2_path)
        .arg("--index-dir")
        .arg(&index)
        .output()
        .unwrap();
    assert!(status.status.success());
    assert_eq!(
        std::fs::read(&out_path).unwrap(),
        std::fs::read(&out2_path).unwrap()
    );

    // stats and verify
    let stats = bin()
        .args(["index", "stats", "--json", "--index-dir"])
        .arg(&index)
        .output()
        .unwrap();
    assert!(stats.status.success());
    let stats: Value = serde_json::from_slice(&stats.stdout).unwrap();
    let valid = out
        .iter()
        .filter(|o| o["dedup"]["decision"] != "invalid")
        .count() as u64;
    assert_eq!(stats["articles"], json!(valid));
    assert_eq!(stats["families"].as_array().unwrap().len(), 4);
    verify_index(&index);
}

#[test]
fn stdin_to_stdout_and_a_locked_index() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    let mut child = bin()
        .args(["batch", "--input", "-", "--output", "-", "--index-dir"])
        .arg(&index)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // While the first process holds the index, a second one fails with a clear message.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let second = bin()
        .args(["batch", "--input", "-", "--output", "-", "--index-dir"])
        .arg(&index)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!second.status.success());
    let msg = String::from_utf8_lossy(&second.stderr);
    assert!(msg.contains("already in use by another process"), "{msg}");
    {
        let stdin = child.stdin.as_mut().unwrap();
        stdin.write_all("{\"id\":\"a\",\"content\":\"北京时间今晚，中国女排以三比零战胜美国队，夺得世界杯冠军。\"}\n".as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["dedup"]["decision"], "unique");
}

#[test]
fn kill_mid_run_then_resume_gives_identical_decisions_and_a_consistent_index() {
    let dir = tempfile::tempdir().unwrap();
    // Without the corpus: the sample's stories over and over (later rounds are duplicates).
    let lines = corpus_stream(common::corpus_articles_cycled(
        "sina_2018_patrick233.jsonl",
        6000,
    ));
    let input_path = dir.path().join("in.jsonl");
    std::fs::write(&input_path, lines.join("\n") + "\n").unwrap();

    // Reference: one uninterrupted run.
    let reference = dir.path().join("ref.jsonl");
    run_batch(&input_path, &reference, &dir.path().join("ref-index"));

    // Killed run: SIGKILL after some of the input is decided.
    let index = dir.path().join("index");
    let partial = dir.path().join("partial.jsonl");
    let mut child = bin()
        .args(["batch", "--quiet", "--input"])
        .arg(&input_path)
        .arg("--output")
        .arg(&partial)
        .arg("--index-dir")
        .arg(&index)
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while std::fs::metadata(&partial).map(|m| m.len()).unwrap_or(0) < 200_000
        && start.elapsed().as_secs() < 60
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let after_kill = verify_index(&index);
    let decided = after_kill["articles"].as_u64().unwrap();
    assert!(
        decided > 0 && (decided as usize) < lines.len(),
        "kill came at {decided} of {}",
        lines.len()
    );

    // Resume over the whole input: identical to the reference, line for line.
    let resumed = dir.path().join("resumed.jsonl");
    run_batch(&input_path, &resumed, &index);
    assert_eq!(read_jsonl(&reference), read_jsonl(&resumed));
}

#[test]
fn fingerprint_and_compare_commands() {
    let dir = tempfile::tempdir().unwrap();
    let a = common::corpus_articles("peoples_daily_2019_2020.jsonl", 1).remove(0);
    let content = common::str_field(&a, "content").to_owned();
    let a_path = dir.path().join("a.json");
    std::fs::write(&a_path, Value::Object(a.clone()).to_string()).unwrap();
    let b_path = dir.path().join("b.json");
    let b = json!({"id": "b", "title": a["title"], "content": format!("来源：人民网\n{content}")});
    std::fs::write(&b_path, b.to_string()).unwrap();
    // Plain text files work too.
    let (ta, tb) = (dir.path().join("a.txt"), dir.path().join("b.txt"));
    std::fs::write(&ta, &content).unwrap();
    std::fs::write(&tb, format!("{content}\n责任编辑：张三")).unwrap();
    let out = bin().arg("compare").arg(&ta).arg(&tb).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["distance"], 0, "{v}");

    let out = bin()
        .args(["fingerprint", "--explain", "--input"])
        .arg(&a_path)
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["id"], a["id"]);
    assert_eq!(v["fingerprint"].as_str().unwrap().len(), 16);
    assert!(v["features"].as_array().unwrap().len() >= 10);

    let out = bin()
        .arg("compare")
        .arg(&a_path)
        .arg(&b_path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["distance"].as_u64().unwrap() <= 3, "{v}");
    assert_eq!(v["verdict"], "duplicate");
    assert_eq!(v["match_rule"], "simhash");
    assert!(v["why"].as_str().unwrap().starts_with("simhash:"), "{v}");
    assert!(!v["top_shared"].as_array().unwrap().is_empty());

    // The sample's excerpt (A, later) of s01 (B): a duplicate by the containment rule, with the
    // containment in each direction; the other way round (s01 after its excerpt) it is not.
    let sample = common::sample_articles();
    let by_id = |id: &str| {
        Value::Object(
            sample
                .iter()
                .find(|m| m["id"] == id)
                .unwrap_or_else(|| panic!("{id} in the sample"))
                .clone(),
        )
    };
    let (excerpt, story) = (
        dir.path().join("excerpt.json"),
        dir.path().join("story.json"),
    );
    std::fs::write(&excerpt, by_id("s01-r1").to_string()).unwrap();
    std::fs::write(&story, by_id("s01").to_string()).unwrap();
    let compare = |a: &Path, b: &Path| -> Value {
        let out = bin().arg("compare").arg(a).arg(b).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let v = compare(&excerpt, &story);
    assert_eq!(v["verdict"], "duplicate", "{v}");
    assert_eq!(v["match_rule"], "containment", "{v}");
    assert_eq!(v["relation"], "excerpt", "{v}");
    assert!(
        v["why"].as_str().unwrap().contains("relation excerpt"),
        "{v}"
    );
    assert!(
        v["why"].as_str().unwrap().starts_with("containment:"),
        "{v}"
    );
    assert!(v["second_check"]["a_in_b"].as_f64().unwrap() >= 0.9, "{v}");
    assert!(v["second_check"]["b_in_a"].as_f64().unwrap() < 0.6, "{v}");
    let v = compare(&story, &excerpt);
    assert_eq!(v["verdict"], "distinct", "{v}");
    assert!(v["match_rule"].is_null(), "{v}");
    assert!(v["why"].as_str().unwrap().starts_with("none:"), "{v}");
}

/// `index delete` removes an article from every family: a later copy of it is then unique, and
/// a revision through `batch` (same id, other content) says so in its `dedup`.
#[test]
fn index_delete_and_revisions_through_batch() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    let story = "本市今日召开新闻发布会，介绍秋季交通安全专项整治行动的进展情况。据介绍，行动开展以来，全市共查处各类交通违法行为十二万余起，重点路段事故数量同比下降百分之十八。下一步，交管部门将继续加强夜间巡查，严查酒驾醉驾和超速行驶，并在学校周边增设护学岗。";
    let other = "市气象台今晨发布寒潮蓝色预警，预计未来三天受强冷空气影响，全市将出现大风降温天气，最低气温将降至零下五摄氏度左右。气象部门提醒市民注意防寒保暖，农业生产单位做好设施农业的防冻措施，户外作业人员注意安全。";
    let write = |name: &str, lines: &[Value]| {
        let path = dir.path().join(name);
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(&path, text).unwrap();
        path
    };
    let decided = |input: &Path, name: &str| {
        let out = dir.path().join(name);
        run_batch(input, &out, &index);
        read_jsonl(&out)
    };
    let first = write(
        "first.jsonl",
        &[
            json!({"id": "orig", "title": "交通整治", "content": story}),
            json!({"id": "copy1", "title": "交通整治", "content": format!("{story}\n责任编辑：张三")}),
        ],
    );
    let out = decided(&first, "first.out");
    assert_eq!(out[1]["dedup"]["decision"], "duplicate");

    let deleted = bin()
        .args(["index", "delete", "--index-dir"])
        .arg(&index)
        .args(["--id", "orig", "missing"])
        .output()
        .unwrap();
    assert!(
        deleted.status.success(),
        "{}",
        String::from_utf8_lossy(&deleted.stderr)
    );
    let report: Value = serde_json::from_slice(&deleted.stdout).unwrap();
    assert_eq!(
        report,
        json!({"deleted": ["orig"], "not_found": ["missing"]})
    );
    verify_index(&index);

    // The original is gone: another copy of the story is now unique. A revision of copy1 (other
    // content) is decided afresh and says what it replaced.
    let second = write(
        "second.jsonl",
        &[
            json!({"id": "copy2", "title": "交通整治", "content": format!("来源：某某网\n{story}")}),
            json!({"id": "copy1", "title": "寒潮预警", "content": other}),
            json!({"id": "copy1", "title": "寒潮预警", "content": other}),
        ],
    );
    let out = decided(&second, "second.out");
    assert_eq!(out[0]["dedup"]["decision"], "unique", "{}", out[0]);
    assert_eq!(out[1]["dedup"]["decision"], "unique", "{}", out[1]);
    assert_eq!(out[1]["dedup"]["revision"], 1);
    assert!(out[1]["dedup"]["previous_fingerprint"].is_string());
    assert_eq!(
        out[2]["dedup"], out[1]["dedup"],
        "the same content again replays the revision"
    );
    let report = verify_index(&index);
    assert_eq!(
        (report["articles"].as_u64(), report["unique"].as_u64()),
        (Some(2), Some(2)),
        "{report}"
    );
}
