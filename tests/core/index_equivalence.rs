//! The block index never misses a fingerprint within distance 3: candidates from RocksDB are
//! compared with a brute-force scan over 120k random fingerprints with planted neighbours. The
//! sketch-band index returns exactly the articles sharing a band, minus crowded bands.

use newsdedup::config::IndexConfig;
use newsdedup::fingerprint::FingerprintIdentity;
use newsdedup::index::bucket::MAX_BAND_BUCKET;
use newsdedup::index::{ArticleStore, Candidate, RocksIndex, StoredArticle, StoredDecision};
use newsdedup::simhash::Fingerprint;
use newsdedup::sketch::{Sketch, BINS};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};

pub fn test_identity() -> FingerprintIdentity {
    let cfg = newsdedup::config::FingerprintConfig::default();
    FingerprintIdentity {
        algorithm: "test".into(),
        cleaning: "test".into(),
        sketch: "test".into(),
        dict_xxh3: String::new(),
        idf_xxh3: String::new(),
        stopwords_xxh3: String::new(),
        hmm: cfg.hmm,
        title_weight: cfg.title_weight,
        unknown_idf: None,
        keep_single_chars: false,
        keep_numbers: true,
        keep_latin: true,
        pos_filter: vec![],
        strip_boilerplate: true,
        fold_traditional: true,
        max_content_bytes: 0,
    }
}

/// A unique article with fingerprint `fp` and no sketch.
fn unique_record(seq: u64, fp: u64) -> StoredArticle {
    StoredArticle {
        indexed_extension: false,
        event_ms: 0,
        published_ms: None,
        event_time_clamped: false,
        earlier: Vec::new(),
        correction: None,
        seq,
        fingerprint: Fingerprint(fp),
        url: None,
        title: None,
        first_seen_ms: 0,
        decision: StoredDecision::Unique,
        matched: None,
        sketch: None,
        revision: None,
    }
}

fn flip_bits(rng: &mut SmallRng, fp: u64, d: u32) -> u64 {
    let mut out = fp;
    let mut flipped = BTreeSet::new();
    while flipped.len() < d as usize {
        let bit = rng.gen_range(0..64);
        if flipped.insert(bit) {
            out ^= 1u64 << bit;
        }
    }
    out
}

#[test]
fn block_index_equals_brute_force_within_three() {
    let dir = tempfile::tempdir().unwrap();
    let mut index =
        RocksIndex::open(dir.path(), &test_identity(), &IndexConfig::default()).unwrap();
    let mut rng = SmallRng::seed_from_u64(0x5eed);
    const N: usize = 120_000;
    let mut all: Vec<u64> = Vec::with_capacity(N);
    // Random fingerprints, plus clusters: bases with neighbours at distance 1..3 already indexed,
    // so lookups see several true matches at once.
    while all.len() < N {
        let base: u64 = rng.gen();
        all.push(base);
        if rng.gen_bool(0.05) {
            for d in 1..=3 {
                all.push(flip_bits(&mut rng, base, d));
            }
        }
    }
    all.truncate(N);
    for (seq, &fp) in all.iter().enumerate() {
        index
            .insert(&format!("a{seq}"), &unique_record(seq as u64, fp), true)
            .unwrap();
    }
    assert_eq!(index.counts().articles, N as u64);

    let brute = |q: u64, k: u32| -> BTreeSet<u64> {
        all.iter()
            .enumerate()
            .filter(|(_, &fp)| (fp ^ q).count_ones() <= k)
            .map(|(seq, _)| seq as u64)
            .collect()
    };
    let mut out: Vec<Candidate> = Vec::new();
    let mut found_beyond = [0usize; 7];
    let mut total_beyond = [0usize; 7];
    let queries_per_distance = 300;
    for d in 0..=6u32 {
        for _ in 0..queries_per_distance {
            let target = all[rng.gen_range(0..N)];
            let q = flip_bits(&mut rng, target, d);
            out.clear();
            index.candidates(Fingerprint(q), 6, &mut out).unwrap();
            let got: BTreeSet<u64> = out.iter().map(|c| c.seq).collect();
            assert_eq!(got.len(), out.len(), "a candidate was returned twice");
            for c in &out {
                assert_eq!(c.distance, Fingerprint(q).distance(c.fingerprint));
                assert_eq!(c.id, format!("a{}", c.seq));
            }
            // Exhaustive within 3.
            let got3: BTreeSet<u64> = out
                .iter()
                .filter(|c| c.distance <= 3)
                .map(|c| c.seq)
                .collect();
            assert_eq!(
                got3,
                brute(q, 3),
                "query {q:016x} (planted at distance {d})"
            );
            // Beyond 3: never anything wrong, but not everything.
            let truth6 = brute(q, 6);
            assert!(got.is_subset(&truth6));
            for seq in truth6 {
                let dist = (all[seq as usize] ^ q).count_ones() as usize;
                if dist >= 4 {
                    total_beyond[dist] += 1;
                    found_beyond[dist] += got.contains(&seq) as usize;
                }
            }
        }
    }
    for d in 4..=6 {
        // Printed for the record: the fraction of true neighbours at distance d
        // that share a block. Theory for random bit flips: 1 - P(every block hit).
        println!(
            "distance {d}: {}/{} true neighbours found ({:.1}%)",
            found_beyond[d],
            total_beyond[d],
            100.0 * found_beyond[d] as f64 / total_beyond[d].max(1) as f64
        );
        assert!(total_beyond[d] > 0);
    }
    // Four flipped bits all in different blocks is the only way to miss at distance 4.
    assert!(found_beyond[4] < total_beyond[4]);
}

#[test]
fn ties_go_to_the_earliest_seen() {
    let cands = vec![
        Candidate {
            seq: 9,
            fingerprint: Fingerprint(1),
            distance: 2,
            id: "late".into(),
        },
        Candidate {
            seq: 3,
            fingerprint: Fingerprint(2),
            distance: 2,
            id: "early".into(),
        },
        Candidate {
            seq: 1,
            fingerprint: Fingerprint(3),
            distance: 3,
            id: "far".into(),
        },
    ];
    assert_eq!(
        newsdedup::dedup::best_candidate(&cands).unwrap().id,
        "early"
    );
}

fn random_sketch(rng: &mut SmallRng) -> Sketch {
    let mut bins = [0u32; BINS];
    for b in bins.iter_mut() {
        *b = rng.gen_range(0..u32::MAX);
    }
    Sketch {
        bins,
        shingles: 1000,
        segments: newsdedup::segments::Segments::default(),
        slots: Default::default(),
    }
}

/// `sketch` with the two bins of `band` taken from `from`: the two share that band.
fn share_band(mut sketch: Sketch, from: &Sketch, band: usize) -> Sketch {
    sketch.bins[band * 2..band * 2 + 2].copy_from_slice(&from.bins[band * 2..band * 2 + 2]);
    sketch
}

#[test]
fn band_index_equals_brute_force_and_ignores_crowded_bands() {
    let dir = tempfile::tempdir().unwrap();
    let mut index =
        RocksIndex::open(dir.path(), &test_identity(), &IndexConfig::default()).unwrap();
    let mut rng = SmallRng::seed_from_u64(0xba4d);
    let query = random_sketch(&mut rng);
    let mut sketches: Vec<Sketch> = Vec::new();
    // Band 0 of the query shared by exactly MAX_BAND_BUCKET articles (searched), band 1 by one
    // more (crowded: ignored), bands 3 and 5 both by one article (returned once), the rest random.
    for _ in 0..MAX_BAND_BUCKET {
        sketches.push(share_band(random_sketch(&mut rng), &query, 0));
    }
    for _ in 0..=MAX_BAND_BUCKET {
        sketches.push(share_band(random_sketch(&mut rng), &query, 1));
    }
    let both = share_band(random_sketch(&mut rng), &query, 3);
    sketches.push(share_band(both, &query, 5));
    while sketches.len() < 3000 {
        sketches.push(random_sketch(&mut rng));
    }
    // Same fingerprint for all: the simhash path must not see band entries.
    for (seq, sketch) in sketches.iter().enumerate() {
        let rec = StoredArticle {
            indexed_extension: false,
            event_ms: 0,
            published_ms: None,
            event_time_clamped: false,
            earlier: Vec::new(),
            correction: None,
            seq: seq as u64,
            fingerprint: Fingerprint(0x0123_4567_89ab_cdef),
            url: None,
            title: None,
            first_seen_ms: 0,
            decision: StoredDecision::Unique,
            matched: None,
            sketch: Some(*sketch),
            revision: None,
        };
        index.insert(&format!("a{seq}"), &rec, true).unwrap();
    }
    // A duplicate's bands are not searchable.
    let dup = StoredArticle {
        indexed_extension: false,
        event_ms: 0,
        published_ms: None,
        event_time_clamped: false,
        earlier: Vec::new(),
        correction: None,
        seq: sketches.len() as u64,
        fingerprint: Fingerprint(!0x0123_4567_89ab_cdef),
        url: None,
        title: None,
        first_seen_ms: 0,
        decision: StoredDecision::Duplicate,
        matched: None,
        sketch: Some(query),
        revision: None,
    };
    index.insert("dup", &dup, false).unwrap();

    // Brute force: articles sharing a (band, key) with the query, over buckets of <= 32.
    let mut buckets: BTreeMap<(usize, u64), Vec<u64>> = BTreeMap::new();
    for (seq, sketch) in sketches.iter().enumerate() {
        for band in sketch.bands() {
            buckets.entry(band).or_default().push(seq as u64);
        }
    }
    let expected: BTreeSet<u64> = query
        .bands()
        .filter_map(|band| buckets.get(&band))
        .filter(|seqs| seqs.len() <= MAX_BAND_BUCKET)
        .flatten()
        .copied()
        .collect();
    assert_eq!(expected.len(), MAX_BAND_BUCKET + 1);
    let mut got = Vec::new();
    index.sketch_lookup(&query, &mut got).unwrap();
    let got_seqs: BTreeSet<u64> = got.iter().map(|(seq, _)| *seq).collect();
    assert_eq!(
        got_seqs.len(),
        got.len(),
        "a band candidate was returned twice"
    );
    assert_eq!(got_seqs, expected);
    for (seq, id) in &got {
        assert_eq!(id, &format!("a{seq}"));
    }
    // Every stored sketch finds itself (its own bands are not crowded, except band 1 of the
    // crowded group, whose other bands are random).
    for (seq, sketch) in sketches.iter().enumerate().step_by(97) {
        got.clear();
        index.sketch_lookup(sketch, &mut got).unwrap();
        assert!(got.iter().any(|(s, _)| *s == seq as u64), "article {seq}");
    }
    // The simhash path sees each article once and no band entry.
    let mut cands = Vec::new();
    index
        .candidates(Fingerprint(0x0123_4567_89ab_cdef), 3, &mut cands)
        .unwrap();
    assert_eq!(cands.len(), sketches.len());

    let stats = index.stats(5, None).unwrap();
    let band_entries: usize = sketches.iter().map(|s| s.bands().count()).sum();
    assert_eq!(stats.families.len(), 4);
    for f in &stats.families {
        assert_eq!(f.entries, sketches.len() as u64);
    }
    assert_eq!(stats.bands.family, "bands");
    assert_eq!(stats.bands.entries, band_entries as u64);
    assert_eq!(stats.bands.buckets_used, buckets.len() as u64);
    assert_eq!(stats.bands.max_bucket, MAX_BAND_BUCKET as u32 + 1);
    assert_eq!(stats.bands.crowded_buckets, 1);
    assert_eq!(stats.bands.crowded_entries, MAX_BAND_BUCKET as u64 + 1);
    assert_eq!(
        stats.bands.shared_buckets,
        buckets.values().filter(|v| v.len() >= 2).count() as u64
    );
    assert_eq!(stats.bands.largest[0].1, MAX_BAND_BUCKET as u32 + 1);
    assert!(stats.bands.largest[0].0.starts_with("1:"));

    // Again from SST files (reopening flushes the recovered memtable): prefix blooms in play.
    drop(index);
    let index = RocksIndex::open(dir.path(), &test_identity(), &IndexConfig::default()).unwrap();
    let mut again = Vec::new();
    index.sketch_lookup(&query, &mut again).unwrap();
    assert_eq!(
        again.iter().map(|(seq, _)| *seq).collect::<BTreeSet<_>>(),
        expected
    );
    assert!(std::fs::read_dir(dir.path()).unwrap().any(|e| e
        .unwrap()
        .path()
        .extension()
        .is_some_and(|x| x == "sst")));

    let report = index.verify().unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.band_entries, band_entries as u64);
    assert_eq!(report.expected_band_entries, band_entries as u64);
    assert_eq!(report.block_entries, 4 * sketches.len() as u64);
}

/// A crowded bucket (20k fingerprints sharing block 0, five times `CROWDED_BUCKET`) is read
/// whole; the candidates stay exactly the brute force's: every fingerprint within the distance
/// that shares a block with the query.
#[test]
fn crowded_bucket_lookups_equal_brute_force() {
    use newsdedup::index::block_bucket::CROWDED_BUCKET;
    let dir = tempfile::tempdir().unwrap();
    let mut index =
        RocksIndex::open(dir.path(), &test_identity(), &IndexConfig::default()).unwrap();
    let mut rng = SmallRng::seed_from_u64(0xc0ffee);
    const N: usize = 20_000;
    const { assert!(N > 4 * CROWDED_BUCKET) };
    let shared: u64 = 0xabcd << 48;
    let mut all: Vec<u64> = Vec::with_capacity(N);
    while all.len() < N {
        let base = shared | (rng.gen::<u64>() >> 16);
        all.push(base);
        if rng.gen_bool(0.1) {
            for d in 1..=4 {
                // Neighbours that keep block 0, so they stay in the crowded bucket.
                let mut fp = base;
                let mut flipped = BTreeSet::new();
                while flipped.len() < d {
                    let bit = rng.gen_range(0..48);
                    if flipped.insert(bit) {
                        fp ^= 1u64 << bit;
                    }
                }
                all.push(fp);
            }
        }
    }
    all.truncate(N);
    for (seq, &fp) in all.iter().enumerate() {
        index
            .insert(&format!("a{seq}"), &unique_record(seq as u64, fp), true)
            .unwrap();
    }
    let shares_block =
        |a: u64, b: u64| (0..4).any(|i| (a >> (48 - 16 * i)) as u16 == (b >> (48 - 16 * i)) as u16);
    let mut out: Vec<Candidate> = Vec::new();
    for max_distance in [3u32, 4] {
        for _ in 0..200 {
            let target = all[rng.gen_range(0..N)];
            let flips = rng.gen_range(0..=4);
            let q = flip_bits(&mut rng, target, flips) & !(0xffffu64 << 48) | shared;
            out.clear();
            index
                .candidates(Fingerprint(q), max_distance, &mut out)
                .unwrap();
            let got: BTreeSet<u64> = out.iter().map(|c| c.seq).collect();
            assert_eq!(got.len(), out.len(), "a candidate was returned twice");
            let truth: BTreeSet<u64> = all
                .iter()
                .enumerate()
                .filter(|(_, &fp)| (fp ^ q).count_ones() <= max_distance && shares_block(fp, q))
                .map(|(seq, _)| seq as u64)
                .collect();
            assert_eq!(got, truth, "query {q:016x} within {max_distance}");
        }
    }
}

/// Candidates come in a fixed order whatever the order the articles were indexed in: family by
/// family, each family's by fingerprint, then sequence number (the decision takes the first of
/// equally good candidates, so the order is part of the output).
#[test]
fn candidates_come_by_fingerprint_then_sequence_number() {
    let dir = tempfile::tempdir().unwrap();
    let mut index =
        RocksIndex::open(dir.path(), &test_identity(), &IndexConfig::default()).unwrap();
    let q: u64 = 0x1234_5678_9abc_def0;
    // All share every block with `q` but the last (distance 1-3 in the lowest bits), indexed in
    // descending fingerprint order, one fingerprint twice.
    let fps = [q ^ 0b111, q ^ 0b110, q ^ 0b11, q ^ 0b11, q ^ 0b1];
    for (seq, &fp) in fps.iter().enumerate() {
        index
            .insert(&format!("a{seq}"), &unique_record(seq as u64, fp), true)
            .unwrap();
    }
    let mut out: Vec<Candidate> = Vec::new();
    index.candidates(Fingerprint(q), 3, &mut out).unwrap();
    let got: Vec<(u64, u64)> = out.iter().map(|c| (c.fingerprint.0, c.seq)).collect();
    let mut want: Vec<(u64, u64)> = fps
        .iter()
        .enumerate()
        .map(|(seq, &fp)| (fp, seq as u64))
        .collect();
    want.sort();
    assert_eq!(got, want);
}
