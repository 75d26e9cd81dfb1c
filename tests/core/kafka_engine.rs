//! The service's stages without a broker: the runner as `run` configures it (`kafka::engine`)
//! with an in-memory sink, and the offset tracker fed by its acknowledgements.

use crate::common;

use newsdedup::config::Config;
use newsdedup::dedup::Deduper;
use newsdedup::error::IndexError;
use newsdedup::fingerprint::Fingerprinter;
use newsdedup::index::IndexCounts;
use newsdedup::index::{RocksIndex, SyncHandle};
use newsdedup::kafka::engine::{Engine, LocalPreparer, OutputSink};
use newsdedup::kafka::record::{InputMessage, OutputKind, OutputRecord, Ticket};
use newsdedup::kafka::tracker::OffsetTracker;
use newsdedup::pipeline::DecisionStage;
use newsdedup::pipeline::{Outcome, Prepared};
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Collects outputs and acknowledges them at once.
#[derive(Clone)]
struct VecSink {
    out: Arc<Mutex<Vec<(OutputRecord, Ticket)>>>,
    tracker: Arc<Mutex<OffsetTracker>>,
}

impl OutputSink for VecSink {
    fn send(&mut self, record: OutputRecord, ticket: Ticket) {
        self.out.lock().push((record, ticket));
        self.tracker
            .lock()
            .done(ticket.partition, ticket.epoch, ticket.offset);
    }
}

fn start<K: OutputSink>(dir: &std::path::Path, sink: K) -> Engine {
    let config = Config::default();
    let fp = Fingerprinter::new(&config.fingerprint).expect("fingerprinter");
    let index = RocksIndex::open(dir, fp.identity(), &config.index).expect("index");
    let preparer = Arc::new(LocalPreparer {
        fingerprinter: fp,
        max_output_bytes: 1 << 20,
        correction_acceptance: Default::default(),
        read_rules: newsdedup::article::ReadRules::new(1 << 20),
    });
    Engine::start(
        Deduper::new(index, 3),
        preparer,
        sink,
        4,
        Arc::new(AtomicBool::new(false)),
    )
}

fn message(partition: i32, offset: i64, epoch: u64, value: &Value) -> InputMessage {
    InputMessage {
        topic: Arc::from("articles.raw"),
        partition,
        offset,
        epoch,
        timestamp_ms: Some(1),
        key: None,
        payload: Some(serde_json::to_vec(value).expect("json")),
        headers: Vec::new(),
        headers_dropped: 0,
        received: Instant::now(),
        correction: false,
    }
}

fn header<'a>(r: &'a OutputRecord, name: &str) -> &'a str {
    r.headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| std::str::from_utf8(v).expect("utf8"))
        .expect("header")
}

#[test]
fn near_duplicates_in_flight_on_different_partitions_are_never_both_unique() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tracker = Arc::new(Mutex::new(OffsetTracker::new()));
    let sink = VecSink {
        out: Arc::default(),
        tracker: tracker.clone(),
    };
    let mut engine = start(dir.path(), sink.clone());
    let epochs: Vec<u64> = (0..4).map(|p| tracker.lock().assign(p)).collect();

    // 300 articles, each immediately followed by a repost on another partition: with 4 prepare
    // threads both are in flight together.
    let articles = common::corpus_articles("sina_2018_patrick233.jsonl", 300);
    let mut next_offset = [0i64; 4];
    let mut sent = Vec::new();
    for (i, a) in articles.iter().enumerate() {
        let content = common::str_field(a, "content");
        let title = common::str_field(a, "title");
        let original = Value::Object(a.clone());
        let repost = json!({"id": format!("copy-{i}"), "title": title, "content": format!("{content}\n责任编辑：王五")});
        for (k, v) in [original, repost].into_iter().enumerate() {
            let p = ((i + k) % 4) as i32;
            let o = next_offset[p as usize];
            next_offset[p as usize] += 1;
            tracker.lock().register(p, o);
            engine
                .submit(message(p, o, epochs[p as usize], &v))
                .expect("submit");
            sent.push((p, o));
        }
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while sink.out.lock().len() < sent.len() {
        assert!(Instant::now() < deadline, "engine did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
    engine.handle().sync(Duration::from_secs(10)).expect("sync");
    engine.shutdown();

    let out = sink.out.lock();
    // Decisions follow each partition's order.
    let mut last = [-1i64; 4];
    for (_, t) in out.iter() {
        assert!(
            t.offset > last[t.partition as usize],
            "partition {} out of order",
            t.partition
        );
        last[t.partition as usize] = t.offset;
    }
    let mut pairs_both_unique = 0;
    let mut kinds = std::collections::HashMap::new();
    for (r, _) in out.iter() {
        let v: Value = serde_json::from_slice(&r.payload).expect("json");
        kinds.insert(v["id"].as_str().expect("id").to_owned(), r.kind);
    }
    for (i, a) in articles.iter().enumerate() {
        let id = common::str_field(a, "id");
        if kinds[id] == OutputKind::Unique && kinds[&format!("copy-{i}")] == OutputKind::Unique {
            pairs_both_unique += 1;
        }
    }
    assert_eq!(
        pairs_both_unique, 0,
        "a repost and its original both came out unique"
    );
    // Everything acknowledged: the whole of every partition is committable.
    let t = tracker.lock();
    assert_eq!(t.in_flight(), 0);
    let cands = t.commit_candidates(None);
    assert_eq!(cands.len(), 4);
    for c in cands {
        assert_eq!(c.offset, next_offset[c.partition as usize]);
    }
    assert_eq!(header(&out[0].0, "newsdedup.source.topic"), "articles.raw");
}

#[test]
fn invalid_records_go_to_the_dlq_and_nothing_blocks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tracker = Arc::new(Mutex::new(OffsetTracker::new()));
    let sink = VecSink {
        out: Arc::default(),
        tracker: tracker.clone(),
    };
    let mut engine = start(dir.path(), sink.clone());
    let e = tracker.lock().assign(0);
    let good = json!({"id": "ok", "content": "国务院常务会议部署进一步做好稳就业工作"});
    let mut msgs = vec![message(0, 0, e, &good)];
    let mut bad = message(0, 1, e, &good);
    bad.payload = Some(b"\xff\xfe not json".to_vec());
    msgs.push(bad);
    let mut tombstone = message(0, 2, e, &good);
    tombstone.payload = None;
    msgs.push(tombstone);
    // A valid article in a record of too many headers (as `detach` reads it): the DLQ, not the
    // index, and nothing after it waits.
    let mut many_headers = message(
        0,
        3,
        e,
        &json!({"id": "hdr", "content": "另一篇完全不同的新闻正文"}),
    );
    many_headers.headers =
        vec![(String::new(), Vec::new()); newsdedup::kafka::record::MAX_INPUT_HEADERS];
    many_headers.headers_dropped = 519_000;
    msgs.push(many_headers);
    msgs.push(message(
        0,
        4,
        e,
        &json!({"id": "after", "content": "第三篇新闻：省政府发布交通建设规划"}),
    ));
    for m in msgs {
        tracker.lock().register(0, m.offset);
        engine.submit(m).expect("submit");
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while sink.out.lock().len() < 5 {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(10));
    }
    engine.shutdown();
    let out = sink.out.lock();
    assert_eq!(out[0].0.kind, OutputKind::Unique);
    assert_eq!(out[1].0.kind, OutputKind::Dlq);
    assert_eq!(header(&out[1].0, "newsdedup.error.reason"), "bad_utf8");
    assert_eq!(out[1].0.payload, b"\xff\xfe not json");
    assert_eq!(out[2].0.kind, OutputKind::Dlq);
    assert_eq!(header(&out[2].0, "newsdedup.error.reason"), "bad_json");
    assert_eq!(out[3].0.kind, OutputKind::Dlq);
    assert_eq!(header(&out[3].0, "newsdedup.error.reason"), "oversized");
    assert!(
        header(&out[3].0, "newsdedup.error.message").contains("520024 headers"),
        "{}",
        header(&out[3].0, "newsdedup.error.message")
    );
    assert_eq!(out[3].0.indexed, None, "never indexed");
    assert_eq!(out[4].0.kind, OutputKind::Unique);
    assert_eq!(tracker.lock().commit_candidates(None)[0].offset, 5);
}

/// Fails every decision after the first `ok` ones, like an index that stopped accepting writes.
struct FailAfter {
    inner: Deduper<RocksIndex>,
    ok: usize,
    /// Offer the index's sync handle (the committer fsyncs on its own thread, as in the
    /// service), or not (sync requests go through the decision thread).
    sync_handle: bool,
}

impl DecisionStage for FailAfter {
    fn decide(&mut self, prepared: Prepared, now_ms: u64) -> Result<Outcome, IndexError> {
        if self.ok == 0 {
            return Err(IndexError::Io {
                dir: "/injected".into(),
                error: std::io::Error::other("injected write failure"),
            });
        }
        self.ok -= 1;
        DecisionStage::decide(&mut self.inner, prepared, now_ms)
    }

    fn sync(&self) -> Result<(), IndexError> {
        DecisionStage::sync(&self.inner)
    }

    fn sync_handle(&self) -> Option<SyncHandle> {
        if self.sync_handle {
            DecisionStage::sync_handle(&self.inner)
        } else {
            None
        }
    }

    fn counts(&self) -> IndexCounts {
        DecisionStage::counts(&self.inner)
    }

    fn undo(&mut self, id: &str, write: &newsdedup::index::IndexWrite) -> Result<bool, IndexError> {
        DecisionStage::undo(&mut self.inner, id, write)
    }

    fn holds(&self, id: &str) -> Result<bool, IndexError> {
        DecisionStage::holds(&self.inner, id)
    }
}

#[test]
fn an_index_error_stops_decisions_and_nothing_after_it_is_committable() {
    index_error_stops_decisions(true);
}

#[test]
fn an_index_error_stops_decisions_with_syncs_through_the_decision_thread() {
    index_error_stops_decisions(false);
}

fn index_error_stops_decisions(sync_handle: bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = Config::default();
    let fp = Fingerprinter::new(&config.fingerprint).expect("fingerprinter");
    let index = RocksIndex::open(dir.path(), fp.identity(), &config.index).expect("index");
    let tracker = Arc::new(Mutex::new(OffsetTracker::new()));
    let sink = VecSink {
        out: Arc::default(),
        tracker: tracker.clone(),
    };
    let preparer = Arc::new(LocalPreparer {
        fingerprinter: fp,
        max_output_bytes: 1 << 20,
        correction_acceptance: Default::default(),
        read_rules: newsdedup::article::ReadRules::new(1 << 20),
    });
    let decider = FailAfter {
        inner: Deduper::new(index, 3),
        ok: 10,
        sync_handle,
    };
    let mut engine = Engine::start(
        decider,
        preparer,
        sink.clone(),
        2,
        Arc::new(AtomicBool::new(false)),
    );
    let e = tracker.lock().assign(0);
    for (i, a) in common::corpus_articles("sina_2018_patrick233.jsonl", 30)
        .iter()
        .enumerate()
    {
        tracker.lock().register(0, i as i64);
        engine
            .submit(message(0, i as i64, e, &Value::Object(a.clone())))
            .expect("submit");
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while engine.handle().failure().is_none() {
        assert!(Instant::now() < deadline, "no failure reported");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(200));
    let failure = engine.handle().failure().expect("failure");
    assert!(failure.contains("injected write failure"), "{failure}");
    // What was decided before the error can still be made durable and committed; nothing after.
    engine
        .handle()
        .sync(Duration::from_secs(10))
        .expect("sync after failure");
    assert_eq!(sink.out.lock().len(), 10);
    assert_eq!(tracker.lock().commit_candidates(None)[0].offset, 10);
    assert_eq!(tracker.lock().in_flight(), 20);
    engine.shutdown();
}

/// A valid article whose output record could exceed the producer's limit is invalid
/// (`oversized`) before the decision: it goes to the DLQ and the index never holds it.
#[test]
fn an_article_whose_output_cannot_fit_is_oversized_and_never_indexed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tracker = Arc::new(Mutex::new(OffsetTracker::new()));
    let sink = VecSink {
        out: Arc::default(),
        tracker: tracker.clone(),
    };
    let config = Config::default();
    let fp = Fingerprinter::new(&config.fingerprint).expect("fingerprinter");
    let index = RocksIndex::open(dir.path(), fp.identity(), &config.index).expect("index");
    let preparer = Arc::new(LocalPreparer {
        fingerprinter: fp,
        max_output_bytes: 64 * 1024,
        correction_acceptance: Default::default(),
        read_rules: newsdedup::article::ReadRules::new(1 << 20),
    });
    let mut engine = Engine::start(
        Deduper::new(index, 3),
        preparer,
        sink.clone(),
        2,
        Arc::new(AtomicBool::new(false)),
    );
    let epoch = tracker.lock().assign(0);
    let small = json!({"id": "small", "title": "短讯", "content": "本市今日召开新闻发布会，介绍秋季交通安全专项整治行动的进展情况。"});
    let large = json!({"id": "large", "title": "长文", "content": "城市更新与社区治理的实践观察。".repeat(2000)});
    // Fits as a value, but 40 KB of pass-through headers push its output over 64 KiB.
    let mut with_headers = message(
        0,
        2,
        epoch,
        &json!({"id": "headers", "content": "记者从市气象台获悉，本周末将有一次明显降温过程。".repeat(400)}),
    );
    with_headers.headers = vec![("trace".into(), vec![b'x'; 40_000])];
    for (o, m) in [
        message(0, 0, epoch, &small),
        message(0, 1, epoch, &large),
        with_headers,
    ]
    .into_iter()
    .enumerate()
    {
        tracker.lock().register(0, o as i64);
        engine.submit(m).expect("submit");
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while sink.out.lock().len() < 3 {
        assert!(Instant::now() < deadline, "engine did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
    engine.handle().sync(Duration::from_secs(10)).expect("sync");
    engine.shutdown();
    let out = sink.out.lock();
    assert_eq!(out[0].0.kind, OutputKind::Unique);
    for (record, _) in &out[1..] {
        assert_eq!(record.kind, OutputKind::Dlq);
        assert_eq!(header(record, "newsdedup.error.reason"), "oversized");
    }
    drop(out);
    let index = RocksIndex::open_raw(dir.path(), &Default::default()).expect("reopen");
    assert_eq!(
        newsdedup::index::ArticleStore::counts(&index).articles,
        1,
        "only the small article is indexed"
    );
}

/// A sink standing in for a broker whose output topic refuses records over `limit` bytes (a
/// topic `max.message.bytes` below the producer's; the test broker does not enforce it), or
/// whose input carried the header [`REFUSE`] (standing for pass-through headers that take it
/// over). It does what the producer does on such a refusal: undo what the decision wrote to the
/// index, then deliver the size-bounded DLQ record, then acknowledge.
#[derive(Clone)]
struct RefusingSink {
    limit: usize,
    engine: Arc<Mutex<Option<newsdedup::runner::RunnerHandle>>>,
    inner: VecSink,
}

/// An input header that makes [`RefusingSink`] refuse the output record.
const REFUSE: &str = "x-test-refuse";

impl OutputSink for RefusingSink {
    fn attach(&mut self, engine: &newsdedup::runner::RunnerHandle) {
        *self.engine.lock() = Some(engine.clone());
    }

    fn send(&mut self, record: OutputRecord, ticket: Ticket) {
        let marked = record.headers.iter().any(|(k, _)| k == REFUSE);
        if record.kind == OutputKind::Dlq || (record.payload.len() <= self.limit && !marked) {
            return self.inner.send(record, ticket);
        }
        let engine = self.engine.lock().clone().expect("attached");
        let indexed = record
            .indexed
            .clone()
            .expect("a decided record names its index entry");
        // Off the decision thread, as the producer's delivery tasks are; what the producer does.
        let taken_back = std::thread::spawn(move || {
            newsdedup::kafka::producer::undo(&engine, indexed, Duration::from_secs(10))
        })
        .join()
        .expect("undo thread");
        assert!(taken_back.is_ok(), "{taken_back:?}");
        let fallback = newsdedup::kafka::record::oversized_fallback(record, "MessageSizeTooLarge");
        self.inner.send(fallback, ticket);
    }
}

/// The articles in `out` that reached their topics, as a rebuild from them (what a standby or
/// a replacement index holds).
fn rebuilt_from(out: &[(OutputRecord, Ticket)]) -> (tempfile::TempDir, RocksIndex) {
    let topics = tempfile::tempdir().expect("tempdir");
    let file = topics.path().join("outputs.jsonl");
    let lines: String = out
        .iter()
        .filter(|(r, _)| r.kind != OutputKind::Dlq)
        .map(|(r, _)| format!("{}\n", String::from_utf8_lossy(&r.payload)))
        .collect();
    std::fs::write(&file, lines).expect("write");
    let config = Config::default();
    let fp = Fingerprinter::new(&config.fingerprint).expect("fingerprinter");
    let mut rebuilt = RocksIndex::open(&topics.path().join("index"), fp.identity(), &config.index)
        .expect("index");
    newsdedup::replica::rebuild_from_files(
        &mut rebuilt,
        &fp,
        &[file],
        newsdedup::replica::ApplyOptions {
            threads: 2,
            published_at_offset: Default::default(),
        },
        None,
    )
    .expect("rebuild");
    (topics, rebuilt)
}

/// A refused publish undoes only what its own decision wrote: an article published before and
/// sent again (a replay) stays; a refused revision puts the published version back instead of
/// deleting the id; a refused older version is forgotten, the stored one untouched. Afterwards
/// the live index agrees with a rebuild from the output topics, and a copy of the article still
/// finds it.
#[test]
fn a_refused_publish_undoes_only_what_its_own_decision_wrote() {
    use newsdedup::index::ArticleStore;
    let dir = tempfile::tempdir().expect("tempdir");
    let tracker = Arc::new(Mutex::new(OffsetTracker::new()));
    let delivered = VecSink {
        out: Arc::default(),
        tracker: tracker.clone(),
    };
    let sink = RefusingSink {
        limit: 1 << 20,
        engine: Arc::default(),
        inner: delivered.clone(),
    };
    let mut engine = start(dir.path(), sink);
    let epoch = tracker.lock().assign(0);
    let article = |content: String, published: &str| json!({"id": "a", "title": "专项核查", "content": content, "published_at": published});
    let first = article(
        common::numbered_report("河东区", 1, 20),
        "2025-10-01T09:00:00Z",
    );
    let revision = article(
        common::numbered_report("河东区", 1, 8) + &common::numbered_report("南山县", 100, 12),
        "2025-10-01T10:00:00Z",
    );
    let older = article(
        common::numbered_report("北湖镇", 1, 20),
        "2025-10-01T07:00:00Z",
    );
    let mut copy = first.clone();
    copy["id"] = json!("a-copy");
    let refused = |value: &Value, offset: i64| {
        let mut m = message(0, offset, epoch, value);
        m.headers.push((REFUSE.to_owned(), b"1".to_vec()));
        m
    };
    let inputs = [
        message(0, 0, epoch, &first),
        refused(&first, 1),
        refused(&revision, 2),
        refused(&older, 3),
        message(0, 4, epoch, &copy),
    ];
    for (n, input) in inputs.into_iter().enumerate() {
        tracker.lock().register(0, input.offset);
        engine.submit(input).expect("submit");
        // One at a time: each decision sees the index as the previous refusal left it.
        let deadline = Instant::now() + Duration::from_secs(30);
        while delivered.out.lock().len() <= n {
            assert!(Instant::now() < deadline, "engine did not finish");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    engine.handle().sync(Duration::from_secs(10)).expect("sync");
    engine.shutdown();
    let out = delivered.out.lock().clone();
    let kinds: Vec<OutputKind> = out.iter().map(|(r, _)| r.kind).collect();
    assert_eq!(
        kinds,
        [
            OutputKind::Unique,
            OutputKind::Dlq,
            OutputKind::Dlq,
            OutputKind::Dlq,
            OutputKind::Duplicate
        ]
    );
    let first_out: Value = serde_json::from_slice(&out[0].0.payload).expect("json");
    let published: newsdedup::simhash::Fingerprint = first_out["dedup"]["fingerprint"]
        .as_str()
        .expect("fingerprint")
        .parse()
        .expect("hex");
    let copy_out: Value = serde_json::from_slice(&out[4].0.payload).expect("json");
    assert_eq!(
        copy_out["dedup"]["match"]["id"], "a",
        "a copy finds the published article: {}",
        copy_out["dedup"]
    );
    let live = RocksIndex::open_raw(dir.path(), &Default::default()).expect("reopen");
    let (_topics, rebuilt) = rebuilt_from(&out);
    for (name, index) in [("live", &live), ("rebuilt", &rebuilt)] {
        let stored = index
            .get("a")
            .expect("get")
            .unwrap_or_else(|| panic!("{name}: the published article stays"));
        assert_eq!(
            stored.fingerprint, published,
            "{name}: the published version"
        );
        assert_eq!(stored.revision, None, "{name}: no revision stored");
        assert!(
            stored.earlier.is_empty(),
            "{name}: no refused version remembered: {:?}",
            stored.earlier
        );
        assert!(stored.searchable(), "{name}");
    }
    assert_eq!(
        ArticleStore::counts(&live).articles,
        ArticleStore::counts(&rebuilt).articles
    );
}

/// An output the broker refuses as too large after the article was indexed goes to the DLQ, and
/// the article leaves the index: a later copy is decided as a standby or a rebuild (which read
/// only the output topics) decide it, not as a duplicate of an article no reader received.
#[test]
fn an_output_refused_after_indexing_is_withdrawn_so_the_index_agrees_with_the_topics() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tracker = Arc::new(Mutex::new(OffsetTracker::new()));
    let delivered = VecSink {
        out: Arc::default(),
        tracker: tracker.clone(),
    };
    let sink = RefusingSink {
        limit: 8 * 1024,
        engine: Arc::default(),
        inner: delivered.clone(),
    };
    let mut engine = start(dir.path(), sink);
    let epoch = tracker.lock().assign(0);
    let body = "城市更新与社区治理的实践观察，记者走访多个街道，听取居民对老旧小区改造的意见。"
        .repeat(120);
    let big = json!({"id": "big", "title": "老旧小区改造", "content": body});
    let small = json!({"id": "small", "title": "短讯", "content": "本市今日召开新闻发布会，介绍秋季交通安全专项整治行动的进展情况。"});
    let copy = json!({"id": "big-copy", "title": "老旧小区改造", "content": format!("{body}\n责任编辑：张三")});
    for (offset, value) in [big, small].iter().enumerate() {
        tracker.lock().register(0, offset as i64);
        engine
            .submit(message(0, offset as i64, epoch, value))
            .expect("submit");
    }
    let wait_for = |n: usize| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while delivered.out.lock().len() < n {
            assert!(Instant::now() < deadline, "engine did not finish");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait_for(2);
    tracker.lock().register(0, 2);
    engine.submit(message(0, 2, epoch, &copy)).expect("submit");
    wait_for(3);
    engine.handle().sync(Duration::from_secs(10)).expect("sync");
    engine.shutdown();
    let out = delivered.out.lock().clone();
    let kinds: Vec<OutputKind> = out.iter().map(|(r, _)| r.kind).collect();
    assert_eq!(
        kinds[0],
        OutputKind::Dlq,
        "the refused output went to the DLQ"
    );
    assert_eq!(header(&out[0].0, "newsdedup.error.reason"), "oversized");
    let copy_out: Value = serde_json::from_slice(&out[2].0.payload).expect("json");
    assert_eq!(
        copy_out["dedup"]["decision"], "unique",
        "a copy of the withdrawn article: {}",
        copy_out["dedup"]
    );
    // What a rebuild from the output topics holds: the same articles as the live index.
    let live = RocksIndex::open_raw(dir.path(), &Default::default()).expect("reopen");
    let topics = tempfile::tempdir().expect("tempdir");
    let file = topics.path().join("outputs.jsonl");
    let lines: String = out
        .iter()
        .filter(|(r, _)| r.kind != OutputKind::Dlq)
        .map(|(r, _)| format!("{}\n", String::from_utf8_lossy(&r.payload)))
        .collect();
    std::fs::write(&file, lines).expect("write");
    let config = Config::default();
    let fp = Fingerprinter::new(&config.fingerprint).expect("fingerprinter");
    let mut rebuilt = RocksIndex::open(&topics.path().join("index"), fp.identity(), &config.index)
        .expect("index");
    newsdedup::replica::rebuild_from_files(
        &mut rebuilt,
        &fp,
        &[file],
        newsdedup::replica::ApplyOptions {
            threads: 2,
            published_at_offset: Default::default(),
        },
        None,
    )
    .expect("rebuild");
    use newsdedup::index::ArticleStore;
    for id in ["big", "small", "big-copy"] {
        assert_eq!(
            live.get(id).expect("get").map(|a| a.fingerprint),
            rebuilt.get(id).expect("get").map(|a| a.fingerprint),
            "{id}: live index and rebuild disagree"
        );
    }
    assert!(live.get("big").expect("get").is_none());
}

/// A correction whose output the broker refuses as too large is refused: its record goes to the
/// DLQ with the reason, and the index keeps the article as it was before (its decision, its
/// pair), which is what a standby or a rebuild holds, since the output topics never saw the
/// correction. (Withdrawing the article, as for an article decided, would drop one the topics
/// hold: later copies would be decided differently by the service and by its replicas.)
#[test]
fn a_correction_refused_as_too_large_is_undone_and_the_article_stays() {
    use newsdedup::index::{ArticleStore, StoredDecision};
    let dir = tempfile::tempdir().expect("tempdir");
    let tracker = Arc::new(Mutex::new(OffsetTracker::new()));
    let delivered = VecSink {
        out: Arc::default(),
        tracker: tracker.clone(),
    };
    // B, then A, which the engine links to B.
    let (b, a) = (story("b"), story("a"));
    let largest = [&a, &b]
        .iter()
        .map(|v| serde_json::to_vec(v).expect("json").len())
        .max()
        .expect("two");
    // Their outputs fit; the release of A, with a 4 KB reason, does not.
    let sink = RefusingSink {
        limit: largest + 2048,
        engine: Arc::default(),
        inner: delivered.clone(),
    };
    let mut engine = start(dir.path(), sink);
    let epoch = tracker.lock().assign(0);
    for (offset, value) in [&b, &a].into_iter().enumerate() {
        tracker.lock().register(0, offset as i64);
        engine
            .submit(message(0, offset as i64, epoch, value))
            .expect("submit");
    }
    let wait_for = |n: usize| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while delivered.out.lock().len() < n {
            assert!(Instant::now() < deadline, "engine did not finish");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait_for(2);
    let decided: Value = serde_json::from_slice(&delivered.out.lock()[1].0.payload).expect("json");
    assert_eq!(decided["dedup"]["match"]["id"], "b", "{}", decided["dedup"]);
    let release = release_of_a(&a, &decided, "两篇报道不同。".repeat(190));
    let mut correction = message(0, 0, 0, &Value::Null);
    correction.topic = Arc::from("articles.corrections");
    correction.partition = 7;
    correction.payload = Some(release.to_json().into_bytes());
    correction.correction = true;
    engine.submit(correction).expect("submit");
    wait_for(3);
    engine.handle().sync(Duration::from_secs(10)).expect("sync");
    engine.shutdown();
    let out = delivered.out.lock().clone();
    let refused = &out[2].0;
    assert_eq!(refused.kind, OutputKind::Dlq);
    assert_eq!(header(refused, "newsdedup.error.reason"), "oversized");
    assert!(
        header(refused, "newsdedup.error.message").contains("correction refused"),
        "{}",
        header(refused, "newsdedup.error.message")
    );

    // The live index holds A as the output topics do: B's duplicate, no correction, the pair
    // not separated; and so does a rebuild from them.
    let live = RocksIndex::open_raw(dir.path(), &Default::default()).expect("reopen");
    let topics = tempfile::tempdir().expect("tempdir");
    let file = topics.path().join("outputs.jsonl");
    let lines: String = out
        .iter()
        .filter(|(r, _)| r.kind != OutputKind::Dlq)
        .map(|(r, _)| format!("{}\n", String::from_utf8_lossy(&r.payload)))
        .collect();
    std::fs::write(&file, lines).expect("write");
    let config = Config::default();
    let fp = Fingerprinter::new(&config.fingerprint).expect("fingerprinter");
    let mut rebuilt = RocksIndex::open(&topics.path().join("index"), fp.identity(), &config.index)
        .expect("index");
    newsdedup::replica::rebuild_from_files(
        &mut rebuilt,
        &fp,
        &[file],
        newsdedup::replica::ApplyOptions {
            threads: 2,
            published_at_offset: Default::default(),
        },
        None,
    )
    .expect("rebuild");
    for index in [&live, &rebuilt] {
        let stored = index.get("a").expect("get").expect("A stays in the index");
        assert_eq!(stored.decision, StoredDecision::Duplicate);
        assert_eq!(stored.matched.as_ref().map(|m| m.id.as_str()), Some("b"));
        assert_eq!(stored.correction, None);
        assert!(index.separated("a").is_empty());
        assert!(index.separated("b").is_empty());
    }
    assert_eq!(
        live.get("a")
            .expect("get")
            .map(|s| (s.fingerprint, s.searchable())),
        rebuilt
            .get("a")
            .expect("get")
            .map(|s| (s.fingerprint, s.searchable()))
    );
}

/// A correction applied and published, read again (a restart, a re-sent record) and this time
/// refused by the broker, stays applied: its record wrote nothing, so nothing is undone, and the
/// index keeps agreeing with the output topics, which hold the correction.
#[test]
fn a_correction_read_again_and_refused_stays_applied() {
    use newsdedup::index::{ArticleStore, CorrectionKind, StoredDecision};
    let dir = tempfile::tempdir().expect("tempdir");
    let tracker = Arc::new(Mutex::new(OffsetTracker::new()));
    let delivered = VecSink {
        out: Arc::default(),
        tracker: tracker.clone(),
    };
    let (b, a) = (story("b"), story("a"));
    let sink = RefusingSink {
        limit: 1 << 20,
        engine: Arc::default(),
        inner: delivered.clone(),
    };
    let mut engine = start(dir.path(), sink);
    let epoch = tracker.lock().assign(0);
    let wait_for = |n: usize| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while delivered.out.lock().len() < n {
            assert!(Instant::now() < deadline, "engine did not finish");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    for (offset, value) in [&b, &a].into_iter().enumerate() {
        tracker.lock().register(0, offset as i64);
        engine
            .submit(message(0, offset as i64, epoch, value))
            .expect("submit");
    }
    wait_for(2);
    let decided: Value = serde_json::from_slice(&delivered.out.lock()[1].0.payload).expect("json");
    assert_eq!(decided["dedup"]["match"]["id"], "b", "{}", decided["dedup"]);
    let release = release_of_a(&a, &decided, "两篇报道不同。".into());
    for (offset, refuse) in [(0, false), (1, true)] {
        let mut correction = message(7, offset, 0, &Value::Null);
        correction.topic = Arc::from("articles.corrections");
        correction.payload = Some(release.to_json().into_bytes());
        correction.correction = true;
        if refuse {
            correction.headers.push((REFUSE.to_owned(), b"1".to_vec()));
        }
        engine.submit(correction).expect("submit");
        wait_for(3 + offset as usize);
    }
    engine.handle().sync(Duration::from_secs(10)).expect("sync");
    engine.shutdown();
    let out = delivered.out.lock().clone();
    let kinds: Vec<OutputKind> = out.iter().map(|(r, _)| r.kind).collect();
    assert_eq!(
        kinds,
        [
            OutputKind::Unique,
            OutputKind::Duplicate,
            OutputKind::Unique,
            OutputKind::Dlq
        ],
        "the release published, then its second reading refused"
    );
    let live = RocksIndex::open_raw(dir.path(), &Default::default()).expect("reopen");
    let (_topics, rebuilt) = rebuilt_from(&out);
    for (name, index) in [("live", &live), ("rebuilt", &rebuilt)] {
        let stored = index.get("a").expect("get").expect("A stays");
        assert_eq!(
            stored.decision,
            StoredDecision::Unique,
            "{name}: still released"
        );
        assert_eq!(
            stored.correction.as_ref().map(|c| c.kind),
            Some(CorrectionKind::Release),
            "{name}"
        );
        assert_eq!(index.separated("a"), ["b".to_owned()], "{name}");
    }
}

/// One of the correction tests' articles (`common::correction_articles`) as an input value.
fn story(id: &str) -> Value {
    let (_, content, published) = common::correction_articles()
        .into_iter()
        .find(|(i, _, _)| *i == id)
        .expect("a story article");
    json!({"id": id, "title": "", "content": content, "published_at": published})
}

/// An editor's release of article `a`, decided as `decided` (its output record), for `reason`.
fn release_of_a(a: &Value, decided: &Value, reason: String) -> newsdedup::correction::Correction {
    newsdedup::correction::Correction {
        kind: newsdedup::index::CorrectionKind::Release,
        id: "a".into(),
        into: None,
        by: Some("editor".into()),
        reason: Some(reason),
        at: "2025-10-02T08:00:00Z".into(),
        fingerprint: decided["dedup"]["fingerprint"]
            .as_str()
            .expect("fingerprint")
            .parse()
            .expect("hex"),
        article: a.to_string(),
        follows: None,
        audience: None,
        expires: None,
        key_id: None,
        signature: None,
    }
}
