//! The docs name what the code defines, checked mechanically for the names that drift most
//! easily: metrics, command-line flags, configuration keys, environment variables and topics.
//!
//! The code's side comes from its single definitions, never from a copy: the flags from the
//! built binary's `--help` of every command, the metrics from `newsdedup::metrics::DEFINITIONS`
//! (what the service describes to Prometheus), the configuration keys from the sections'
//! `Deserialize` definitions (`newsdedup::config::keys`), the topics from `ServiceConfig`'s
//! defaults. The docs' side is what users read: README.md, docs/*.md, examples/README.md,
//! config/default.toml and the files under docker/ (image, compose file, Prometheus, alerts,
//! Grafana).
//!
//! Both ways where users need it: every name the docs use exists; every metric has a row in
//! docs/OPERATIONS.md's metrics table (with its kind), every flag of every command is in that
//! command's section of docs/REFERENCE.md, every key of the configuration file is in
//! config/default.toml (every `[service]` key also in OPERATIONS.md's settings table), and every
//! topic in README.md, REFERENCE.md, OPERATIONS.md and the compose file that creates them. And
//! every repository path the docs name (`src/kafka/stop.rs`) exists, and the index layout they
//! name is the current one, and so is every test they name by its function.

use crate::common::repo_file;
use newsdedup::config::{keys as config_keys, ServiceConfig};
use newsdedup::metrics::{Kind, DEFINITIONS};
use regex::Regex;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// Flags of other programs that the docs show standing alone in a code span (`--ci` of
/// scripts/soak.sh, say), by program. Any other flag in a span of its own must be newsdedup's.
const FOREIGN_FLAGS: [(&str, &str); 11] = [
    ("--articles", "scripts/demo.sh"),
    ("--ci", "scripts/soak.sh"),
    ("--faults", "scripts/soak.sh"),
    ("--hostile-every", "scripts/soak.sh"),
    ("--with-length", "scripts/eval"),
    ("--command-config", "the Apache Kafka tools"),
    ("--runtime", "podman"),
    ("--ulimit", "podman"),
    ("--stop-timeout", "docker/podman run"),
    ("--workdir", "podman"),
    ("--target", "docker/podman build"),
];

/// Topics the docs name as examples of a topic of the user's own (a replayed archive).
const EXAMPLE_TOPICS: [&str; 1] = ["articles.archive"];

/// A document: its path under the repository and its text.
struct Doc {
    path: String,
    text: String,
}

impl Doc {
    fn line_of(&self, offset: usize) -> usize {
        self.text[..offset].matches('\n').count() + 1
    }

    fn is_markdown(&self) -> bool {
        self.path.ends_with(".md")
    }
}

fn read(rel: &str) -> Doc {
    let path = repo_file(rel);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    Doc {
        path: rel.to_owned(),
        text,
    }
}

fn files_under(rel: &str, keep: impl Fn(&Path) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![rel.to_owned()];
    while let Some(dir) = stack.pop() {
        let entries =
            std::fs::read_dir(repo_file(&dir)).unwrap_or_else(|e| panic!("cannot list {dir}: {e}"));
        for entry in entries {
            let entry = entry.expect("dir entry");
            let rel = format!("{dir}/{}", entry.file_name().to_string_lossy());
            if entry.path().is_dir() {
                stack.push(rel);
            } else if keep(&entry.path()) {
                out.push(rel);
            }
        }
    }
    out.sort();
    out
}

/// Everything users read.
fn docs() -> Vec<Doc> {
    let mut paths = vec![
        "README.md".to_owned(),
        "examples/README.md".to_owned(),
        "config/default.toml".to_owned(),
    ];
    paths.extend(files_under("docs", |p| {
        p.extension().is_some_and(|e| e == "md")
    }));
    paths.extend(files_under("docker", |_| true));
    paths.iter().map(|p| read(p)).collect()
}

fn doc<'a>(docs: &'a [Doc], path: &str) -> &'a Doc {
    docs.iter()
        .find(|d| d.path == path)
        .unwrap_or_else(|| panic!("{path} is not among the docs"))
}

/// Inline code spans of a Markdown text outside fenced blocks, or of any other text: (offset,
/// content). A span may run over a line break, as Markdown allows. The fenced blocks are blanked
/// first (same offsets), so that a backtick inside one cannot pair with one outside.
fn code_spans(doc: &Doc) -> Vec<(usize, &str)> {
    let mut prose = doc.text.clone().into_bytes();
    for block in fenced_blocks(doc) {
        for b in &mut prose[block] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    }
    let prose = String::from_utf8_lossy(&prose).into_owned();
    let span = Regex::new(r"`([^`]+)`").unwrap();
    span.captures_iter(&prose)
        .map(|c| {
            let m = c.get(1).unwrap();
            (m.start(), &doc.text[m.range()])
        })
        .collect()
}

/// The byte ranges of a Markdown text's fenced code blocks.
fn fenced_blocks(doc: &Doc) -> Vec<std::ops::Range<usize>> {
    if !doc.is_markdown() {
        return Vec::new();
    }
    let mut blocks = Vec::new();
    let mut open: Option<usize> = None;
    let mut at = 0;
    for line in doc.text.split_inclusive('\n') {
        if line.trim_start().starts_with("```") {
            match open.take() {
                Some(start) => blocks.push(start..at + line.len()),
                None => open = Some(at),
            }
        }
        at += line.len();
    }
    blocks
}

/// The command lines of a Markdown text's fenced blocks (continuation lines joined): (offset,
/// line).
fn block_lines(doc: &Doc) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for block in fenced_blocks(doc) {
        let mut current: Option<(usize, String)> = None;
        let mut at = block.start;
        for line in doc.text[block.clone()].split_inclusive('\n') {
            let body = line.trim_end();
            let (start, mut text) = current.take().unwrap_or((at, String::new()));
            match body.strip_suffix('\\') {
                Some(head) => {
                    text.push_str(head);
                    text.push(' ');
                    current = Some((start, text));
                }
                None => {
                    text.push_str(body);
                    out.push((start, text));
                }
            }
            at += line.len();
        }
    }
    out
}

/// The commands of the binary and their flags, from its `--help`.
struct Cli {
    /// "index stats" -> its flags (long ones with `--`, short ones such as `-X`), `--help` left
    /// out.
    commands: BTreeMap<String, BTreeSet<String>>,
    /// The flags of the binary itself (`--version`).
    top: BTreeSet<String>,
    /// The environment variables any command reads (`[env: NAME=]`).
    env: BTreeSet<String>,
}

fn help(path: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_newsdedup"))
        .args(path)
        .arg("--help")
        .output()
        .expect("run newsdedup --help");
    assert!(
        out.status.success(),
        "newsdedup {} --help failed: {}",
        path.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("help is UTF-8")
}

/// (subcommands, flags, environment variables) of one `--help` text.
fn parse_help(text: &str) -> (Vec<String>, BTreeSet<String>, BTreeSet<String>) {
    let flag = Regex::new(r"^(-[A-Za-z])?(?:, )?(--[a-z0-9][a-z0-9-]*)?").unwrap();
    let alias = Regex::new(r"\[(?:visible )?aliases?: ([^\]]+)\]").unwrap();
    let env = Regex::new(r"\[env: ([A-Z0-9_]+)=").unwrap();
    let mut subcommands = Vec::new();
    let mut flags = BTreeSet::new();
    let mut section = "";
    for line in text.lines() {
        if !line.starts_with(' ') && line.ends_with(':') {
            section = line;
            continue;
        }
        let trimmed = line.trim_start();
        if section == "Commands:" && line.starts_with("  ") && !line.starts_with("   ") {
            let name = trimmed.split_whitespace().next().unwrap_or_default();
            if !name.is_empty() && name != "help" {
                subcommands.push(name.to_owned());
            }
        }
        if section == "Options:" && trimmed.starts_with('-') {
            let c = flag.captures(trimmed).unwrap();
            flags.extend(
                [c.get(1), c.get(2)]
                    .into_iter()
                    .flatten()
                    .map(|m| m.as_str().to_owned()),
            );
        }
        for c in alias.captures_iter(line) {
            flags.extend(c[1].split(',').map(|a| a.trim().to_owned()));
        }
    }
    flags.remove("--help");
    flags.remove("-h");
    let env = env.captures_iter(text).map(|c| c[1].to_owned()).collect();
    (subcommands, flags, env)
}

fn cli() -> Cli {
    let (top_commands, top, mut env) = parse_help(&help(&[]));
    let mut commands = BTreeMap::new();
    let mut queue: Vec<Vec<String>> = top_commands.into_iter().map(|c| vec![c]).collect();
    while let Some(path) = queue.pop() {
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let (subcommands, flags, vars) = parse_help(&help(&args));
        env.extend(vars);
        if subcommands.is_empty() {
            commands.insert(path.join(" "), flags);
        } else {
            queue.extend(subcommands.into_iter().map(|s| {
                let mut p = path.clone();
                p.push(s);
                p
            }));
        }
    }
    assert!(
        commands.contains_key("run") && commands.contains_key("index stats"),
        "the commands read from --help miss run or index stats: {:?}",
        commands.keys()
    );
    Cli { commands, top, env }
}

impl Cli {
    fn all_flags(&self) -> BTreeSet<&str> {
        self.commands
            .values()
            .flatten()
            .chain(&self.top)
            .map(String::as_str)
            .collect()
    }

    /// The command named at the start of `words` ("index stats --json" -> "index stats"; a
    /// group alone, "correct --since", names the group), and the words after it.
    fn command_at<'a>(&self, words: &'a str) -> Option<(String, &'a str)> {
        let words = words.trim_start();
        let mut parts = words.splitn(3, char::is_whitespace);
        let first = parts.next().unwrap_or_default();
        let second = parts.next().unwrap_or_default();
        let after = |word: &str| &words[words.find(word).map_or(words.len(), |i| i + word.len())..];
        let two = format!("{first} {second}");
        if self.commands.contains_key(&two) {
            return Some((two, after(second)));
        }
        if !self.flags_of(first).is_empty() || self.commands.contains_key(first) {
            return Some((first.to_owned(), after(first)));
        }
        None
    }

    /// The flags of a command, or of every command of a group (`correct`, `index`).
    fn flags_of(&self, command: &str) -> BTreeSet<&str> {
        let group = format!("{command} ");
        self.commands
            .iter()
            .filter(|(name, _)| *name == command || name.starts_with(&group))
            .flat_map(|(_, flags)| flags.iter().map(String::as_str))
            .collect()
    }
}

/// The flags written in `args`, the text after a command's name: `--name`, `--name=value`,
/// `[--name VALUE]`, `-X`.
fn flags_in(args: &str) -> Vec<&str> {
    let flag = Regex::new(r"^(--[a-z0-9][a-z0-9-]*|-[A-Za-z])$").unwrap();
    args.split_whitespace()
        .map(|token| {
            let token = token.trim_start_matches(['[', '(']);
            let token = token.split('=').next().unwrap_or_default();
            token.trim_end_matches([']', ')', ','])
        })
        .filter(|token| flag.is_match(token))
        .collect()
}

/// Problems with the flags `args` gives `newsdedup command` at `at` of `doc`.
fn check_flags(
    cli: &Cli,
    doc: &Doc,
    at: usize,
    command: &str,
    args: &str,
    problems: &mut Vec<String>,
) {
    let known = cli.flags_of(command);
    for f in flags_in(args) {
        if !known.contains(f) {
            problems.push(format!(
                "{}:{}: `newsdedup {command}` has no flag {f} (its flags: {})",
                doc.path,
                doc.line_of(at),
                known.iter().copied().collect::<Vec<_>>().join(" ")
            ));
        }
    }
}

fn report(problems: Vec<String>, what: &str) {
    assert!(
        problems.is_empty(),
        "{} {what}:\n  {}",
        problems.len(),
        problems.join("\n  ")
    );
}

#[test]
fn every_metric_the_docs_name_is_defined() {
    let defined: BTreeMap<&str, Kind> = DEFINITIONS.iter().map(|d| (d.name, d.kind)).collect();
    let name = Regex::new(r"newsdedup_[a-z0-9_]*").unwrap();
    let mut problems = Vec::new();
    for doc in docs() {
        for m in name.find_iter(&doc.text) {
            let n = m.as_str();
            let known = if n.ends_with('_') {
                // A family: `newsdedup_index_*`.
                defined.keys().any(|d| d.starts_with(n))
            } else {
                defined.contains_key(n)
                    || ["_bucket", "_sum", "_count"].iter().any(|suffix| {
                        n.strip_suffix(suffix)
                            .is_some_and(|base| defined.get(base) == Some(&Kind::Histogram))
                    })
            };
            if !known {
                problems.push(format!(
                    "{}:{}: metric {n} is not defined in src/metrics.rs (DEFINITIONS)",
                    doc.path,
                    doc.line_of(m.start())
                ));
            }
        }
    }
    report(
        problems,
        "metric names in the docs that the service does not export",
    );
}

#[test]
fn every_metric_has_a_row_in_the_operations_table_with_its_kind() {
    let docs = docs();
    let ops = doc(&docs, "docs/OPERATIONS.md");
    let span = Regex::new(r"`(newsdedup_[a-z0-9_]+)`").unwrap();
    let mut rows: BTreeMap<String, String> = BTreeMap::new();
    for line in ops.text.lines().filter(|l| l.starts_with("| `newsdedup_")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        for c in span.captures_iter(cells[1]) {
            rows.insert(c[1].to_owned(), cells[2].to_owned());
        }
    }
    let mut problems = Vec::new();
    for d in DEFINITIONS {
        match rows.get(d.name) {
            None => problems.push(format!(
                "metric {} ({}) has no row in docs/OPERATIONS.md's metrics table",
                d.name,
                d.kind.as_str()
            )),
            Some(kind) if kind != d.kind.as_str() => problems.push(format!(
                "metric {} is a {} but docs/OPERATIONS.md's metrics table says {kind}",
                d.name,
                d.kind.as_str()
            )),
            Some(_) => {}
        }
    }
    report(problems, "metrics missing from docs/OPERATIONS.md");
}

#[test]
fn every_flag_the_docs_name_belongs_to_its_command() {
    let cli = cli();
    let all = cli.all_flags();
    let foreign: BTreeMap<&str, &str> = FOREIGN_FLAGS.into_iter().collect();
    let invocation = Regex::new(r"(?s)(?:^|[\s/])newsdedup\s+([a-z].*)").unwrap();
    let bare = Regex::new(r"(?:^|[\s(`])(--[a-z0-9][a-z0-9-]*)").unwrap();
    let mut problems = Vec::new();
    for doc in docs() {
        // Inline spans: `newsdedup CMD ...` or `CMD ...`; a `|` inside one separates
        // alternatives (`audit (--brokers B | --input FILE)`), each of the same command unless it
        // names another.
        for (at, span) in code_spans(&doc) {
            let start = invocation
                .captures(span)
                .map_or(span, |c| c.get(1).unwrap().as_str());
            let mut command: Option<String> = None;
            for part in start.split('|') {
                let args = match cli.command_at(part) {
                    Some((c, args)) => {
                        command = Some(c);
                        args
                    }
                    None => part,
                };
                if let Some(c) = &command {
                    check_flags(&cli, &doc, at, c, args, &mut problems);
                }
            }
            // A flag alone: `--retention 30d`.
            let alone = span.trim_start();
            if alone.starts_with('-') {
                let f = flags_in(alone).into_iter().next();
                if let Some(f) = f.filter(|f| !all.contains(f) && !foreign.contains_key(f)) {
                    problems.push(format!(
                        "{}:{}: {f} is a flag of no newsdedup command (another program's? list it in FOREIGN_FLAGS)",
                        doc.path,
                        doc.line_of(at)
                    ));
                }
            }
        }
        // Command lines of fenced blocks: `newsdedup CMD ...` up to a pipe, `;`, `&&` or a
        // comment.
        for (at, line) in block_lines(&doc) {
            for c in invocation.captures_iter(&line) {
                let rest = c.get(1).unwrap().as_str();
                let end = ["|", ";", "&&", " #", ">"]
                    .iter()
                    .filter_map(|s| rest.find(s))
                    .min()
                    .unwrap_or(rest.len());
                if let Some((command, args)) = cli.command_at(&rest[..end]) {
                    check_flags(&cli, &doc, at, &command, args, &mut problems);
                }
            }
        }
        // Plain text (config/default.toml's comments): every flag is one of newsdedup's.
        if doc.path == "config/default.toml" {
            for c in bare.captures_iter(&doc.text) {
                let m = c.get(1).unwrap();
                if !all.contains(m.as_str()) {
                    problems.push(format!(
                        "{}:{}: {} is a flag of no newsdedup command",
                        doc.path,
                        doc.line_of(m.start()),
                        m.as_str()
                    ));
                }
            }
        }
    }
    report(problems, "flags in the docs that the binary does not take");
}

#[test]
fn every_command_and_flag_is_in_the_reference_and_every_command_in_the_readme() {
    let cli = cli();
    let docs = docs();
    let reference = doc(&docs, "docs/REFERENCE.md");
    let lines: Vec<&str> = reference.text.lines().collect();
    // What the introduction of "## Commands" says of every command (`--config`).
    let intro_start = lines
        .iter()
        .position(|l| *l == "## Commands")
        .expect("docs/REFERENCE.md has a \"## Commands\" section");
    let intro: String = lines[intro_start..]
        .iter()
        .take_while(|l| !l.starts_with("###"))
        .copied()
        .collect::<Vec<_>>()
        .join("\n");
    let section = |command: &str| -> Option<String> {
        let start = lines.iter().position(|l| {
            l.starts_with("#### `")
                && (l.starts_with(&format!("#### `{command} "))
                    || l.starts_with(&format!("#### `{command}`"))
                    || l.contains(&format!("| {command} ")))
        })?;
        let end = lines[start + 1..]
            .iter()
            .position(|l| l.starts_with('#'))
            .map_or(lines.len(), |i| start + 1 + i);
        Some(lines[start..end].join("\n"))
    };
    let mentions = |text: &str, flag: &str| {
        Regex::new(&format!(r"{}(?:[^a-z0-9-]|$)", regex::escape(flag)))
            .unwrap()
            .is_match(text)
    };
    // Flags a command shares with `run` are told once, in run's section.
    let run_flags = &cli.commands["run"];
    let run_section = section("run").expect("docs/REFERENCE.md has a section for run");
    let mut problems = Vec::new();
    for (command, flags) in &cli.commands {
        let Some(text) = section(command) else {
            problems.push(format!(
                "docs/REFERENCE.md has no section \"#### `{command} ...`\" for `newsdedup {command}`"
            ));
            continue;
        };
        for flag in flags {
            let told = mentions(&text, flag)
                || (matches!(command.as_str(), "standby" | "replay")
                    && run_flags.contains(flag)
                    && mentions(&run_section, flag))
                || mentions(&intro, flag);
            if !told {
                problems.push(format!(
                    "docs/REFERENCE.md: flag {flag} of `newsdedup {command}` is not in its section"
                ));
            }
        }
    }
    // README.md's table of commands: one row each (`correct` for both of its own).
    let readme = doc(&docs, "README.md");
    for command in cli.commands.keys() {
        let row = |c: &str| readme.text.contains(&format!("| `{c}` |"));
        let group = command.split(' ').next().unwrap_or_default();
        if !row(command) && !row(group) {
            problems.push(format!(
                "README.md's table of commands has no row for `{command}`"
            ));
        }
    }
    report(
        problems,
        "commands or flags missing from docs/REFERENCE.md and README.md",
    );
}

/// (section, key) of every key line of config/default.toml, commented out or not, with its line.
fn default_toml_keys(doc: &Doc) -> Vec<(String, String, usize)> {
    let header = Regex::new(r"^\[([a-z_.]+)\]\s*$").unwrap();
    let key = Regex::new(r"^#? ?([a-z_][a-z0-9_]*)\s*=").unwrap();
    let mut section = String::new();
    let mut out = Vec::new();
    for (i, line) in doc.text.lines().enumerate() {
        if let Some(c) = header.captures(line) {
            section = c[1].to_owned();
            if let Some((parent, child)) = section.split_once('.') {
                out.push((parent.to_owned(), child.to_owned(), i + 1));
            }
        } else if let Some(c) = key.captures(line) {
            if !section.contains('.') {
                out.push((section.clone(), c[1].to_owned(), i + 1));
            }
        }
    }
    out
}

#[test]
fn every_config_key_is_in_default_toml_and_every_key_there_exists() {
    let code: BTreeSet<(String, String)> = config_keys()
        .into_iter()
        .map(|(s, k)| (s.to_owned(), k.to_owned()))
        .collect();
    let docs = docs();
    let toml = doc(&docs, "config/default.toml");
    let shown = default_toml_keys(toml);
    let mut problems = Vec::new();
    for (section, key, line) in &shown {
        if !code.contains(&(section.clone(), key.clone())) {
            problems.push(format!(
                "config/default.toml:{line}: [{section}] {key} is not a key the configuration file accepts"
            ));
        }
    }
    for (section, key) in &code {
        if !shown.iter().any(|(s, k, _)| s == section && k == key) {
            problems.push(format!(
                "[{section}] {key} (src: the section's definition) is not shown in config/default.toml"
            ));
        }
    }
    // The [service] keys with their flags and variables: OPERATIONS.md's settings table.
    let ops = doc(&docs, "docs/OPERATIONS.md");
    let cells: BTreeSet<&str> = ops
        .text
        .lines()
        .filter(|l| l.starts_with("| `-"))
        .filter_map(|l| l.split('|').nth(3))
        .map(|c| c.trim().trim_matches('`'))
        .collect();
    for (section, key) in &code {
        if section == "service" && key != "kafka" && !cells.contains(key.as_str()) {
            problems.push(format!(
                "[service] {key} has no row in docs/OPERATIONS.md's settings table"
            ));
        }
    }
    report(problems, "configuration keys out of step");
}

#[test]
fn every_config_key_the_docs_name_exists() {
    let code: BTreeSet<(String, String)> = config_keys()
        .into_iter()
        .map(|(s, k)| (s.to_owned(), k.to_owned()))
        .collect();
    let mut sections: BTreeSet<String> = code.iter().map(|(s, _)| s.clone()).collect();
    sections.insert("service.kafka".to_owned());
    // `[dedup] threshold`, `[service.kafka]`, `[index] retention = "30d"`.
    let bracketed = Regex::new(r"^\[([a-z_.]+)\](?:\s+([a-z_][a-z0-9_]*))?").unwrap();
    // `service.kafka`, `index.retention` (not `dedup.match`, the output's member, nor `service.rs`).
    let dotted = Regex::new(r"^(input|fingerprint|index|image|service)\.([a-z_]+)$").unwrap();
    let mut problems = Vec::new();
    for doc in docs() {
        if !doc.is_markdown() {
            continue;
        }
        for (at, span) in code_spans(&doc) {
            let span = span.trim();
            let named = if let Some(c) = bracketed.captures(span) {
                Some((c[1].to_owned(), c.get(2).map(|k| k.as_str().to_owned())))
            } else {
                dotted
                    .captures(span)
                    .filter(|c| &c[2] != "rs")
                    .map(|c| (c[1].to_owned(), Some(c[2].to_owned())))
            };
            let Some((section, key)) = named else {
                continue;
            };
            let exists = match &key {
                _ if section.contains('.') => sections.contains(&section) && key.is_none(),
                None => sections.contains(&section),
                Some(k) => code.contains(&(section.clone(), k.clone())),
            };
            if !exists {
                problems.push(format!(
                    "{}:{}: `{span}` names no key of the configuration file",
                    doc.path,
                    doc.line_of(at)
                ));
            }
        }
        if doc.path == "docs/OPERATIONS.md" {
            for (i, line) in doc.text.lines().enumerate() {
                if !line.starts_with("| `-") {
                    continue;
                }
                let Some(cell) = line.split('|').nth(3).map(str::trim) else {
                    continue;
                };
                let key = cell.trim_matches('`');
                if cell.starts_with('`')
                    && !key.starts_with('[')
                    && !code.contains(&("service".to_owned(), key.to_owned()))
                {
                    problems.push(format!(
                        "docs/OPERATIONS.md:{}: `{key}` is no [service] key",
                        i + 1
                    ));
                }
            }
        }
    }
    report(problems, "configuration keys in the docs that do not exist");
}

#[test]
fn every_environment_variable_the_docs_name_is_read() {
    let cli = cli();
    let var = Regex::new(r"NEWSDEDUP_[A-Z0-9_]*[A-Z0-9]").unwrap();
    // Variables of the scripts, benches, examples and tests (`NEWSDEDUP_BENCH_SIZES`, ...).
    let elsewhere: String = ["scripts", "benches", "examples", "tests"]
        .iter()
        .flat_map(|dir| files_under(dir, |_| true))
        .filter_map(|p| std::fs::read_to_string(repo_file(&p)).ok())
        .collect();
    let mut problems = Vec::new();
    for doc in docs() {
        for m in var.find_iter(&doc.text) {
            let name = m.as_str();
            let read = cli.env.contains(name)
                || name == newsdedup::service::LOG_ENV
                || name.starts_with(newsdedup::kafka::properties::KAFKA_ENV_PREFIX)
                || elsewhere.contains(name);
            if !read {
                problems.push(format!(
                    "{}:{}: {name} is read by no command (--help's [env: ...]) nor script",
                    doc.path,
                    doc.line_of(m.start())
                ));
            }
        }
    }
    report(problems, "environment variables nothing reads");
}

#[test]
fn every_topic_the_docs_name_exists_and_each_is_documented() {
    let defaults = ServiceConfig::default();
    let topics = [
        defaults.input_topic,
        defaults.unique_topic,
        defaults.duplicate_topic,
        defaults.dlq_topic,
        defaults.corrections_topic,
    ];
    let count = [
        "zero", "one", "two", "three", "four", "five", "six", "seven", "eight",
    ][topics.len()];
    let name = Regex::new(r"\barticles\.[a-z_]+").unwrap();
    let counted = Regex::new(r"(?i)\b(two|three|four|five|six|seven|eight) topics\b").unwrap();
    let docs = docs();
    let mut problems = Vec::new();
    for doc in &docs {
        for m in name.find_iter(&doc.text) {
            let t = m.as_str();
            if !topics.iter().any(|d| d == t) && !EXAMPLE_TOPICS.contains(&t) {
                problems.push(format!(
                    "{}:{}: topic {t} is none of the service's topics ({})",
                    doc.path,
                    doc.line_of(m.start()),
                    topics.join(", ")
                ));
            }
        }
        for c in counted.captures_iter(&doc.text) {
            if !c[1].eq_ignore_ascii_case(count) {
                let m = c.get(0).unwrap();
                problems.push(format!(
                    "{}:{}: \"{}\": the service has {count} topics",
                    doc.path,
                    doc.line_of(m.start()),
                    m.as_str()
                ));
            }
        }
    }
    for path in [
        "README.md",
        "docs/REFERENCE.md",
        "docs/OPERATIONS.md",
        "docker/docker-compose.yml",
    ] {
        let text = &doc(&docs, path).text;
        for t in &topics {
            if !text.contains(t.as_str()) {
                problems.push(format!("{path} does not name the topic {t}"));
            }
        }
    }
    report(problems, "topics out of step");
}

#[test]
fn every_repository_path_the_docs_name_exists() {
    // `src/kafka/stop.rs`, `tests/core/cli_batch.rs`, `../docker/alerts.yml`; not a path under
    // a build directory (`$CARGO_TARGET_DIR/release/examples/kafka_load`).
    let path = Regex::new(
        r"(^|\.\./|[^A-Za-z0-9_./-])((?:src|tests|scripts|docs|docker|config|examples|benches|schemas|vendor)/[A-Za-z0-9_./-]*[A-Za-z0-9_])",
    )
    .unwrap();
    let mut problems = Vec::new();
    for doc in docs() {
        for c in path.captures_iter(&doc.text) {
            let m = c.get(2).unwrap();
            if !repo_file(m.as_str()).exists() {
                problems.push(format!(
                    "{}:{}: {} does not exist",
                    doc.path,
                    doc.line_of(m.start()),
                    m.as_str()
                ));
            }
        }
    }
    report(problems, "paths in the docs that are not in the repository");
}

#[test]
fn the_settings_table_gives_each_flag_its_variable_and_default() {
    // `run --help`: each option's `[env: NAME=]` and `[default: VALUE]`, which may follow on
    // later lines.
    let text = help(&["run"]);
    let option = Regex::new(r"^\s+(?:-[A-Za-z], )?(--[a-z0-9-]+|-[A-Za-z])\b").unwrap();
    let env = Regex::new(r"\[env: ([A-Z0-9_]+)=").unwrap();
    let default = Regex::new(r"\[default: ([^\]\[]+)\]").unwrap();
    let mut code: BTreeMap<String, (Option<String>, Option<String>)> = BTreeMap::new();
    let mut current = String::new();
    for line in text.lines() {
        if let Some(c) = option.captures(line) {
            current = c[1].to_owned();
        }
        let entry = code.entry(current.clone()).or_default();
        if let Some(c) = env.captures(line) {
            entry.0 = Some(c[1].to_owned());
        }
        if let Some(c) = default.captures(line) {
            entry.1 = Some(c[1].to_owned());
        }
    }
    let docs = docs();
    let ops = doc(&docs, "docs/OPERATIONS.md");
    let mut problems = Vec::new();
    for (i, line) in ops.text.lines().enumerate() {
        if !line.starts_with("| `-") {
            continue;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let flag = cells[1]
            .trim_matches('`')
            .split([' ', '`'])
            .next()
            .unwrap_or_default();
        let Some((code_env, code_default)) = code.get(flag) else {
            problems.push(format!(
                "docs/OPERATIONS.md:{}: {flag} is not a flag of `newsdedup run`",
                i + 1
            ));
            continue;
        };
        let doc_env = cells[2].trim_matches('`');
        if let Some(e) = code_env.as_deref().filter(|e| *e != doc_env) {
            problems.push(format!(
                "docs/OPERATIONS.md:{}: {flag}'s variable is {e}, not {doc_env}",
                i + 1
            ));
        }
        let doc_default = cells[4].trim_start_matches('`');
        if let Some(d) = code_default
            .as_deref()
            .filter(|d| !doc_default.starts_with(*d))
        {
            problems.push(format!(
                "docs/OPERATIONS.md:{}: {flag}'s default is {d}, the table says {}",
                i + 1,
                cells[4]
            ));
        }
    }
    report(
        problems,
        "rows of the settings table out of step with `run --help`",
    );
}

#[test]
fn the_index_layout_the_docs_name_is_the_current_one() {
    // PERFORMANCE.md may compare with earlier layouts; the others describe this one.
    let layout = Regex::new(r"newsdedup-index/[0-9]+").unwrap();
    let current = newsdedup::index::layout::FORMAT_VERSION;
    let mut problems = Vec::new();
    for doc in docs().iter().filter(|d| d.path != "docs/PERFORMANCE.md") {
        for m in layout.find_iter(&doc.text) {
            if m.as_str() != current {
                problems.push(format!(
                    "{}:{}: {} is not the index's layout, {current} (src/index/layout.rs)",
                    doc.path,
                    doc.line_of(m.start()),
                    m.as_str()
                ));
            }
        }
    }
    report(problems, "index layouts that are not the current one");
}

#[test]
fn every_test_the_docs_name_exists() {
    // A long snake_case name in a span (`an_index_of_the_previous_layout_is_refused_naming_index_rebuild`)
    // is a function of this repository: a test, or what a test calls. Not a metric, nor
    // librdkafka's (`rd_kafka_...`).
    let name = Regex::new(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+){4,}$").unwrap();
    let sources: String = ["src", "tests", "benches", "examples"]
        .iter()
        .flat_map(|dir| files_under(dir, |p| p.extension().is_some_and(|e| e == "rs")))
        .filter_map(|p| std::fs::read_to_string(repo_file(&p)).ok())
        .collect();
    let mut problems = Vec::new();
    for doc in docs().iter().filter(|d| d.is_markdown()) {
        for (at, span) in code_spans(doc) {
            if !name.is_match(span)
                || span.starts_with("newsdedup_")
                || span.starts_with("rd_kafka_")
            {
                continue;
            }
            if !sources.contains(&format!("fn {span}(")) {
                problems.push(format!(
                    "{}:{}: no function {span} in src/, tests/, benches/ or examples/",
                    doc.path,
                    doc.line_of(at)
                ));
            }
        }
    }
    report(problems, "functions the docs name that do not exist");
}
