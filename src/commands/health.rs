//! `newsdedup health`: GET /health (or /ready) of a running `run` or `standby` on the metrics
//! address resolved as the service resolves it; the answer printed, and an error unless it is
//! 200 (the container image's HEALTHCHECK).

use super::load_config;
use crate::cli::health::HealthArgs;
use anyhow::{bail, Context, Result};
use newsdedup::settings;
use std::time::Duration;

pub fn execute(args: HealthArgs) -> Result<()> {
    let HealthArgs {
        metrics_addr,
        ready,
        timeout,
        common,
    } = args;
    let addr = settings::parse_metrics_addr(&metrics_addr.resolve(&load_config(&common)?))?;
    let timeout = Duration::from_secs(timeout);
    let path = if ready { "/ready" } else { "/health" };
    let (status, body) = newsdedup::metrics::probe(addr, path, timeout).with_context(|| {
        format!(
            "no answer to {path} on {addr}: is `newsdedup run` serving there (--metrics-addr, NEWSDEDUP_METRICS_ADDR)?"
        )
    })?;
    if status != 200 {
        bail!("{path} on {addr} answered {status}: {}", body.trim());
    }
    println!("{}", body.trim());
    Ok(())
}
