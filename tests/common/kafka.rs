//! The Kafka test harness: a local Tansu broker (scripts/broker.sh) per test and the
//! `newsdedup run` process, both stopped on drop (panics included), plus small HTTP and
//! Prometheus-text helpers.

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::ClientConfig;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
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
    super::repo_file("scripts/broker.sh")
}

impl Broker {
    pub fn start(dir: &Path) -> Broker {
        Broker::start_with(dir, &[])
    }

    /// Like `start`, with more `scripts/broker.sh start` options, e.g. `["--advertised",
    /// "127.0.0.1:PORT"]` (the broker puts that address in its metadata, e.g. a TLS proxy in front
    /// of it; `bootstrap` stays the plain listen address, used by `create_topics`) or
    /// `["--authentication"]`.
    pub fn start_with(dir: &Path, options: &[&str]) -> Broker {
        let state = dir.join("broker");
        let mut cmd = Command::new("bash");
        cmd.arg(broker_script())
            .arg("start")
            .arg("--state-dir")
            .arg(&state)
            .args(options);
        let out = cmd
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

    /// The service's topics: `articles.raw` with `input_partitions`, the three outputs with one.
    pub fn create_service_topics(&self, input_partitions: u32) {
        let raw = format!("articles.raw:{input_partitions}");
        self.create_topics(&[
            &raw,
            "articles.unique:1",
            "articles.duplicate:1",
            "articles.dlq:1",
        ]);
    }

    /// The broker's process id (from the state directory).
    pub fn pid(&self) -> u32 {
        let text = std::fs::read_to_string(self.state.join("broker.pid")).expect("broker.pid");
        text.trim().parse().expect("broker pid")
    }

    /// Freezes the broker process (SIGSTOP): its connections stay open and nothing is answered,
    /// what clients see of a hung or overloaded broker. It runs again (SIGCONT) when the guard
    /// is dropped, panics included, so that it can be stopped.
    pub fn freeze(&self) -> Frozen {
        let pid = self.pid();
        assert!(signal_pid(pid, "-STOP"), "cannot freeze broker pid {pid}");
        Frozen { pid }
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

/// A frozen broker (see [`Broker::freeze`]); dropping it lets the broker run again.
pub struct Frozen {
    pid: u32,
}

impl Drop for Frozen {
    fn drop(&mut self) {
        // No assert: this also runs while a failed test unwinds.
        if !signal_pid(self.pid, "-CONT") {
            eprintln!("cannot thaw broker pid {}", self.pid);
        }
    }
}

fn signal_pid(pid: u32, sig: &str) -> bool {
    Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success())
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
    start_command("run", brokers, index, log, extra)
}

/// `newsdedup <command>` (`run` or `standby`, which take the same settings) with the test
/// defaults of `start_service`.
pub fn start_command(
    command: &str,
    brokers: &str,
    index: &Path,
    log: &Path,
    extra: &[&str],
) -> Service {
    start_with_group_settings(command, brokers, index, log, &FAST_GROUP, extra)
}

/// Like `start_command` with other group settings than [`FAST_GROUP`] (none: librdkafka's).
pub fn start_with_group_settings(
    command: &str,
    brokers: &str,
    index: &Path,
    log: &Path,
    group: &[&str],
    extra: &[&str],
) -> Service {
    let port = free_port();
    let metrics = format!("127.0.0.1:{port}");
    let log_file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("service log");
    let child = Command::new(env!("CARGO_BIN_EXE_newsdedup"))
        .arg(command)
        .args(["--brokers", brokers, "--metrics-addr", &metrics])
        .arg("--index-dir")
        .arg(index)
        .args(group)
        .args(extra)
        // The revoke wait must stay below max.poll.interval.ms (refused otherwise).
        .args(
            (!extra.contains(&"--rebalance-timeout-ms"))
                .then_some(["--rebalance-timeout-ms", "5000"])
                .into_iter()
                .flatten(),
        )
        .env("NEWSDEDUP_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log_file)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn newsdedup {command}: {e}"));
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

// ---------------------------------------------------------------------------------------------
// Records in and out

#[derive(Clone, Debug)]
pub struct Input {
    pub key: Option<String>,
    pub value: Vec<u8>,
    /// Some(reason) for a malformed record.
    pub bad: Option<&'static str>,
    /// Article id for a valid record.
    pub id: Option<String>,
}

/// Produces `inputs` in order; returns (partition, offset) of each.
pub fn produce(
    brokers: &str,
    topic: &str,
    inputs: &[Input],
    partition: Option<i32>,
) -> Vec<(i32, i64)> {
    produce_paced(brokers, topic, inputs, partition, None)
}

/// Like `produce`, at most `per_sec` records per second if given.
pub fn produce_paced(
    brokers: &str,
    topic: &str,
    inputs: &[Input],
    partition: Option<i32>,
    per_sec: Option<u32>,
) -> Vec<(i32, i64)> {
    produce_records(brokers, topic, inputs, partition, per_sec, None, &[])
}

/// Like `produce`, each record with these headers too.
pub fn produce_with_headers(
    brokers: &str,
    topic: &str,
    inputs: &[Input],
    headers: &[(&str, Vec<u8>)],
    partition: Option<i32>,
) -> Vec<(i32, i64)> {
    produce_records(brokers, topic, inputs, partition, None, None, headers)
}

/// Like `produce`, with the record timestamp (CreateTime, Unix ms) of each input given.
pub fn produce_at(
    brokers: &str,
    topic: &str,
    inputs: &[Input],
    timestamps_ms: &[i64],
    partition: Option<i32>,
) -> Vec<(i32, i64)> {
    assert_eq!(inputs.len(), timestamps_ms.len());
    produce_records(
        brokers,
        topic,
        inputs,
        partition,
        None,
        Some(timestamps_ms),
        &[],
    )
}

fn produce_records(
    brokers: &str,
    topic: &str,
    inputs: &[Input],
    partition: Option<i32>,
    per_sec: Option<u32>,
    timestamps_ms: Option<&[i64]>,
    extra_headers: &[(&str, Vec<u8>)],
) -> Vec<(i32, i64)> {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("linger.ms", "5")
        .set("message.max.bytes", "2000000")
        // A send retried after a lost connection is not written twice.
        .set("enable.idempotence", "true")
        .create()
        .expect("producer");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let mut futures = Vec::with_capacity(inputs.len());
        let start = Instant::now();
        for (i, input) in inputs.iter().enumerate() {
            if let Some(rate) = per_sec {
                let due = start + Duration::from_secs_f64(i as f64 / f64::from(rate));
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    tokio::time::sleep(wait).await;
                }
            }
            let mut headers = OwnedHeaders::new().insert(Header {
                key: "test.seq",
                value: Some(&i.to_string()),
            });
            for (key, value) in extra_headers {
                headers = headers.insert(Header {
                    key,
                    value: Some(value.as_slice()),
                });
            }
            let mut r: FutureRecord<'_, str, [u8]> = FutureRecord::to(topic)
                .payload(input.value.as_slice())
                .headers(headers);
            if let Some(k) = &input.key {
                r = r.key(k.as_str());
            }
            if let Some(p) = partition {
                r = r.partition(p);
            }
            if let Some(ts) = timestamps_ms {
                r = r.timestamp(ts[i]);
            }
            futures.push(
                producer
                    .send_result(r)
                    .map_err(|(e, _)| e)
                    .expect("enqueue"),
            );
        }
        let mut coords = Vec::with_capacity(futures.len());
        for f in futures {
            let d = f
                .await
                .expect("delivery future")
                .map_err(|(e, _)| e)
                .expect("delivered");
            coords.push((d.partition, d.offset));
        }
        coords
    })
}

// ---------------------------------------------------------------------------------------------
// Output

#[derive(Clone, Debug)]
pub struct Output {
    pub topic: String,
    /// Where the record itself is (its source is in its headers).
    pub partition: i32,
    pub offset: i64,
    pub key: Option<String>,
    pub value: Vec<u8>,
    pub headers: HashMap<String, String>,
}

impl Output {
    pub fn source(&self) -> (i32, i64) {
        let p = self.headers["newsdedup.source.partition"]
            .parse()
            .expect("partition header");
        let o = self.headers["newsdedup.source.offset"]
            .parse()
            .expect("offset header");
        (p, o)
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.value).expect("output JSON")
    }
}

pub struct Reader {
    pub consumer: BaseConsumer,
    pub got: Vec<Output>,
}

impl Reader {
    pub fn new(brokers: &str, topics: &[(&str, i32)]) -> Reader {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", brokers)
            .set("group.id", "test-reader")
            .set("enable.auto.commit", "false")
            .set("fetch.wait.max.ms", "50")
            .create()
            .expect("reader");
        let mut tpl = TopicPartitionList::new();
        for (t, parts) in topics {
            for p in 0..*parts {
                tpl.add_partition_offset(t, p, Offset::Beginning)
                    .expect("tpl");
            }
        }
        consumer.assign(&tpl).expect("assign");
        Reader {
            consumer,
            got: Vec::new(),
        }
    }

    pub fn poll_for(&mut self, d: Duration) {
        let start = Instant::now();
        while start.elapsed() < d {
            match self.consumer.poll(Duration::from_millis(50)) {
                Some(Ok(m)) => self.got.push(Output {
                    topic: m.topic().to_owned(),
                    partition: m.partition(),
                    offset: m.offset(),
                    key: m.key().map(|k| String::from_utf8_lossy(k).into_owned()),
                    value: m.payload().unwrap_or_default().to_vec(),
                    headers: headers_of(&m),
                }),
                Some(Err(e)) => eprintln!("reader: {e}"),
                None => {}
            }
        }
    }

    /// Polls until at least `n` outputs have been read, or panics after `limit`.
    pub fn wait_outputs(&mut self, n: usize, limit: Duration, log: &dyn Fn() -> String) {
        let start = Instant::now();
        while self.got.len() < n {
            assert!(
                start.elapsed() < limit,
                "{} of {n} outputs after {limit:?}; service log:\n{}",
                self.got.len(),
                log()
            );
            self.poll_for(Duration::from_millis(20));
        }
    }

    /// Polls until every coordinate in `want` is answered by some output, or panics.
    pub fn wait_covered(
        &mut self,
        want: &HashSet<(i32, i64)>,
        limit: Duration,
        log: &dyn Fn() -> String,
    ) {
        let start = Instant::now();
        loop {
            let covered: HashSet<(i32, i64)> = self.got.iter().map(Output::source).collect();
            let mut missing: Vec<&(i32, i64)> = want.difference(&covered).collect();
            if missing.is_empty() {
                return;
            }
            missing.sort_unstable();
            assert!(
                start.elapsed() < limit,
                "{} of {} inputs have no output after {limit:?}, e.g. {:?}; service log:\n{}",
                missing.len(),
                want.len(),
                &missing[..missing.len().min(5)],
                log()
            );
            self.poll_for(Duration::from_millis(200));
        }
    }
}

/// The coordinates of `n` records produced by `produce*` (in produce order), read back from
/// `topic` by their `test.seq` header: a delivery report can lack the offset (an idempotent
/// send retried after a lost connection, already written by the first try, reports -1).
pub fn coords_by_seq(brokers: &str, topic: &str, partitions: i32, n: usize) -> Vec<(i32, i64)> {
    let mut reader = Reader::new(brokers, &[(topic, partitions)]);
    let start = Instant::now();
    while reader.got.len() < n {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "read back {} of {n} records of {topic}",
            reader.got.len()
        );
        reader.poll_for(Duration::from_millis(100));
    }
    let mut coords = vec![(-1, -1); n];
    for r in &reader.got {
        let seq: usize = r.headers["test.seq"].parse().expect("test.seq header");
        coords[seq] = (r.partition, r.offset);
    }
    coords
}

/// A consumed record's headers, values read as (lossy) UTF-8.
pub fn headers_of(m: &impl Message) -> HashMap<String, String> {
    m.headers()
        .map(|h| {
            h.iter()
                .map(|h| {
                    (
                        h.key.to_owned(),
                        String::from_utf8_lossy(h.value.unwrap_or_default()).into_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A client of consumer group `group` that joins nothing: for reading and moving its offsets.
fn group_client(brokers: &str, group: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer")
}

pub fn committed(brokers: &str, group: &str, topic: &str, partitions: i32) -> BTreeMap<i32, i64> {
    let consumer = group_client(brokers, group);
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition(topic, p);
    }
    let c = consumer
        .committed_offsets(tpl, Duration::from_secs(10))
        .expect("committed offsets");
    c.elements_for_topic(topic)
        .iter()
        .map(|e| (e.partition(), e.offset().to_raw().unwrap_or(-1)))
        .collect()
}

/// Moves group `group`'s committed offset of `topic` [`partition`] to `offset` (the group has no
/// member): what an operator's reset, or the broker's expiry of the group's offsets, leaves.
pub fn commit_group(brokers: &str, group: &str, topic: &str, partition: i32, offset: i64) {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, Offset::Offset(offset))
        .expect("offset");
    group_client(brokers, group)
        .commit(&tpl, rdkafka::consumer::CommitMode::Sync)
        .expect("commit");
}

/// Waits until the service's group (`newsdedup`) has committed exactly `ends` on `articles.raw`
/// (one entry per partition), or panics after `limit`.
pub fn wait_committed(
    brokers: &str,
    ends: &BTreeMap<i32, i64>,
    limit: Duration,
    log: &dyn Fn() -> String,
) {
    let start = Instant::now();
    let partitions = i32::try_from(ends.len()).expect("partition count");
    loop {
        let c = committed(brokers, "newsdedup", "articles.raw", partitions);
        if &c == ends {
            return;
        }
        assert!(
            start.elapsed() < limit,
            "committed {c:?}, not {ends:?}, after {limit:?}; service log:\n{}",
            log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Highest offset + 1 per partition of the produced records.
pub fn ends(coords: &[(i32, i64)]) -> BTreeMap<i32, i64> {
    let mut m = BTreeMap::new();
    for &(p, o) in coords {
        let e = m.entry(p).or_insert(0);
        *e = (*e).max(o + 1);
    }
    m
}
