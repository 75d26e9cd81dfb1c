//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod kafka;

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;

/// The shared corpus (read at run time, never copied into the repository).
pub fn corpus_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("NEWSDEDUP_CORPUS_DIR") {
        return PathBuf::from(dir);
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data/corpus")
}

/// The corpus files, in the order the tests read them.
pub const CORPUS_FILES: [&str; 4] = [
    "peoples_daily_2019_2020.jsonl",
    "sina_2018_patrick233.jsonl",
    "bdci2019_inews.jsonl",
    "sogou_smarty_2008_2012.jsonl",
];

/// `(title, content)` of the first `per_file` articles of every corpus file ("" for a missing
/// title).
pub fn corpus_texts(per_file: usize) -> Vec<(String, String)> {
    CORPUS_FILES
        .iter()
        .flat_map(|file| corpus_articles(file, per_file))
        .map(|a| {
            (
                str_field(&a, "title").to_owned(),
                str_field(&a, "content").to_owned(),
            )
        })
        .collect()
}

/// The first `n` articles of a corpus file, as JSON objects.
pub fn corpus_articles(file: &str, n: usize) -> Vec<serde_json::Map<String, Value>> {
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
