//! `newsdedup run` over TLS (`security.protocol=SSL`) end to end.
//!
//! The local Tansu broker (scripts/broker.sh) speaks plaintext only here, so each test puts
//! scripts/tls_proxy.py in front of it: a TLS-terminating proxy with a server certificate for
//! 127.0.0.1/localhost issued by a CA made at test time with the `openssl` CLI. The broker
//! advertises the proxy's address in its metadata (`broker.sh start --advertised`), so every
//! Kafka client — the service, the test's producer and its readers — reaches the broker through
//! TLS only: a plaintext client would be sent to the TLS port and fail. Topics are created over
//! the broker's plain listen port (admin only).
//!
//! * `kafka_tls_decides_through_tls_proxy`: `-X security.protocol=SSL -X ssl.ca.location=CA`
//!   (host name verification left at librdkafka's default `https`), articles produced over TLS
//!   are decided, read back over TLS, offsets committed to the end, SIGTERM exits 0.
//! * `kafka_tls_unknown_ca_is_refused`: the same with an unrelated CA: the service refuses the
//!   broker's certificate (librdkafka: "certificate verify failed"; the proxy sees the client's
//!   "unknown ca" alert), /ready answers 503, nothing is decided and nothing is committed.
//! * `kafka_tls_wrong_host_name_is_refused`: a certificate from the right CA whose name is not
//!   127.0.0.1 is refused too (`ssl.endpoint.identification.algorithm=https` is on by default).
//!
//! SASL, over plaintext and over TLS (this module's proxy in front of the SASL one), is tested in
//! `kafka_sasl`, which shares this module's certificates, proxy and clients.

use crate::common;

use common::kafka::{start_service, Broker};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Message, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::ClientConfig;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

const TOPICS: [&str; 4] = [
    "articles.raw:2",
    "articles.unique:1",
    "articles.duplicate:1",
    "articles.dlq:1",
];
const OUTPUTS: [&str; 3] = ["articles.unique", "articles.duplicate", "articles.dlq"];

// ---------------------------------------------------------------------------------------------
// Certificates (openssl CLI)

/// PEM files made for one test.
pub(crate) struct Pki {
    /// The CA that issued the proxy's certificate.
    pub(crate) ca: PathBuf,
    /// An unrelated CA.
    other_ca: PathBuf,
    /// Server certificate for IP:127.0.0.1 and DNS:localhost, and its key.
    pub(crate) cert: PathBuf,
    pub(crate) key: PathBuf,
    /// Server certificate from `ca` for DNS:broker.invalid only, and its key.
    wrong_name_cert: PathBuf,
    wrong_name_key: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run the openssl CLI (needed by this test)");
    assert!(
        out.status.success(),
        "openssl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

const EC_KEY: [&str; 4] = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];

fn make_ca(dir: &Path, name: &str, cn: &str) -> PathBuf {
    let cnf = format!("{name}.cnf");
    std::fs::write(
        dir.join(&cnf),
        format!(
            "[req]\ndistinguished_name = dn\nprompt = no\nx509_extensions = v3_ca\n\
             [dn]\nCN = {cn}\n\
             [v3_ca]\nbasicConstraints = critical, CA:TRUE\n\
             keyUsage = critical, keyCertSign, cRLSign\nsubjectKeyIdentifier = hash\n"
        ),
    )
    .expect("write CA config");
    let (key, pem) = (format!("{name}.key"), format!("{name}.pem"));
    let mut args = vec!["req", "-x509", "-new", "-nodes", "-days", "2"];
    args.extend(EC_KEY);
    args.extend(["-keyout", &key, "-out", &pem, "-config", &cnf]);
    openssl(dir, &args);
    dir.join(pem)
}

/// A server certificate signed by CA `ca` ("ca.pem"/"ca.key" in `dir`) for `san`.
fn make_server_cert(dir: &Path, ca: &str, name: &str, san: &str) -> (PathBuf, PathBuf) {
    let ext = format!("{name}.ext");
    std::fs::write(
        dir.join(&ext),
        format!(
            "basicConstraints = CA:FALSE\n\
             keyUsage = critical, digitalSignature, keyEncipherment\n\
             extendedKeyUsage = serverAuth\nsubjectAltName = {san}\n\
             authorityKeyIdentifier = keyid\nsubjectKeyIdentifier = hash\n"
        ),
    )
    .expect("write extensions");
    let (key, csr, pem) = (
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.pem"),
    );
    let mut args = vec![
        "req",
        "-new",
        "-nodes",
        "-subj",
        "/CN=newsdedup test broker",
    ];
    args.extend(EC_KEY);
    args.extend(["-keyout", &key, "-out", &csr]);
    openssl(dir, &args);
    let (ca_pem, ca_key) = (format!("{ca}.pem"), format!("{ca}.key"));
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &ca_pem,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            &ext,
            "-out",
            &pem,
        ],
    );
    (dir.join(pem), dir.join(key))
}

pub(crate) fn make_pki(dir: &Path) -> Pki {
    let dir = dir.join("pki");
    std::fs::create_dir_all(&dir).expect("pki dir");
    let ca = make_ca(&dir, "ca", "newsdedup test CA");
    let other_ca = make_ca(&dir, "other-ca", "unrelated test CA");
    let (cert, key) = make_server_cert(&dir, "ca", "server", "IP:127.0.0.1, DNS:localhost");
    let (wrong_name_cert, wrong_name_key) =
        make_server_cert(&dir, "ca", "wrong-name", "DNS:broker.invalid");
    Pki {
        ca,
        other_ca,
        cert,
        key,
        wrong_name_cert,
        wrong_name_key,
    }
}

// ---------------------------------------------------------------------------------------------
// TLS proxy (scripts/tls_proxy.py)

pub(crate) struct Proxy {
    child: Child,
    stdin: Option<ChildStdin>,
    /// "127.0.0.1:PORT" (TLS).
    pub(crate) addr: String,
    log: PathBuf,
}

impl Proxy {
    /// Starts the proxy with `cert`/`key`; the upstream is given later by `forward_to`.
    pub(crate) fn start(dir: &Path, cert: &Path, key: &Path) -> Proxy {
        let log = dir.join("proxy.log");
        let script = common::repo_file("scripts/tls_proxy.py");
        let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
        let mut child = Command::new(python)
            .arg(script)
            .arg("--cert")
            .arg(cert)
            .arg("--key")
            .arg(key)
            .args(["--upstream", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("proxy log"))
            .spawn()
            .expect("spawn scripts/tls_proxy.py (needs python3)");
        let stdout = child.stdout.take().expect("proxy stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("proxy port line");
        let port: u16 = line.trim().parse().unwrap_or_else(|_| {
            panic!(
                "tls_proxy.py printed {line:?}, not a port; its log:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            )
        });
        Proxy {
            stdin: child.stdin.take(),
            child,
            addr: format!("127.0.0.1:{port}"),
            log,
        }
    }

    pub(crate) fn forward_to(&mut self, upstream: &str) {
        let stdin = self.stdin.as_mut().expect("proxy stdin");
        writeln!(stdin, "{upstream}").expect("give the proxy its upstream");
        stdin.flush().expect("flush");
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        drop(self.stdin.take()); // EOF on stdin stops it too
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A broker reachable only through a TLS proxy presenting `cert`. Fields drop in order:
/// proxy, then broker.
struct TlsBroker {
    proxy: Proxy,
    _broker: Broker,
}

/// With the service's topics.
fn tls_broker(dir: &Path, cert: &Path, key: &Path) -> TlsBroker {
    let mut proxy = Proxy::start(dir, cert, key);
    let broker = Broker::start_with(dir, &["--advertised", proxy.addr.as_str()]);
    proxy.forward_to(&broker.bootstrap);
    broker.create_topics(&TOPICS);
    TlsBroker {
        proxy,
        _broker: broker,
    }
}

// ---------------------------------------------------------------------------------------------
// Test clients (over TLS)

/// The test's own Kafka clients: through a proxy, with the security properties of the test.
pub(crate) struct Clients {
    pub(crate) brokers: String,
    /// librdkafka properties beside `bootstrap.servers` (security).
    pub(crate) properties: Vec<(String, String)>,
}

impl Clients {
    /// Over TLS, trusting `ca`; `check_name`: librdkafka's default (`https`), off only where the
    /// test itself must reach a broker whose certificate names another host.
    fn tls(brokers: &str, ca: &Path, check_name: bool) -> Clients {
        let mut properties = vec![
            ("security.protocol".to_owned(), "SSL".to_owned()),
            (
                "ssl.ca.location".to_owned(),
                ca.to_str().expect("UTF-8 path").to_owned(),
            ),
        ];
        if !check_name {
            properties.push((
                "ssl.endpoint.identification.algorithm".to_owned(),
                "none".to_owned(),
            ));
        }
        Clients {
            brokers: brokers.to_owned(),
            properties,
        }
    }

    fn config(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.brokers);
        for (k, v) in &self.properties {
            c.set(k, v);
        }
        c
    }
}

/// An input record: the article id, the Kafka key it is produced under, and its JSON.
pub(crate) struct Record {
    pub(crate) id: String,
    pub(crate) key: String,
    pub(crate) value: Vec<u8>,
}

/// A few corpus articles plus a near-duplicate of the first long one. Returns the records and
/// the repost's (original id, repost id).
pub(crate) fn articles(n: usize) -> (Vec<Record>, (String, String)) {
    let corpus = common::corpus_articles("sina_2018_patrick233.jsonl", n);
    let mut out: Vec<Record> = corpus
        .iter()
        .map(|a| {
            let id = common::str_field(a, "id").to_owned();
            Record {
                key: id.clone(),
                id,
                value: serde_json::to_vec(&Value::Object(a.clone())).expect("json"),
            }
        })
        .collect();
    let original = corpus
        .iter()
        .find(|a| common::str_field(a, "content").chars().count() > 300)
        .expect("a long article among the first few");
    let original_id = common::str_field(original, "id").to_owned();
    let repost_id = format!("repost-tls-{original_id}");
    let repost = json!({
        "id": repost_id,
        "title": common::str_field(original, "title"),
        "content": format!("<p>{}</p>\n责任编辑：王五", common::str_field(original, "content")),
    });
    // Keyed like its original, so both land on one partition in order (across partitions the
    // service may decide the repost first).
    out.push(Record {
        id: repost_id.clone(),
        key: original_id.clone(),
        value: serde_json::to_vec(&repost).expect("json"),
    });
    (out, (original_id, repost_id))
}

/// Produces through the proxy; returns the highest offset + 1 per partition.
pub(crate) fn produce(clients: &Clients, records: &[Record]) -> BTreeMap<i32, i64> {
    let producer: FutureProducer = clients
        .config()
        .set("linger.ms", "5")
        .create()
        .expect("TLS producer");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let mut ends = BTreeMap::new();
        for (i, r) in records.iter().enumerate() {
            let headers = OwnedHeaders::new().insert(Header {
                key: "test.seq",
                value: Some(&i.to_string()),
            });
            let record = FutureRecord::to("articles.raw")
                .key(r.key.as_str())
                .payload(r.value.as_slice())
                .headers(headers);
            let delivery = producer
                .send(record, Duration::from_secs(30))
                .await
                .map_err(|(e, _)| e)
                .expect("delivered through the proxy");
            let e = ends.entry(delivery.partition).or_insert(0);
            *e = (*e).max(delivery.offset + 1);
        }
        ends
    })
}

pub(crate) struct Output {
    pub(crate) topic: String,
    pub(crate) key: String,
    pub(crate) decision: String,
    pub(crate) json: Value,
}

/// Reads every output topic from the beginning through the proxy for `d`.
pub(crate) fn read_outputs(clients: &Clients, d: Duration, until: usize) -> Vec<Output> {
    let consumer: BaseConsumer = clients
        .config()
        .set("group.id", "test-reader")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "50")
        .create()
        .expect("TLS reader");
    let mut tpl = TopicPartitionList::new();
    for t in OUTPUTS {
        tpl.add_partition_offset(t, 0, Offset::Beginning)
            .expect("tpl");
    }
    consumer.assign(&tpl).expect("assign");
    let mut got = Vec::new();
    let start = Instant::now();
    while start.elapsed() < d && got.len() < until {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                let headers = common::kafka::headers_of(&m);
                got.push(Output {
                    topic: m.topic().to_owned(),
                    key: String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned(),
                    decision: headers
                        .get("newsdedup.decision")
                        .cloned()
                        .unwrap_or_default(),
                    json: serde_json::from_slice(m.payload().unwrap_or_default())
                        .unwrap_or(Value::Null),
                });
            }
            Some(Err(e)) => panic!("TLS reader: {e}"),
            None => {}
        }
    }
    got
}

/// Committed offsets of the service's group (`newsdedup`) on articles.raw, read through the proxy;
/// -1001 (librdkafka's "invalid") where nothing is committed.
pub(crate) fn committed(clients: &Clients) -> BTreeMap<i32, i64> {
    let consumer: BaseConsumer = clients
        .config()
        .set("group.id", "newsdedup")
        .set("enable.auto.commit", "false")
        .create()
        .expect("TLS consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..2 {
        tpl.add_partition("articles.raw", p);
    }
    let c = consumer
        .committed_offsets(tpl, Duration::from_secs(15))
        .expect("committed offsets over TLS");
    c.elements_for_topic("articles.raw")
        .iter()
        .map(|e| (e.partition(), e.offset().to_raw().unwrap_or(-1)))
        .collect()
}

fn tls_args(ca: &Path) -> Vec<String> {
    vec![
        "-X".into(),
        "security.protocol=SSL".into(),
        "-X".into(),
        format!("ssl.ca.location={}", ca.display()),
    ]
}

fn wait_log(service: &common::kafka::Service, what: &[&str], limit: Duration) -> String {
    let start = Instant::now();
    loop {
        let log = service.log();
        if what.iter().any(|w| log.contains(w)) {
            return log;
        }
        assert!(
            start.elapsed() < limit,
            "none of {what:?} in the service log after {limit:?}:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

// ---------------------------------------------------------------------------------------------
// Tests

/// The right CA: articles produced over TLS are decided, outputs read back over TLS, offsets
/// committed to the end, /ready 200, SIGTERM exits 0.
#[test]
fn kafka_tls_decides_through_tls_proxy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = make_pki(dir.path());
    let tls = tls_broker(dir.path(), &pki.cert, &pki.key);
    let b = tls.proxy.addr.clone();
    let clients = Clients::tls(&b, &pki.ca, true);

    let (records, (original, repost)) = articles(12);
    let ends = produce(&clients, &records);

    let args = tls_args(&pki.ca);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut service = start_service(
        &b,
        &dir.path().join("index"),
        &dir.path().join("service.log"),
        &args,
    );
    service.wait_http();

    let outputs = read_outputs(&clients, Duration::from_secs(90), records.len());
    assert_eq!(
        outputs.len(),
        records.len(),
        "every article decided once over TLS; service log:\n{}\nproxy log:\n{}",
        service.log(),
        tls.proxy.log()
    );
    let by_key: HashMap<&str, &Output> = outputs.iter().map(|o| (o.key.as_str(), o)).collect();
    for Record { id, .. } in &records {
        let o = by_key
            .get(id.as_str())
            .unwrap_or_else(|| panic!("no output for {id}"));
        assert_eq!(o.topic, format!("articles.{}", o.decision), "{id}");
        assert_eq!(o.json["id"], Value::String(id.clone()));
    }
    let dup = by_key[repost.as_str()];
    assert_eq!(dup.topic, "articles.duplicate", "{}", dup.json);
    assert_eq!(dup.json["dedup"]["match"]["id"], Value::String(original));

    let (status, body) = service.http("/ready").expect("/ready");
    assert_eq!(status, 200, "{body}");

    // Offsets are committed (over TLS) up to the end of what was produced.
    let start = Instant::now();
    loop {
        let c = committed(&clients);
        if ends.iter().all(|(p, e)| c.get(p) == Some(e)) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "committed {c:?}, want {ends:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    let (status, _) = service.terminate(Duration::from_secs(40));
    assert!(status.success(), "exit {status:?}; log:\n{}", service.log());
    let log = service.log();
    assert!(
        !log.contains("SSL handshake failed") && !log.contains("certificate verify failed"),
        "no SSL error with the right CA:\n{log}"
    );
    // Everything went through the proxy, encrypted.
    let proxy = tls.proxy.log();
    assert!(proxy.contains("TLS established"), "{proxy}");
    assert!(!proxy.contains("handshake failed"), "{proxy}");
}

/// Starts the service with `args` against a broker behind a proxy presenting `cert`, after
/// producing articles over TLS with the right CA; checks that the service refuses the broker:
/// the log names the certificate failure, /ready is 503, nothing is decided or committed.
fn check_refused(dir: &Path, clients: &Clients, args: &[String], log_says: &[&str]) {
    let (records, _) = articles(6);
    let ends = produce(clients, &records);
    assert!(!ends.is_empty());

    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut service = start_service(
        &clients.brokers,
        &dir.join("index"),
        &dir.join("service.log"),
        &args,
    );
    service.wait_http();
    let log = wait_log(&service, log_says, Duration::from_secs(30));
    eprintln!("service log (refusal):\n{log}");

    let (status, body) = service.http("/ready").expect("/ready");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("unreachable"), "{body}");
    let (status, _) = service.http("/health").expect("/health");
    assert_eq!(status, 200, "liveness stays up while the broker is refused");

    // Give it time to (wrongly) get through, then look at what the broker holds.
    std::thread::sleep(Duration::from_secs(5));
    let outputs = read_outputs(clients, Duration::from_secs(3), 1);
    assert!(
        outputs.is_empty(),
        "{} outputs although the certificate was refused; log:\n{}",
        outputs.len(),
        service.log()
    );
    let c = committed(clients);
    assert!(
        c.values().all(|&o| o < 0),
        "offsets committed although the certificate was refused: {c:?}"
    );

    let (status, _) = service.terminate(Duration::from_secs(40));
    assert!(status.success(), "exit {status:?}; log:\n{}", service.log());
}

/// An unrelated CA: the broker's certificate is refused.
#[test]
fn kafka_tls_unknown_ca_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = make_pki(dir.path());
    let tls = tls_broker(dir.path(), &pki.cert, &pki.key);
    let clients = Clients::tls(&tls.proxy.addr, &pki.ca, true);
    check_refused(
        dir.path(),
        &clients,
        &tls_args(&pki.other_ca),
        &["certificate verify failed"],
    );
    // The proxy saw the client abort the handshake.
    let proxy = tls.proxy.log();
    assert!(proxy.contains("handshake failed"), "{proxy}");
    assert!(proxy.to_lowercase().contains("unknown ca"), "{proxy}");
}

/// The right CA but a certificate for another host name: refused (librdkafka verifies the
/// broker's name by default).
#[test]
fn kafka_tls_wrong_host_name_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = make_pki(dir.path());
    let tls = tls_broker(dir.path(), &pki.wrong_name_cert, &pki.wrong_name_key);
    let clients = Clients::tls(&tls.proxy.addr, &pki.ca, false);
    check_refused(
        dir.path(),
        &clients,
        &tls_args(&pki.ca),
        &["certificate verify failed"],
    );
    let proxy = tls.proxy.log();
    assert!(proxy.contains("handshake failed"), "{proxy}");
}
