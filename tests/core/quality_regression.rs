//! Quality must not regress: a small fixed labelled set (3,000 corpus articles + 300 generated
//! reposts, built from the shared corpus at test time by scripts/eval/quality.py --quick) is run
//! through `newsdedup batch`, and precision / recall by length class must stay at the targets
//! (precision >= 0.99, recall >= 0.95 long, >= 0.85 short); excerpt reposts (40-60% of a story's
//! sentences) must be caught (>= 0.85) and roundups (an earlier short item among other articles'
//! paragraphs) stay unique (<= 1% flagged). Full figures: docs/QUALITY.md.
//! The in-repo sample (examples/sample_articles.jsonl, what scripts/demo.sh runs) must be decided
//! exactly as planted. On the corpus, the natural pairs read by editors (scripts/eval/natural/,
//! test half) are scored and must stay at or above the floors recorded in docs/QUALITY.md.

use crate::common;

use serde_json::Value;
use std::process::Command;

#[test]
fn precision_and_recall_meet_the_targets_on_the_quick_set() {
    let work = tempfile::tempdir().unwrap();
    let root = common::repo_file("");
    let root = root.display();
    // Without the corpus, the harness runs on the sample's stories instead: every one of them
    // (10 long, 28 short) gets the harness's generated reposts (same edit model and seed), ~40
    // instead of ~330, so at least 10 per length class instead of 100. On so few, one miss moves
    // a rate by 3-9%: a target then holds if the misses are at most its share of n rounded up
    // (1 of ~11 long reposts, 5 of ~30 short ones, 1 false positive in ~40 flagged).
    let sample_corpus = tempfile::tempdir().unwrap();
    let on_corpus = common::corpus_available();
    let (corpus, min_per_class) = if on_corpus {
        (common::corpus_dir(), 100)
    } else {
        let lines: Vec<String> = common::sample_stories()
            .into_iter()
            .map(|a| Value::Object(a).to_string())
            .collect();
        let dir = sample_corpus.path().to_owned();
        std::fs::write(dir.join("sample.jsonl"), lines.join("\n") + "\n").unwrap();
        (dir, 10)
    };
    let out = Command::new("python3")
        .arg(format!("{root}/scripts/eval/quality.py"))
        .args(["--quick", "--excerpts", "--sweep", "none", "--corpus"])
        .arg(corpus)
        .arg("--bin")
        .arg(env!("CARGO_BIN_EXE_newsdedup"))
        .arg("--workdir")
        .arg(work.path())
        .output()
        .expect("python3 must be installed (scripts/setup.sh)");
    assert!(
        out.status.success(),
        "quality.py failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value =
        serde_json::from_slice(&std::fs::read(work.path().join("report.json")).unwrap()).unwrap();
    let rate = |v: &Value| v["rate"].as_f64().unwrap();
    let meets = |v: &Value, target: f64| {
        let (n, hits) = (v["n"].as_u64().unwrap(), v["hits"].as_u64().unwrap());
        if on_corpus {
            rate(v) >= target
        } else {
            (n - hits) as f64 <= (n as f64 * (1.0 - target)).ceil()
        }
    };
    let precision = rate(&report["precision"]["overall"]);
    let long = &report["recall"]["by_length"]["long"];
    let short = &report["recall"]["by_length"]["short"];
    println!(
        "quick set: precision {precision:.4}, recall long {:.4} (n={}), short {:.4} (n={})",
        rate(long),
        long["n"],
        rate(short),
        short["n"]
    );
    assert!(
        long["n"].as_u64().unwrap() >= min_per_class
            && short["n"].as_u64().unwrap() >= min_per_class
    );
    assert!(
        meets(&report["precision"]["overall"], 0.99),
        "precision {precision}"
    );
    assert!(meets(long, 0.95), "recall on long articles {}", rate(long));
    assert!(
        meets(short, 0.85),
        "recall on short articles {}",
        rate(short)
    );
    println!(
        "templated reports flagged: {}",
        report["templated"]["flagged_in_run"]
    );
    // Excerpts: caught; roundups: a flagged one is a mistake (1 allowed per 100, rounded up).
    let excerpts = &report["excerpt_recall"]["overall"];
    let roundups = &report["roundups"]["overall"];
    println!(
        "excerpts caught {:.4} (n={}), roundups flagged {:.4} (n={})",
        rate(excerpts),
        excerpts["n"],
        rate(roundups),
        roundups["n"]
    );
    assert!(excerpts["n"].as_u64().unwrap() >= min_per_class / 10);
    assert!(roundups["n"].as_u64().unwrap() >= min_per_class / 10);
    assert!(meets(excerpts, 0.85), "excerpt recall {}", rate(excerpts));
    let (n, flagged) = (
        roundups["n"].as_u64().unwrap(),
        roundups["hits"].as_u64().unwrap(),
    );
    assert!(
        flagged as f64 <= (n as f64 * 0.01).ceil(),
        "{flagged} of {n} roundups flagged as duplicates: {}",
        report["roundups"]["flagged_examples"]
    );
}

/// Why each malformed record of the sample is invalid, in file order (examples/README.md).
const SAMPLE_INVALID: [&str; 6] = [
    "bad_json",
    "missing_field",
    "empty_text",
    "wrong_type",
    "no_features",
    "bad_json",
];

/// Every planted repost of the sample (`sNN-rK`) is a duplicate of its story `sNN`; every story,
/// the templated reports included, is unique; the malformed records are invalid, for their reasons.
#[test]
fn the_sample_is_decided_as_planted() {
    let work = tempfile::tempdir().unwrap();
    let output = work.path().join("out.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_newsdedup"))
        .args(["batch", "--quiet", "--input"])
        .arg(common::repo_file(common::SAMPLE))
        .arg("--output")
        .arg(&output)
        .arg("--index-dir")
        .arg(work.path().join("index"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (mut unique, mut duplicate, mut invalid) = (0, 0, Vec::new());
    let mut rules = Vec::new();
    for line in std::fs::read_to_string(&output).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let id = v["id"].as_str().unwrap_or("");
        let dedup = &v["dedup"];
        match dedup["decision"].as_str().unwrap() {
            "invalid" => {
                let error = dedup["error"].as_str().unwrap();
                invalid.push(error.split(':').next().unwrap().to_owned());
            }
            "unique" => {
                assert_eq!(
                    common::sample_repost_of(id),
                    None,
                    "the planted repost {id} came out unique"
                );
                unique += 1;
            }
            _ => {
                let m = &dedup["match"];
                println!(
                    "{id} duplicate of {} (distance {}, containment {})",
                    m["id"], m["distance"], m["containment"]
                );
                assert_eq!(
                    common::sample_repost_of(id),
                    m["id"].as_str(),
                    "{id} is a duplicate of {}",
                    m["id"]
                );
                assert!(m["rule"].is_string(), "{id}: no rule in {m}");
                rules.push((id.to_owned(), m["rule"].as_str().unwrap_or("").to_owned()));
                duplicate += 1;
            }
        }
    }
    assert_eq!(invalid, SAMPLE_INVALID);
    assert_eq!(unique, common::sample_stories().len());
    assert_eq!(unique + duplicate, common::sample_articles().len());
    assert!(duplicate >= 8, "{duplicate} planted reposts");
    // The excerpt (s01-r1) needs the containment rule; the roundup s39, a story, came out unique
    // above.
    assert!(
        rules.contains(&("s01-r1".to_owned(), "containment".to_owned())),
        "{rules:?}"
    );
}

/// The natural benchmark (scripts/eval/natural: corpus pairs labelled by two readers, test half):
/// the whole corpus through `batch`, pairs counted as linked when both ids end on one duplicate
/// chain. Needs the corpus (the labels name corpus ids); without it the test says so and checks
/// nothing. The floors are the figures of docs/QUALITY.md, rounded down: a change that loses
/// natural recall or precision fails here, whatever it gains on planted edits.
#[test]
fn natural_pairs_stay_at_their_recorded_level() {
    if !common::corpus_available() {
        eprintln!("natural pairs: corpus absent, not scored (the labels name corpus articles)");
        return;
    }
    let root = common::repo_file("");
    let root = root.display();
    let out = Command::new("python3")
        .arg(format!("{root}/scripts/eval/natural.py"))
        .args(["score", "--run", "--split", "test", "--json", "--corpus"])
        .arg(common::corpus_dir())
        .arg("--bin")
        .arg(env!("CARGO_BIN_EXE_newsdedup"))
        .output()
        .expect("python3 must be installed (scripts/setup.sh)");
    assert!(
        out.status.success(),
        "natural.py failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("natural.py --json");
    let rate = |name: &str| report["headline"][name]["rate"].as_f64().unwrap_or(0.0);
    eprintln!("natural pairs (test half): {}", report["headline"]);
    for (name, floor) in NATURAL_FLOORS {
        assert!(
            rate(name) >= floor,
            "natural {name} {:.3} fell below {floor}: {}",
            rate(name),
            report["headline"]
        );
    }
    let flagged = rate("different_flagged");
    assert!(
        flagged <= NATURAL_MAX_DIFFERENT_FLAGGED,
        "different reports linked: {flagged:.3} > {NATURAL_MAX_DIFFERENT_FLAGGED}"
    );
    // What auditors read: the relation of the directly linked pairs against the readers'.
    let relation = report["relation"]["agree"]["rate"].as_f64().unwrap_or(0.0);
    assert!(
        relation >= NATURAL_MIN_RELATION_AGREEMENT,
        "match.relation agrees with the readers' on {relation:.3} of the directly linked pairs, \
         below {NATURAL_MIN_RELATION_AGREEMENT}: {}",
        report["relation"]
    );
}

/// Natural test-half floors (docs/QUALITY.md "Natural pairs"), rounded down.
const NATURAL_FLOORS: [(&str, f64); 3] = [
    ("recall", 0.71),
    ("precision", 0.93),
    ("extension_recall", 0.45),
];
/// Largest share of different reports linked (docs/QUALITY.md), rounded up.
const NATURAL_MAX_DIFFERENT_FLAGGED: f64 = 0.08;
/// Smallest share of directly linked same pairs whose `match.relation` is the readers'
/// (docs/QUALITY.md), rounded down. It counts every linked pair read, also the links chosen
/// because char 5-grams cannot confirm them (source `dissimilar`), whose relation is the
/// hardest to tell.
const NATURAL_MIN_RELATION_AGREEMENT: f64 = 0.77;
