//! Index decision latency (candidate lookup + atomic insert) with 1M and 10M fingerprints indexed,
//! and bytes on disk per article.
//!
//!   cargo bench --bench index_latency                       # 1M
//!   NEWSDEDUP_BENCH_SIZES=1000000,10000000 cargo bench --bench index_latency
//!
//! NEWSDEDUP_BENCH_DIR: where the index directories go (default: the temp dir);
//! NEWSDEDUP_BENCH_CACHE_MIB: `[index] block_cache_mib` (default 256);
//! NEWSDEDUP_BENCH_SETTLE=0: skip the second query phase (after the load's background work).
//!
//! Fingerprints and sketches are random (the occupancy real ones reach; see `index stats` on real
//! data); every article stores its 4 simhash blocks and 12 sketch bands, as with the defaults.
//! Every 100th query is a planted near-duplicate so the duplicate path is measured too.

use hdrhistogram::Histogram;
use newsdedup::config::IndexConfig;
use newsdedup::dedup::{DecisionInput, Deduper};
use newsdedup::fingerprint::FingerprintIdentity;
use newsdedup::index::{ArticleStore, RocksIndex, StoredArticle, StoredDecision};
use newsdedup::simhash::Fingerprint;
use newsdedup::sketch::Sketch;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::time::Instant;
#[path = "common/slots.rs"]
mod slots;
use slots::random_slots;

fn identity() -> FingerprintIdentity {
    serde_json::from_value(serde_json::json!({
        "algorithm": "bench", "cleaning": "bench", "sketch": "", "dict_xxh3": "", "idf_xxh3": "", "stopwords_xxh3": "",
        "hmm": true, "title_weight": 1.0, "unknown_idf": null, "keep_single_chars": false, "keep_numbers": true,
        "keep_latin": true, "pos_filter": [], "strip_boilerplate": true, "fold_traditional": true, "max_content_bytes": 0
    }))
    .unwrap()
}

/// A sketch of a ~1,000-character article: every bin filled, so all 12 LSH bands are indexed
/// (the default `sketch_search` configuration stores them with each unique article), and 28
/// segments of 10-60 characters (the corpus's median article has about that many), so its
/// searchable segments are looked up and its first few entered as the index does.
fn random_sketch(rng: &mut SmallRng) -> Sketch {
    let mut bins = [0u32; newsdedup::sketch::BINS];
    for b in bins.iter_mut() {
        *b = rng.gen_range(0..u32::MAX);
    }
    let signed: Vec<(u32, u32)> = (0..28)
        .map(|_| (rng.gen_range(0..u32::MAX), rng.gen_range(10..60)))
        .collect();
    let chars = signed.iter().map(|(_, len)| len).sum();
    Sketch {
        bins,
        shingles: 1000,
        segments: newsdedup::segments::Segments::from_signed(signed, chars),
        slots: random_slots(rng),
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let sizes: Vec<u64> = std::env::var("NEWSDEDUP_BENCH_SIZES")
        .unwrap_or_else(|_| "1000000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let base = std::env::var("NEWSDEDUP_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| std::env::temp_dir());
    if let Err(e) = std::fs::create_dir_all(&base) {
        panic!("NEWSDEDUP_BENCH_DIR {}: {e}", base.display());
    }
    let config = IndexConfig {
        block_cache_mib: std::env::var("NEWSDEDUP_BENCH_CACHE_MIB")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(IndexConfig::default().block_cache_mib),
        ..IndexConfig::default()
    };
    for n in sizes {
        let dir = tempfile::tempdir_in(&base).unwrap();
        let mut rng = SmallRng::seed_from_u64(n);
        let mut index = RocksIndex::open(dir.path(), &identity(), &config).unwrap();
        let start = Instant::now();
        let mut last_print = Instant::now();
        // Bulk load through the same atomic insert the service uses.
        for seq in 0..n {
            let rec = StoredArticle {
                indexed_extension: false,
                event_ms: 0,
                published_ms: None,
                event_time_clamped: false,
                earlier: Vec::new(),
                correction: None,
                seq,
                fingerprint: Fingerprint(rng.gen()),
                url: Some(format!("https://news.example.com/2019/{seq}.html")),
                title: Some("某地举行新闻发布会介绍经济运行情况".into()),
                first_seen_ms: 1_570_000_000_000 + seq,
                decision: StoredDecision::Unique,
                matched: None,
                sketch: Some(random_sketch(&mut rng)),
                revision: None,
            };
            index.insert(&format!("article:{seq}"), &rec, true).unwrap();
            if last_print.elapsed().as_secs() >= 10 {
                last_print = Instant::now();
                eprintln!(
                    "  loading {n}: {seq} inserted ({:.0}/s)",
                    seq as f64 / start.elapsed().as_secs_f64()
                );
            }
        }
        let load_secs = start.elapsed().as_secs_f64();
        println!("{n:>9} indexed: load {:.0} inserts/s", n as f64 / load_secs);
        let mut deduper = Deduper::new(index, 3);
        // Right after the bulk load, the flushes and compactions it queued run during the queries
        // (on a 2-core machine they compete with the decision thread).
        query_phase(&mut deduper, &mut rng, n, "after load", &config);
        if std::env::var("NEWSDEDUP_BENCH_SETTLE").map_or(true, |v| v != "0") {
            // Settled: the load's background work done, as in a service that is not bulk loading
            // (the queries still insert, so some flushes and compactions still run).
            let t = Instant::now();
            deduper.store().wait_for_background_work().unwrap();
            println!(
                "{n:>9} background work after load took {:.1} s to settle",
                t.elapsed().as_secs_f64()
            );
            query_phase(&mut deduper, &mut rng, n, "settled", &config);
        }
        let index = deduper.into_store();
        // Let compactions settle before measuring disk use.
        drop(index);
        let index = RocksIndex::open(dir.path(), &identity(), &config).unwrap();
        let disk = index.disk_bytes();
        let articles = index.counts().articles;
        println!(
            "{n:>9} indexed: {:.0} bytes/article on disk",
            disk as f64 / articles as f64
        );
    }
}

/// 20,000 decisions of new articles, each preceded by its lookup alone (the "cold" read half:
/// replay check, block scans, band buckets, on blocks not yet in the block cache).
fn query_phase(
    deduper: &mut Deduper<RocksIndex>,
    rng: &mut SmallRng,
    n: u64,
    label: &str,
    config: &IndexConfig,
) {
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
    let mut lookup_hist = hist.clone();
    let mut get_hist = hist.clone();
    let mut blocks_hist = hist.clone();
    let mut bands_hist = hist.clone();
    let mut scratch = Vec::new();
    let mut dups = 0;
    let queries = 20_000u64;
    let first = deduper.store().counts().articles;
    for i in 0..queries {
        let fp = if i % 100 == 0 {
            // A near-duplicate of an article inserted in this loop.
            Fingerprint(0xdead_beef_0000_0000 ^ (first + i / 100) ^ 0b11)
        } else if i % 100 == 1 {
            Fingerprint(0xdead_beef_0000_0000 ^ (first + i / 100))
        } else {
            Fingerprint(rng.gen())
        };
        let id = format!("query:{first}:{i}");
        let sketch = random_sketch(rng);
        // The read half alone: replay check, block scans, band buckets.
        let t = Instant::now();
        assert!(deduper.store().get(&id).unwrap().is_none());
        let t_blocks = Instant::now();
        scratch.clear();
        deduper.store().candidates(fp, 3, &mut scratch).unwrap();
        let t_bands = Instant::now();
        let mut banded = Vec::new();
        deduper.store().sketch_lookup(&sketch, &mut banded).unwrap();
        let end = Instant::now();
        get_hist.record((t_blocks - t).as_nanos() as u64).unwrap();
        blocks_hist
            .record((t_bands - t_blocks).as_nanos() as u64)
            .unwrap();
        bands_hist
            .record((end - t_bands).as_nanos() as u64)
            .unwrap();
        lookup_hist.record((end - t).as_nanos() as u64).unwrap();
        let t = Instant::now();
        let d = deduper
            .decide(
                &DecisionInput {
                    published_ms: None,
                    record_time_ms: None,
                    id: &id,
                    url: Some("https://x.example/q"),
                    title: Some("查询"),
                    fingerprint: fp,
                    sketch: Some(&sketch),
                    off_title_text: None,
                    outline: None,
                },
                0,
            )
            .unwrap();
        hist.record(t.elapsed().as_nanos() as u64).unwrap();
        dups += usize::from(d.is_duplicate());
    }
    let us = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    println!(
        "{n:>9} {label}: lookup only (blocks + bands, cold) p50 {:.1} us, p99 {:.1} us; decide (lookup+insert) p50 {:.1} us, p99 {:.1} us, p99.9 {:.1} us, max {:.1} us; {dups} dup of {queries}",
        us(&lookup_hist, 0.5),
        us(&lookup_hist, 0.99),
        us(&hist, 0.5),
        us(&hist, 0.99),
        us(&hist, 0.999),
        hist.max() as f64 / 1000.0,
    );
    println!(
        "{n:>9} {label}: lookup parts (cold), p50 / p99: replay get {:.1} / {:.1} us; 4 block scans {:.1} / {:.1} us; 12 band buckets {:.1} / {:.1} us (block cache {} MiB)",
        us(&get_hist, 0.5),
        us(&get_hist, 0.99),
        us(&blocks_hist, 0.5),
        us(&blocks_hist, 0.99),
        us(&bands_hist, 0.5),
        us(&bands_hist, 0.99),
        config.block_cache_mib
    );
}
