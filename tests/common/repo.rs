//! Files of this repository, found at run time. A compile-time `CARGO_MANIFEST_DIR` goes stale when
//! a target directory is shared between clones (CI's clean clone and a working checkout share
//! `~/.cache/newsdedup/target`): cargo keeps a binary built in the other clone while the sources
//! here are older, and that binary would read the other clone's files. Included by the tests
//! (`common`), the examples and the benches.

use std::path::{Path, PathBuf};

/// `rel` under the repository root: cargo's run-time `CARGO_MANIFEST_DIR` (set for the tests,
/// benches and `cargo run`), else the working directory when `rel` is there (the scripts run from
/// the root), else the compile-time root.
pub fn repo_file(rel: impl AsRef<Path>) -> PathBuf {
    let rel = rel.as_ref();
    match std::env::var_os("CARGO_MANIFEST_DIR") {
        Some(root) => PathBuf::from(root).join(rel),
        None if rel.exists() => rel.to_path_buf(),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join(rel),
    }
}
