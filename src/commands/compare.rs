//! `newsdedup compare`: two articles read from files (article JSON, or plain text as content),
//! judged by the decision rule as `batch` would judge the later against the earlier, and the
//! report printed as JSON: distance, similarity, verdict, and the features behind them.

use super::{fingerprinter, resolve};
use crate::cli::compare::CompareArgs;
use anyhow::{Context, Result};
use newsdedup::article::Article;
use newsdedup::compare::{compare, CompareInput};
use newsdedup::components::Overrides;
use newsdedup::index::{ArticleStore, Crowded};
use std::path::Path;

pub fn execute(args: CompareArgs) -> Result<()> {
    let CompareArgs {
        a,
        b,
        threshold,
        top,
        explain,
        index_dir,
        common,
    } = args;
    let overrides = Overrides {
        threshold,
        ..Overrides::default()
    };
    let (_, components) = resolve(&common, overrides)?;
    let fp = fingerprinter(&components)?;
    let index = index_dir
        .as_deref()
        .map(|dir| components.open_index(dir, &fp))
        .transpose()?;
    // The lookup's own answer: which of A's band buckets are crowded in that index, and which
    // of its segments are template.
    let lookup_error = std::cell::RefCell::new(None);
    let crowded = |sketch: &newsdedup::sketch::Sketch| -> Crowded {
        let Some(index) = &index else {
            return Crowded::default();
        };
        match index.sketch_lookup(sketch, &mut Vec::new()) {
            Ok(crowded) => crowded,
            Err(e) => {
                *lookup_error.borrow_mut() = Some(e);
                Crowded::default()
            }
        }
    };
    let report = compare(
        &fp,
        &read_compare_input(&a)?,
        &read_compare_input(&b)?,
        &components.rule,
        top,
        explain,
        &crowded,
    )?;
    if let Some(e) = lookup_error.into_inner() {
        return Err(e.into());
    }
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

/// Reads an article for `compare`: a JSON article object, or else the file's text as content.
fn read_compare_input(path: &Path) -> Result<CompareInput> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    if let Ok(a) = Article::parse(&bytes, usize::MAX) {
        return Ok(CompareInput {
            id: a.id().to_owned(),
            title: a.title().to_owned(),
            content: a.content().to_owned(),
        });
    }
    let text = String::from_utf8(bytes).with_context(|| {
        format!(
            "{} is neither an article JSON object nor UTF-8 text",
            path.display()
        )
    })?;
    Ok(CompareInput {
        id: path.display().to_string(),
        title: String::new(),
        content: text,
    })
}
