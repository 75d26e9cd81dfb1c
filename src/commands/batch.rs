//! `newsdedup batch`: a JSONL stream decided against a persistent index in input order, by the
//! same pipeline as the service, then the `--corrections` lines applied; one output line per
//! input line, and a summary on stderr.

use super::{fingerprinter_and_index, open_input, open_output, resolve};
use crate::cli::batch::BatchArgs;
use anyhow::{Context, Result};
use newsdedup::batch::{self, BatchOptions};
use newsdedup::components::Overrides;
use newsdedup::correction::Acceptance;
use newsdedup::signing::SigningKeys;
use std::fs::File;
use std::io::BufReader;
use std::time::{Duration, Instant};

/// `started`: when the process started, for the summary's timings.
pub fn execute(args: BatchArgs, started: Instant) -> Result<()> {
    let BatchArgs {
        input,
        output,
        index_dir,
        threshold,
        threads,
        max_article_bytes,
        quiet,
        retention,
        corrections,
        common,
    } = args;
    let overrides = Overrides {
        threshold,
        retention,
        threads,
    };
    let (config, components) = resolve(&common, overrides)?;
    let opts = BatchOptions {
        threads: components.threads,
        max_article_bytes,
        published_at_offset: components.published_at_offset,
        progress_every: (!quiet).then_some(Duration::from_secs(5)),
        process_start: started,
        correction_acceptance: Acceptance {
            keys: SigningKeys::load(&components.corrections)
                .context("invalid [corrections] keys")?,
            // The audience `correct` names by default: the service of this configuration.
            audience: config.service.group_id.clone(),
        },
    };
    let corrections = match &corrections {
        Some(path) => {
            Some(BufReader::new(File::open(path).with_context(|| {
                format!("cannot open corrections {}", path.display())
            })?))
        }
        None => None,
    };
    let (fp, index) = fingerprinter_and_index(&components, &index_dir)?;
    let deduper = components.deduper(index);
    let mut out = open_output(&output)?;
    let (summary, _deduper) = batch::run_batch(open_input(Some(&input))?, corrections, &mut out, &fp, deduper, &opts)
        .with_context(|| format!("batch over {} failed; the index in {} keeps every decision written before the failure, so once the cause below is fixed the same command resumes with identical decisions", input.display(), index_dir.display()))?;
    eprintln!("batch: done: {}", summary.to_json());
    Ok(())
}
