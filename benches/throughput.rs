//! Fingerprinting throughput vs raw jieba-rs `cut` on the same corpus texts, same run, one thread.
//!
//!   cargo bench --bench throughput            # all four corpus files
//!   NEWSDEDUP_BENCH_ARTICLES=5000 cargo bench --bench throughput
//!
//! Prints articles/s and MB/s for: raw cut (hmm on, as the fingerprinter uses) and the whole
//! fingerprint (clean + cut + filter + TF-IDF + simhash + sketch), measured in alternating passes
//! for their ratio, then each stage alone.

use newsdedup::config::FingerprintConfig;
use newsdedup::fingerprint::Fingerprinter;
use std::hint::black_box;
use std::io::BufRead;
use std::time::Instant;

#[path = "../tests/common/repo.rs"]
mod repo;
use repo::repo_file;

fn corpus(limit: usize) -> Vec<(String, String)> {
    let dir = std::env::var("NEWSDEDUP_CORPUS_DIR")
        .unwrap_or_else(|_| repo_file("../shared/data/corpus").display().to_string());
    let files = [
        "peoples_daily_2019_2020.jsonl",
        "sina_2018_patrick233.jsonl",
        "bdci2019_inews.jsonl",
        "sogou_smarty_2008_2012.jsonl",
    ];
    let paths: Vec<String> = files.iter().map(|f| format!("{dir}/{f}")).collect();
    let mut out = Vec::new();
    if paths.iter().all(|p| std::path::Path::new(p).is_file()) {
        for path in &paths {
            let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{path}: {e}"));
            for line in std::io::BufReader::new(f).lines() {
                let v: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
                let s = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_owned();
                out.push((s("title"), s("content")));
            }
        }
    } else {
        // Without the corpus the figures are only a smoke test: ~50 short articles, cycled.
        let sample = "examples/sample_articles.jsonl";
        eprintln!("corpus not found at {dir}: using the in-repo sample {sample}");
        let text = std::fs::read_to_string(repo_file(sample)).expect("the in-repo sample");
        for line in text.lines() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            if let Some(content) = v.get("content").and_then(|x| x.as_str()) {
                let title = v.get("title").and_then(|x| x.as_str()).unwrap_or("");
                out.push((title.to_owned(), content.to_owned()));
            }
        }
        let n = out.len();
        out = out.into_iter().cycle().take(limit.min(n * 100)).collect();
    }
    // Interleave sources so any prefix is a mix.
    out.sort_by_cached_key(|(t, c)| xxhash_rust::xxh3::xxh3_64(format!("{t}{c}").as_bytes()));
    out.truncate(limit);
    out
}

fn measure(
    name: &str,
    texts: &[(String, String)],
    rounds: usize,
    mut f: impl FnMut(&str, &str),
) -> f64 {
    let bytes: usize = texts.iter().map(|(t, c)| t.len() + c.len()).sum();
    let mut best = f64::MAX;
    for _ in 0..rounds {
        let start = Instant::now();
        for (t, c) in texts {
            f(t, c);
        }
        best = best.min(start.elapsed().as_secs_f64());
    }
    let aps = texts.len() as f64 / best;
    println!(
        "{name:<28} {:>9.0} articles/s {:>7.1} MB/s  ({} articles, best of {rounds})",
        aps,
        bytes as f64 / 1e6 / best,
        texts.len()
    );
    aps
}

/// Speed of `a` and of `b` and their ratio, measured in alternating chunks of articles
/// (`NEWSDEDUP_BENCH_CHUNK`, default 50: a few milliseconds each): a shared VM's speed drifts by
/// 20-30% within seconds, and adjacent chunks see the same machine. Each switch also evicts the
/// other side's dictionary tables from the caches (two jieba instances, upstream and vendored),
/// which costs both sides; larger chunks (500: ~80 ms) measure closer to each running alone.
/// Prints the total-time ratio and its spread over `rounds` passes.
fn measure_pair(
    texts: &[(String, String)],
    rounds: usize,
    (name_a, mut a): (&str, impl FnMut(&str, &str)),
    (name_b, mut b): (&str, impl FnMut(&str, &str)),
) -> f64 {
    let (mut total_a, mut total_b) = (0.0, 0.0);
    let mut ratios = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let (mut round_a, mut round_b) = (0.0, 0.0);
        for chunk in texts.chunks(env_usize("NEWSDEDUP_BENCH_CHUNK", 50).max(1)) {
            let start = Instant::now();
            for (t, c) in chunk {
                a(t, c);
            }
            round_a += start.elapsed().as_secs_f64();
            let start = Instant::now();
            for (t, c) in chunk {
                b(t, c);
            }
            round_b += start.elapsed().as_secs_f64();
        }
        total_a += round_a;
        total_b += round_b;
        ratios.push(round_a / round_b);
    }
    ratios.sort_by(f64::total_cmp);
    let bytes: usize = texts.iter().map(|(t, c)| t.len() + c.len()).sum();
    let n = (texts.len() * rounds) as f64;
    for (name, total) in [(name_a, total_a), (name_b, total_b)] {
        println!(
            "{name:<28} {:>9.0} articles/s {:>7.1} MB/s  ({} articles x {rounds} rounds, alternating)",
            n / total,
            bytes as f64 * rounds as f64 / 1e6 / total,
            texts.len()
        );
    }
    println!(
        "  speed ratio {name_b} / {name_a}: {:.2} (rounds: min {:.2}, median {:.2}, max {:.2})",
        total_a / total_b,
        ratios[0],
        ratios[ratios.len() / 2],
        ratios[ratios.len() - 1]
    );
    total_a / total_b
}

/// Raw cut (with the fingerprinter's HMM setting) against the full fingerprint, alternating.
fn cut_vs_fingerprint(
    texts: &[(String, String)],
    rounds: usize,
    jieba: &jieba_rs_upstream::Jieba,
    fp: &Fingerprinter,
    label: &str,
) -> f64 {
    let hmm = fp.config().hmm;
    let cut_name = if hmm {
        "raw jieba cut (hmm)"
    } else {
        "raw jieba cut (no hmm)"
    };
    measure_pair(
        texts,
        rounds,
        (cut_name, |t: &str, c: &str| {
            black_box(jieba.cut(t, hmm));
            black_box(jieba.cut(c, hmm));
        }),
        (&format!("fingerprint ({label})"), |t: &str, c: &str| {
            let _ = black_box(fp.fingerprint(t, c));
        }),
    )
}

/// `NEWSDEDUP_BENCH_ROUNDS`, or `default`.
fn env_rounds(default: usize) -> usize {
    env_usize("NEWSDEDUP_BENCH_ROUNDS", default)
}

/// The environment variable `name` as a number, or `default`.
fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let limit = std::env::var("NEWSDEDUP_BENCH_ARTICLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(usize::MAX);
    let texts = corpus(limit);
    let fp = Fingerprinter::new(&FingerprintConfig::default()).unwrap();
    // The baseline is the unmodified crates.io jieba-rs (newsdedup builds a vendored copy with
    // one added entry point), loaded with the same dictionary the fingerprinter uses.
    let dict = std::fs::read_to_string(repo_file("config/jieba_dict.txt")).unwrap();
    let jieba = &jieba_rs_upstream::Jieba::with_dict(&mut dict.as_bytes()).unwrap();
    let rounds = 3;
    if std::env::var("NEWSDEDUP_BENCH_ONLY").as_deref() == Ok("fingerprint") {
        // For profiling the fingerprint path alone (perf record).
        measure("fingerprint (full)", &texts, rounds, |t, c| {
            let _ = black_box(fp.fingerprint(t, c));
        });
        return;
    }
    if std::env::var("NEWSDEDUP_BENCH_ONLY").as_deref() == Ok("stages") {
        // Each stage added in turn, all measured in alternating rounds (where does time go?).
        let cleaned: Vec<(String, String)> = texts.iter().map(|(t, c)| fp.clean(t, c)).collect();
        let mut total = [0f64; 5];
        for _ in 0..5 {
            for chunk in (0..texts.len()).collect::<Vec<_>>().chunks(50) {
                let mut t = |i: usize, f: &mut dyn FnMut(usize)| {
                    let start = Instant::now();
                    for &k in chunk {
                        f(k);
                    }
                    total[i] += start.elapsed().as_secs_f64();
                };
                t(0, &mut |k| {
                    black_box(jieba.cut(&texts[k].0, true));
                    black_box(jieba.cut(&texts[k].1, true));
                });
                t(1, &mut |k| {
                    black_box(jieba.cut(&cleaned[k].0, true));
                    black_box(jieba.cut(&cleaned[k].1, true));
                });
                t(2, &mut |k| {
                    let (a, b) = fp.clean(&texts[k].0, &texts[k].1);
                    black_box(jieba.cut(&a, true));
                    black_box(jieba.cut(&b, true));
                });
                t(3, &mut |k| {
                    black_box(fp.feature_count(&texts[k].0, &texts[k].1));
                });
                t(4, &mut |k| {
                    let _ = black_box(fp.fingerprint(&texts[k].0, &texts[k].1));
                });
            }
        }
        let best = total.map(|t| t / 5.0);
        for (name, b) in [
            "raw cut",
            "cut of cleaned",
            "clean + cut",
            "clean + cut + filter + tf",
            "fingerprint",
        ]
        .iter()
        .zip(best)
        {
            println!(
                "{name:<28} {:>7.1} us/article",
                b * 1e6 / texts.len() as f64
            );
        }
        return;
    }
    if std::env::var("NEWSDEDUP_BENCH_ONLY").as_deref() == Ok("vendored") {
        // The vendored jieba (what the fingerprinter segments with) against the crates.io
        // release, same texts and calls: the copy's prefetches should keep it the faster one
        // (vendor/jieba-rs/VENDORED.md); then the same with the vendored copy's automaton.
        measure_pair(
            &texts,
            env_rounds(rounds),
            ("raw jieba cut (crates.io)", |t: &str, c: &str| {
                black_box(jieba.cut(t, true));
                black_box(jieba.cut(c, true));
            }),
            ("raw jieba cut (vendored)", |t: &str, c: &str| {
                black_box(fp.jieba().cut(t, true));
                black_box(fp.jieba().cut(c, true));
            }),
        );
        // The vendored jieba with its one-pass automaton (not the default: VENDORED.md).
        let mut one_pass = fp.jieba().clone();
        one_pass.build_automaton();
        measure_pair(
            &texts,
            env_rounds(rounds),
            ("raw jieba cut (crates.io)", |t: &str, c: &str| {
                black_box(jieba.cut(t, true));
                black_box(jieba.cut(c, true));
            }),
            ("raw jieba cut (vendored, automaton)", |t: &str, c: &str| {
                black_box(one_pass.cut(t, true));
                black_box(one_pass.cut(c, true));
            }),
        );
        return;
    }
    if std::env::var("NEWSDEDUP_BENCH_ONLY").as_deref() == Ok("cut") {
        let rounds = env_rounds(rounds);
        measure("raw jieba cut (hmm)", &texts, rounds, |t, c| {
            black_box(jieba.cut(t, true));
            black_box(jieba.cut(c, true));
        });
        return;
    }
    // The goal's ratio: raw cut and the full fingerprint measured in alternating passes.
    let rounds_pair = env_rounds(9);
    let ratio = cut_vs_fingerprint(&texts, rounds_pair, jieba, &fp, "full");
    println!("fingerprint / raw cut = {ratio:.2}");
    measure("clean only", &texts, rounds, |t, c| {
        black_box(fp.clean(t, c));
    });
    let cleaned: Vec<(String, String)> = texts.iter().map(|(t, c)| fp.clean(t, c)).collect();
    measure("cut of cleaned text", &cleaned, rounds, |t, c| {
        black_box(jieba.cut(t, true));
        black_box(jieba.cut(c, true));
    });
    measure("clean + cut + filter + tf", &texts, rounds, |t, c| {
        black_box(fp.feature_count(t, c));
    });
    measure("sketch of cleaned text", &cleaned, rounds, |_, c| {
        black_box(newsdedup::sketch::Sketch::of(c));
    });
    let no_hmm = Fingerprinter::new(&FingerprintConfig {
        hmm: false,
        ..FingerprintConfig::default()
    })
    .unwrap();
    // The same comparison with HMM off on both sides (a configuration choice, `hmm = false`).
    let ratio_no_hmm = cut_vs_fingerprint(&texts, rounds_pair, jieba, &no_hmm, "hmm off");
    println!("fingerprint / raw cut, both without hmm = {ratio_no_hmm:.2}");
}
