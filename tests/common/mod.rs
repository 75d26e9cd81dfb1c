//! Helpers shared by the integration tests.
#![allow(dead_code)]

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
