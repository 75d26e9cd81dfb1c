//! `newsdedup audit`: a report of the duplicates for editors. Reads decided records (a `batch`
//! output file here, the duplicate and unique topics at the Kafka edge), finds each duplicate's
//! original, recomputes the pair's numbers with the code of `newsdedup compare`, and renders one
//! self-contained HTML page (and, for machines, one JSON line per shown pair).
//!
//! * [`record`]: one decided record, as the audit reads it.
//! * [`collect`]: the three passes (records in scope, originals, the shown pairs read again)
//!   and the seeded sample, suspicious pairs first.
//! * [`report`]: the report model, built from the passes.
//! * [`highlight`]: shared passages of two texts.
//! * [`html`] and [`svg`]: the page and its charts.
//! * [`time`]: timestamps in and out.
//! * [`jsonl`]: the passes over a `batch` output file.
//!
//! Pure: no broker, no index, no command line.

pub mod collect;
mod escape;
pub mod highlight;
pub mod html;
pub mod jsonl;
pub mod record;
pub mod report;
pub mod svg;

pub use collect::{
    AuditOptions, Collector, CorrectionRow, Counts, Location, Originals, Plan, Reason, SampleKind,
};
pub use report::{Header, Pair, Report};

/// Errors of the audit.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    // The cause is in the message, not chained as a source: printed with its causes it would be
    // told twice.
    #[error("cannot read the input: {0}")]
    Read(std::io::Error),
    #[error(transparent)]
    BadTime(#[from] crate::time::BadTime),
}
