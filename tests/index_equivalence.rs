//! The block index never misses a fingerprint within distance 3: candidates from RocksDB are
//! compared with a brute-force scan over 120k random fingerprints with planted neighbours.

use newsdedup::config::IndexConfig;
use newsdedup::fingerprint::FingerprintIdentity;
use newsdedup::index::{ArticleStore, Candidate, RocksIndex, StoredArticle, StoredDecision};
use newsdedup::simhash::Fingerprint;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeSet;

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
        let rec = StoredArticle {
            seq: seq as u64,
            fingerprint: Fingerprint(fp),
            url: None,
            title: None,
            first_seen_ms: 0,
            decision: StoredDecision::Unique,
            matched: None,
            sketch: None,
        };
        index.insert(&format!("a{seq}"), &rec, true).unwrap();
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
        // Printed for the record (see README "Index"): the fraction of true neighbours at distance d
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
