//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod kafka;
pub mod proxy;
mod repo;
pub mod stream;
pub mod volume;

pub use repo::repo_file;

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

/// The shared corpus (read at run time, never copied into the repository).
pub fn corpus_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("NEWSDEDUP_CORPUS_DIR") {
        return PathBuf::from(dir);
    }
    repo_file("../shared/data/corpus")
}

/// The corpus files, in the order the tests read them.
pub const CORPUS_FILES: [&str; 4] = [
    "peoples_daily_2019_2020.jsonl",
    "sina_2018_patrick233.jsonl",
    "bdci2019_inews.jsonl",
    "sogou_smarty_2008_2012.jsonl",
];

/// The in-repo sample (original text, see examples/README.md): what the tests read instead of the
/// corpus when it is not there.
pub const SAMPLE: &str = "examples/sample_articles.jsonl";

/// Whether every corpus file is present. If not, the corpus helpers below fall back to the sample
/// (saying so once on stderr), and tests that measure on the corpus check what the sample allows;
/// each such test says what in a comment.
pub fn corpus_available() -> bool {
    let dir = corpus_dir();
    let present = CORPUS_FILES.iter().all(|f| dir.join(f).is_file());
    if !present {
        static NOTICE: std::sync::Once = std::sync::Once::new();
        // Straight to stderr: the test harness captures `eprintln!` of passing tests.
        NOTICE.call_once(|| {
            let _ = writeln!(
                std::io::stderr(),
                "corpus not found at {}: using the in-repo sample {SAMPLE}",
                dir.display()
            );
        });
    }
    present
}

/// The sample's valid articles (every line that is a JSON object with a string `id` and a string
/// `content` with a letter or digit in it), in file order; the malformed lines are left out.
pub fn sample_articles() -> Vec<serde_json::Map<String, Value>> {
    let path = repo_file(SAMPLE);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{} is part of the repository: {e}", path.display()));
    text.lines()
        .filter_map(|l| match serde_json::from_str(l) {
            Ok(Value::Object(m)) => Some(m),
            _ => None,
        })
        .filter(|m| {
            m.get("id")
                .and_then(Value::as_str)
                .is_some_and(|id| !id.is_empty())
                && m.get("content")
                    .and_then(Value::as_str)
                    .is_some_and(|c| c.chars().any(char::is_alphanumeric))
        })
        .collect()
}

/// A planted repost of the sample (`sNN-rK` reposts `sNN`; examples/README.md).
pub fn sample_repost_of(id: &str) -> Option<&str> {
    id.split_once("-r").map(|(original, _)| original)
}

/// The sample's stories: its valid articles minus the planted reposts, so that, like the corpus's
/// articles, each one is its own story (the decisions on the sample are checked by
/// tests/core/quality_regression.rs).
pub fn sample_stories() -> Vec<serde_json::Map<String, Value>> {
    sample_articles()
        .into_iter()
        .filter(|m| sample_repost_of(str_field(m, "id")).is_none())
        .collect()
}

/// `(title, content)` of the first `per_file` articles of every corpus file ("" for a missing
/// title). Without the corpus: every valid article of the sample, reposts included (Traditional
/// characters, markup, half-width punctuation).
pub fn corpus_texts(per_file: usize) -> Vec<(String, String)> {
    let articles: Vec<_> = if corpus_available() {
        CORPUS_FILES
            .iter()
            .flat_map(|file| corpus_articles(file, per_file))
            .collect()
    } else {
        sample_articles()
    };
    articles
        .iter()
        .map(|a| {
            (
                str_field(a, "title").to_owned(),
                str_field(a, "content").to_owned(),
            )
        })
        .collect()
}

/// The first `n` articles of a corpus file, as JSON objects. Without the corpus: the first `n` of
/// the sample's stories (fewer if `n` is larger than the sample).
pub fn corpus_articles(file: &str, n: usize) -> Vec<serde_json::Map<String, Value>> {
    if !corpus_available() {
        return sample_stories().into_iter().take(n).collect();
    }
    let path = corpus_dir().join(file);
    let f = std::fs::File::open(&path).unwrap_or_else(|e| {
        panic!(
            "corpus file {} is needed by this test ({e}); set NEWSDEDUP_CORPUS_DIR",
            path.display()
        )
    });
    BufReader::new(f)
        .lines()
        .take(n)
        .map(|l| match serde_json::from_str(&l.expect("corpus line")) {
            Ok(Value::Object(m)) => m,
            _ => panic!("corpus line is not a JSON object"),
        })
        .collect()
}

/// Exactly `n` articles for tests that need volume: the corpus file's first `n`, or without the
/// corpus the sample's stories over and over, each round's copies with new ids (`s01~2`, ...).
/// The copies are exact reposts of the first round: such a stream is mostly duplicates.
pub fn corpus_articles_cycled(file: &str, n: usize) -> Vec<serde_json::Map<String, Value>> {
    if corpus_available() {
        let articles = corpus_articles(file, n);
        assert_eq!(articles.len(), n, "{file} has fewer than {n} articles");
        return articles;
    }
    let stories = sample_stories();
    assert!(!stories.is_empty(), "{SAMPLE} has no valid article");
    (0..n)
        .map(|i| {
            let mut a = stories[i % stories.len()].clone();
            let round = i / stories.len();
            if round > 0 {
                let id = format!("{}~{}", str_field(&a, "id"), round + 1);
                a.insert("id".into(), Value::String(id));
            }
            a
        })
        .collect()
}

pub fn str_field<'a>(m: &'a serde_json::Map<String, Value>, k: &str) -> &'a str {
    m.get(k).and_then(Value::as_str).unwrap_or("")
}

/// One record of every malformed kind the pipeline must reject, with the reason code it must
/// report (`oversized` is left to the caller: it depends on the configured limit).
pub fn malformed_records() -> Vec<(Vec<u8>, &'static str)> {
    vec![
        (b"this is not json".to_vec(), "bad_json"),
        (
            b"{\"id\":\"u1\",\"content\":\"\xff\xfe\"}".to_vec(),
            "bad_utf8",
        ),
        (b"[1,2,3]".to_vec(), "not_object"),
        (b"{\"content\":\"no id\"}".to_vec(), "missing_field"),
        (b"{\"id\":\"x2\"}".to_vec(), "missing_field"),
        (b"{\"id\":42,\"content\":\"x\"}".to_vec(), "wrong_type"),
        (
            b"{\"id\":\"x3\",\"content\":\"x\",\"url\":5}".to_vec(),
            "wrong_type",
        ),
        (b"{\"id\":\"\",\"content\":\"x\"}".to_vec(), "bad_id"),
        (
            b"{\"id\":\"x4\",\"content\":\"   \",\"title\":\"\"}".to_vec(),
            "empty_text",
        ),
        (
            "{\"id\":\"x5\",\"content\":\"，。！？😀\"}"
                .as_bytes()
                .to_vec(),
            "no_features",
        ),
    ]
}

/// `newsdedup batch --input INPUT --output OUTPUT --index-dir INDEX`, to add options to and run.
pub fn batch_command(input: &Path, output: &Path, index: &Path) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_newsdedup"));
    command
        .arg("batch")
        .arg("--input")
        .arg(input)
        .arg("--output")
        .arg(output)
        .arg("--index-dir")
        .arg(index);
    command
}

/// `newsdedup batch` over `input` into `index`; the output records.
pub fn run_batch(input: &Path, output: &Path, index: &Path) -> Vec<Value> {
    let out = batch_command(input, output, index)
        .args(["--quiet", "--max-article-bytes", "200000"])
        .output()
        .expect("batch");
    assert!(
        out.status.success(),
        "batch failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(output)
        .expect("batch output")
        .lines()
        .map(|l| serde_json::from_str(l).expect("batch line"))
        .collect()
}

/// A report of `n` sentences on `topic`, numbered from `from`: texts whose overlap a test sets
/// exactly (the same numbers give the same sentences).
pub fn numbered_report(topic: &str, from: usize, n: usize) -> String {
    (from..from + n)
        .map(|i| {
            format!(
                "{topic}第{i}项工作中，相关部门组织专家开展第{i}轮现场核查，对发现的{}个问题逐一整改并公开结果。",
                i * 7 % 13 + 2
            )
        })
        .collect()
}

/// The articles the correction tests start from, as (id, content, published_at), in decision
/// order: B; A, B with its last fifth rewritten (the engine links it to B, an editor releases
/// it); C, unrelated and published first; O; M, O plus three times as much new text of its story
/// (O is too small a part of M for the extension rule's topic check: the engine misses it, an
/// editor merges it into O).
pub fn correction_articles() -> Vec<(&'static str, String, &'static str)> {
    vec![
        (
            "b",
            numbered_report("河东区", 1, 20),
            "2025-10-01T08:00:00Z",
        ),
        (
            "a",
            numbered_report("河东区", 1, 16) + &numbered_report("河西区", 40, 4),
            "2025-10-01T09:00:00Z",
        ),
        (
            "c",
            numbered_report("南山县", 100, 20),
            "2025-10-01T07:00:00Z",
        ),
        ("o", numbered_report("北湖镇", 1, 8), "2025-10-01T08:00:00Z"),
        (
            "m",
            numbered_report("北湖镇", 1, 8) + &numbered_report("北湖镇", 200, 60),
            "2025-10-01T10:00:00Z",
        ),
    ]
}

/// Writes a correction key file readable by its owner only (the service refuses one that other
/// users can read).
pub fn write_key(path: &Path, secret: &[u8]) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, secret).expect("key file");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("key mode");
}
