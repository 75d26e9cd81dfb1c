//! Quality must not regress: a small fixed labelled set (3,000 corpus articles + 300 generated
//! reposts, built from the shared corpus at test time by scripts/eval/quality.py --quick) is run
//! through `newsdedup batch`, and precision / recall by length class must stay at the targets
//! (precision >= 0.99, recall >= 0.95 long, >= 0.85 short). Full figures: docs/QUALITY.md.

mod common;

use serde_json::Value;
use std::process::Command;

#[test]
fn precision_and_recall_meet_the_targets_on_the_quick_set() {
    let work = tempfile::tempdir().unwrap();
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new("python3")
        .arg(format!("{root}/scripts/eval/quality.py"))
        .args(["--quick", "--sweep", "none", "--corpus"])
        .arg(common::corpus_dir())
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
    assert!(long["n"].as_u64().unwrap() >= 100 && short["n"].as_u64().unwrap() >= 100);
    assert!(precision >= 0.99, "precision {precision}");
    assert!(rate(long) >= 0.95, "recall on long articles {}", rate(long));
    assert!(
        rate(short) >= 0.85,
        "recall on short articles {}",
        rate(short)
    );
    println!(
        "templated reports flagged: {}",
        report["templated"]["flagged_in_run"]
    );
}
