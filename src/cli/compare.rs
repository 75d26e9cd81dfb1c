//! The flags of `newsdedup compare`: the two articles, the threshold that judges them, how many
//! features are shown, and the index whose crowded buckets mark template text.

use super::CommonOpts;
use clap::Args;
use std::path::PathBuf;

#[derive(Args)]
pub struct CompareArgs {
    /// The later article (the one decided: is it a duplicate of B?).
    pub a: PathBuf,
    /// The earlier, indexed article.
    pub b: PathBuf,
    /// Near-duplicate threshold (Hamming distance).
    #[arg(long)]
    pub threshold: Option<u32>,
    /// Number of shared / differing features shown.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Show every feature of both articles too.
    #[arg(long)]
    pub explain: bool,
    /// An index directory: A's sketch bins whose band bucket is crowded there are left out as
    /// template text, exactly as `batch` / `run` on that index do (without it, none are).
    #[arg(long, value_name = "DIR")]
    pub index_dir: Option<PathBuf>,
    #[command(flatten)]
    pub common: CommonOpts,
}
