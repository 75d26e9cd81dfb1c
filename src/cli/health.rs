//! The flags of `newsdedup health`: the address asked (resolved as `run` resolves its own),
//! which page, and how long to wait.

use super::CommonOpts;
use clap::Args;
use newsdedup::settings::MetricsAddrArg;

#[derive(Args)]
pub struct HealthArgs {
    #[command(flatten)]
    pub metrics_addr: MetricsAddrArg,
    /// Ask /ready instead of /health.
    #[arg(long)]
    pub ready: bool,
    /// Give up after this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 5)]
    pub timeout: u64,
    #[command(flatten)]
    pub common: CommonOpts,
}
