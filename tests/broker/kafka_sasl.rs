//! SASL logins for real: every command that talks to Kafka, through a broker that accepts only
//! clients that logged in.
//!
//! The local Tansu broker cannot hold SASL users (its memory storage loses them, and with
//! `--authentication` it refuses its own CLI), so each test puts scripts/sasl_proxy.py in front
//! of it: a SASL-terminating proxy that advertises the SASL APIs in its ApiVersions answer,
//! performs the PLAIN or SCRAM-SHA-256/512 exchange against the user it was started with, closes
//! a connection that sends anything else first, and after a login forwards every byte unchanged.
//! The broker advertises the proxy's address (`broker.sh start --advertised`), so every client
//! (the service, the test's producer and readers) comes back through it and logs in; for
//! SASL_SSL the TLS proxy of `kafka_tls` sits in front of the SASL proxy. Topics are created over
//! the broker's plain listen port (admin only). The service's password is read from a file
//! (`sasl.password.file`) and must appear in no command's output and not in `/metrics`.
//!
//! * `kafka_sasl_plain_run_commits_then_rebuild_and_audit_log_in`: PLAIN: `run` decides every
//!   article (the repost a duplicate of its original), commits to the end, /ready 200; then
//!   `index rebuild` reads every output back and `audit` reports the duplicate.
//! * `kafka_sasl_scram_sha_256_standby_and_replay_log_in`: SCRAM-SHA-256: `standby` follows what
//!   `run` publishes; `replay` decides the input again into a file.
//! * `kafka_sasl_scram_sha_512_correct_logs_in`: SCRAM-SHA-512: `correct release` is applied by
//!   `run` and republished.
//! * `kafka_sasl_refused_logins_end_commands_and_name_the_setting`: a wrong password (`correct`,
//!   `replay`, `standby`) and a mechanism the broker does not enable (`index rebuild`) each end the command
//!   within seconds with an error naming the setting; `run` with a wrong password stays unready
//!   (503, the reason naming the setting), decides and commits nothing, and stops cleanly.
//! * `kafka_sasl_ssl_run_decides_through_tls_and_sasl`: SASL_SSL (SCRAM-SHA-512 inside TLS).
//!
//! Each success also checks the proxy's log: the login of that mechanism was accepted and none
//! was refused, so a test passes only if the client really logged in.

use crate::common;
use crate::kafka_tls::{self, Clients, Output, Pki, Record};

use common::kafka::{start_command, start_service, Broker};
use serde_json::Value;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

const USER: &str = "newsdedup";
/// Distinctive, so that any echo of it is found.
const PASSWORD: &str = "pw-Q7vX2k-sasl-secret";
const WRONG_PASSWORD: &str = "pw-wrong-Z9mT4r";

// ---------------------------------------------------------------------------------------------
// SASL proxy (scripts/sasl_proxy.py)

struct SaslProxy {
    child: Child,
    stdin: Option<ChildStdin>,
    /// "127.0.0.1:PORT" (plain TCP, SASL required).
    addr: String,
    log: PathBuf,
}

impl SaslProxy {
    /// Starts the proxy accepting `USER`/`PASSWORD` with `mechanisms` (comma-separated); the
    /// upstream is given later by `forward_to`.
    fn start(dir: &Path, mechanisms: &str) -> SaslProxy {
        let log = dir.join("sasl_proxy.log");
        let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
        let mut child = Command::new(python)
            .arg(common::repo_file("scripts/sasl_proxy.py"))
            .args(["--user", &format!("{USER}:{PASSWORD}")])
            .args(["--mechanisms", mechanisms, "--upstream", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("proxy log"))
            .spawn()
            .expect("spawn scripts/sasl_proxy.py (needs python3)");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("proxy stdout"))
            .read_line(&mut line)
            .expect("proxy port line");
        let port: u16 = line.trim().parse().unwrap_or_else(|_| {
            panic!(
                "sasl_proxy.py printed {line:?}, not a port; its log:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            )
        });
        SaslProxy {
            stdin: child.stdin.take(),
            child,
            addr: format!("127.0.0.1:{port}"),
            log,
        }
    }

    fn forward_to(&mut self, upstream: &str) {
        let stdin = self.stdin.as_mut().expect("proxy stdin");
        writeln!(stdin, "{upstream}").expect("give the proxy its upstream");
        stdin.flush().expect("flush");
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for SaslProxy {
    fn drop(&mut self) {
        drop(self.stdin.take()); // EOF on stdin stops it too
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A broker reachable only through the SASL proxy (behind the TLS proxy when `tls` is set),
/// with the service's topics (`articles.raw` with 2 partitions) and `articles.corrections`.
/// Fields drop in order: proxies, then broker.
struct SaslBroker {
    tls: Option<kafka_tls::Proxy>,
    sasl: SaslProxy,
    _broker: Broker,
    /// What clients connect to: the outermost proxy.
    addr: String,
}

fn sasl_broker(dir: &Path, mechanisms: &str, tls: Option<&Pki>) -> SaslBroker {
    let mut sasl = SaslProxy::start(dir, mechanisms);
    let mut tls = tls.map(|pki| kafka_tls::Proxy::start(dir, &pki.cert, &pki.key));
    let addr = tls
        .as_ref()
        .map_or_else(|| sasl.addr.clone(), |p| p.addr.clone());
    let broker = Broker::start_with(dir, &["--advertised", addr.as_str()]);
    sasl.forward_to(&broker.bootstrap);
    if let Some(p) = &mut tls {
        p.forward_to(&sasl.addr);
    }
    broker.create_service_topics(2);
    broker.create_topics(&["articles.corrections:1"]);
    SaslBroker {
        tls,
        sasl,
        _broker: broker,
        addr,
    }
}

// ---------------------------------------------------------------------------------------------
// Settings

/// How a client logs in.
struct Login<'a> {
    mechanism: &'a str,
    password: &'a str,
    /// The CA for SASL_SSL; SASL_PLAINTEXT without.
    ca: Option<&'a Path>,
}

impl Login<'_> {
    fn protocol(&self) -> &'static str {
        if self.ca.is_some() {
            "SASL_SSL"
        } else {
            "SASL_PLAINTEXT"
        }
    }

    /// The test's own clients (the password as a property: they are not under test).
    fn clients(&self, brokers: &str) -> Clients {
        let mut properties: Vec<(String, String)> = [
            ("security.protocol", self.protocol()),
            ("sasl.mechanisms", self.mechanism),
            ("sasl.username", USER),
            ("sasl.password", self.password),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        if let Some(ca) = self.ca {
            properties.push(("ssl.ca.location".to_owned(), ca.display().to_string()));
        }
        Clients {
            brokers: brokers.to_owned(),
            properties,
        }
    }

    /// The `-X` arguments of a newsdedup command: the password from a file written in `dir`.
    fn args(&self, dir: &Path) -> Vec<String> {
        let file = dir.join(format!("password-{}", self.password));
        std::fs::write(&file, format!("{}\n", self.password)).expect("password file");
        let mut properties = vec![
            format!("security.protocol={}", self.protocol()),
            format!("sasl.mechanisms={}", self.mechanism),
            format!("sasl.username={USER}"),
            format!("sasl.password.file={}", file.display()),
        ];
        if let Some(ca) = self.ca {
            properties.push(format!("ssl.ca.location={}", ca.display()));
        }
        properties
            .into_iter()
            .flat_map(|p| ["-X".to_owned(), p])
            .collect()
    }
}

fn plain(mechanism: &str) -> Login<'_> {
    Login {
        mechanism,
        password: PASSWORD,
        ca: None,
    }
}

// ---------------------------------------------------------------------------------------------
// Checks

/// Neither password appears in `text` (a command's output, a log, `/metrics`).
fn assert_no_password(what: &str, text: &str) {
    for secret in [PASSWORD, WRONG_PASSWORD] {
        assert!(!text.contains(secret), "{what} shows a password:\n{text}");
    }
}

/// The proxy accepted a login with `mechanism` and refused none.
fn assert_logged_in(proxy: &SaslProxy, mechanism: &str) {
    let log = proxy.log();
    assert!(
        log.contains(&format!("{mechanism} login as '{USER}' accepted")),
        "no {mechanism} login in the proxy log:\n{log}"
    );
    assert!(!log.contains("refused"), "a login was refused:\n{log}");
    assert!(
        !log.contains("before authentication"),
        "a client skipped the login:\n{log}"
    );
    assert_no_password("the proxy log", &log);
}

fn svc_args(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// `newsdedup ARGS`, ended if it runs longer than `limit`: (status, stdout, stderr, elapsed).
fn newsdedup(args: &[String], limit: Duration) -> (Option<i32>, String, String, Duration) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (out, err) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_newsdedup"))
        .args(args)
        .env("NEWSDEDUP_LOG", "info")
        .stdout(std::fs::File::create(&out).expect("stdout file"))
        .stderr(std::fs::File::create(&err).expect("stderr file"))
        .spawn()
        .expect("spawn newsdedup");
    let status = loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            break s.code();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    (status, read(&out), read(&err), start.elapsed())
}

/// Runs `run` with `login` on `records` (produced first) and checks the service decided all of
/// them through the proxy, the repost as a duplicate of its original, and committed to the end:
/// returns the outputs; the service is stopped (SIGTERM, exit 0) unless `keep` is given, which
/// receives it running.
fn run_decides(
    dir: &Path,
    broker: &SaslBroker,
    login: &Login<'_>,
    keep: Option<&mut dyn FnMut(&mut common::kafka::Service)>,
) -> Vec<Output> {
    let clients = login.clients(&broker.addr);
    let (records, (original, repost)) = kafka_tls::articles(12);
    let ends = kafka_tls::produce(&clients, &records);
    let args = login.args(dir);
    let log = dir.join(format!("run-{}.log", login.mechanism));
    let mut service = start_service(&broker.addr, &dir.join("index"), &log, &svc_args(&args));
    service.wait_http();

    let outputs = kafka_tls::read_outputs(&clients, Duration::from_secs(90), records.len());
    assert_eq!(
        outputs.len(),
        records.len(),
        "every article decided once through SASL; service log:\n{}\nproxy log:\n{}",
        service.log(),
        broker.sasl.log()
    );
    let by_key: HashMap<&str, &Output> = outputs.iter().map(|o| (o.key.as_str(), o)).collect();
    for Record { id, .. } in &records {
        let o = by_key
            .get(id.as_str())
            .unwrap_or_else(|| panic!("no output for {id}"));
        assert_eq!(o.topic, format!("articles.{}", o.decision), "{id}");
    }
    let dup = by_key[repost.as_str()];
    assert_eq!(dup.topic, "articles.duplicate", "{}", dup.json);
    assert_eq!(dup.json["dedup"]["match"]["id"], Value::String(original));

    let (status, body) = service.http("/ready").expect("/ready");
    assert_eq!(status, 200, "{body}");
    let start = Instant::now();
    loop {
        let c = kafka_tls::committed(&clients);
        if ends.iter().all(|(p, e)| c.get(p) == Some(e)) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "committed {c:?}, want {ends:?}; log:\n{}",
            service.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let (_, metrics) = service.http("/metrics").expect("/metrics");
    assert!(metrics.contains("newsdedup_"), "{metrics}");
    assert_no_password("/metrics", &metrics);

    if let Some(keep) = keep {
        keep(&mut service);
    }
    let (status, _) = service.terminate(Duration::from_secs(40));
    assert!(status.success(), "exit {status:?}; log:\n{}", service.log());
    let log = service.log();
    assert_no_password("the run log", &log);
    assert!(
        !log.contains("SASL authentication error") && !log.contains("refused the SASL login"),
        "{log}"
    );
    outputs
}

// ---------------------------------------------------------------------------------------------
// Tests

/// PLAIN: `run` end to end, then `index rebuild` and `audit` read the outputs back.
#[test]
fn kafka_sasl_plain_run_commits_then_rebuild_and_audit_log_in() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let broker = sasl_broker(d, "PLAIN", None);
    let login = plain("PLAIN");
    let outputs = run_decides(d, &broker, &login, None);

    let mut rebuild: Vec<String> = ["index", "rebuild", "--brokers", &broker.addr, "--index-dir"]
        .map(str::to_owned)
        .into();
    rebuild.push(d.join("rebuilt").display().to_string());
    rebuild.extend(login.args(d));
    let (status, stdout, stderr, _) = newsdedup(&rebuild, Duration::from_secs(120));
    assert_eq!(status, Some(0), "index rebuild: {stderr}");
    assert_no_password("index rebuild", &(stdout.clone() + &stderr));
    let summary: Value = serde_json::from_str(stdout.trim()).expect("rebuild summary");
    assert_eq!(summary["records"], outputs.len(), "{summary}");

    let html = d.join("audit.html");
    let mut audit: Vec<String> = ["audit", "--brokers", &broker.addr, "--html"]
        .map(str::to_owned)
        .into();
    audit.push(html.display().to_string());
    audit.extend(login.args(d));
    let (status, stdout, stderr, _) = newsdedup(&audit, Duration::from_secs(120));
    assert_eq!(status, Some(0), "audit: {stderr}");
    assert_no_password("audit", &(stdout + &stderr));
    let report = std::fs::read_to_string(&html).expect("audit report");
    assert!(
        report.contains("repost-tls-"),
        "the duplicate in the report"
    );

    assert_logged_in(&broker.sasl, "PLAIN");
}

/// SCRAM-SHA-256: a `standby` follows what `run` publishes; `replay` decides the input again.
#[test]
fn kafka_sasl_scram_sha_256_standby_and_replay_log_in() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let broker = sasl_broker(d, "SCRAM-SHA-256", None);
    let login = plain("SCRAM-SHA-256");
    let args = login.args(d);
    let standby_log = d.join("standby.log");
    let mut standby = start_command(
        "standby",
        &broker.addr,
        &d.join("standby"),
        &standby_log,
        &svc_args(&args),
    );
    standby.wait_http();
    let outputs = run_decides(d, &broker, &login, None);
    let start = Instant::now();
    loop {
        let followed = standby
            .http("/metrics")
            .map(|(_, body)| common::kafka::metric(&body, "newsdedup_standby_records_total"))
            .unwrap_or(0.0);
        if followed >= outputs.len() as f64 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the standby read {followed} of {} outputs; log:\n{}",
            outputs.len(),
            standby.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let (_, metrics) = standby.http("/metrics").expect("/metrics");
    assert_no_password("the standby's /metrics", &metrics);
    let (status, _) = standby.terminate(Duration::from_secs(40));
    assert!(status.success(), "standby: {}", standby.log());
    assert_no_password("the standby log", &standby.log());

    let file = d.join("replayed.jsonl");
    let mut replay: Vec<String> = ["replay", "--brokers", &broker.addr, "--threads", "2"]
        .map(str::to_owned)
        .into();
    replay.extend([
        "--index-dir".to_owned(),
        d.join("replay-index").display().to_string(),
        "--output".to_owned(),
        file.display().to_string(),
    ]);
    replay.extend(args);
    let (status, stdout, stderr, _) = newsdedup(&replay, Duration::from_secs(120));
    assert_eq!(status, Some(0), "replay: {stderr}");
    assert_no_password("replay", &(stdout + &stderr));
    let lines = std::fs::read_to_string(&file).expect("replay output");
    assert_eq!(lines.lines().count(), outputs.len(), "{lines}");

    assert_logged_in(&broker.sasl, "SCRAM-SHA-256");
}

/// SCRAM-SHA-512: `correct release` is applied by `run` and republished.
#[test]
fn kafka_sasl_scram_sha_512_correct_logs_in() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let broker = sasl_broker(d, "SCRAM-SHA-512", None);
    let login = plain("SCRAM-SHA-512");
    let args = login.args(d);
    let records = kafka_tls::articles(12).0.len();
    let mut released = None;
    run_decides(
        d,
        &broker,
        &login,
        Some(&mut |_service: &mut common::kafka::Service| {
            let clients = login.clients(&broker.addr);
            let outputs = kafka_tls::read_outputs(&clients, Duration::from_secs(10), records);
            let dup = outputs
                .iter()
                .find(|o| o.topic == "articles.duplicate")
                .expect("a duplicate to release");
            let mut correct: Vec<String> = [
                "correct",
                "release",
                "--id",
                &dup.key,
                "--by",
                "editor",
                "--brokers",
                &broker.addr,
                "--wait",
                "60",
                "--quiet",
            ]
            .map(str::to_owned)
            .into();
            correct.extend(args.iter().cloned());
            let (status, stdout, stderr, _) = newsdedup(&correct, Duration::from_secs(120));
            assert_eq!(status, Some(0), "correct: {stderr}");
            assert_no_password("correct", &(stdout.clone() + &stderr));
            let said: Value = serde_json::from_str(stdout.trim()).expect("correct report");
            assert_eq!(said["outcome"], "applied", "{said}");
            let again = kafka_tls::read_outputs(&clients, Duration::from_secs(10), records + 1);
            // Topics are read one after another: the released record is the unique one.
            let now = again
                .iter()
                .find(|o| o.key == dup.key && o.topic == "articles.unique")
                .unwrap_or_else(|| panic!("{} not republished as unique", dup.key));
            released = Some((now.topic.clone(), now.json["dedup"]["correction"].clone()));
        }),
    );
    let (topic, correction) = released.expect("the correction ran");
    assert_eq!(topic, "articles.unique", "{correction}");
    assert_eq!(correction["by"], "editor", "{correction}");
    assert_logged_in(&broker.sasl, "SCRAM-SHA-512");
}

/// A wrong password and a mechanism the broker does not enable end each command quickly with
/// an error that names the setting; `run` with a wrong password stays unready and does nothing.
#[test]
fn kafka_sasl_refused_logins_end_commands_and_name_the_setting() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let broker = sasl_broker(d, "PLAIN,SCRAM-SHA-512", None);
    let limit = Duration::from_secs(60);
    let wrong = |mechanism| Login {
        mechanism,
        password: WRONG_PASSWORD,
        ca: None,
    };
    let b = broker.addr.as_str();
    let index = |name: &str| d.join(name).display().to_string();
    let (replay_index, rebuild_index) = (index("replay-index"), index("rebuilt"));
    let cases: [(Vec<&str>, Login<'_>, &[&str]); 3] = [
        (
            vec!["correct", "release", "--id", "a", "--brokers", b],
            wrong("SCRAM-SHA-512"),
            &[
                "sasl.username=\"newsdedup\"",
                "sasl.password",
                "invalid credentials",
            ],
        ),
        (
            vec!["replay", "--brokers", b, "--index-dir", &replay_index],
            wrong("PLAIN"),
            &[
                "sasl.username=\"newsdedup\"",
                "sasl.password",
                "Invalid username or password",
            ],
        ),
        (
            vec![
                "index",
                "rebuild",
                "--brokers",
                b,
                "--index-dir",
                &rebuild_index,
            ],
            plain("SCRAM-SHA-256"),
            &["sasl.mechanisms=SCRAM-SHA-256", "PLAIN,SCRAM-SHA-512"],
        ),
    ];
    for (command, login, says) in cases {
        let mut args: Vec<String> = command.iter().map(|s| (*s).to_owned()).collect();
        args.extend(login.args(d));
        let (status, stdout, stderr, took) = newsdedup(&args, limit);
        eprintln!("{command:?} ({}): {took:?}\n{stderr}", login.mechanism);
        assert!(
            status.is_some_and(|s| s != 0),
            "{command:?} must fail within {limit:?} (status {status:?}):\n{stderr}"
        );
        for s in says {
            assert!(stderr.contains(s), "{command:?}: {s:?} not said:\n{stderr}");
        }
        assert_no_password(&format!("{command:?}"), &(stdout + &stderr));
    }

    // `standby` checks its login before following the topics, and stops.
    let args = wrong("SCRAM-SHA-512").args(d);
    let standby_log = d.join("standby.log");
    let mut standby = start_command(
        "standby",
        b,
        &d.join("standby-index"),
        &standby_log,
        &svc_args(&args),
    );
    let status = standby.wait(limit);
    let log = standby.log();
    assert!(
        status.is_some_and(|s| !s.success()),
        "standby must stop within {limit:?} ({status:?}):\n{log}"
    );
    assert!(log.contains("sasl.password"), "{log}");
    assert_no_password("the standby log", &log);

    // `run` keeps trying (a user created on the broker later is picked up) but is not ready,
    // says why, and decides and commits nothing.
    let login = wrong("PLAIN");
    let clients = plain("PLAIN").clients(b);
    let (records, _) = kafka_tls::articles(4);
    kafka_tls::produce(&clients, &records);
    let args = login.args(d);
    let mut service = start_service(
        b,
        &d.join("run-index"),
        &d.join("run.log"),
        &svc_args(&args),
    );
    service.wait_http();
    let start = Instant::now();
    let body = loop {
        let (status, body) = service.http("/ready").expect("/ready");
        assert_eq!(status, 503, "ready with a wrong password: {body}");
        if body.contains("sasl.password") || start.elapsed() > Duration::from_secs(30) {
            break body;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        body.contains("sasl.password"),
        "/ready names the setting: {body}"
    );
    std::thread::sleep(Duration::from_secs(3));
    let (status, body) = service.http("/ready").expect("/ready");
    assert_eq!(status, 503, "{body}");
    let (_, metrics) = service.http("/metrics").expect("/metrics");
    assert_no_password("/metrics", &metrics);
    assert!(
        kafka_tls::read_outputs(&clients, Duration::from_secs(3), 1).is_empty(),
        "decided with a wrong password"
    );
    let committed = kafka_tls::committed(&clients);
    assert!(committed.values().all(|&o| o < 0), "{committed:?}");
    let (status, _) = service.terminate(Duration::from_secs(40));
    assert!(status.success(), "exit {status:?}; log:\n{}", service.log());
    let log = service.log();
    assert!(log.contains("refused the SASL login"), "{log}");
    assert!(log.contains("sasl.password"), "{log}");
    assert_no_password("the run log", &log);

    let proxy = broker.sasl.log();
    assert!(proxy.contains("SCRAM-SHA-512 login refused"), "{proxy}");
    assert!(proxy.contains("PLAIN login refused"), "{proxy}");
    assert!(
        proxy.contains("mechanism 'SCRAM-SHA-256' refused"),
        "{proxy}"
    );
    assert_no_password("the proxy log", &proxy);
}

/// SASL_SSL: SCRAM-SHA-512 inside TLS (the TLS proxy in front of the SASL proxy).
#[test]
fn kafka_sasl_ssl_run_decides_through_tls_and_sasl() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let pki = kafka_tls::make_pki(d);
    let broker = sasl_broker(d, "SCRAM-SHA-512", Some(&pki));
    let login = Login {
        mechanism: "SCRAM-SHA-512",
        password: PASSWORD,
        ca: Some(&pki.ca),
    };
    run_decides(d, &broker, &login, None);
    assert_logged_in(&broker.sasl, "SCRAM-SHA-512");
    let tls = broker.tls.as_ref().expect("TLS proxy").log();
    assert!(tls.contains("TLS established"), "{tls}");
    assert!(!tls.contains("handshake failed"), "{tls}");
}
