//! What the container image (docker/Dockerfile) and the Compose file rely on: `index stats` and
//! `index verify` find the index as `run` does (`NEWSDEDUP_INDEX_DIR`, `[service] index_dir`),
//! `newsdedup health` (the image's HEALTHCHECK) asks the metrics address `run` serves, and every
//! `NEWSDEDUP_*` variable the files under docker/ set is one the service reads.
//! scripts/image_test.sh builds and runs the image itself.

use crate::common::{self, repo_file};

use serde_json::Value;
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};

/// The binary with no `NEWSDEDUP_*` variable of the caller's environment.
fn bin() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_newsdedup"));
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("NEWSDEDUP_") {
            command.env_remove(name);
        }
    }
    command
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn articles_in(stats: &Output) -> u64 {
    assert!(stats.status.success(), "index stats: {}", stderr(stats));
    let stats: Value = serde_json::from_slice(&stats.stdout).unwrap();
    stats["articles"].as_u64().unwrap()
}

fn config_file(dir: &Path, service: &str) -> std::path::PathBuf {
    let path = dir.join("config.toml");
    std::fs::write(&path, format!("[service]\n{service}\n")).unwrap();
    path
}

#[test]
fn index_stats_and_verify_find_the_index_as_run_does() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    let decided = common::run_batch(
        &repo_file(common::SAMPLE),
        &dir.path().join("out.jsonl"),
        &index,
    );
    let indexed = decided
        .iter()
        .filter(|o| o["dedup"]["decision"] != "invalid")
        .count() as u64;
    assert!(indexed > 0);
    let stats = || {
        let mut command = bin();
        command.args(["index", "stats", "--json"]);
        command
    };

    // The variable the image sets.
    let out = stats().env("NEWSDEDUP_INDEX_DIR", &index).output().unwrap();
    assert_eq!(articles_in(&out), indexed);
    // The configuration file's [service] index_dir, as `run` reads it.
    let config = config_file(dir.path(), &format!("index_dir = {index:?}"));
    let out = stats().arg("--config").arg(&config).output().unwrap();
    assert_eq!(articles_in(&out), indexed);
    // The variable overrides the file, the flag overrides both.
    let elsewhere = dir.path().join("no-index-here");
    let out = stats()
        .arg("--config")
        .arg(&config)
        .env("NEWSDEDUP_INDEX_DIR", &elsewhere)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(stderr(&out).contains("no-index-here"), "{}", stderr(&out));
    let out = stats()
        .arg("--index-dir")
        .arg(&index)
        .env("NEWSDEDUP_INDEX_DIR", &elsewhere)
        .output()
        .unwrap();
    assert_eq!(articles_in(&out), indexed);

    let verify = bin()
        .args(["index", "verify"])
        .env("NEWSDEDUP_INDEX_DIR", &index)
        .output()
        .unwrap();
    assert!(verify.status.success(), "index verify: {}", stderr(&verify));
}

/// A stand-in for the service's metrics server: /health answers 200, anything else 503.
fn fake_service() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut head = Vec::new();
            let mut byte = [0u8];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let (status, body) = if head.starts_with(b"GET /health ") {
                ("200 OK", "{\"status\":\"ok\"}")
            } else {
                ("503 Service Unavailable", "{\"status\":\"waiting\"}")
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

#[test]
fn health_asks_the_metrics_address_run_serves() {
    let port = fake_service();
    let dir = tempfile::tempdir().unwrap();
    let health = |args: &[&str], env: Option<String>| {
        let mut command = bin();
        command.arg("health").args(args);
        if let Some(addr) = env {
            command.env("NEWSDEDUP_METRICS_ADDR", addr);
        }
        command.output().unwrap()
    };

    // The image's setting (0.0.0.0 is asked on the loopback).
    let out = health(&[], Some(format!("0.0.0.0:{port}")));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "{\"status\":\"ok\"}"
    );
    // [service] metrics_addr of the configuration file.
    let config = config_file(dir.path(), &format!("metrics_addr = \"127.0.0.1:{port}\""));
    let config = config.to_str().unwrap();
    let out = health(&["--config", config], None);
    assert!(out.status.success(), "{}", stderr(&out));
    // A service that is not ready, and none at all: exit 1, saying what answered or where.
    let out = health(&["--ready"], Some(format!("127.0.0.1:{port}")));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("/ready on 127.0.0.1:"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("answered 503"), "{}", stderr(&out));
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let out = health(&["--timeout", "2"], Some(closed.to_string()));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no answer to /health"),
        "{}",
        stderr(&out)
    );
}

/// The `NEWSDEDUP_*` names in `text`, without placeholders (`NEWSDEDUP_*`, `NEWSDEDUP_KAFKA_<NAME>`).
fn variables_in(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("NEWSDEDUP_") {
        let name: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        rest = &rest[at + name.len()..];
        if !name.ends_with('_') {
            names.insert(name);
        }
    }
    names
}

#[test]
fn every_variable_the_docker_files_set_is_one_the_service_reads() {
    // What `run` reads: its flags' variables (as --help lists them), the config file's, the log
    // filter's and the librdkafka properties' prefix.
    let help = bin().args(["run", "--help"]).output().unwrap();
    assert!(help.status.success());
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let mut read: BTreeSet<String> = help
        .split("[env: ")
        .skip(1)
        .filter_map(|s| s.split('=').next())
        .map(str::to_owned)
        .collect();
    assert!(
        read.contains("NEWSDEDUP_BROKERS") && read.contains("NEWSDEDUP_CONFIG"),
        "{read:?}"
    );
    read.insert(newsdedup::service::LOG_ENV.to_owned());
    let kafka = newsdedup::kafka::properties::KAFKA_ENV_PREFIX;

    for file in ["docker/docker-compose.yml", "docker/Dockerfile"] {
        let text = std::fs::read_to_string(repo_file(file)).unwrap();
        let set = variables_in(&text);
        assert!(set.contains("NEWSDEDUP_METRICS_ADDR"), "{file}: {set:?}");
        let unknown: Vec<&String> = set
            .iter()
            .filter(|v| !read.contains(*v) && !v.starts_with(kafka))
            .collect();
        assert!(
            unknown.is_empty(),
            "{file} names variables newsdedup does not read: {unknown:?} (it reads {read:?} and {kafka}*)"
        );
    }
}
