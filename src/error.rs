//! Typed errors of the library. Binaries add context (paths, offsets) at the edges with `anyhow`.

use std::path::PathBuf;

/// Errors from building a fingerprinter (loading dictionaries, stop words, IDF tables).
#[derive(Debug, thiserror::Error)]
pub enum ResourceError {
    // The cause is in the message, not chained as a source: printed with its causes it would be
    // told twice.
    #[error("cannot read {what} file {path}: {error}")]
    Read {
        what: &'static str,
        path: PathBuf,
        error: std::io::Error,
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
         the index was built with, or rebuild it into a new directory with this configuration: \
         `newsdedup index rebuild --brokers ... --index-dir NEW_DIR` from the output topics (or \
         `--input` from `batch` output), which keeps every decision (docs/OPERATIONS.md, \
         \"Upgrading\"), then point the service at NEW_DIR."
    )]
    IdentityMismatch {
        dir: PathBuf,
        stored: String,
        current: String,
    },
    #[error(
        "index directory {dir} has on-disk layout {stored}, this newsdedup reads {current}.\n\
         The index must be rebuilt (there is no in-place upgrade): build a new directory with \
         `newsdedup index rebuild --brokers ... --index-dir NEW_DIR` from the output topics (or \
         `--input` from `batch` output), which keeps every decision, then point the service at \
         NEW_DIR (docs/OPERATIONS.md, \"Upgrading\"). The old directory is left as it was, so the \
         previous newsdedup version can still open it."
    )]
    FormatMismatch {
        dir: PathBuf,
        stored: String,
        current: String,
    },
    /// The index's families disagree, or the storage engine found damaged data (a checksum
    /// mismatch): running again does not help, the index must be rebuilt.
    #[error(
        "index at {dir} is corrupt: {message}. It cannot be used as it is: stop every process \
         using it, see what is wrong with `newsdedup index verify --index-dir {dir}`, then rebuild \
         it from the output topics into a new directory (`newsdedup index rebuild`; \
         docs/OPERATIONS.md, \"Lost the index disk\"), or fail over to a standby"
    )]
    Corrupt { dir: PathBuf, message: String },
    /// An error of the storage engine (RocksDB), as its message: the index interface does not
    /// name the engine's types.
    #[error("storage error on {dir}: {message}")]
    Storage { dir: PathBuf, message: String },
    /// The volume holding the index has no space left. Each decision is one atomic write and
    /// nothing is published or committed before its write is durable, so the failed write and
    /// everything after it are simply decided again by the next run.
    #[error(
        "the volume holding the index {dir} is full ({message}). Nothing decided is lost, and \
         nothing after the failed write was published or committed: free space on that volume (or \
         move the index directory to a larger one), then run the command again; it resumes where \
         it stopped. To keep the index from outgrowing its volume, set or shorten the retention \
         window ([index] retention)"
    )]
    DiskFull { dir: PathBuf, message: String },
    /// The storage engine's process-wide environment (its background threads) refused a setting.
    #[error("storage engine environment: {0}")]
    Environment(String),
    // The cause is in the message, not chained as a source: printed with its causes it would be
    // told twice.
    #[error("I/O error on {dir}: {error}")]
    Io { dir: PathBuf, error: std::io::Error },
}

/// What the operating system says when a volume is full (`ENOSPC`), as the storage engine quotes
/// it in its error messages.
const NO_SPACE_MESSAGE: &str = "No space left on device";
/// How the storage engine's messages about damaged data begin (RocksDB's `Status::Corruption`).
const CORRUPTION_PREFIX: &str = "Corruption:";

impl IndexError {
    /// An error of the storage engine on `dir`, from its message: [`IndexError::DiskFull`] when
    /// the volume is full, [`IndexError::Corrupt`] for damaged data, else
    /// [`IndexError::Storage`].
    pub fn storage(dir: &std::path::Path, message: String) -> IndexError {
        let dir = dir.to_owned();
        if message.contains(NO_SPACE_MESSAGE) {
            IndexError::DiskFull { dir, message }
        } else if message.starts_with(CORRUPTION_PREFIX) {
            IndexError::Corrupt { dir, message }
        } else {
            IndexError::Storage { dir, message }
        }
    }

    /// An I/O error on `dir`: [`IndexError::DiskFull`] when the volume is full, else
    /// [`IndexError::Io`].
    pub fn io(dir: &std::path::Path, source: std::io::Error) -> IndexError {
        let dir = dir.to_owned();
        if source.kind() == std::io::ErrorKind::StorageFull {
            IndexError::DiskFull {
                dir,
                message: source.to_string(),
            }
        } else {
            IndexError::Io { dir, error: source }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn a_full_volume_and_damaged_data_are_told_apart_and_say_what_to_do() {
        let dir = Path::new("/var/lib/newsdedup/index");
        // RocksDB's message for a WAL append on a full volume.
        let full = IndexError::storage(
            dir,
            "IO error: No space left on device: While appending to file: /var/lib/newsdedup/index/000004.log: No space left on device".to_owned(),
        );
        assert!(matches!(full, IndexError::DiskFull { .. }), "{full:?}");
        let told = full.to_string();
        assert!(told.contains("/var/lib/newsdedup/index is full"), "{told}");
        assert!(told.contains("free space on that volume"), "{told}");
        assert!(told.contains("Nothing decided is lost"), "{told}");

        let damaged = IndexError::storage(
            dir,
            "Corruption: block checksum mismatch in /var/lib/newsdedup/index/000008.sst".to_owned(),
        );
        assert!(matches!(damaged, IndexError::Corrupt { .. }), "{damaged:?}");
        assert!(damaged.to_string().contains("index rebuild"), "{damaged}");
        let other = IndexError::storage(dir, "IO error: Permission denied".to_owned());
        assert!(matches!(other, IndexError::Storage { .. }), "{other:?}");

        let io_full = IndexError::io(dir, std::io::Error::from_raw_os_error(libc::ENOSPC));
        assert!(
            matches!(io_full, IndexError::DiskFull { .. }),
            "{io_full:?}"
        );
        let io_other = IndexError::io(dir, std::io::Error::from_raw_os_error(libc::EACCES));
        assert!(matches!(io_other, IndexError::Io { .. }), "{io_other:?}");
    }
}
