//! Decision latency when one 16-bit block bucket is flooded (templated reports, crafted input):
//! 200,000 fingerprints share block 0, beside 200,000 random ones. Prints, in one run, decide p50 /
//! p99 for queries that land in the crowded bucket and for ordinary queries, and the lookup alone
//! (the bucket read whole) for queries in the crowded bucket.
//!
//!   cargo bench --bench crowded_bucket
//!
//! NEWSDEDUP_BENCH_CROWDED: fingerprints in the crowded bucket (default 200000);
//! NEWSDEDUP_BENCH_DIR: where the index goes (default: the temp dir).

use hdrhistogram::Histogram;
use newsdedup::config::IndexConfig;
use newsdedup::dedup::{DecisionInput, Deduper};
use newsdedup::fingerprint::FingerprintIdentity;
use newsdedup::index::{ArticleStore, RocksIndex, StoredArticle, StoredDecision};
use newsdedup::simhash::Fingerprint;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::time::Instant;

const CROWDED_BLOCK: u64 = 0x5a5a << 48;

fn identity() -> FingerprintIdentity {
    serde_json::from_value(serde_json::json!({
        "algorithm": "bench", "cleaning": "bench", "sketch": "", "dict_xxh3": "", "idf_xxh3": "", "stopwords_xxh3": "",
        "hmm": true, "title_weight": 1.0, "unknown_idf": null, "keep_single_chars": false, "keep_numbers": true,
        "keep_latin": true, "pos_filter": [], "strip_boilerplate": true, "fold_traditional": true, "max_content_bytes": 0
    }))
    .expect("identity")
}

fn crowded(rng: &mut SmallRng) -> Fingerprint {
    Fingerprint(CROWDED_BLOCK | (rng.gen::<u64>() >> 16))
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let n: u64 = std::env::var("NEWSDEDUP_BENCH_CROWDED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000);
    let base = std::env::var("NEWSDEDUP_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| std::env::temp_dir());
    let dir = tempfile::tempdir_in(&base).expect("temp dir");
    let mut index =
        RocksIndex::open(dir.path(), &identity(), &IndexConfig::default()).expect("index");
    let mut rng = SmallRng::seed_from_u64(7);
    let start = Instant::now();
    for seq in 0..2 * n {
        let fp = if seq % 2 == 0 {
            crowded(&mut rng)
        } else {
            Fingerprint(rng.gen())
        };
        let rec = StoredArticle {
            indexed_extension: false,
            event_ms: 0,
            published_ms: None,
            event_time_clamped: false,
            earlier: Vec::new(),
            correction: None,
            seq,
            fingerprint: fp,
            url: None,
            title: None,
            first_seen_ms: 0,
            decision: StoredDecision::Unique,
            matched: None,
            sketch: None,
            revision: None,
        };
        index
            .insert(&format!("a{seq}"), &rec, true)
            .expect("insert");
    }
    index.wait_for_background_work().expect("settle");
    println!(
        "{n} fingerprints share one block (plus {n} random), loaded in {:.1} s",
        start.elapsed().as_secs_f64()
    );

    let mut deduper = Deduper::new(index, 3);
    let mut scratch = Vec::new();
    let mut report = |label: &str,
                      deduper: &mut Deduper<RocksIndex>,
                      pick: &mut dyn FnMut(&mut SmallRng) -> Fingerprint| {
        let mut decide = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("hist");
        for i in 0..5_000u64 {
            let fp = pick(&mut rng);
            let id = format!("{label}:{i}");
            let t = Instant::now();
            deduper
                .decide(
                    &DecisionInput {
                        published_ms: None,
                        record_time_ms: None,
                        id: &id,
                        url: None,
                        title: None,
                        fingerprint: fp,
                        sketch: None,
                        off_title_text: None,
                        outline: None,
                    },
                    0,
                )
                .expect("decide");
            decide
                .record(t.elapsed().as_nanos() as u64)
                .expect("record");
        }
        let us = |q: f64| decide.value_at_quantile(q) as f64 / 1000.0;
        println!(
            "{label}: decide p50 {:.1} us, p99 {:.1} us, max {:.1} us",
            us(0.5),
            us(0.99),
            decide.max() as f64 / 1000.0
        );
        us(0.99)
    };
    let crowded_p99 = report("crowded bucket", &mut deduper, &mut crowded);
    deduper.store().wait_for_background_work().expect("settle");
    let ordinary_p99 = report("ordinary bucket", &mut deduper, &mut |r| {
        Fingerprint(r.gen())
    });
    println!(
        "crowded / ordinary decide p99: {:.2}",
        crowded_p99 / ordinary_p99.max(1e-9)
    );

    // The lookup alone: the crowded bucket is read and scanned whole.
    let mut lookup = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("hist");
    for _ in 0..200 {
        let fp = crowded(&mut rng);
        scratch.clear();
        let t = Instant::now();
        deduper
            .store()
            .candidates(fp, 3, &mut scratch)
            .expect("candidates");
        lookup
            .record(t.elapsed().as_nanos() as u64)
            .expect("record");
    }
    println!(
        "crowded bucket: lookup p50 {:.1} us, p99 {:.1} us",
        lookup.value_at_quantile(0.5) as f64 / 1000.0,
        lookup.value_at_quantile(0.99) as f64 / 1000.0
    );
}
