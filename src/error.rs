//! Typed errors of the library. Binaries add context (paths, offsets) at the edges with `anyhow`.

use std::path::PathBuf;

/// Errors from building a fingerprinter (loading dictionaries, stop words, IDF tables).
#[derive(Debug, thiserror::Error)]
pub enum ResourceError {
    #[error("cannot read {what} file {path}: {source}")]
    Read {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid {what} ({origin}): {message}")]
    Invalid {
        what: &'static str,
        origin: String,
        message: String,
    },
}

/// Errors from the persistent index.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error(
        "index directory {dir} is already in use by another process (RocksDB LOCK is held); \
         one newsdedup process owns one index directory: stop the other process or use another --index-dir"
    )]
    Locked { dir: PathBuf },
    #[error(
        "index directory {dir} was built with a different fingerprint configuration.\n  \
         stored:  {stored}\n  current: {current}\n\
         Fingerprints from the two configurations are not comparable. Either run with the configuration \
         the index was built with, or rebuild: move {dir} away and re-run `newsdedup batch` over the \
         source data (or replay the input topic from the beginning with a new consumer group)."
    )]
    IdentityMismatch {
        dir: PathBuf,
        stored: String,
        current: String,
    },
    #[error(
        "index directory {dir} has on-disk layout {stored}, this newsdedup reads {current}.\n\
         The index must be rebuilt (there is no in-place upgrade): stop every process using it, \
         delete (or move away) {dir}, then re-run `newsdedup batch` over the source data (or \
         replay the input topic from the beginning with a new consumer group). The old directory \
         is left as it was, so the previous newsdedup version can still open it."
    )]
    FormatMismatch {
        dir: PathBuf,
        stored: String,
        current: String,
    },
    #[error("index at {dir} is corrupt: {message}")]
    Corrupt { dir: PathBuf, message: String },
    /// An error of the storage engine (RocksDB), as its message: the index interface does not
    /// name the engine's types.
    #[error("storage error on {dir}: {message}")]
    Storage { dir: PathBuf, message: String },
    /// The storage engine's process-wide environment (its background threads) refused a setting.
    #[error("storage engine environment: {0}")]
    Environment(String),
    #[error("I/O error on {dir}: {source}")]
    Io {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
