//! The flags of `newsdedup batch`: input, output and index, the settings of `[dedup]` and
//! `[index]` a run may override, and the corrections applied after the input.

use super::CommonOpts;
use clap::Args;
use newsdedup::article::DEFAULT_MAX_ARTICLE_BYTES;
use newsdedup::time::TimeSpan;
use std::path::PathBuf;

#[derive(Args)]
pub struct BatchArgs {
    /// JSONL articles, or `-` for standard input.
    #[arg(long)]
    pub input: PathBuf,
    /// Output JSONL, or `-` for standard output.
    #[arg(long)]
    pub output: PathBuf,
    /// Index directory (created if missing; persists across runs).
    #[arg(long)]
    pub index_dir: PathBuf,
    /// Near-duplicate threshold (Hamming distance) [default: `[dedup] threshold`, 3].
    #[arg(long)]
    pub threshold: Option<u32>,
    /// Fingerprinting threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Longest accepted input line in bytes.
    #[arg(long, default_value_t = DEFAULT_MAX_ARTICLE_BYTES)]
    pub max_article_bytes: usize,
    /// No progress lines on stderr (the summary is still printed).
    #[arg(long)]
    pub quiet: bool,
    /// Retention window by event time, e.g. 30d, 2w, 12h [default: [index] retention, keep
    /// for ever]: older indexed articles no longer match and are removed.
    #[arg(long, value_name = "SPAN")]
    pub retention: Option<TimeSpan>,
    /// Editors' corrections (JSONL, as `newsdedup correct ... --write FILE` writes them),
    /// applied after the input; one output line each: the corrected record, or the reason it
    /// was refused.
    #[arg(long, value_name = "FILE")]
    pub corrections: Option<PathBuf>,
    #[command(flatten)]
    pub common: CommonOpts,
}
