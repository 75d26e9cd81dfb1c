//! `newsdedup fingerprint`: each line of a JSONL stream fingerprinted on the worker pool and
//! printed in input order as one JSON line (id and fingerprint, with --explain the heaviest
//! features too; an unreadable line gives its error and line number instead).

use super::{fingerprinter, open_input, open_output, resolve};
use crate::cli::fingerprint::FingerprintArgs;
use anyhow::Result;
use newsdedup::article::{Article, DEFAULT_MAX_ARTICLE_BYTES};
use newsdedup::batch::{self, JsonLine};
use newsdedup::compare::feature_json;
use newsdedup::components::Overrides;
use newsdedup::fingerprint::Fingerprinter;
use newsdedup::lines::Line;
use newsdedup::runner;
use serde_json::{json, Value};
use std::io::{self, Write};
use std::path::Path;

pub fn execute(args: FingerprintArgs) -> Result<()> {
    let FingerprintArgs {
        input,
        explain,
        top,
        common,
    } = args;
    let (_, components) = resolve(&common, Overrides::default())?;
    let fp = fingerprinter(&components)?;
    let mut out = open_output(Path::new("-"))?;
    let input = open_input(input.as_deref())?;
    runner::run_to_end(
        batch::json_lines(input, DEFAULT_MAX_ARTICLE_BYTES),
        &|line: &mut JsonLine| fingerprint_line(&fp, line.line.take(), explain, top),
        &mut runner::Map(|line: JsonLine, mut value: Value| {
            if let Some(obj) = value.as_object_mut() {
                if obj.contains_key("error") {
                    obj.insert("line".into(), json!(line.number));
                }
            }
            value
        }),
        |value: Value| -> io::Result<()> {
            serde_json::to_writer(&mut out, &value)?;
            out.write_all(b"\n")
        },
        &runner::Options::file(components.threads),
    )?;
    out.flush()?;
    Ok(())
}

/// The JSON line of one input line.
fn fingerprint_line(fp: &Fingerprinter, line: Option<Line>, explain: bool, top: usize) -> Value {
    let bytes = match line {
        Some(Line::Bytes(b)) => b,
        Some(Line::TooLong(n)) => return json!({"error": format!("oversized: line is {n} bytes")}),
        None => return json!({"error": "the line was already fingerprinted"}),
    };
    let article = match Article::parse(&bytes, DEFAULT_MAX_ARTICLE_BYTES) {
        Ok(a) => a,
        Err(e) => return json!({"id": e.id, "error": e.to_string()}),
    };
    let result = if explain {
        fp.analyze(article.title(), article.content())
            .map(|(f, feats)| (f, Some(feats)))
    } else {
        fp.fingerprint(article.title(), article.content())
            .map(|f| (f, None))
    };
    match result {
        Err(e) => json!({"id": article.id(), "error": format!("no_features: {e}")}),
        Ok((f, feats)) => {
            let mut v = json!({"id": article.id(), "fingerprint": f.fingerprint.to_hex()});
            if let (Some(feats), Some(obj)) = (feats, v.as_object_mut()) {
                obj.insert("feature_count".into(), json!(f.features));
                obj.insert(
                    "features".into(),
                    Value::Array(feats.iter().take(top).map(feature_json).collect()),
                );
            }
            v
        }
    }
}
