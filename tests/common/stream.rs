//! A stream of inputs for the `run` tests and the check of its outputs: corpus articles with
//! planted reposts and malformed records of every kind, and "every output agrees with its input,
//! all outputs of an id carry the same decision".

use super::kafka::{Input, Output};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

// ---------------------------------------------------------------------------------------------
// Input

pub fn valid(a: &serde_json::Map<String, Value>) -> Input {
    let id = super::str_field(a, "id").to_owned();
    Input {
        key: Some(id.clone()),
        value: serde_json::to_vec(&Value::Object(a.clone())).expect("json"),
        bad: None,
        id: Some(id),
    }
}

/// Corpus articles (a slice of the sina file) with a planted repost after every 10th long one.
/// Returns the inputs and the (original id, repost id) pairs.
pub fn corpus_inputs(skip: usize, n: usize, tag: &str) -> (Vec<Input>, Vec<(String, String)>) {
    let mut out = Vec::new();
    let mut pairs = Vec::new();
    let articles = super::corpus_articles_cycled("sina_2018_patrick233.jsonl", skip + n);
    for (i, a) in articles.into_iter().skip(skip).enumerate() {
        let content = super::str_field(&a, "content").to_owned();
        let title = super::str_field(&a, "title").to_owned();
        let id = super::str_field(&a, "id").to_owned();
        out.push(valid(&a));
        if i % 10 == 0 && content.chars().count() > 300 {
            let repost_id = format!("repost-{tag}-{id}");
            let repost = json!({
                "id": repost_id,
                "title": title,
                "content": format!("<p>{content}</p>\n责任编辑：李四"),
                "url": format!("https://mirror.example/{tag}/{i}"),
            });
            out.push(valid(repost.as_object().expect("object")));
            pairs.push((id, repost_id));
        }
    }
    (out, pairs)
}

/// One malformed record of each kind (an oversized one needs --max-article-bytes 200000).
pub fn malformed(tag: &str) -> Vec<Input> {
    let big = format!(
        "{{\"id\":\"big-{tag}\",\"content\":\"{}\"}}",
        "长".repeat(100_000)
    );
    let mut cases = super::malformed_records();
    cases.push((big.into_bytes(), "oversized"));
    cases
        .into_iter()
        .enumerate()
        .map(|(i, (value, reason))| Input {
            key: (i % 2 == 0).then(|| format!("bad-{tag}-{i}")),
            value,
            bad: Some(reason),
            id: None,
        })
        .collect()
}

/// Interleaves `extra` into `base` at regular positions (deterministic).
pub fn interleave(base: Vec<Input>, extra: Vec<Input>) -> Vec<Input> {
    let every = (base.len() / (extra.len() + 1)).max(1);
    let mut extra = extra.into_iter();
    let mut out = Vec::new();
    for (i, x) in base.into_iter().enumerate() {
        out.push(x);
        if i % every == every - 1 {
            if let Some(e) = extra.next() {
                out.push(e);
            }
        }
    }
    out.extend(extra);
    out
}

pub fn write_jsonl(path: &Path, inputs: &[Input]) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).expect("jsonl"));
    for i in inputs {
        f.write_all(&i.value).expect("write");
        f.write_all(b"\n").expect("write");
    }
    f.flush().expect("flush");
}

/// Checks every output against its input: valid -> unique/duplicate topic with the article plus
/// `dedup`, key = id; malformed -> DLQ with original key and bytes and the expected reason.
/// Returns the decision per id, checking that all outputs of an id agree.
pub fn check_outputs(
    inputs_by_coord: &HashMap<(i32, i64), Input>,
    outputs: &[Output],
) -> HashMap<String, Value> {
    let mut by_id: HashMap<String, (String, Value)> = HashMap::new();
    for o in outputs {
        let coord = o.source();
        let input = inputs_by_coord
            .get(&coord)
            .unwrap_or_else(|| panic!("output for unknown input {coord:?}"));
        assert_eq!(o.headers["newsdedup.source.topic"], "articles.raw");
        assert!(o.headers.contains_key("newsdedup.source.timestamp"));
        assert!(
            o.headers.contains_key("test.seq"),
            "input headers pass through"
        );
        match input.bad {
            Some(reason) => {
                assert_eq!(o.topic, "articles.dlq", "malformed {reason} not in the DLQ");
                assert_eq!(o.headers["newsdedup.error.reason"], reason);
                assert!(!o.headers["newsdedup.error.message"].is_empty());
                assert_eq!(o.headers["newsdedup.decision"], "invalid");
                assert_eq!(o.value, input.value, "DLQ keeps the original bytes");
                assert_eq!(o.key, input.key, "DLQ keeps the original key");
            }
            None => {
                let id = input.id.clone().expect("id");
                assert!(
                    o.topic == "articles.unique" || o.topic == "articles.duplicate",
                    "{}",
                    o.topic
                );
                assert_eq!(o.key.as_deref(), Some(id.as_str()));
                let v = o.json();
                let decision = v["dedup"]["decision"]
                    .as_str()
                    .expect("decision")
                    .to_owned();
                assert_eq!(o.topic, format!("articles.{decision}"));
                assert_eq!(o.headers["newsdedup.decision"], decision);
                // The input object is echoed.
                let original: Value = serde_json::from_slice(&input.value).expect("input json");
                for (k, val) in original.as_object().expect("object") {
                    assert_eq!(&v[k], val, "field {k} of {id}");
                }
                if decision == "duplicate" {
                    let m = &v["dedup"]["match"];
                    assert!(
                        m["id"].is_string()
                            && m["fingerprint"].is_string()
                            && m["distance"].is_u64(),
                        "{m}"
                    );
                }
                match by_id.get(&id) {
                    None => {
                        by_id.insert(id, (o.topic.clone(), v));
                    }
                    Some((topic, first)) => {
                        assert_eq!(topic, &o.topic, "id {id} decided into two topics");
                        assert_eq!(first, &v, "id {id} got two different decisions");
                    }
                }
            }
        }
    }
    by_id.into_iter().map(|(k, (_, v))| (k, v)).collect()
}
