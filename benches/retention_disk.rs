//! Disk use under a retention window: streams N days of synthetic articles (arrival times spread
//! over each day, one in three a duplicate, realistic url / title / sketch sizes) through an index
//! with a short window, letting RocksDB flush and compact as it does in service, and prints the
//! index's disk bytes at the end of each day. Under a steady stream the figure must level off
//! once the window is full: the last lines compare the mean of the second half of the run with
//! the mean of the days right after the window filled, for the table files (the data) and for the
//! whole directory (which also holds RocksDB's info log, growing slowly until it is rolled).
//!
//!   cargo bench --bench retention_disk
//!
//! NEWSDEDUP_BENCH_DAYS (default 60), NEWSDEDUP_BENCH_PER_DAY (articles per day, default 10000),
//! NEWSDEDUP_BENCH_RETENTION (default 7d), NEWSDEDUP_BENCH_DIR (where the index goes, default the
//! temp dir).

use newsdedup::config::IndexConfig;
use newsdedup::fingerprint::FingerprintIdentity;
use newsdedup::index::{ArticleStore, MatchRef, RocksIndex, StoredArticle, StoredDecision};
use newsdedup::simhash::Fingerprint;
use newsdedup::sketch::Sketch;
use newsdedup::time::TimeSpan;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::time::Instant;
#[path = "common/slots.rs"]
mod slots;
use slots::random_slots;

const DAY: i64 = 86_400_000;
/// 2024-01-01T00:00:00Z.
const START: i64 = 1_704_067_200_000;

fn identity() -> FingerprintIdentity {
    serde_json::from_value(serde_json::json!({
        "algorithm": "bench", "cleaning": "bench", "sketch": "", "dict_xxh3": "", "idf_xxh3": "", "stopwords_xxh3": "",
        "hmm": true, "title_weight": 1.0, "unknown_idf": null, "keep_single_chars": false, "keep_numbers": true,
        "keep_latin": true, "pos_filter": [], "strip_boilerplate": true, "fold_traditional": true, "max_content_bytes": 0
    }))
    .expect("identity")
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn random_sketch(rng: &mut SmallRng) -> Sketch {
    let mut bins = [0u32; newsdedup::sketch::BINS];
    rng.fill(&mut bins[..]);
    let signed: Vec<(u32, u32)> = (0..28)
        .map(|_| (rng.gen_range(0..u32::MAX), rng.gen_range(10..60)))
        .collect();
    let chars = signed.iter().map(|(_, len)| len).sum();
    Sketch {
        bins,
        shingles: rng.gen_range(200u32..2000),
        segments: newsdedup::segments::Segments::from_signed(signed, chars),
        slots: random_slots(rng),
    }
}

/// Bytes of the table files (the data) and of RocksDB's own info logs (`LOG*`, which grow with
/// every flush and compaction message) in `dir`.
fn file_bytes(dir: &std::path::Path) -> (u64, u64) {
    let (mut sst, mut log) = (0, 0);
    for entry in std::fs::read_dir(dir).expect("index dir").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let len = entry.metadata().map_or(0, |m| m.len());
        if name.ends_with(".sst") {
            sst += len;
        } else if name.starts_with("LOG") {
            log += len;
        }
    }
    (sst, log)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let days: i64 = env_or("NEWSDEDUP_BENCH_DAYS", 60);
    let per_day: u64 = env_or("NEWSDEDUP_BENCH_PER_DAY", 10_000);
    let retention: TimeSpan = env_or("NEWSDEDUP_BENCH_RETENTION", TimeSpan::from_days(7));
    let window_days = (retention.as_ms() + DAY - 1) / DAY;
    let base = std::env::var("NEWSDEDUP_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| std::env::temp_dir());
    let dir = tempfile::tempdir_in(&base).expect("temp dir");
    let config = IndexConfig {
        retention: Some(retention),
        ..IndexConfig::default()
    };
    let mut index = RocksIndex::open(dir.path(), &identity(), &config).expect("index");
    let mut rng = SmallRng::seed_from_u64(11);
    let title = "国务院常务会议部署进一步优化营商环境的措施";
    let started = Instant::now();
    println!(
        "{days} days x {per_day} articles/day, retention {retention}; disk at the end of each day"
    );
    println!("day  articles_indexed  disk_bytes  bytes_per_article  sst_bytes  log_bytes");
    let mut disk_by_day = Vec::new();
    let mut sst_by_day = Vec::new();
    let mut seq = 0u64;
    for day in 0..days {
        for i in 0..per_day {
            let event_ms = START + day * DAY + (i as i64 * DAY) / per_day as i64;
            let unique = !seq.is_multiple_of(3);
            let url = format!("https://news.example.com/{day}/{i}/article-{seq}.html");
            let rec = StoredArticle {
                indexed_extension: false,
                seq,
                fingerprint: Fingerprint(rng.gen()),
                url: Some(url.clone()),
                title: Some(title.to_owned()),
                first_seen_ms: event_ms as u64,
                decision: if unique {
                    StoredDecision::Unique
                } else {
                    StoredDecision::Duplicate
                },
                matched: (!unique).then(|| MatchRef {
                    id: format!("a{}", seq - 1),
                    url: Some(url),
                    title: Some(title.to_owned()),
                    fingerprint: Fingerprint(rng.gen()),
                    distance: 2,
                    containment: Some(0.93),
                    published_ms: Some(event_ms - 3_600_000),
                    contained: Some(0.95),
                    rule: Some(newsdedup::index::MatchRule::Simhash),
                    relation: Some(newsdedup::index::Relation::Copy),
                    via: None,
                    segments: Some(Box::new(newsdedup::index::SegmentMatch {
                        shared: 20,
                        shared_chars: 540,
                        in_match: Some(0.93),
                        of_match: Some(0.95),
                        template: 0,
                    })),
                    slots: Some(Box::new(newsdedup::slots::SlotOverlap {
                        entities: newsdedup::slots::SlotShare {
                            shared: 11,
                            only_later: 1,
                            only_earlier: 1,
                            complete: true,
                        },
                        ..Default::default()
                    })),
                }),
                sketch: Some(random_sketch(&mut rng)),
                revision: None,
                event_ms,
                published_ms: Some(event_ms),
                event_time_clamped: false,
                earlier: Vec::new(),
                correction: None,
            };
            index
                .insert(&format!("a{seq}"), &rec, unique)
                .expect("insert");
            seq += 1;
        }
        index.flush().expect("flush");
        index.wait_for_background_work().expect("compactions");
        let disk = index.disk_bytes();
        let articles = index.counts().articles;
        let (sst, log) = file_bytes(dir.path());
        println!(
            "{:>3}  {articles:>16}  {disk:>10}  {:>17.0}  {sst:>9}  {log:>9}",
            day + 1,
            disk as f64 / articles.max(1) as f64
        );
        disk_by_day.push(disk as f64);
        sst_by_day.push(sst as f64);
    }
    let mean = |days: &[f64]| days.iter().sum::<f64>() / days.len().max(1) as f64;
    let filled = (window_days as usize + 1).min(disk_by_day.len());
    let half = (disk_by_day.len() / 2).max(filled);
    for (what, by_day) in [
        ("table files", &sst_by_day),
        ("whole directory", &disk_by_day),
    ] {
        let early = mean(&by_day[filled..half]);
        let late = mean(&by_day[half..]);
        println!(
            "{what}: mean bytes days {}..{} {early:.0}, days {}..{} {late:.0}; ratio {:.3} (1.000 = level)",
            filled + 1,
            half,
            half + 1,
            by_day.len(),
            late / early,
        );
    }
    println!(
        "{seq} articles streamed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
