//! The core stays pure: article -> text -> fingerprint -> decision over the index interface,
//! without Kafka, RocksDB, the CLI, HTTP or the async runtime. This test reads the core's source
//! files and fails when one of them names an edge crate or module, so a dependency that would
//! make the core untestable without a broker (or an import cycle through the settings) is caught
//! at review time, not discovered later.

use std::path::{Path, PathBuf};

/// The core modules (files and folders under src/).
const CORE: [&str; 15] = [
    "article.rs",
    "time.rs",
    "text",
    "simhash.rs",
    "sketch.rs",
    "fingerprint.rs",
    "dedup.rs",
    "output.rs",
    "compare.rs",
    "pipeline.rs",
    "batch.rs",
    "restore.rs",
    "error.rs",
    "index/mod.rs",
    "audit",
];

/// What the core must not name: edge crates and edge modules of this crate.
const FORBIDDEN: [&str; 16] = [
    "rdkafka",
    "tokio",
    "clap",
    "rocksdb",
    "hyper",
    "metrics_exporter_prometheus",
    "crate::kafka",
    "crate::service",
    "crate::replay",
    "crate::replica",
    "indicatif",
    "crate::settings",
    "crate::config",
    "crate::metrics",
    "crate::index::rocks",
    "RocksIndex",
];

fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .expect("read src dir")
            .map(|e| e.expect("dir entry").path())
            .collect();
        entries.sort();
        for e in entries {
            rust_files(&e, out);
        }
    } else if path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_owned());
    }
}

/// `(file, line number, line)` of every code line (comments dropped) that names a forbidden
/// item.
fn violations(files: &[PathBuf]) -> Vec<(String, usize, String)> {
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).expect("read source");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for word in FORBIDDEN {
                let named = code.match_indices(word).any(|(at, _)| {
                    // A whole path segment: `tokio::`, not `my_tokio_like`.
                    let before = code[..at].chars().next_back();
                    let after = code[at + word.len()..].chars().next();
                    !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                        && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
                });
                if named {
                    found.push((file.display().to_string(), n + 1, line.trim().to_owned()));
                }
            }
        }
    }
    found
}

#[test]
fn the_core_does_not_depend_on_the_edges() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    for module in CORE {
        let path = src.join(module);
        assert!(path.exists(), "core module {} is missing", path.display());
        rust_files(&path, &mut files);
    }
    // `index/mod.rs` is the interface; it may re-export the RocksDB implementation for the
    // edges, which is the one line allowed to name it.
    let found: Vec<_> = violations(&files)
        .into_iter()
        .filter(|(file, _, line)| {
            !(file.ends_with("index/mod.rs")
                && (line.starts_with("pub use rocks::") || line.starts_with("pub mod rocks")))
        })
        .collect();
    assert!(
        found.is_empty(),
        "the core names edge crates or modules (move the code to the edge, or pass what it needs through an interface):\n{}",
        found
            .iter()
            .map(|(f, n, l)| format!("  {f}:{n}: {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn the_check_sees_a_forbidden_import() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("bad.rs");
    std::fs::write(
        &file,
        "// tokio in a comment is fine\nuse crate::kafka::engine;\nfn f() { let _ = rdkafka::util::get_rdkafka_version(); }\nfn g() { my_tokio_like(); }\n",
    )
    .expect("write");
    let found = violations(&[file]);
    let lines: Vec<usize> = found.iter().map(|(_, n, _)| *n).collect();
    assert_eq!(lines, vec![2, 3], "{found:?}");
}
