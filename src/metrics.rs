//! Metrics of the Kafka service (`metrics` facade, Prometheus exposition) and the small HTTP
//! server that serves them at `/metrics`, next to `/health` and `/ready`.
//!
//! Every name starts with `newsdedup_`. The library only records through the `metrics` macros, so
//! without an installed recorder (tests, `batch`) recording is a no-op.

use crate::index::DiskUsage;
use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

pub const ARTICLES_CONSUMED: &str = "newsdedup_articles_consumed_total";
pub const ARTICLES_UNIQUE: &str = "newsdedup_articles_unique_total";
pub const ARTICLES_DUPLICATE: &str = "newsdedup_articles_duplicate_total";
pub const ARTICLES_INVALID: &str = "newsdedup_articles_invalid_total";
pub const ARTICLES_REPLAYED: &str = "newsdedup_articles_replayed_total";
pub const CORRECTIONS: &str = "newsdedup_corrections_total";
pub const CORRECTIONS_FETCH_ERRORS: &str = "newsdedup_corrections_fetch_errors_total";
pub const RECORDS_DELIVERED: &str = "newsdedup_records_delivered_total";
pub const DELIVERY_RETRIES: &str = "newsdedup_delivery_retries_total";
pub const COMMITS: &str = "newsdedup_commits_total";
pub const REBALANCES: &str = "newsdedup_rebalances_total";
pub const KAFKA_ERRORS: &str = "newsdedup_kafka_errors_total";
pub const PROCESSING_LATENCY: &str = "newsdedup_processing_latency_seconds";
pub const STAGE_SECONDS: &str = "newsdedup_stage_seconds";
pub const CANDIDATES_PER_LOOKUP: &str = "newsdedup_candidates_per_lookup";
pub const CONSUMED_OFFSET: &str = "newsdedup_consumed_offset";
pub const COMMITTED_OFFSET: &str = "newsdedup_committed_offset";
pub const UNCOMMITTED_MESSAGES: &str = "newsdedup_uncommitted_messages";
pub const HIGH_WATERMARK: &str = "newsdedup_high_watermark";
pub const CONSUMER_LAG: &str = "newsdedup_consumer_lag";
pub const WATERMARK_SUSPECT: &str = "newsdedup_watermark_suspect";
pub const IN_FLIGHT: &str = "newsdedup_in_flight_messages";
pub const ASSIGNED_PARTITIONS: &str = "newsdedup_assigned_partitions";
pub const FETCH_PAUSED: &str = "newsdedup_fetch_paused";
pub const BROKER_UP: &str = "newsdedup_broker_up";
pub const HEALTHY: &str = "newsdedup_healthy";
pub const GROUP_MEMBERS: &str = "newsdedup_group_members";
pub const WAITING_SECONDS: &str = "newsdedup_waiting_seconds";
pub const INDEX_ARTICLES: &str = "newsdedup_index_articles";
pub const INDEX_UNIQUE: &str = "newsdedup_index_unique_articles";
pub const INDEX_DISK_BYTES: &str = "newsdedup_index_disk_bytes";
pub const INDEX_VOLUME_AVAILABLE_BYTES: &str = "newsdedup_index_volume_available_bytes";
pub const INDEX_VOLUME_SIZE_BYTES: &str = "newsdedup_index_volume_size_bytes";
pub const INDEX_STREAM_TIME: &str = "newsdedup_index_stream_time_seconds";
pub const GROUP_COMMIT_SIZE: &str = "newsdedup_group_commit_records";
pub const STANDBY_RECORDS: &str = "newsdedup_standby_records_total";
pub const STANDBY_LAG: &str = "newsdedup_standby_lag_records";
pub const STANDBY_CAUGHT_UP: &str = "newsdedup_standby_caught_up";

const LATENCY_BUCKETS: [f64; 16] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0,
];
const CANDIDATE_BUCKETS: [f64; 9] = [0.0, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0];
const GROUP_BUCKETS: [f64; 9] = [1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 1024.0];

#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("cannot install the metrics recorder: {0}")]
    Install(String),
    // The cause is in the message, not chained as a source: printed with its causes it would be
    // told twice.
    #[error("cannot listen on {addr} for /metrics and /health: {error}")]
    Bind {
        addr: SocketAddr,
        error: std::io::Error,
    },
}

/// Installs the global Prometheus recorder (once per process) and describes every metric.
pub fn install() -> Result<PrometheusHandle, MetricsError> {
    let err = |e: metrics_exporter_prometheus::BuildError| MetricsError::Install(e.to_string());
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Full(PROCESSING_LATENCY.into()), &LATENCY_BUCKETS)
        .map_err(err)?
        .set_buckets_for_metric(Matcher::Full(STAGE_SECONDS.into()), &LATENCY_BUCKETS)
        .map_err(err)?
        .set_buckets_for_metric(
            Matcher::Full(CANDIDATES_PER_LOOKUP.into()),
            &CANDIDATE_BUCKETS,
        )
        .map_err(err)?
        .set_buckets_for_metric(Matcher::Full(GROUP_COMMIT_SIZE.into()), &GROUP_BUCKETS)
        .map_err(err)?
        .install_recorder()
        .map_err(err)?;
    describe();
    Ok(handle)
}

/// What a metric is, for Prometheus's `# TYPE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    /// The name Prometheus gives it (`counter`, `gauge`, `histogram`).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// One metric of the service: its name, kind, unit and help text.
#[derive(Debug, Clone, Copy)]
pub struct Definition {
    pub name: &'static str,
    pub kind: Kind,
    pub unit: Unit,
    pub help: &'static str,
}

const fn def(name: &'static str, kind: Kind, unit: Unit, help: &'static str) -> Definition {
    Definition {
        name,
        kind,
        unit,
        help,
    }
}

/// Every metric the service exports, described to the recorder by [`install`]: the one list of
/// names, kinds and help texts (docs/OPERATIONS.md documents each; a test holds the two
/// together).
pub const DEFINITIONS: &[Definition] = &[
    def(
        ARTICLES_CONSUMED,
        Kind::Counter,
        Unit::Count,
        "Records read from the input topic.",
    ),
    def(
        ARTICLES_UNIQUE,
        Kind::Counter,
        Unit::Count,
        "Articles decided unique (replays included).",
    ),
    def(
        ARTICLES_DUPLICATE,
        Kind::Counter,
        Unit::Count,
        "Articles decided duplicate (replays included).",
    ),
    def(
        ARTICLES_INVALID,
        Kind::Counter,
        Unit::Count,
        "Records sent to the DLQ, by reason.",
    ),
    def(
        ARTICLES_REPLAYED,
        Kind::Counter,
        Unit::Count,
        "Articles whose id was already indexed (stored decision re-emitted).",
    ),
    def(
        CORRECTIONS,
        Kind::Counter,
        Unit::Count,
        "Editors' corrections applied, by kind (release, merge); one delivered again after a restart counts again. Refused ones: newsdedup_articles_invalid_total{reason=\"refused_correction\"}.",
    ),
    def(
        CORRECTIONS_FETCH_ERRORS,
        Kind::Counter,
        Unit::Count,
        "Failed reads of the corrections topic, by code (TopicAuthorizationFailed: the Read ACL is missing); no correction is applied meanwhile.",
    ),
    def(
        RECORDS_DELIVERED,
        Kind::Counter,
        Unit::Count,
        "Output records acknowledged by the broker, by topic kind.",
    ),
    def(
        DELIVERY_RETRIES,
        Kind::Counter,
        Unit::Count,
        "Output records produced again after a failed delivery.",
    ),
    def(
        COMMITS,
        Kind::Counter,
        Unit::Count,
        "Offset commits, by result (ok/error).",
    ),
    def(
        REBALANCES,
        Kind::Counter,
        Unit::Count,
        "Rebalance events, by kind (assign/revoke/lost/error).",
    ),
    def(
        KAFKA_ERRORS,
        Kind::Counter,
        Unit::Count,
        "Errors reported by librdkafka, by client and code.",
    ),
    def(
        PROCESSING_LATENCY,
        Kind::Histogram,
        Unit::Seconds,
        "From receipt of an input record to the broker's acknowledgement of its output.",
    ),
    def(
        STAGE_SECONDS,
        Kind::Histogram,
        Unit::Seconds,
        "Time per record in a stage (prepare, decide), and per index WAL fsync before a commit (sync).",
    ),
    def(
        CANDIDATES_PER_LOOKUP,
        Kind::Histogram,
        Unit::Count,
        "Candidates within the threshold per index lookup.",
    ),
    def(
        CONSUMED_OFFSET,
        Kind::Gauge,
        Unit::Count,
        "One past the last consumed offset, per partition.",
    ),
    def(
        COMMITTED_OFFSET,
        Kind::Gauge,
        Unit::Count,
        "Last committed offset (next to process after a restart), per partition.",
    ),
    def(
        UNCOMMITTED_MESSAGES,
        Kind::Gauge,
        Unit::Count,
        "consumed_offset - committed_offset, per partition.",
    ),
    def(
        HIGH_WATERMARK,
        Kind::Gauge,
        Unit::Count,
        "High watermark reported by the broker, per partition.",
    ),
    def(
        CONSUMER_LAG,
        Kind::Gauge,
        Unit::Count,
        "high_watermark - committed_offset; -1 when the watermark is below the consumed offset (unreliable broker watermark).",
    ),
    def(
        WATERMARK_SUSPECT,
        Kind::Gauge,
        Unit::Count,
        "1 when the broker's high watermark was seen below the consumed offset (lag unknown).",
    ),
    def(
        IN_FLIGHT,
        Kind::Gauge,
        Unit::Count,
        "Records consumed but not yet indexed and delivered.",
    ),
    def(
        ASSIGNED_PARTITIONS,
        Kind::Gauge,
        Unit::Count,
        "Input partitions assigned to this consumer.",
    ),
    def(
        FETCH_PAUSED,
        Kind::Gauge,
        Unit::Count,
        "1 while fetching is paused by backpressure: max_in_flight records or max_in_flight_bytes bytes in flight (it resumes once both are at half).",
    ),
    def(
        BROKER_UP,
        Kind::Gauge,
        Unit::Count,
        "0 after librdkafka reported all brokers down, 1 once traffic resumes.",
    ),
    def(
        HEALTHY,
        Kind::Gauge,
        Unit::Count,
        "1 while /health answers 200; 0 when failed, stalled, without progress or waiting too long.",
    ),
    def(
        GROUP_MEMBERS,
        Kind::Gauge,
        Unit::Count,
        "Members the consumer group's coordinator lists, this one included (run only).",
    ),
    def(
        WAITING_SECONDS,
        Kind::Gauge,
        Unit::Seconds,
        "How long this member has fetched nothing while records wait beyond the group's committed offsets; 0 otherwise.",
    ),
    def(
        INDEX_ARTICLES,
        Kind::Gauge,
        Unit::Count,
        "Articles in the index.",
    ),
    def(
        INDEX_UNIQUE,
        Kind::Gauge,
        Unit::Count,
        "Unique (searchable) articles in the index.",
    ),
    def(
        INDEX_DISK_BYTES,
        Kind::Gauge,
        Unit::Bytes,
        "Size of the index directory.",
    ),
    def(
        INDEX_VOLUME_AVAILABLE_BYTES,
        Kind::Gauge,
        Unit::Bytes,
        "Space left on the volume holding the index directory (for unprivileged writes); when none is left the service stops deciding until space is freed.",
    ),
    def(
        INDEX_VOLUME_SIZE_BYTES,
        Kind::Gauge,
        Unit::Bytes,
        "Size of the volume holding the index directory.",
    ),
    def(
        INDEX_STREAM_TIME,
        Kind::Gauge,
        Unit::Seconds,
        "Stream time of the index: the newest event time (Unix seconds) of any indexed article; the retention window removes articles older than it by the window.",
    ),
    def(
        GROUP_COMMIT_SIZE,
        Kind::Histogram,
        Unit::Count,
        "Records published per index fsync (group commit: a decision is produced only once durable).",
    ),
    def(
        STANDBY_RECORDS,
        Kind::Counter,
        Unit::Count,
        "Standby: output records read and applied to its index.",
    ),
    def(
        STANDBY_LAG,
        Kind::Gauge,
        Unit::Count,
        "Standby: records behind the end of each output topic partition (a lower bound on brokers with low watermarks).",
    ),
    def(
        STANDBY_CAUGHT_UP,
        Kind::Gauge,
        Unit::Count,
        "Standby: 1 once it has read every output topic to its end.",
    ),
    def(
        crate::index::rocks::CROWDED_LOOKUPS,
        Kind::Counter,
        Unit::Count,
        "Lookups that read a block bucket of more than 4096 fingerprints (templated reports, crafted input).",
    ),
    def(
        crate::index::rocks::BUCKET_WRITE_BACKS,
        Kind::Counter,
        Unit::Count,
        "Crowded block buckets whose merged value the writer put back, so reads do not walk their pending operands.",
    ),
    def(
        crate::index::rocks::EXPIRED_ARTICLES,
        Kind::Counter,
        Unit::Count,
        "Articles removed by the retention window ([index] retention, --retention).",
    ),
];

fn describe() {
    for d in DEFINITIONS {
        match d.kind {
            Kind::Counter => describe_counter!(d.name, d.unit, d.help),
            Kind::Gauge => describe_gauge!(d.name, d.unit, d.help),
            Kind::Histogram => describe_histogram!(d.name, d.unit, d.help),
        }
    }
    // Shown (as 0) before the first removal, so a dashboard can tell "nothing removed" from "no data".
    metrics::counter!(crate::index::rocks::EXPIRED_ARTICLES).increment(0);
}

/// Exports a measurement of the index's disk use (`run` and `standby`).
pub fn record_disk_usage(disk: &DiskUsage) {
    metrics::gauge!(INDEX_DISK_BYTES).set(disk.index_bytes as f64);
    if let Some(volume) = disk.volume {
        metrics::gauge!(INDEX_VOLUME_AVAILABLE_BYTES).set(volume.available_bytes as f64);
        metrics::gauge!(INDEX_VOLUME_SIZE_BYTES).set(volume.total_bytes as f64);
    }
}

/// Who asks `/health` or `/ready`. The texts of an answer (a broker's error with its address, a
/// failure's cause, what the member waits for) go to a client on the loopback only (`newsdedup
/// health`, `kubectl exec`, `kubectl port-forward`); any other client (a kubelet, a load balancer,
/// a scanner) gets the status and the counts, and the texts stay in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asker {
    Loopback,
    Remote,
}

impl Asker {
    fn of(ip: IpAddr) -> Asker {
        if ip.to_canonical().is_loopback() {
            Asker::Loopback
        } else {
            Asker::Remote
        }
    }
}

/// A health answer for an asker: HTTP status code and JSON body.
pub type HealthFn = Arc<dyn Fn(Asker) -> (u16, String) + Send + Sync>;

/// How many connections the listener keeps open.
#[derive(Debug, Clone, Copy)]
struct Limits {
    /// From one client address. A client at its limit that opens another closes its own oldest
    /// connection still waiting for a request, so idle sockets (a scanner, a stuck proxy) never
    /// keep a probe waiting; with none of its own idle (all answering, e.g. to a client that
    /// never reads), the new one is refused, so one client can never hold the global limit.
    per_client: usize,
    /// From all clients; at the limit the oldest idle one is closed, or the new one if none is
    /// idle.
    all: usize,
}

const LIMITS: Limits = Limits {
    per_client: 32,
    all: 1024,
};
/// Longest request head (request line and headers); a larger one is refused.
const MAX_REQUEST_BYTES: usize = 16 * 1024;
/// Longest time to receive a request head: a probe sends it at once.
const HEADER_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest life of one connection.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(10);

/// Binds the listener (fails fast, before anything else starts).
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, MetricsError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| MetricsError::Bind {
            addr,
            error: source,
        })
}

/// The three endpoints.
#[derive(Clone)]
struct Endpoints {
    prometheus: PrometheusHandle,
    health: HealthFn,
    ready: HealthFn,
}

/// One open connection, as the accept loop sees it.
struct Open {
    id: u64,
    client: IpAddr,
    /// Set once its request head has arrived.
    busy: Arc<AtomicBool>,
    close: Arc<tokio::sync::Notify>,
}

/// The open connections, oldest first: what the limits are counted over.
struct Connections {
    limits: Limits,
    open: parking_lot::Mutex<VecDeque<Open>>,
}

impl Connections {
    fn new(limits: Limits) -> Connections {
        Connections {
            limits,
            open: parking_lot::Mutex::new(VecDeque::new()),
        }
    }

    /// Registers a new connection from `client`, first closing an idle one where a limit is
    /// reached. None: at a limit with no idle connection to close (refuse this one).
    fn admit(
        &self,
        id: u64,
        client: IpAddr,
    ) -> Option<(Arc<AtomicBool>, Arc<tokio::sync::Notify>)> {
        let mut open = self.open.lock();
        let idle_of = |open: &VecDeque<Open>, client: Option<IpAddr>| {
            open.iter().position(|c| {
                client.is_none_or(|ip| c.client == ip) && !c.busy.load(Ordering::Relaxed)
            })
        };
        if open.iter().filter(|c| c.client == client).count() >= self.limits.per_client {
            let i = idle_of(&open, Some(client))?;
            if let Some(c) = open.remove(i) {
                c.close.notify_one();
            }
        }
        if open.len() >= self.limits.all {
            let i = idle_of(&open, None)?;
            if let Some(c) = open.remove(i) {
                c.close.notify_one();
            }
        }
        let busy = Arc::new(AtomicBool::new(false));
        let close = Arc::new(tokio::sync::Notify::new());
        open.push_back(Open {
            id,
            client,
            busy: busy.clone(),
            close: close.clone(),
        });
        Some((busy, close))
    }

    fn closed(&self, id: u64) {
        self.open.lock().retain(|c| c.id != id);
    }
}

/// Serves `GET /metrics` (Prometheus text), `GET /health` (liveness) and `GET /ready`
/// (readiness) over HTTP/1.1 until the task is dropped. Also runs the recorder's upkeep.
pub async fn serve(
    listener: TcpListener,
    prometheus: PrometheusHandle,
    health: HealthFn,
    ready: HealthFn,
) {
    serve_within(listener, prometheus, health, ready, LIMITS).await
}

async fn serve_within(
    listener: TcpListener,
    prometheus: PrometheusHandle,
    health: HealthFn,
    ready: HealthFn,
    limits: Limits,
) {
    let upkeep = prometheus.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            upkeep.run_upkeep();
        }
    });
    let endpoints = Endpoints {
        prometheus,
        health,
        ready,
    };
    // Every connection is accepted at once (none waits in the kernel's backlog behind idle
    // ones); the limits close idle connections instead.
    let connections = Arc::new(Connections::new(limits));
    let mut next_id = 0u64;
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!("metrics listener: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        next_id += 1;
        let id = next_id;
        let Some((busy, close)) = connections.admit(id, peer.ip()) else {
            drop(stream);
            continue;
        };
        let endpoints = endpoints.clone();
        let connections = connections.clone();
        let asker = Asker::of(peer.ip());
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                busy.store(true, Ordering::Relaxed);
                let response = endpoints.answer(&request, asker);
                async move { Ok::<_, std::convert::Infallible>(response) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .max_buf_size(MAX_REQUEST_BYTES)
                .keep_alive(false)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            tokio::select! {
                _ = tokio::time::timeout(CONNECTION_TIMEOUT, connection) => {}
                _ = close.notified() => {}
            }
            connections.closed(id);
        });
    }
}

/// What `newsdedup health` does: GET `path` from the service listening on `addr` (an unspecified
/// address, 0.0.0.0 or [::], is asked on the loopback of its family), each step within
/// `timeout`. Returns the status code and the body.
pub fn probe(addr: SocketAddr, path: &str, timeout: Duration) -> std::io::Result<(u16, String)> {
    use std::io::{Read, Write};
    let mut addr = addr;
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    let mut stream = std::net::TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut answer = Vec::new();
    stream.take(1 << 20).read_to_end(&mut answer)?;
    let answer = String::from_utf8_lossy(&answer);
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head
        .strip_prefix("HTTP/1.")
        .and_then(|rest| rest.get(2..5))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "not an HTTP answer: {:?}",
                    head.lines().next().unwrap_or("")
                ),
            )
        })?;
    Ok((status, body.to_owned()))
}

type Response = hyper::Response<http_body_util::Full<hyper::body::Bytes>>;

impl Endpoints {
    fn answer<B>(&self, request: &hyper::Request<B>, asker: Asker) -> Response {
        use hyper::Method;
        let (status, content_type, body) = match (request.method(), request.uri().path()) {
            (&Method::GET | &Method::HEAD, "/metrics") => (
                200,
                "text/plain; version=0.0.4; charset=utf-8",
                self.prometheus.render(),
            ),
            (&Method::GET | &Method::HEAD, "/health" | "/healthz") => {
                let (s, b) = (self.health)(asker);
                (s, "application/json", b)
            }
            (&Method::GET | &Method::HEAD, "/ready" | "/readyz") => {
                let (s, b) = (self.ready)(asker);
                (s, "application/json", b)
            }
            (&Method::GET | &Method::HEAD, _) => (
                404,
                "text/plain",
                "not found: try /metrics, /health or /ready\n".to_owned(),
            ),
            _ => (405, "text/plain", "method not allowed\n".to_owned()),
        };
        // hyper leaves the body out of a HEAD response itself.
        let mut response = hyper::Response::new(http_body_util::Full::new(body.into()));
        *response.status_mut() =
            hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
        if let Ok(value) = hyper::header::HeaderValue::from_str(content_type) {
            response
                .headers_mut()
                .insert(hyper::header::CONTENT_TYPE, value);
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn get(addr: SocketAddr, path: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.unwrap();
        String::from_utf8_lossy(&answer).into_owned()
    }

    /// kubelet gives a probe 1 s: idle sockets (here 200, some with half a request head) must not
    /// make it wait.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn probes_answer_within_a_second_while_idle_connections_are_open() {
        let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let prometheus = PrometheusBuilder::new().build_recorder().handle();
        let ok: HealthFn = Arc::new(|_| (200, "{\"status\":\"ok\"}".to_owned()));
        let server = tokio::spawn(serve(listener, prometheus, ok.clone(), ok));
        let mut idle = Vec::new();
        for i in 0..200 {
            let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            if i % 4 == 0 {
                stream.write_all(b"GET /health HTTP/1.1\r\n").await.unwrap();
            }
            idle.push(stream);
        }
        for round in 0..5 {
            for path in ["/health", "/ready", "/metrics"] {
                let answer = tokio::time::timeout(Duration::from_secs(1), get(addr, path))
                    .await
                    .unwrap_or_else(|_| panic!("no answer to {path} within 1 s (round {round})"));
                assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
            }
            tokio::time::sleep(Duration::from_millis(700)).await;
        }
        drop(idle);
        server.abort();
    }

    /// A client whose connections stay busy (answers larger than the socket buffers that it
    /// never reads) holds at most its own share: a probe from another address is answered.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_that_never_reads_cannot_hold_every_connection() {
        let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let prometheus = PrometheusBuilder::new().build_recorder().handle();
        let ok: HealthFn = Arc::new(|_| (200, "{\"status\":\"ok\"}".to_owned()));
        // Larger than the server's send buffer can grow to (tcp_wmem's 4 MiB) and the reader's.
        let large = Arc::new("x".repeat(6 << 20));
        let ready: HealthFn = Arc::new(move |_| (200, large.as_str().to_owned()));
        let limits = Limits {
            per_client: 4,
            all: 8,
        };
        let server = tokio::spawn(serve_within(listener, prometheus, ok, ready, limits));
        let mut unread = Vec::new();
        for _ in 0..20 {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.set_recv_buffer_size(4096).unwrap();
            let mut stream = socket.connect(addr).await.unwrap();
            // The server may already have closed a refused one.
            let _ = stream
                .write_all(b"GET /ready HTTP/1.1\r\nHost: x\r\n\r\n")
                .await;
            unread.push(stream);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let probe = async {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
            let mut stream = socket.connect(addr).await.unwrap();
            stream
                .write_all(b"GET /health HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n")
                .await
                .unwrap();
            let mut answer = Vec::new();
            let _ = stream.read_to_end(&mut answer).await;
            String::from_utf8_lossy(&answer).into_owned()
        };
        let answer = tokio::time::timeout(Duration::from_secs(1), probe)
            .await
            .expect("a probe from another address is answered within 1 s");
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
        drop(unread);
        server.abort();
    }

    /// The server tells the health function who asks: a client on the loopback, or another.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_asker_is_told_apart_by_its_address() {
        // This host's address on its default route (no packet is sent); none: loopback only.
        let Some(own) = std::net::UdpSocket::bind("0.0.0.0:0")
            .and_then(|s| s.connect("198.51.100.1:9").map(|_| s))
            .and_then(|s| s.local_addr())
            .ok()
            .map(|a| a.ip())
            .filter(|ip| !ip.is_loopback() && !ip.is_unspecified())
        else {
            eprintln!("skipped: no address but the loopback");
            return;
        };
        let listener = bind("0.0.0.0:0".parse().unwrap()).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let prometheus = PrometheusBuilder::new().build_recorder().handle();
        let health: HealthFn = Arc::new(|asker| (200, format!("{asker:?}")));
        let server = tokio::spawn(serve(listener, prometheus, health.clone(), health));
        let loopback = get(SocketAddr::from(([127, 0, 0, 1], port)), "/health").await;
        let remote = get(SocketAddr::new(own, port), "/health").await;
        assert!(loopback.ends_with("\r\n\r\nLoopback"), "{loopback}");
        assert!(remote.ends_with("\r\n\r\nRemote"), "{remote}");
        server.abort();
    }

    /// `newsdedup health`'s client against the server: the status and body of /health and
    /// /ready, a 503, and 0.0.0.0 asked on the loopback.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn probe_reads_status_and_body() {
        let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let prometheus = PrometheusBuilder::new().build_recorder().handle();
        let ok: HealthFn = Arc::new(|_| (200, "{\"status\":\"ok\"}".to_owned()));
        let waiting: HealthFn = Arc::new(|_| (503, "{\"status\":\"waiting\"}".to_owned()));
        let server = tokio::spawn(serve(listener, prometheus, ok, waiting));
        let unspecified: SocketAddr = format!("0.0.0.0:{}", addr.port()).parse().unwrap();
        let answers = tokio::task::spawn_blocking(move || {
            let second = Duration::from_secs(1);
            (
                probe(unspecified, "/health", second).unwrap(),
                probe(addr, "/ready", second).unwrap(),
            )
        })
        .await
        .unwrap();
        assert_eq!(answers.0, (200, "{\"status\":\"ok\"}".to_owned()));
        assert_eq!(answers.1, (503, "{\"status\":\"waiting\"}".to_owned()));
        server.abort();
    }
}
