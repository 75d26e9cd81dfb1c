//! The Kafka test harness: a local Tansu broker (scripts/broker.sh) per test and the
//! `newsdedup run` process, both stopped on drop (panics included), plus small HTTP and
//! Prometheus-text helpers.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// librdkafka settings that make Tansu's group join take ~3 s instead of ~23 s.
pub const FAST_GROUP: [&str; 6] = [
    "-X",
    "session.timeout.ms=6000",
    "-X",
    "heartbeat.interval.ms=500",
    "-X",
    "max.poll.interval.ms=10000",
];

// ---------------------------------------------------------------------------------------------
// Broker

pub struct Broker {
    pub state: PathBuf,
    pub bootstrap: String,
}

pub fn broker_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/broker.sh")
}

impl Broker {
    pub fn start(dir: &Path) -> Broker {
        let state = dir.join("broker");
        let out = Command::new("bash")
            .arg(broker_script())
            .arg("start")
            .arg("--state-dir")
            .arg(&state)
            .stderr(Stdio::inherit())
            .output()
            .expect("run scripts/broker.sh");
        assert!(out.status.success(), "broker.sh start failed");
        let bootstrap = String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .expect("bootstrap line")
            .trim()
            .to_owned();
        Broker { state, bootstrap }
    }

    pub fn create_topics(&self, specs: &[&str]) {
        let status = Command::new("bash")
            .arg(broker_script())
            .arg("create-topics")
            .arg("--state-dir")
            .arg(&self.state)
            .args(specs)
            .status()
            .expect("run scripts/broker.sh");
        assert!(status.success(), "create-topics failed");
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(broker_script())
            .arg("stop")
            .arg("--state-dir")
            .arg(&self.state)
            .status();
    }
}

// ---------------------------------------------------------------------------------------------
// Service process

pub struct Service {
    pub child: Child,
    pub log: PathBuf,
    pub metrics: String,
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

pub fn start_service(brokers: &str, index: &Path, log: &Path, extra: &[&str]) -> Service {
    let port = free_port();
    let metrics = format!("127.0.0.1:{port}");
    let log_file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("service log");
    let child = Command::new(env!("CARGO_BIN_EXE_newsdedup"))
        .arg("run")
        .args(["--brokers", brokers, "--metrics-addr", &metrics])
        .arg("--index-dir")
        .arg(index)
        .args(FAST_GROUP)
        .args(extra)
        .env("NEWSDEDUP_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log_file)
        .spawn()
        .expect("spawn newsdedup run");
    Service {
        child,
        log: log.to_owned(),
        metrics,
    }
}

impl Service {
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// SIGTERM; returns the exit status and how long the process took to exit.
    pub fn terminate(&mut self, limit: Duration) -> (ExitStatus, Duration) {
        let start = Instant::now();
        self.signal("-TERM");
        self.wait(limit)
            .map(|s| (s, start.elapsed()))
            .unwrap_or_else(|| panic!("no exit within {limit:?} of SIGTERM; log:\n{}", self.log()))
    }

    pub fn wait(&mut self, limit: Duration) -> Option<ExitStatus> {
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    pub fn kill9(&mut self) {
        self.child.kill().expect("kill -9");
        let _ = self.child.wait();
    }

    pub fn http(&self, path: &str) -> Option<(u16, String)> {
        http_get(&self.metrics, path)
    }

    /// Waits until the HTTP endpoint answers.
    pub fn wait_http(&self) {
        let start = Instant::now();
        while self.http("/health").is_none() {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "no /health; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    let status = buf.split_whitespace().nth(1)?.parse().ok()?;
    let body = buf
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Some((status, body))
}

/// The value of a Prometheus sample (`name{labels} value`), summed over matching lines.
pub fn metric(text: &str, name_and_labels: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(k, _)| *k == name_and_labels)
        .filter_map(|(_, v)| v.parse::<f64>().ok())
        .sum()
}
