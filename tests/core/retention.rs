//! The retention window against a real RocksDB index: the query-time check, removal driven by the
//! stream time (never by an old archive), clamping of future times, exact counters and a
//! consistent index after removals, and `index delete` alongside.

use newsdedup::config::{FingerprintConfig, IndexConfig};
use newsdedup::dedup::{Deduper, Verdict};
use newsdedup::fingerprint::Fingerprinter;
use newsdedup::index::rocks::EXPIRE_BATCH;
use newsdedup::index::{ArticleStore, RocksIndex, StoredArticle, StoredDecision, MAX_FUTURE_MS};
use newsdedup::pipeline::{self, Outcome};
use newsdedup::simhash::Fingerprint;
use newsdedup::time::{parse_time, TimeSpan};
use serde_json::{json, Value};

const DAY: i64 = 86_400_000;

const STORY: &str = "新华社北京3月5日电 第十三届全国人民代表大会第二次会议5日上午在人民大会堂开幕。国务院总理李克强作政府工作报告，\
回顾2018年工作，部署2019年任务。报告提出，今年国内生产总值增长预期目标为6%至6.5%，城镇新增就业1100万人以上，\
城镇调查失业率5.5%左右，居民消费价格涨幅3%左右。报告指出，要深化增值税改革，将制造业等行业现行16%的税率降至13%，\
将交通运输业、建筑业等行业现行10%的税率降至9%。政府工作报告还提出，要大力优化营商环境，继续推进简政放权。";

const WEATHER: &str = "上海市气象台发布暴雨黄色预警，预计今天夜间到明天本市将出现大到暴雨，局部地区有大暴雨，请市民注意防范城市内涝，\
减少不必要的出行，车辆避免驶入低洼积水路段。气象部门提醒，雷雨发生时请远离高压电线和大树，户外作业人员应及时停止作业。";

const MATCH_DAY: &str = "国家统计局今天发布数据显示，上月全国居民消费价格同比上涨百分之二点一，其中食品价格上涨百分之四点五，\
非食品价格上涨百分之一点六；工业生产者出厂价格同比下降百分之零点三，环比持平。统计局城市司首席统计师对数据进行了解读。";

fn fingerprinter() -> Fingerprinter {
    Fingerprinter::new(&FingerprintConfig::default()).unwrap()
}

fn open(dir: &std::path::Path, fp: &Fingerprinter, retention: Option<&str>) -> RocksIndex {
    let config = IndexConfig {
        retention: retention.map(|r| r.parse().unwrap()),
        ..IndexConfig::default()
    };
    RocksIndex::open(dir, fp.identity(), &config).unwrap()
}

/// Decides one article record through the same stages as `batch` and the service; returns the
/// decision and the output record.
fn decide_json(
    d: &mut Deduper<RocksIndex>,
    fp: &Fingerprinter,
    article: Value,
    record_time_ms: Option<i64>,
    now_ms: u64,
) -> (newsdedup::dedup::Decision, Value) {
    let raw = article.to_string();
    let mut prepared = pipeline::prepare(
        raw.as_bytes(),
        fp,
        &newsdedup::article::ReadRules::new(1 << 20),
    );
    prepared.set_record_time(record_time_ms);
    match pipeline::decide(d, prepared, None, now_ms).unwrap() {
        Outcome::Decided {
            record, decision, ..
        } => (decision, serde_json::from_slice(&record).unwrap()),
        Outcome::Invalid { error, .. } => panic!("invalid article: {error}"),
    }
}

fn article(id: &str, body: &str, published_at: Option<&str>) -> Value {
    let mut a = json!({"id": id, "title": "", "content": body});
    if let Some(p) = published_at {
        a["published_at"] = json!(p);
    }
    a
}

fn assert_consistent(index: &RocksIndex) {
    let report = index.verify().unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let counts = index.counts();
    assert_eq!(
        (report.articles, report.unique),
        (counts.articles, counts.unique)
    );
    assert_eq!(report.expiry_entries, report.articles);
}

/// An indexed article more than the window older than the article being decided does not match
/// it, before any removal; one within the window does, and its `published_at` is in the match.
/// The old one is removed once the stream time passes it by the window.
#[test]
fn out_of_window_articles_do_not_match_and_are_removed_by_stream_time() {
    let dir = tempfile::tempdir().unwrap();
    let fp = fingerprinter();
    let mut d = Deduper::new(open(dir.path(), &fp, Some("7d")), 3);
    let now = parse_time("2024-06-01T00:00:00Z").unwrap() as u64;

    let (a, _) = decide_json(
        &mut d,
        &fp,
        article("a", STORY, Some("2024-03-01 08:00:00")),
        None,
        now,
    );
    assert_eq!(a.verdict, Verdict::Unique);
    assert_eq!(a.event_ms, parse_time("2024-03-01T08:00:00Z").unwrap());
    // Another story 3 days later: the stream time moves to day 3, nothing is due.
    decide_json(
        &mut d,
        &fp,
        article("w", WEATHER, Some("2024-03-04T08:00:00Z")),
        None,
        now,
    );
    assert_eq!(d.store().counts().articles, 2);

    // A copy of `a` 5 days after it: within the window, a duplicate naming when `a` was published.
    let (c, record) = decide_json(
        &mut d,
        &fp,
        article("c", STORY, Some("2024-03-06T08:00:00+00:00")),
        None,
        now,
    );
    assert!(c.is_duplicate(), "{c:?}");
    assert_eq!(record["dedup"]["match"]["id"], "a");
    assert_eq!(
        record["dedup"]["match"]["published_at"],
        "2024-03-01T08:00:00Z"
    );
    assert!(record["dedup"].get("event_time_clamped").is_none());

    // A copy 10 days after `a`, decided while `a` is still on disk (the stream time is day 5):
    // `a` is out of its window, so it is a new story.
    assert!(d.store().get("a").unwrap().is_some());
    let (b, record) = decide_json(
        &mut d,
        &fp,
        article("b", STORY, Some("2024-03-11T08:00:00Z")),
        None,
        now,
    );
    assert_eq!(b.verdict, Verdict::Unique, "{record}");
    // Its write moved the stream time to day 10: `a` (day 0) is removed, `w` (day 3) and the
    // duplicate `c` (day 5) stay.
    assert!(d.store().get("a").unwrap().is_none());
    for id in ["w", "c", "b"] {
        assert!(d.store().get(id).unwrap().is_some(), "{id}");
    }
    let counts = d.store().counts();
    assert_eq!((counts.articles, counts.unique), (3, 2));
    assert_eq!(
        counts.stream_time_ms,
        parse_time("2024-03-11T08:00:00Z").unwrap()
    );
    assert_consistent(d.store());

    // A later copy matches `b`, whose `published_at` is given; one of a story whose original had
    // no readable time has `published_at` null.
    let (_, record) = decide_json(
        &mut d,
        &fp,
        article("b2", STORY, Some("2024-03-12T08:00:00Z")),
        None,
        now,
    );
    assert_eq!(record["dedup"]["match"]["id"], "b");
    assert_eq!(
        record["dedup"]["match"]["published_at"],
        "2024-03-11T08:00:00Z"
    );
    decide_json(
        &mut d,
        &fp,
        article("m", MATCH_DAY, Some("not a time")),
        Some(parse_time("2024-03-12T09:00:00Z").unwrap()),
        now,
    );
    let (m2, record) = decide_json(
        &mut d,
        &fp,
        article("m2", MATCH_DAY, None),
        Some(parse_time("2024-03-12T10:00:00Z").unwrap()),
        now,
    );
    assert!(m2.is_duplicate());
    assert_eq!(record["dedup"]["match"]["id"], "m");
    assert_eq!(record["dedup"]["match"]["published_at"], Value::Null);
    // Without a readable `published_at`, the record time is the event time.
    assert_eq!(
        d.store().get("m").unwrap().unwrap().event_ms,
        parse_time("2024-03-12T09:00:00Z").unwrap()
    );
}

/// Without a window nothing is skipped or removed (the default keeps every article).
#[test]
fn without_a_window_old_articles_still_match() {
    let dir = tempfile::tempdir().unwrap();
    let fp = fingerprinter();
    let mut d = Deduper::new(open(dir.path(), &fp, None), 3);
    decide_json(
        &mut d,
        &fp,
        article("a", STORY, Some("2020-01-01")),
        None,
        0,
    );
    let (b, _) = decide_json(
        &mut d,
        &fp,
        article("b", STORY, Some("2024-01-01")),
        None,
        0,
    );
    assert!(b.is_duplicate());
    assert_eq!(d.store().counts().articles, 2);
}

fn record(seq: u64, event_ms: i64, unique: bool) -> StoredArticle {
    StoredArticle {
        indexed_extension: false,
        seq,
        // Distinct, far-apart fingerprints.
        fingerprint: Fingerprint(seq.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        url: None,
        title: None,
        first_seen_ms: event_ms.max(0) as u64,
        decision: if unique {
            StoredDecision::Unique
        } else {
            StoredDecision::Duplicate
        },
        matched: None,
        sketch: None,
        revision: None,
        event_ms,
        published_ms: Some(event_ms),
        event_time_clamped: false,
        earlier: Vec::new(),
        correction: None,
    }
}

/// Replaying an archive two years old into an index of recent articles removes nothing recent:
/// removal follows the stream time (the newest event time seen), which the archive cannot move
/// back. The archive's own articles, already out of the window, go.
#[test]
fn replaying_an_old_archive_removes_nothing_recent() {
    let dir = tempfile::tempdir().unwrap();
    let fp = fingerprinter();
    let mut index = open(dir.path(), &fp, Some("30d"));
    let recent_start = parse_time("2026-01-01").unwrap();
    let mut seq = 0u64;
    let mut recent = Vec::new();
    for i in 0..200 {
        let id = format!("recent-{i}");
        let rec = record(seq, recent_start + i * DAY / 10, i % 4 != 0);
        index
            .insert(&id, &rec, rec.decision == StoredDecision::Unique)
            .unwrap();
        recent.push(id);
        seq += 1;
    }
    let stream = index.counts().stream_time_ms;
    let archive_start = parse_time("2024-01-01").unwrap();
    for i in 0..200 {
        let rec = record(seq, archive_start + i * DAY / 10, true);
        index.insert(&format!("archive-{i}"), &rec, true).unwrap();
        seq += 1;
    }
    assert_eq!(index.counts().stream_time_ms, stream);
    for id in &recent {
        assert!(index.get(id).unwrap().is_some(), "{id} was removed");
    }
    // The archive's articles, out of the window, are gone (each removed right after its write).
    assert_eq!(index.counts().articles, 200);
    assert!(index.get("archive-199").unwrap().is_none());
    assert_consistent(&index);
    assert_eq!(index.stats(1, None).unwrap().age.due_for_expiry, 0);
}

/// A time far in the future (a bad clock) is clamped to the arrival time, the output says so, and
/// it does not push the stream time forward (which would remove every other article).
#[test]
fn future_times_are_clamped_to_arrival() {
    let dir = tempfile::tempdir().unwrap();
    let fp = fingerprinter();
    let mut d = Deduper::new(open(dir.path(), &fp, Some("7d")), 3);
    let now = parse_time("2024-03-10T00:00:00Z").unwrap();
    decide_json(
        &mut d,
        &fp,
        article("w", WEATHER, Some("2024-03-09T00:00:00Z")),
        None,
        now as u64,
    );
    let (f, record) = decide_json(
        &mut d,
        &fp,
        article("future", STORY, Some("2099-03-10T00:00:00Z")),
        None,
        now as u64,
    );
    assert!(f.event_time_clamped);
    assert_eq!(f.event_ms, now);
    assert_eq!(record["dedup"]["event_time_clamped"], true);
    assert_eq!(d.store().counts().stream_time_ms, now);
    assert!(d.store().get("w").unwrap().is_some());
    // Within the bound, a time ahead of arrival is kept as it is.
    let ahead = now + MAX_FUTURE_MS / 2;
    let (g, record) = decide_json(
        &mut d,
        &fp,
        article("ahead", MATCH_DAY, None),
        Some(ahead),
        now as u64,
    );
    assert!(!g.event_time_clamped);
    assert_eq!(g.event_ms, ahead);
    assert!(record["dedup"].get("event_time_clamped").is_none());
    // A replay of the clamped article says so again.
    let (again, record) = decide_json(
        &mut d,
        &fp,
        article("future", STORY, Some("2099-03-10T00:00:00Z")),
        None,
        now as u64 + 1000,
    );
    assert!(again.replayed);
    assert_eq!(record["dedup"]["event_time_clamped"], true);
}

/// A window made shorter on a full index: each write removes at most `EXPIRE_BATCH` articles,
/// the counters stay exact and `verify` passes after each; `stats` shows the age distribution and
/// what is due; `delete` still removes from every family.
#[test]
fn removal_is_bounded_per_write_and_keeps_the_index_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let fp = fingerprinter();
    let start = parse_time("2024-01-01").unwrap();
    let total = 3 * EXPIRE_BATCH as u64 + 500;
    {
        let mut index = open(dir.path(), &fp, None);
        // 30 days of articles, one in three a duplicate.
        for seq in 0..total {
            let event = start + (seq as i64 * 30 * DAY) / total as i64;
            let rec = record(seq, event, !seq.is_multiple_of(3));
            index
                .insert(
                    &format!("id-{seq}"),
                    &rec,
                    rec.decision == StoredDecision::Unique,
                )
                .unwrap();
        }
        assert_eq!(index.counts().articles, total);
        let stats = index.stats(1, Some(TimeSpan::from_days(5))).unwrap();
        assert_eq!(stats.age.per_day.len(), 30);
        assert_eq!(stats.age.per_day[0].0, "2024-01-01");
        assert_eq!(stats.age.per_day.iter().map(|d| d.1).sum::<u64>(), total);
        assert_eq!(stats.age.oldest.as_deref(), Some("2024-01-01T00:00:00Z"));
        let cutoff = index.counts().stream_time_ms - 5 * DAY;
        let event_of = |seq: u64| start + (seq as i64 * 30 * DAY) / (total as i64);
        let due_expected = (0..total).filter(|&seq| event_of(seq) < cutoff).count() as u64;
        assert_eq!(stats.age.due_for_expiry, due_expected);
        assert!(due_expected > 2 * EXPIRE_BATCH as u64);
    }
    let mut index = open(dir.path(), &fp, Some("5d"));
    let due = index.stats(1, None).unwrap().age.due_for_expiry;
    let mut removed = 0;
    loop {
        let n = index.remove_expired().unwrap();
        assert!(n <= EXPIRE_BATCH as u64);
        assert_consistent(&index);
        if n == 0 {
            break;
        }
        removed += n;
    }
    assert_eq!(removed, due);
    assert_eq!(index.counts().articles, total - due);
    let stats = index.stats(1, None).unwrap();
    assert_eq!(stats.age.due_for_expiry, 0);
    assert_eq!(stats.age.retention.as_deref(), Some("5d"));
    // The expired ones are gone from every family; a recent one is still there.
    assert!(index.get("id-0").unwrap().is_none());
    let last = format!("id-{}", total - 1);
    assert!(index.get(&last).unwrap().is_some());

    // `index delete` alongside: removes from every family, counters exact.
    let kept_unique = format!("id-{}", total - 2);
    let deleted = index
        .delete(&[kept_unique.clone(), "id-0".to_owned()])
        .unwrap();
    assert_eq!(deleted, vec![kept_unique.clone()]);
    assert!(index.get(&kept_unique).unwrap().is_none());
    assert_eq!(index.counts().articles, total - due - 1);
    assert_consistent(&index);

    // The writes themselves remove what becomes due: 6 more days of stream time.
    let later = index.counts().stream_time_ms + 6 * DAY;
    let rec = record(total, later, true);
    index.insert("later", &rec, true).unwrap();
    let remaining: u64 = index
        .stats(1, None)
        .unwrap()
        .age
        .per_day
        .iter()
        .map(|d| d.1)
        .sum();
    assert_eq!(remaining, index.counts().articles);
    assert_eq!(index.stats(1, None).unwrap().age.due_for_expiry, 0);
    assert_eq!(index.counts().articles, 1);
    assert_consistent(&index);
}
