//! The yardstick of `scripts/bench_batch.sh`: a raw jieba-rs cut as a whole process on one
//! thread. It reads a JSONL stream of articles, loads the unmodified crates.io jieba-rs with
//! newsdedup's dictionary (`config/jieba_dict.txt`) and cuts every article's title and content
//! (HMM on), the work no deduplicator can skip; `newsdedup batch` over the same file is timed
//! against it, start-up included on both sides.
//!
//! ```sh
//! cargo run --release --example raw_cut -- articles.jsonl
//! ```
//!
//! Prints the number of articles and tokens (so the cut cannot be optimised away) on stderr.

use std::error::Error;
use std::io::BufRead;

#[path = "../tests/common/repo.rs"]
mod repo;
use repo::repo_file;

fn main() -> Result<(), Box<dyn Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: raw_cut ARTICLES.jsonl")?;
    let dict_path = repo_file("config/jieba_dict.txt");
    let dict =
        std::fs::read_to_string(&dict_path).map_err(|e| format!("{}: {e}", dict_path.display()))?;
    let jieba = jieba_rs_upstream::Jieba::with_dict(&mut dict.as_bytes())?;
    let input =
        std::io::BufReader::new(std::fs::File::open(&path).map_err(|e| format!("{path}: {e}"))?);
    let (mut articles, mut tokens) = (0usize, 0usize);
    for line in input.lines() {
        let line = line?;
        // Lines that are not articles are skipped, as `batch` sends them to its DLQ.
        let Ok(article) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        let field = |k: &str| article.get(k).and_then(|v| v.as_str()).unwrap_or("");
        tokens += jieba.cut(field("title"), true).len() + jieba.cut(field("content"), true).len();
        articles += 1;
    }
    eprintln!("raw_cut: {articles} articles, {tokens} tokens");
    Ok(())
}
