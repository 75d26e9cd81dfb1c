//! The flags of `newsdedup fingerprint`: where the articles come from and how much of each
//! fingerprint's making is shown.

use super::CommonOpts;
use clap::Args;
use std::path::PathBuf;

#[derive(Args)]
pub struct FingerprintArgs {
    /// JSONL articles; `-` or absent: standard input.
    #[arg(long)]
    pub input: Option<PathBuf>,
    /// Also print the heaviest features with their weights.
    #[arg(long)]
    pub explain: bool,
    /// Number of features shown with --explain.
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    #[command(flatten)]
    pub common: CommonOpts,
}
