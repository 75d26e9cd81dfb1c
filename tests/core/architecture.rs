//! The layers of the crate, checked. A module (a file or folder under src/) may import only
//! modules of lower layers (`LAYERS`, lowest first), so no import runs upward and no cycle exists
//! between modules; inside a folder, no two files import each other (directly or around a
//! circle). And the core stays pure: article -> text -> fingerprint -> decision over the index
//! interface, without Kafka, RocksDB, the CLI, HTTP or the async runtime. This test reads the core's source
//! files and fails when one of them names an edge crate or module, so a dependency that would
//! make the core untestable without a broker (or an import cycle through the settings) is caught
//! at review time, not discovered later.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The core modules (files and folders under src/).
const CORE: [&str; 20] = [
    "article.rs",
    "correction.rs",
    "time.rs",
    "text",
    "simhash.rs",
    "sketch.rs",
    "topic.rs",
    "fingerprint.rs",
    "fingerprint",
    "dedup.rs",
    "dedup",
    "output.rs",
    "compare.rs",
    "pipeline.rs",
    "runner.rs",
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
    let src = crate::common::repo_file("src");
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

/// The modules of src/, lowest layer first. A module imports only modules of lower layers. A new
/// module gets a row (or joins one) here; the test names any module it does not know.
const LAYERS: &[&[&str]] = &[
    &[
        "error", "simhash", "time", "lines", "progress", "signing", "slots",
    ],
    &["text"],
    // A text's clause signatures, which the sketch carries.
    &["segments"],
    &["sketch", "article", "headline"],
    // The topic check reads a text's outline against a sketch; fingerprinting makes outlines.
    &["topic"],
    &["fingerprint"],
    // The index interface and its RocksDB implementation: storage knows no feature module.
    &["index"],
    // The one ordered runner: sources, stages and sinks are configurations of it.
    &["runner"],
    &["dedup"],
    &["output", "correction"],
    &["pipeline", "compare", "restore"],
    &["batch", "audit"],
    &["metrics", "config"],
    &["components"],
    &["kafka"],
    &["settings", "correct"],
    &["replica"],
    &["service"],
    &["replay"],
    // The binary: the command line's definitions, what each command does with them, and
    // `main`, which parses and dispatches.
    &["cli"],
    &["commands"],
    &["main"],
];

/// Code lines of a source file: comments dropped, and nothing from its `#[cfg(test)]` module on
/// (unit tests may reach anywhere).
fn code_of(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        out.push_str(line.split("//").next().unwrap_or(""));
        out.push('\n');
    }
    out
}

/// The first path segments after every `prefix` (`crate::`, `super::`) in `code`, with grouped
/// imports (`crate::{a, b::c}`) opened.
fn named_after(code: &str, prefix: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = BTreeSet::new();
    for (at, _) in code.match_indices(prefix) {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &code[at + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut start = 0;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        out.insert(ident(group[start..i].trim()));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.insert(ident(group[start..i].trim()));
                        start = i + 1;
                    }
                    _ => {}
                }
            }
        } else {
            out.insert(ident(rest));
        }
    }
    out.retain(|n| !n.is_empty() && n != "self");
    out
}

/// One source file: its module (first component under src/), its own name and folder, and what
/// it imports: other modules (`crate::m`, or `newsdedup::m` in the binary) and sibling files of
/// its folder (`super::f`).
#[derive(Debug, Clone)]
struct Source {
    path: String,
    module: String,
    folder: Option<String>,
    file: String,
    modules: BTreeSet<String>,
    siblings: BTreeSet<String>,
}

fn sources(src: &Path) -> Vec<Source> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut out = Vec::new();
    for path in files {
        let rel = path.strip_prefix(src).expect("under src");
        let parts: Vec<String> = rel
            .iter()
            .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
            .collect();
        if parts == ["lib"] {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(&path).expect("read source"));
        let mut modules = named_after(&code, "crate::");
        modules.extend(named_after(&code, "newsdedup::"));
        let folder = (parts.len() > 1).then(|| parts[..parts.len() - 1].join("/"));
        let siblings = match &folder {
            Some(dir) => named_after(&code, "super::")
                .into_iter()
                .filter(|f| src.join(dir).join(format!("{f}.rs")).is_file())
                .collect(),
            None => BTreeSet::new(),
        };
        out.push(Source {
            path: rel.display().to_string(),
            module: parts[0].clone(),
            folder,
            file: parts[parts.len() - 1].clone(),
            modules,
            siblings,
        });
    }
    out
}

/// A file: its folder and its name.
type FileKey = (Option<String>, String);

/// Every breach of the layer table and every circle of imports between files of one folder.
fn layer_problems(sources: &[Source], layers: &[&[&str]]) -> Vec<String> {
    let layer_of = |m: &str| layers.iter().position(|row| row.contains(&m));
    let mut problems = Vec::new();
    for s in sources {
        let Some(own) = layer_of(&s.module) else {
            problems.push(format!(
                "{}: module `{}` is in no layer of LAYERS",
                s.path, s.module
            ));
            continue;
        };
        for m in &s.modules {
            if *m == s.module {
                continue;
            }
            match layer_of(m) {
                // Not a module of this crate (a macro, a crate-level item).
                None => {}
                Some(l) if l < own => {}
                Some(l) => problems.push(format!(
                    "{}: `{}` (layer {own}) imports `{m}` (layer {l}): {}",
                    s.path,
                    s.module,
                    if l == own { "same layer" } else { "upward" }
                )),
            }
        }
    }
    // Circles between files of one folder: depth-first search over `super::` imports.
    let key = |s: &Source| (s.folder.clone(), s.file.clone());
    let edges: BTreeMap<FileKey, Vec<FileKey>> = sources
        .iter()
        .map(|s| {
            let to = s
                .siblings
                .iter()
                .filter(|f| **f != s.file)
                .map(|f| (s.folder.clone(), f.clone()))
                .collect();
            (key(s), to)
        })
        .collect();
    let mut reported = BTreeSet::new();
    for start in edges.keys() {
        let mut stack = vec![(start.clone(), vec![start.clone()])];
        while let Some((at, path)) = stack.pop() {
            for next in edges.get(&at).into_iter().flatten() {
                if next == start {
                    let mut circle: Vec<String> = path.iter().map(|(_, f)| f.clone()).collect();
                    let mut sorted = circle.clone();
                    sorted.sort();
                    if reported.insert(sorted) {
                        circle.push(start.1.clone());
                        problems.push(format!(
                            "{}: files import each other: {}",
                            start.0.clone().unwrap_or_default(),
                            circle.join(" -> ")
                        ));
                    }
                } else if !path.contains(next) {
                    let mut longer = path.clone();
                    longer.push(next.clone());
                    stack.push((next.clone(), longer));
                }
            }
        }
    }
    problems
}

#[test]
fn modules_import_only_lower_layers_and_no_files_import_each_other() {
    let src = crate::common::repo_file("src");
    let problems = layer_problems(&sources(&src), LAYERS);
    assert!(
        problems.is_empty(),
        "imports against the layers (tests/core/architecture.rs LAYERS):\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn the_layer_check_sees_an_upward_import_and_a_circle() {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path();
    std::fs::create_dir_all(src.join("feed")).expect("mkdir");
    let write = |rel: &str, text: &str| std::fs::write(src.join(rel), text).expect("write");
    write("low.rs", "use crate::high::Thing; // upward\n");
    write(
        "high.rs",
        "use crate::{low, feed::a};\n// crate::main in a comment\n",
    );
    write("feed/mod.rs", "pub mod a;\npub mod b;\n");
    write("feed/a.rs", "use super::b::B;\n");
    write(
        "feed/b.rs",
        "use super::a::A;\n#[cfg(test)]\nmod tests { use crate::high; }\n",
    );
    let problems = layer_problems(&sources(src), &[&["low"], &["high", "feed"]]);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    for expected in [
        "`low` (layer 0) imports `high` (layer 1): upward",
        "`high` (layer 1) imports `feed` (layer 1): same layer",
        "files import each other: a -> b -> a",
    ] {
        assert!(
            problems.iter().any(|p| p.contains(expected)),
            "{expected} not in {problems:#?}"
        );
    }
}
