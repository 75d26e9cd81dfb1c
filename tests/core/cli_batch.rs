//! The `newsdedup` binary end to end: batch over real corpus articles and every bad-input class,
//! persistence and replays, kill -9 mid-run, index stats/verify, fingerprint and compare.

use crate::common;

use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_newsdedup"))
}

fn run_batch(input: &Path, output: &Path, index: &Path) -> std::process::Output {
    let out = try_batch(input, output, index);
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
    // The disk split by family adds up to the directory's size, and the text form names it.
    let by_family = stats["disk_by_family"].as_array().unwrap();
    assert_eq!(by_family.len(), 9);
    let in_families: u64 = by_family.iter().map(|f| f["bytes"].as_u64().unwrap()).sum();
    assert_eq!(
        in_families + stats["disk_other_bytes"].as_u64().unwrap(),
        stats["disk_bytes"].as_u64().unwrap()
    );
    let text = bin()
        .args(["index", "stats", "--index-dir"])
        .arg(&index)
        .output()
        .unwrap();
    assert!(text.status.success());
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("disk by family:   block0 "), "{text}");
    assert!(text.contains(" articles "), "{text}");
    // The volume it is on: what a full-volume alert sends the operator to look at.
    let available = stats["volume_available_bytes"].as_u64().unwrap();
    let size = stats["volume_size_bytes"].as_u64().unwrap();
    assert!(0 < size && available <= size, "{available} of {size}");
    assert!(
        text.contains("volume:           ") && text.contains(&format!(" bytes free of {size} (")),
        "{text}"
    );
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

/// 6,000 articles with planted reposts written to `dir/in.jsonl` (without the corpus: the
/// sample's stories over and over, later rounds duplicates), and the output of one uninterrupted
/// `batch` over them (`dir/ref.jsonl`): what an interrupted run must end up writing. Also the
/// input lines.
fn stream_with_reference(dir: &Path) -> (PathBuf, PathBuf, Vec<String>) {
    let lines = corpus_stream(common::corpus_articles_cycled(
        "sina_2018_patrick233.jsonl",
        6000,
    ));
    let input = dir.join("in.jsonl");
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let reference = dir.join("ref.jsonl");
    run_batch(&input, &reference, &dir.join("ref-index"));
    (input, reference, lines)
}

#[test]
fn kill_mid_run_then_resume_gives_identical_decisions_and_a_consistent_index() {
    let dir = tempfile::tempdir().unwrap();
    let (input_path, reference, lines) = stream_with_reference(dir.path());

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

/// A full index volume, for real (a tmpfs of a few MiB): `batch` stops with the disk-full error,
/// which says what to do; once the volume is grown the same command resumes, and its output is
/// what an uninterrupted run writes, over an index that verifies clean. The same with the
/// output's volume full. Needs root to mount the
/// volume; elsewhere it says so and checks nothing.
#[test]
fn a_full_volume_stops_batch_and_the_same_command_resumes_after_it_grows() {
    let volume = match common::volume::SmallVolume::mount(3) {
        Ok(volume) => volume,
        Err(why) => {
            eprintln!("a_full_volume: not checked, no volume of its own ({why})");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let (input, reference, lines) = stream_with_reference(dir.path());

    let index = volume.path().join("index");
    let output = dir.path().join("out.jsonl");
    let full = try_batch(&input, &output, &index);
    assert_failed_with(&full, &["is full", "free space on that volume"]);
    let decided = std::fs::read_to_string(&output).unwrap().lines().count();
    assert!(
        decided < lines.len(),
        "the volume filled up after {decided} lines"
    );
    volume.resize(256);
    assert_resumes(&input, &output, &index, &reference);
    verify_index(&index);

    // The output's volume full instead: the error says which side failed, and a re-run writes
    // the whole output again from the index's decisions.
    let small = common::volume::SmallVolume::mount(1).expect("a second volume");
    let index = dir.path().join("index-2");
    let output = small.path().join("out.jsonl");
    let full = try_batch(&input, &output, &index);
    assert_failed_with(&full, &["cannot write the output: No space left on device"]);
    small.resize(256);
    assert_resumes(&input, &output, &index, &reference);
}

/// `newsdedup batch` over `input`, whatever its outcome.
fn try_batch(input: &Path, output: &Path, index: &Path) -> std::process::Output {
    common::batch_command(input, output, index)
        .output()
        .unwrap()
}

/// `out` failed with exit status 1, its error holding each of `told`.
fn assert_failed_with(out: &std::process::Output, told: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    for part in told {
        assert!(stderr.contains(part), "no {part:?} in: {stderr}");
    }
}

/// The same `batch` again succeeds and writes what the uninterrupted run wrote (`reference`).
fn assert_resumes(input: &Path, output: &Path, index: &Path, reference: &Path) {
    let again = try_batch(input, output, index);
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert_eq!(read_jsonl(output), read_jsonl(reference));
}

/// Writes `lines` as JSONL under `dir`.
fn write_jsonl(dir: &Path, name: &str, lines: &[Value]) -> std::path::PathBuf {
    let path = dir.join(name);
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, text).unwrap();
    path
}

/// One article dated 20 hours ahead (inside the one-day clamp) must not move the stream time past
/// the arrival time: with a 12-hour window, verbatim reposts of articles dated 1-3 hours ago are
/// still found.
#[test]
fn a_future_dated_article_does_not_empty_a_short_window() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    let now = newsdedup::dedup::now_ms() as i64;
    let hour = 3_600_000;
    let originals = common::corpus_articles_cycled("sina_2018_patrick233.jsonl", 300);
    let mut lines = Vec::new();
    for (i, a) in originals.iter().enumerate() {
        let mut a = a.clone();
        let at = now - hour - (i as i64 % 120) * 60_000;
        a.insert(
            "published_at".into(),
            json!(newsdedup::time::format_rfc3339(at)),
        );
        lines.push(Value::Object(a));
    }
    let mut ahead = originals[0].clone();
    ahead.insert("id".into(), json!("from-the-future"));
    ahead.insert(
        "content".into(),
        json!("明日天气预报：本市晴转多云，气温十二到二十摄氏度，东南风三到四级，空气质量良。"),
    );
    ahead.insert(
        "published_at".into(),
        json!(newsdedup::time::format_rfc3339(now + 20 * hour)),
    );
    lines.push(Value::Object(ahead));
    for a in originals.iter().take(100) {
        let mut repost = a.clone();
        let id = format!("repost-{}", common::str_field(a, "id"));
        repost.insert("id".into(), json!(id));
        repost.remove("published_at");
        lines.push(Value::Object(repost));
    }
    let input = write_jsonl(dir.path(), "in.jsonl", &lines);
    let out = dir.path().join("out.jsonl");
    let status = bin()
        .args(["batch", "--quiet", "--retention", "12h", "--input"])
        .arg(&input)
        .arg("--output")
        .arg(&out)
        .arg("--index-dir")
        .arg(&index)
        .status()
        .unwrap();
    assert!(status.success());
    let decided = read_jsonl(&out);
    let flagged = decided[301..]
        .iter()
        .filter(|r| r["dedup"]["decision"] == "duplicate")
        .count();
    assert_eq!(flagged, 100, "reposts flagged after a future-dated article");
    let stats = bin()
        .args(["index", "stats", "--json", "--index-dir"])
        .arg(&index)
        .output()
        .unwrap();
    let stats: Value = serde_json::from_slice(&stats.stdout).unwrap();
    let articles = stats["articles"].as_u64().unwrap();
    assert_eq!(articles, 401, "nothing expired: {stats}");
}

/// `[input] published_at_offset` reads a `published_at` without an offset in that offset; a
/// written offset wins.
#[test]
fn offset_less_times_are_read_in_the_configured_offset() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("beijing.toml");
    std::fs::write(&config, "[input]\npublished_at_offset = \"+08:00\"\n").unwrap();
    let story = "本市今日召开新闻发布会，介绍秋季交通安全专项整治行动的进展情况。据介绍，行动开展以来，全市共查处各类交通违法行为十二万余起，重点路段事故数量同比下降百分之十八。";
    let input = write_jsonl(
        dir.path(),
        "in.jsonl",
        &[
            json!({"id": "bare", "content": story, "published_at": "2024-03-01 16:00:00"}),
            json!({"id": "copy", "content": format!("{story}\n责任编辑：张三")}),
            json!({"id": "zoned", "content": "市气象台今晨发布寒潮蓝色预警，预计未来三天受强冷空气影响，全市将出现大风降温天气，最低气温将降至零下五摄氏度左右。", "published_at": "2024-03-01T16:00:00Z"}),
            json!({"id": "copy2", "content": "市气象台今晨发布寒潮蓝色预警，预计未来三天受强冷空气影响，全市将出现大风降温天气，最低气温将降至零下五摄氏度左右。来源：某某网"}),
        ],
    );
    let decide = |config: Option<&Path>, name: &str| {
        let out = dir.path().join(name);
        let mut cmd = bin();
        cmd.args(["batch", "--quiet", "--input"])
            .arg(&input)
            .arg("--output")
            .arg(&out)
            .arg("--index-dir")
            .arg(dir.path().join(name).with_extension("idx"));
        if let Some(c) = config {
            cmd.arg("--config").arg(c);
        }
        assert!(cmd.status().unwrap().success());
        read_jsonl(&out)
    };
    let beijing = decide(Some(&config), "beijing.jsonl");
    assert_eq!(
        beijing[1]["dedup"]["match"]["published_at"], "2024-03-01T08:00:00Z",
        "{}",
        beijing[1]
    );
    assert_eq!(
        beijing[3]["dedup"]["match"]["published_at"], "2024-03-01T16:00:00Z",
        "{}",
        beijing[3]
    );
    let utc = decide(None, "utc.jsonl");
    assert_eq!(
        utc[1]["dedup"]["match"]["published_at"],
        "2024-03-01T16:00:00Z"
    );
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[input]\npublished_at_offset = \"Asia/Shanghai\"\n").unwrap();
    let out = bin()
        .args(["batch", "--input"])
        .arg(&input)
        .arg("--output")
        .arg(dir.path().join("never.jsonl"))
        .arg("--index-dir")
        .arg(dir.path().join("never"))
        .arg("--config")
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a UTC offset"), "{stderr}");
}

/// Articles with planted revisions (50 of 200 ids again with other content): a second pass over
/// the same input into the same index gives identical output, line by line (the old version gets
/// the decision it got the first time and does not replace the newer one), and the index ends
/// holding the newest version of each id.
#[test]
fn two_passes_over_revisions_give_identical_output_and_keep_the_newest_version() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    let articles = common::corpus_articles_cycled("peoples_daily_2019_2020.jsonl", 260);
    let (originals, donors) = articles.split_at(200);
    let mut lines: Vec<Value> = originals.iter().cloned().map(Value::Object).collect();
    for (i, donor) in donors.iter().take(50).enumerate() {
        let original = &originals[i * 4];
        let mut revision = donor.clone();
        revision.insert("id".into(), original["id"].clone());
        // Published when the original was (a correction, not an older version).
        match original.get("published_at") {
            Some(at) => revision.insert("published_at".into(), at.clone()),
            None => revision.remove("published_at"),
        };
        let content = format!(
            "{}（更正：第{}版）",
            common::str_field(donor, "content"),
            i + 1
        );
        revision.insert("content".into(), json!(content));
        lines.push(Value::Object(revision));
    }
    let input = write_jsonl(dir.path(), "in.jsonl", &lines);
    let first_out = dir.path().join("first.jsonl");
    let second_out = dir.path().join("second.jsonl");
    run_batch(&input, &first_out, &index);
    run_batch(&input, &second_out, &index);
    let first = std::fs::read_to_string(&first_out).unwrap();
    let second = std::fs::read_to_string(&second_out).unwrap();
    let differing: Vec<usize> = first
        .lines()
        .zip(second.lines())
        .enumerate()
        .filter(|(_, (a, b))| a != b)
        .map(|(i, _)| i + 1)
        .collect();
    assert!(
        differing.is_empty(),
        "lines decided differently: {differing:?}"
    );
    let decided = read_jsonl(&first_out);
    assert!(decided[200..]
        .iter()
        .all(|r| r["dedup"]["revision"] == 1 && r["dedup"].get("superseded").is_none()));
    // The newest version is the one stored: a copy of an old version under a new id never
    // matches the revised id; a copy of the new version is a duplicate.
    let mut probes = Vec::new();
    for (i, original) in originals.iter().step_by(4).take(50).enumerate() {
        let mut old = original.clone();
        old.insert("id".into(), json!(format!("old-copy-{i}")));
        probes.push(Value::Object(old));
        let mut new = lines[200 + i].as_object().unwrap().clone();
        new.insert("id".into(), json!(format!("new-copy-{i}")));
        probes.push(Value::Object(new));
    }
    let probes_in = write_jsonl(dir.path(), "probes.jsonl", &probes);
    let probes_out = dir.path().join("probes.out");
    run_batch(&probes_in, &probes_out, &index);
    let probed = read_jsonl(&probes_out);
    for (i, pair) in probed.chunks(2).enumerate() {
        let revised_id = &originals[i * 4]["id"];
        assert_ne!(
            &pair[0]["dedup"]["match"]["id"], revised_id,
            "a copy of the replaced version matched {revised_id}"
        );
        assert_eq!(pair[1]["dedup"]["decision"], "duplicate", "{}", pair[1]);
    }
    verify_index(&index);
}

/// A version published before the stored one but delivered after it (out of order) is decided and
/// marked `superseded`; the stored (newer) version stays the one that matches, and the older
/// version delivered again gets the same output.
#[test]
fn an_older_version_delivered_after_a_newer_one_does_not_replace_it() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    let old_text = "本市今日召开新闻发布会，介绍秋季交通安全专项整治行动的进展情况。据介绍，行动开展以来，全市共查处各类交通违法行为十二万余起，重点路段事故数量同比下降百分之十八。下一步，交管部门将继续加强夜间巡查。";
    let new_text = "市气象台今晨发布寒潮蓝色预警，预计未来三天受强冷空气影响，全市将出现大风降温天气，最低气温将降至零下五摄氏度左右。气象部门提醒市民注意防寒保暖，户外作业人员注意安全。";
    let newer = json!({"id": "a", "content": new_text, "published_at": "2024-03-02T08:00:00Z"});
    let older = json!({"id": "a", "content": old_text, "published_at": "2024-03-01T08:00:00Z"});
    let input = write_jsonl(dir.path(), "in.jsonl", &[newer, older.clone(), older]);
    let out = dir.path().join("out.jsonl");
    run_batch(&input, &out, &index);
    let decided = read_jsonl(&out);
    assert_eq!(decided[1]["dedup"]["superseded"], true, "{}", decided[1]);
    assert!(decided[1]["dedup"].get("revision").is_none());
    assert_eq!(decided[2]["dedup"], decided[1]["dedup"]);
    let probes = write_jsonl(
        dir.path(),
        "probes.jsonl",
        &[
            json!({"id": "new-copy", "content": format!("{new_text}\n来源：某某网")}),
            json!({"id": "old-copy", "content": format!("{old_text}\n来源：某某网")}),
        ],
    );
    let probes_out = dir.path().join("probes.out");
    run_batch(&probes, &probes_out, &index);
    let probed = read_jsonl(&probes_out);
    assert_eq!(probed[0]["dedup"]["match"]["id"], "a", "{}", probed[0]);
    assert_eq!(probed[1]["dedup"]["decision"], "unique", "{}", probed[1]);
    verify_index(&index);
}

/// Validates every JSON line of `lines` against `schema` (a file under schemas/) with a JSON
/// Schema validator (Python's jsonschema, installed by scripts/setup.sh); the lines that fail, with
/// why.
pub fn schema_violations(schema: &str, lines: &[String]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("lines.jsonl");
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let schema = common::repo_file("schemas").join(schema);
    let script = r#"
import json, sys
import jsonschema
schema = json.load(open(sys.argv[1]))
validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
for n, line in enumerate(open(sys.argv[2], encoding="utf-8"), 1):
    for e in validator.iter_errors(json.loads(line)):
        print(f"line {n}: {'/'.join(map(str, e.absolute_path))}: {e.message}")
"#;
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(&schema)
        .arg(&input)
        .output()
        .expect("python3 (scripts/setup.sh)");
    assert!(
        out.status.success(),
        "the validator failed (is jsonschema installed? scripts/setup.sh): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Real inputs and outputs against the JSON Schemas in schemas/: every kind of output record
/// (unique, duplicate by each rule the input provokes, with its relation, revision, superseded,
/// clamped, invalid of every reason) validates; a record with a member the schema does not know
/// is caught.
#[test]
fn inputs_and_outputs_validate_against_the_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let story = "本市今日召开新闻发布会，介绍秋季交通安全专项整治行动的进展情况。据介绍，行动开展以来，全市共查处各类交通违法行为十二万余起，重点路段事故数量同比下降百分之十八。下一步，交管部门将继续加强夜间巡查，严查酒驾醉驾和超速行驶，并在学校周边增设护学岗。";
    let weather = "市气象台今晨发布寒潮蓝色预警，预计未来三天受强冷空气影响，全市将出现大风降温天气，最低气温将降至零下五摄氏度左右。气象部门提醒市民注意防寒保暖，农业生产单位做好设施农业的防冻措施，户外作业人员注意安全。";
    let mut lines: Vec<String> = common::sample_articles()
        .into_iter()
        .map(|a| Value::Object(a).to_string())
        .collect();
    for v in [
        json!({"id": "orig", "title": "交通整治", "content": story, "published_at": "2024-03-02 08:00:00", "url": "https://a.example/1"}),
        json!({"id": "copy", "title": "交通整治", "content": format!("{story}\n责任编辑：张三")}),
        json!({"id": "excerpt", "content": &story[..story.len() / 2 / 3 * 3]}),
        json!({"id": "update", "title": "交通整治", "content": format!("{story}另据了解，下月起全市还将开展电动自行车专项整治。")}),
        json!({"id": "orig", "title": "寒潮预警", "content": weather, "published_at": "2024-03-03 08:00:00"}),
        json!({"id": "orig", "title": "旧版", "content": "区政府召开常务会议，研究部署冬季供暖保障工作，要求各部门确保居民室温达标。", "published_at": "2024-03-01 08:00:00"}),
        json!({"id": "future", "content": "明日天气预报：本市晴转多云，气温十二到二十摄氏度。", "published_at": "2099-01-01T00:00:00Z"}),
        json!({"id": "alert", "content": "【大风蓝色预警信号】"}),
    ] {
        lines.push(v.to_string());
    }
    for (bytes, _) in common::malformed_records() {
        lines.push(String::from_utf8_lossy(&bytes).replace('\n', " "));
    }
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let out = dir.path().join("out.jsonl");
    run_batch(&input, &out, &dir.path().join("index"));
    let outputs: Vec<String> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let decided: Vec<Value> = outputs
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let has = |f: &dyn Fn(&Value) -> bool| decided.iter().any(|r| f(&r["dedup"]));
    assert!(has(&|d| d["decision"] == "unique"));
    assert!(has(&|d| d["decision"] == "invalid"));
    assert!(has(&|d| d["match"]["relation"].is_string()));
    assert!(has(&|d| d["revision"].is_number()));
    assert!(has(&|d| d["superseded"] == true));
    assert!(has(&|d| d["event_time_clamped"] == true));
    let violations = schema_violations("output.schema.json", &outputs);
    assert!(violations.is_empty(), "{violations:#?}");
    let valid_inputs: Vec<String> = lines
        .iter()
        .zip(&decided)
        .filter(|(_, d)| d["dedup"]["decision"] != "invalid")
        .map(|(l, _)| l.clone())
        .collect();
    let violations = schema_violations("article.schema.json", &valid_inputs);
    assert!(violations.is_empty(), "{violations:#?}");
    // The check itself: a member the schema does not allow is caught.
    let mut planted = decided[0].clone();
    planted["dedup"]["confidence"] = json!(0.5);
    assert_eq!(
        schema_violations("output.schema.json", &[planted.to_string()]).len(),
        1
    );
}

/// An error names its cause once: printed with its chain of causes, a message that already holds
/// its cause must not also chain it (it did: `...: No such file or directory (os error 2): No such
/// file or directory (os error 2)`).
#[test]
fn an_error_tells_its_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing_config = bin()
        .args(["batch", "--config", "/nonexistent/newsdedup.toml"])
        .args(["--input", "-", "--output", "-", "--index-dir"])
        .arg(dir.path().join("index"))
        .output()
        .unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy_port = bin()
        .args(["run", "--metrics-addr"])
        .arg(taken.local_addr().unwrap().to_string())
        .arg("--index-dir")
        .arg(dir.path().join("index"))
        .output()
        .unwrap();
    for (out, cause) in [
        (missing_config, "No such file or directory"),
        (busy_port, "Address already in use"),
    ] {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        assert_eq!(stderr.matches(cause).count(), 1, "{stderr}");
    }
}

/// Damaged data, for real: bytes of the index's write-ahead log overwritten after a run (what a
/// failing disk does). RocksDB recovers up to the damage and drops the rest, but the band file
/// written at the close still names the dropped articles: the next run must stop and say that
/// the index is corrupt and how to rebuild it, not promise that running again helps.
#[test]
fn a_damaged_index_says_it_must_be_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let lines = corpus_stream(common::corpus_articles_cycled(
        "sina_2018_patrick233.jsonl",
        3000,
    ));
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let index = dir.path().join("index");
    run_batch(&input, &dir.path().join("out.jsonl"), &index);

    let wal = std::fs::read_dir(&index)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "log"))
        .expect("a write-ahead log");
    let mut bytes = std::fs::read(&wal).unwrap();
    assert!(bytes.len() > 64 * 1024, "{} bytes of WAL", bytes.len());
    bytes[16 * 1024..16 * 1024 + 64].fill(0xff);
    std::fs::write(&wal, bytes).unwrap();

    let again = try_batch(&input, &dir.path().join("again.jsonl"), &index);
    assert_failed_with(&again, &["is corrupt", "newsdedup index rebuild"]);
}
