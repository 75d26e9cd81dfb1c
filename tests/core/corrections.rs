//! Editors' corrections without a broker: release and merge applied by the single writer, what
//! later articles then link to, every refusal, applying twice, and an index rebuilt from the
//! output records (read in any interleaving of the two topics) that equals the corrected one.
//! The command line end to end (`correct --records/--write`, `batch --corrections`) too.

use crate::common;
use newsdedup::article::{InvalidReason, ReadRules};
use newsdedup::config::{DedupConfig, FingerprintConfig, IndexConfig};
use newsdedup::correction::Acceptance;
use newsdedup::correction::{Correction, Refusal};
use newsdedup::dedup::{Deduper, Verdict};
use newsdedup::fingerprint::Fingerprinter;
use newsdedup::index::{ArticleStore, CorrectionKind, MatchRule, RocksIndex};
use newsdedup::pipeline::{self, Outcome};
use newsdedup::restore::{self, RestoreTarget};
use newsdedup::time::{format_rfc3339, TimeSpan, UtcOffset};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const RULES: ReadRules = ReadRules {
    max_bytes: 1 << 20,
    published_at_offset: UtcOffset::UTC,
};

fn article(id: &str, content: &str, published: &str) -> Vec<u8> {
    json!({"id": id, "title": "", "content": content, "published_at": published})
        .to_string()
        .into_bytes()
}

struct Rig {
    fp: Fingerprinter,
    deduper: Deduper<RocksIndex>,
    _dir: tempfile::TempDir,
}

fn rig(retention: Option<TimeSpan>) -> Rig {
    let fp = Fingerprinter::new(&FingerprintConfig::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let index = RocksIndex::open(
        dir.path(),
        fp.identity(),
        &IndexConfig {
            retention,
            ..IndexConfig::default()
        },
    )
    .unwrap();
    Rig {
        fp,
        deduper: Deduper::with_config(index, DedupConfig::default()),
        _dir: dir,
    }
}

impl Rig {
    fn decide(&mut self, raw: &[u8]) -> Outcome {
        let prepared = pipeline::prepare(raw, &self.fp, &RULES);
        pipeline::decide(&mut self.deduper, prepared, None, NOW).unwrap()
    }

    fn verdict(&mut self, raw: &[u8]) -> Verdict {
        match self.decide(raw) {
            Outcome::Decided { decision, .. } => decision.verdict,
            Outcome::Invalid { error, .. } => panic!("invalid: {error}"),
        }
    }

    /// `c` made after the correction in effect on its article, as `newsdedup correct` makes it.
    fn after_latest(&self, c: Correction) -> Correction {
        let follows = self
            .deduper
            .store()
            .get(&c.id)
            .unwrap()
            .and_then(|a| a.correction)
            .map(|n| format_rfc3339(n.at_ms));
        Correction { follows, ..c }
    }

    fn correct(&mut self, c: &Correction) -> Outcome {
        let prepared = pipeline::prepare_correction(
            c.to_json().as_bytes(),
            &self.fp,
            &RULES,
            &Acceptance::default(),
        );
        pipeline::decide(&mut self.deduper, prepared, None, NOW).unwrap()
    }
}

fn linked_to(v: &Verdict) -> Option<&str> {
    match v {
        Verdict::Duplicate(m) => Some(m.id.as_str()),
        Verdict::Unique => None,
    }
}

/// A correction of `id` (its article `raw`, stored as `fingerprint`) made at `at_ms`.
fn correction(
    kind: CorrectionKind,
    raw: &[u8],
    fp: &Fingerprinter,
    into: Option<&str>,
    at_ms: i64,
) -> Correction {
    let value: Value = serde_json::from_slice(raw).unwrap();
    let content = value["content"].as_str().unwrap();
    Correction {
        kind,
        id: value["id"].as_str().unwrap().to_owned(),
        into: into.map(str::to_owned),
        by: Some("editor".into()),
        reason: Some("read both".into()),
        at: format_rfc3339(at_ms),
        follows: None,
        audience: None,
        expires: None,
        key_id: None,
        signature: None,
        fingerprint: fp.fingerprint("", content).unwrap().fingerprint,
        article: String::from_utf8(raw.to_vec()).unwrap(),
    }
}

const T0: i64 = 1_760_000_000_000;
/// When the articles are decided (after every `published_at` above, so none is clamped).
const NOW: u64 = 1_770_000_000_000;

/// The articles of `common::correction_articles`, by id.
fn story(id: &str) -> Vec<u8> {
    let (_, content, published) = common::correction_articles()
        .into_iter()
        .find(|(i, _, _)| *i == id)
        .expect("a story article");
    article(id, &content, published)
}

/// B, then A (B with its last fifth rewritten: the engine links A to B), and an unrelated C.
fn false_pair() -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    (story("b"), story("a"), story("c"))
}

/// O, then M (O plus seven times as much new text, O an eighth of M: the engine misses it), and
/// M's text.
fn missed_update() -> (Vec<u8>, Vec<u8>, String) {
    let m = story("m");
    let text = serde_json::from_slice::<Value>(&m).unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    (story("o"), m, text)
}

#[test]
fn a_released_article_is_unique_and_its_copies_link_to_it_never_to_the_old_original() {
    let mut r = rig(None);
    let (b, a, _) = false_pair();
    assert_eq!(linked_to(&r.verdict(&b)), None);
    assert_eq!(
        linked_to(&r.verdict(&a)),
        Some("b"),
        "the setup: A links to B"
    );
    let release = correction(CorrectionKind::Release, &a, &r.fp, None, T0);
    let Outcome::Decided {
        record,
        decision,
        corrected,
        ..
    } = r.correct(&release)
    else {
        panic!("refused")
    };
    assert_eq!(corrected, Some(CorrectionKind::Release));
    assert_eq!(decision.verdict, Verdict::Unique);
    let out: Value = serde_json::from_slice(&record).unwrap();
    assert_eq!(out["id"], "a");
    assert_eq!(out["dedup"]["decision"], "unique");
    assert_eq!(out["dedup"]["correction"]["kind"], "release");
    assert_eq!(out["dedup"]["correction"]["by"], "editor");
    assert_eq!(
        out["dedup"]["correction"]["previous"]["decision"],
        "duplicate"
    );
    assert_eq!(out["dedup"]["correction"]["previous"]["match"]["id"], "b");
    assert_eq!(r.deduper.store().separated("a"), vec!["b".to_owned()]);
    assert_eq!(r.deduper.store().separated("b"), vec!["a".to_owned()]);

    // A copy of A: A's, though B is as near in simhash.
    let copy_a = article(
        "copy-a",
        &common::numbered_report("河东区", 1, 15),
        "2025-10-02T08:00:00Z",
    );
    let mut copy_a: Value = serde_json::from_slice(&copy_a).unwrap();
    copy_a["content"] = json!(serde_json::from_slice::<Value>(&a).unwrap()["content"]);
    assert_eq!(
        linked_to(&r.verdict(copy_a.to_string().as_bytes())),
        Some("a")
    );
    // A copy of B is still B's.
    let mut copy_b: Value = serde_json::from_slice(&b).unwrap();
    copy_b["id"] = json!("copy-b");
    assert_eq!(
        linked_to(&r.verdict(copy_b.to_string().as_bytes())),
        Some("b")
    );
    // A revision of A never links to B (the pair is kept apart in both directions).
    let revised = article(
        "a",
        &(common::numbered_report("河东区", 1, 15) + &common::numbered_report("河西区", 40, 4)),
        "2025-10-01T09:00:00Z",
    );
    let v = r.verdict(&revised);
    assert_ne!(linked_to(&v), Some("b"), "{v:?}");
    // A re-delivered A gets the released decision (its record repeats the decision only).
    let mut again = rig(None);
    again.verdict(&b);
    again.verdict(&a);
    again.correct(&release);
    match again.decide(&a) {
        Outcome::Decided { decision, .. } => {
            assert!(decision.replayed);
            assert_eq!(decision.verdict, Verdict::Unique);
            assert!(decision.correction.is_none());
        }
        Outcome::Invalid { error, .. } => panic!("{error}"),
    }
}

#[test]
fn a_merged_article_is_a_duplicate_of_the_original_and_its_copies_link_to_the_original() {
    let mut r = rig(None);
    // An update with three times as much new text: the engine misses it.
    let (o, m, m_text) = missed_update();
    assert_eq!(linked_to(&r.verdict(&o)), None);
    assert_eq!(linked_to(&r.verdict(&m)), None, "the setup: M is missed");
    let merge = correction(CorrectionKind::Merge, &m, &r.fp, Some("o"), T0);
    let Outcome::Decided {
        record, decision, ..
    } = r.correct(&merge)
    else {
        panic!("refused")
    };
    let Verdict::Duplicate(matched) = &decision.verdict else {
        panic!("not a duplicate")
    };
    assert_eq!(matched.id, "o");
    assert_eq!(matched.rule, Some(MatchRule::Editor));
    let out: Value = serde_json::from_slice(&record).unwrap();
    assert_eq!(out["dedup"]["match"]["rule"], "editor");
    assert_eq!(out["dedup"]["correction"]["previous"]["decision"], "unique");
    // A copy of M: O's, found through M.
    let copy = article("copy-m", &m_text, "2025-10-02T08:00:00Z");
    match r.verdict(&copy) {
        Verdict::Duplicate(m) => {
            assert_eq!(m.id, "o");
            assert_eq!(m.via.as_deref(), Some("m"));
        }
        Verdict::Unique => panic!("a copy of a merged article is unique"),
    }
    // Applying the same merge again changes nothing and says the same.
    let Outcome::Decided {
        record: again,
        decision,
        ..
    } = r.correct(&merge)
    else {
        panic!("refused the second time")
    };
    assert!(decision.replayed);
    assert_eq!(again, record);
}

#[test]
fn a_pair_kept_apart_is_kept_apart_through_a_merged_article_too() {
    let mut r = rig(None);
    let (o, m, m_text) = missed_update();
    r.verdict(&o);
    r.verdict(&m);
    r.correct(&correction(CorrectionKind::Merge, &m, &r.fp, Some("o"), T0));
    // A repeats M, so it links to O through M; an editor releases it.
    let a_text = m_text.clone() + &common::numbered_report("北湖镇", 90, 1);
    let a = article("a", &a_text, "2025-10-01T11:00:00Z");
    match r.verdict(&a) {
        Verdict::Duplicate(matched) => {
            assert_eq!(matched.id, "o");
            assert_eq!(matched.via.as_deref(), Some("m"));
        }
        Verdict::Unique => panic!("the setup: A links to O through M"),
    }
    r.correct(&correction(
        CorrectionKind::Release,
        &a,
        &r.fp,
        None,
        T0 + 1,
    ));
    // A revision of A is kept apart from O, also through M.
    let revised = article(
        "a",
        &(m_text + &common::numbered_report("北湖镇", 91, 1)),
        "2025-10-01T11:00:00Z",
    );
    let v = r.verdict(&revised);
    assert_ne!(linked_to(&v), Some("o"), "{v:?}");
}

fn refusal_of(r: &mut Rig, c: &Correction) -> String {
    match r.correct(c) {
        Outcome::Invalid { error, .. } => {
            assert_eq!(error.reason, InvalidReason::RefusedCorrection);
            error.message
        }
        Outcome::Decided { .. } => panic!("{c:?} was applied"),
    }
}

#[test]
fn every_refusal_says_why_and_changes_nothing() {
    let mut r = rig(Some("30d".parse().unwrap()));
    let (b, a, c) = false_pair();
    let late = article(
        "late",
        &common::numbered_report("西岭乡", 200, 20),
        "2025-10-05T08:00:00Z",
    );
    for raw in [&b, &a, &c, &late] {
        r.verdict(raw);
    }
    let fp = Fingerprinter::new(&FingerprintConfig::default()).unwrap();
    let counts = r.deduper.store().counts();
    let cases: Vec<(Correction, &str)> = vec![
        (
            Correction {
                id: "nobody".into(),
                article: String::from_utf8(article(
                    "nobody",
                    &common::numbered_report("无人区", 1, 3),
                    "2025-10-01",
                ))
                .unwrap(),
                ..correction(CorrectionKind::Release, &b, &fp, None, T0)
            },
            "not in the index",
        ),
        (
            correction(CorrectionKind::Release, &b, &fp, None, T0),
            "is unique",
        ),
        (
            correction(CorrectionKind::Merge, &c, &fp, Some("c"), T0),
            "into itself",
        ),
        (
            correction(CorrectionKind::Merge, &c, &fp, Some("late"), T0),
            "published later",
        ),
        (
            correction(CorrectionKind::Merge, &late, &fp, Some("a"), T0),
            "itself a duplicate of \"b\"",
        ),
        (
            correction(CorrectionKind::Merge, &a, &fp, Some("c"), T0),
            "already a duplicate",
        ),
        (
            correction(CorrectionKind::Merge, &late, &fp, Some("nobody"), T0),
            "not in the index",
        ),
        (
            Correction {
                fingerprint: newsdedup::simhash::Fingerprint(7),
                ..correction(CorrectionKind::Release, &a, &fp, None, T0)
            },
            "changed since",
        ),
    ];
    for (c, why) in &cases {
        let message = refusal_of(&mut r, c);
        assert!(message.contains(why), "{c:?}: {message}");
    }
    assert_eq!(r.deduper.store().counts(), counts, "a refusal wrote");
    // An older correction than the one applied.
    r.correct(&correction(CorrectionKind::Release, &a, &fp, None, T0 + 10));
    let message = refusal_of(
        &mut r,
        &correction(CorrectionKind::Merge, &a, &fp, Some("c"), T0),
    );
    assert!(message.contains("later correction"), "{message}");
    // Outside the retention window: an article 60 days older than the newest.
    let old = article(
        "old",
        &common::numbered_report("旧城区", 300, 20),
        "2025-08-01T08:00:00Z",
    );
    r.verdict(&old);
    let message = refusal_of(
        &mut r,
        &correction(CorrectionKind::Merge, &late, &fp, Some("old"), T0),
    );
    assert!(message.contains("retention window"), "{message}");
    // Typed refusal names (metrics, DLQ) stay stable.
    assert_eq!(
        Refusal::MergeIntoItself("x".into()).as_str(),
        "merge_into_itself"
    );
}

#[test]
fn a_record_of_the_corrections_topic_that_is_not_a_correction_is_invalid() {
    let fp = Fingerprinter::new(&FingerprintConfig::default()).unwrap();
    for (raw, why) in [
        (&b"{"[..], "not a correction"),
        (br#"{"kind":"merge","id":"a","at":"2025-10-01T00:00:00Z","fingerprint":"0000000000000001","article":"{\"id\":\"a\",\"content\":\"x\"}"}"#, "needs `into`"),
        (br#"{"kind":"release","id":"a","at":"yesterday","fingerprint":"0000000000000001","article":"{\"id\":\"a\",\"content\":\"x\"}"}"#, "RFC 3339"),
        (br#"{"kind":"release","id":"a","at":"2025-10-01T00:00:00Z","fingerprint":"0000000000000001","article":"{\"id\":\"z\",\"content\":\"x\"}"}"#, "has id \"z\""),
    ] {
        match pipeline::prepare_correction(raw, &fp, &RULES, &Acceptance::default()) {
            pipeline::Prepared::Invalid(e) => {
                assert_eq!(e.reason, InvalidReason::BadCorrection);
                assert!(e.message.contains(why), "{}", e.message);
            }
            _ => panic!("accepted {}", String::from_utf8_lossy(raw)),
        }
    }
}

/// The output of `c` carrying `article` (JSON text) in place of the article it was made with.
fn carrying(c: &Correction, article: Value) -> Correction {
    Correction {
        article: article.to_string(),
        ..c.clone()
    }
}

#[test]
fn a_correction_carrying_another_article_than_the_stored_one_is_refused_and_changes_nothing() {
    let mut r = rig(None);
    let (b, a, _) = false_pair();
    r.verdict(&b);
    r.verdict(&a);
    let release = correction(CorrectionKind::Release, &a, &r.fp, None, T0);
    let original: Value = serde_json::from_slice(&a).unwrap();
    let edit = |member: &str, value: Value| {
        let mut v = original.clone();
        v[member] = value;
        carrying(&release, v)
    };
    let content = original["content"].as_str().unwrap();
    let counts = r.deduper.store().counts();
    let stored = r.deduper.store().get("a").unwrap();
    for (forged, differs) in [
        (
            edit("content", json!(common::numbered_report("伪造区", 500, 20))),
            "fingerprint differs",
        ),
        (edit("title", json!("另一个标题")), "differs"),
        (
            edit("url", json!("https://forged.example/a")),
            "url differs",
        ),
        (
            edit("published_at", json!("2025-10-03T08:00:00Z")),
            "published_at differs",
        ),
        (
            // One more sentence: the same simhash is not enough, the sketch tells.
            edit(
                "content",
                json!(format!("{content}另据消息，此事已经全部结束。")),
            ),
            "differs",
        ),
    ] {
        let message = refusal_of(&mut r, &forged);
        assert!(
            message.contains("not the one the index holds") && message.contains(differs),
            "{message}"
        );
    }
    assert_eq!(r.deduper.store().counts(), counts, "a refusal wrote");
    assert_eq!(r.deduper.store().get("a").unwrap(), stored);
    // Applied with the stored article, then the same correction again carrying other text: the
    // repeat republishes nothing but the stored article, so it is refused too.
    assert!(matches!(r.correct(&release), Outcome::Decided { .. }));
    let applied = r.deduper.store().get("a").unwrap();
    let message = refusal_of(&mut r, &edit("content", json!("假消息：全部内容被替换。")));
    assert!(message.contains("not the one the index holds"), "{message}");
    assert_eq!(r.deduper.store().get("a").unwrap(), applied);
}

#[test]
fn a_corrected_record_carries_the_stored_sketch_and_restores_dated_as_the_service_dated_it() {
    let mut r = rig(None);
    let (b, a, _) = false_pair();
    // A's claimed time is two days after it arrives (NOW): the service clamps it to NOW.
    let mut future: Value = serde_json::from_slice(&a).unwrap();
    future["published_at"] = json!(format_rfc3339(NOW as i64 + 2 * 86_400_000));
    let a = future.to_string().into_bytes();
    let original = r.decide(&b).record().to_vec();
    let decided = r.decide(&a).record().to_vec();
    let live = r.deduper.store().get("a").unwrap().unwrap();
    assert!(
        live.event_time_clamped && live.event_ms == NOW as i64,
        "{live:?}"
    );
    let Outcome::Decided {
        record, decision, ..
    } = r.correct(&correction(CorrectionKind::Release, &a, &r.fp, None, T0))
    else {
        panic!("refused")
    };
    assert_eq!(
        decision.sketch, live.sketch,
        "the stored sketch is published"
    );
    let corrected = r.deduper.store().get("a").unwrap().unwrap();
    // Restored as the Kafka edge publishes it: a day and a half later, dated with the stored
    // event time, with the sketch header; over the decided record (a standby) or alone (a
    // rebuild reading the unique topic first).
    let at = NOW + 36 * 3_600_000;
    let restore_corrected = || {
        restore::restore(
            &record,
            decision.sketch.as_ref(),
            &r.fp,
            &RULES,
            at,
            Some(decision.event_ms),
            true,
        )
        .unwrap()
        .unwrap()
    };
    for over_decided in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let mut replica =
            RocksIndex::open(dir.path(), r.fp.identity(), &IndexConfig::default()).unwrap();
        for rec in [&original, &decided].into_iter().filter(|_| over_decided) {
            let restored = restore::restore(rec, None, &r.fp, &RULES, NOW, None, true)
                .unwrap()
                .unwrap();
            replica.apply_restored(Some(&restored), None, None).unwrap();
        }
        replica
            .apply_restored(Some(&restore_corrected()), None, None)
            .unwrap();
        let got = replica.get("a").unwrap().unwrap();
        let dating = |x: &newsdedup::index::StoredArticle| {
            (x.event_ms, x.event_time_clamped, x.published_ms, x.sketch)
        };
        assert_eq!(
            dating(&got),
            dating(&corrected),
            "over_decided {over_decided}"
        );
        if over_decided {
            assert_eq!(got.first_seen_ms, corrected.first_seen_ms);
        }
    }
}

#[test]
fn corrections_take_effect_in_the_order_read_whatever_the_editors_clocks_and_a_replay_changes_nothing(
) {
    let mut r = rig(None);
    let (b, a, _) = false_pair();
    let mut outputs = vec![
        r.decide(&b).record().to_vec(),
        r.decide(&a).record().to_vec(),
    ];
    // An editor whose clock says 9999 releases A; another, a year behind the service, merges it
    // back after seeing the release.
    let far_future = 253_402_300_000_000; // 9999-12-31
    let release = correction(CorrectionKind::Release, &a, &r.fp, None, far_future);
    let Outcome::Decided { record, .. } = r.correct(&release) else {
        panic!("the far-future release was refused")
    };
    outputs.push(record.clone());
    let out: Value = serde_json::from_slice(&record).unwrap();
    assert_eq!(out["dedup"]["correction"]["at"], format_rfc3339(NOW as i64));
    assert_eq!(
        out["dedup"]["correction"]["made_at"],
        format_rfc3339(far_future)
    );
    let a_year_behind = NOW as i64 - 365 * 86_400_000;
    let merge = r.after_latest(correction(
        CorrectionKind::Merge,
        &a,
        &r.fp,
        Some("b"),
        a_year_behind,
    ));
    let Outcome::Decided {
        record, decision, ..
    } = r.correct(&merge)
    else {
        panic!("the later merge was refused")
    };
    outputs.push(record.clone());
    assert_eq!(linked_to(&decision.verdict), Some("b"));
    let stored = r.deduper.store().get("a").unwrap().unwrap();
    let note = stored.correction.clone().unwrap();
    assert_eq!(
        (note.at_ms, note.made_ms),
        (NOW as i64 + 1, Some(a_year_behind)),
        "stamped after the release"
    );
    // Read again: the merge republishes the stored article and changes nothing; the release,
    // sent again after the merge, is refused and changes nothing.
    let Outcome::Decided {
        record: again,
        decision,
        ..
    } = r.correct(&merge)
    else {
        panic!("the merge read again was refused")
    };
    assert!(decision.replayed);
    assert_eq!(again, record);
    let message = refusal_of(&mut r, &release);
    assert!(message.contains("later correction"), "{message}");
    assert_eq!(r.deduper.store().get("a").unwrap().unwrap(), stored);
    assert_eq!(r.deduper.store().separated("a"), Vec::<String>::new());
    // A rebuild from the output records ends in the same state, in any order of the topics.
    let ids = ["a", "b"];
    for order in [outputs.clone(), outputs.iter().rev().cloned().collect()] {
        let dir = tempfile::tempdir().unwrap();
        let mut rebuilt =
            RocksIndex::open(dir.path(), r.fp.identity(), &IndexConfig::default()).unwrap();
        for rec in &order {
            let restored = restore::restore(rec, None, &r.fp, &RULES, NOW, None, true)
                .unwrap()
                .unwrap();
            rebuilt.apply_restored(Some(&restored), None, None).unwrap();
        }
        assert_eq!(state(&rebuilt, &ids), state(r.deduper.store(), &ids));
    }
}

/// The state of an index that decisions depend on, comparable across indexes.
fn state(index: &RocksIndex, ids: &[&str]) -> Vec<String> {
    ids.iter()
        .map(|id| {
            let a = index.get(id).unwrap();
            let mut seps = index.separated(id);
            seps.sort();
            format!(
                "{id}: {:?} {:?} {:?} {:?} {:?}",
                a.as_ref()
                    .map(|a| (a.decision, a.fingerprint, a.searchable())),
                a.as_ref()
                    .and_then(|a| a.matched.as_ref().map(|m| m.id.clone())),
                a.as_ref()
                    .and_then(|a| a.correction.as_ref().map(|c| (c.kind, c.at_ms))),
                seps,
                index.counts().unique,
            )
        })
        .collect()
}

/// B, A, C, O, M decided, then: release A, merge M into O, merge A back into B, release A
/// again. The live rig and every output record, in decision order.
fn corrected_history() -> (Rig, Vec<Vec<u8>>) {
    let mut r = rig(None);
    let (b, a, c) = false_pair();
    let (o, m, _) = missed_update();
    let mut outputs: Vec<Vec<u8>> = Vec::new();
    for raw in [&b, &a, &c, &o, &m] {
        outputs.push(r.decide(raw).record().to_vec());
    }
    for corr in [
        correction(CorrectionKind::Release, &a, &r.fp, None, T0),
        correction(CorrectionKind::Merge, &m, &r.fp, Some("o"), T0 + 1),
        correction(CorrectionKind::Merge, &a, &r.fp, Some("b"), T0 + 2),
        correction(CorrectionKind::Release, &a, &r.fp, None, T0 + 3),
    ] {
        let out = r.correct(&r.after_latest(corr.clone()));
        assert!(
            matches!(out, Outcome::Decided { .. }),
            "{corr:?} refused: {out:?}"
        );
        outputs.push(out.record().to_vec());
    }
    (r, outputs)
}

fn next_articles() -> Vec<Vec<u8>> {
    let (b, a, _) = false_pair();
    let (_, m, _) = missed_update();
    [a, m, b]
        .iter()
        .enumerate()
        .map(|(n, raw)| {
            let mut v: Value = serde_json::from_slice(raw).unwrap();
            v["id"] = json!(format!("next-{n}"));
            v.to_string().into_bytes()
        })
        .collect()
}

#[test]
fn a_rebuild_from_the_output_records_equals_the_corrected_index_in_any_read_order() {
    let ids = ["a", "b", "c", "o", "m"];
    let (_, outputs) = corrected_history();
    let is_dup = |rec: &Vec<u8>| {
        serde_json::from_slice::<Value>(rec).unwrap()["dedup"]["decision"] == "duplicate"
    };
    let uniques: Vec<_> = outputs.iter().filter(|r| !is_dup(r)).cloned().collect();
    let dups: Vec<_> = outputs.iter().filter(|r| is_dup(r)).cloned().collect();
    // In decision order, and each topic read wholly before the other.
    for order in [
        outputs.clone(),
        [uniques.clone(), dups.clone()].concat(),
        [dups.clone(), uniques.clone()].concat(),
    ] {
        let (mut live, _) = corrected_history();
        let expected = state(live.deduper.store(), &ids);
        assert!(expected[0].contains("Release"), "{expected:?}");
        let dir = tempfile::tempdir().unwrap();
        let mut rebuilt =
            RocksIndex::open(dir.path(), live.fp.identity(), &IndexConfig::default()).unwrap();
        for rec in &order {
            let restored = restore::restore(rec, None, &live.fp, &RULES, NOW, None, true)
                .unwrap()
                .unwrap();
            rebuilt.apply_restored(Some(&restored), None, None).unwrap();
        }
        assert_eq!(state(&rebuilt, &ids), expected);
        let v = rebuilt.verify().unwrap();
        assert!(v.problems.is_empty(), "{:?}", v.problems);
        // And decides the next articles as the live index does.
        let mut twin = Deduper::with_config(rebuilt, DedupConfig::default());
        for raw in next_articles() {
            let linked = |d: &mut Deduper<RocksIndex>| {
                let prepared = pipeline::prepare(&raw, &live.fp, &RULES);
                match pipeline::decide(d, prepared, None, NOW).unwrap() {
                    Outcome::Decided { decision, .. } => {
                        linked_to(&decision.verdict).map(str::to_owned)
                    }
                    Outcome::Invalid { error, .. } => panic!("{error}"),
                }
            };
            assert_eq!(linked(&mut twin), linked(&mut live.deduper));
        }
    }
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_newsdedup"))
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn the_command_line_writes_corrections_and_batch_applies_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (b, a, c) = false_pair();
    let input = d.join("in.jsonl");
    std::fs::write(
        &input,
        [&b, &a, &c]
            .iter()
            .map(|r| String::from_utf8(r.to_vec()).unwrap() + "\n")
            .collect::<String>(),
    )
    .unwrap();
    let out = d.join("out.jsonl");
    let index = d.join("index");
    let batch = |input: &Path, corrections: Option<&Path>, output: &Path| {
        let mut cmd = bin();
        cmd.args(["batch", "--quiet", "--input"])
            .arg(input)
            .arg("--output")
            .arg(output)
            .arg("--index-dir")
            .arg(&index);
        if let Some(c) = corrections {
            cmd.arg("--corrections").arg(c);
        }
        let o = cmd.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    batch(&input, None, &out);
    assert_eq!(lines(&out)[1]["dedup"]["match"]["id"], "b");
    let corrections = d.join("corrections.jsonl");
    let correct = |args: &[&str]| {
        bin()
            .args(["correct"])
            .args(args)
            .arg("--records")
            .arg(&out)
            .arg("--write")
            .arg(&corrections)
            .output()
            .unwrap()
    };
    let ok = correct(&[
        "release",
        "--id",
        "a",
        "--by",
        "ed",
        "--reason",
        "two reports",
    ]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let said: Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert_eq!(said["outcome"], "written");
    // Refused before anything is written: a unique article, a merge into a duplicate.
    for (args, why) in [
        (vec!["release", "--id", "b"], "is unique"),
        (
            vec!["merge", "--id", "c", "--into", "a"],
            "itself a duplicate of \"b\"",
        ),
        (vec!["release", "--id", "zz"], "not in the index"),
    ] {
        let refused = correct(&args);
        assert_eq!(refused.status.code(), Some(1), "{args:?}");
        assert!(
            String::from_utf8_lossy(&refused.stderr).contains(why),
            "{args:?}: {}",
            String::from_utf8_lossy(&refused.stderr)
        );
    }
    assert_eq!(
        std::fs::read_to_string(&corrections)
            .unwrap()
            .lines()
            .count(),
        1
    );
    let lines_of_corrections = std::fs::read_to_string(&corrections).unwrap();
    let corr_line: Value = serde_json::from_str(lines_of_corrections.trim()).unwrap();
    assert!(crate::cli_batch::schema_violations(
        "correction.schema.json",
        &[corr_line.to_string()]
    )
    .is_empty());
    // Applied by batch: one output line, the released record; twice: the same line again.
    let empty = d.join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let applied = d.join("applied.jsonl");
    let summary = batch(&empty, Some(&corrections), &applied);
    assert!(
        summary.contains(r#""corrections":{"release":1}"#),
        "{summary}"
    );
    let rec = lines(&applied);
    assert_eq!(rec.len(), 1);
    assert_eq!(rec[0]["dedup"]["correction"]["by"], "ed");
    assert!(
        crate::cli_batch::schema_violations("output.schema.json", &[rec[0].to_string()]).is_empty()
    );
    let again = d.join("again.jsonl");
    batch(&empty, Some(&corrections), &again);
    assert_eq!(
        std::fs::read(&again).unwrap(),
        std::fs::read(&applied).unwrap()
    );
    // A copy of A now links to A.
    let copy = d.join("copy.jsonl");
    let mut v: Value = serde_json::from_slice(&a).unwrap();
    v["id"] = json!("copy-a");
    std::fs::write(&copy, v.to_string() + "\n").unwrap();
    let copied = d.join("copied.jsonl");
    batch(&copy, None, &copied);
    assert_eq!(lines(&copied)[0]["dedup"]["match"]["id"], "a");
}

#[test]
fn with_keys_set_only_a_correction_signed_with_one_of_them_applies() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (b, a, _) = false_pair();
    let input = d.join("in.jsonl");
    std::fs::write(
        &input,
        [&b, &a]
            .iter()
            .map(|r| String::from_utf8(r.to_vec()).unwrap() + "\n")
            .collect::<String>(),
    )
    .unwrap();
    // Two keys accepted (a rotation); a third the service does not know.
    for (name, byte) in [("k-old", b'o'), ("k-new", b'n'), ("k-stranger", b's')] {
        common::write_key(&d.join(name), &[byte; 40]);
    }
    let config = d.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[corrections]\nkeys = [{{ id = \"k-old\", file = {:?} }}, {{ id = \"k-new\", file = {:?} }}]\n",
            d.join("k-old"),
            d.join("k-new")
        ),
    )
    .unwrap();
    let out = d.join("out.jsonl");
    let index = d.join("index");
    let batch = |corrections: Option<&Path>, output: &Path| {
        let mut cmd = bin();
        cmd.args(["batch", "--quiet", "--config"])
            .arg(&config)
            .arg("--input")
            .arg(&input)
            .arg("--output")
            .arg(output)
            .arg("--index-dir")
            .arg(&index);
        if let Some(c) = corrections {
            cmd.arg("--corrections").arg(c);
        }
        let o = cmd.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    batch(None, &out);
    assert_eq!(lines(&out)[1]["dedup"]["match"]["id"], "b");
    // Release A: unsigned, signed by a stranger, signed then altered, then signed with the
    // new key (the only one applied).
    let write = |name: &str, key: Option<(&str, &str)>| {
        let path = d.join(name);
        let mut cmd = bin();
        cmd.args(["correct", "release", "--id", "a", "--by", "ed", "--records"])
            .arg(&out)
            .arg("--write")
            .arg(&path);
        if let Some((id, file)) = key {
            cmd.args(["--key-id", id, "--key-file"]).arg(d.join(file));
        }
        let o = cmd.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::read_to_string(&path).unwrap()
    };
    let unsigned = write("unsigned.jsonl", None);
    let stranger = write("stranger.jsonl", Some(("k-stranger", "k-stranger")));
    let signed = write("signed.jsonl", Some(("k-new", "k-new")));
    let mut altered: Value = serde_json::from_str(signed.trim()).unwrap();
    altered["by"] = json!("someone else");
    assert_eq!(
        serde_json::from_str::<Value>(signed.trim()).unwrap()["key_id"],
        "k-new"
    );
    let all = d.join("all.jsonl");
    std::fs::write(&all, format!("{unsigned}{stranger}{altered}\n{signed}")).unwrap();
    let applied = d.join("applied.jsonl");
    batch(Some(&all), &applied);
    let rec = lines(&applied);
    // The two articles replayed, then one line per correction.
    assert_eq!(rec.len(), 6, "{rec:?}");
    for (r, why) in rec[2..5].iter().zip([
        "not signed",
        "not one of [corrections] keys",
        "does not match",
    ]) {
        let error = r["dedup"]["error"].as_str().unwrap_or_default();
        assert!(
            error.starts_with("unsigned_correction:") && error.contains(why),
            "{r}"
        );
    }
    let corrected = &rec[5];
    assert_eq!(corrected["dedup"]["decision"], "unique", "{corrected}");
    let made: Value = serde_json::from_str(signed.trim()).unwrap();
    assert_eq!(
        made["audience"], "newsdedup",
        "[service] group_id's default"
    );
    let (at, expires) = (
        newsdedup::time::parse_time(made["at"].as_str().unwrap()).unwrap(),
        newsdedup::time::parse_time(made["expires"].as_str().unwrap()).unwrap(),
    );
    assert_eq!(expires - at, 86_400_000, "--valid-for 1d by default");
    assert_eq!(corrected["dedup"]["correction"]["by"], "ed");
    assert_eq!(corrected["dedup"]["correction"]["key_id"], "k-new");
    assert!(
        crate::cli_batch::schema_violations("output.schema.json", &[corrected.to_string()])
            .is_empty()
    );
    assert!(crate::cli_batch::schema_violations(
        "correction.schema.json",
        &[signed.trim().to_owned()]
    )
    .is_empty());
}

/// A signed correction past its `--valid-for` is refused by `batch` (`expired_correction`), and
/// a key file other users can read is refused, saying how to fix it.
#[test]
fn a_signed_correction_expires_and_a_key_open_to_others_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (b, a, _) = false_pair();
    let input = d.join("in.jsonl");
    std::fs::write(
        &input,
        [&b, &a]
            .iter()
            .map(|r| String::from_utf8(r.to_vec()).unwrap() + "\n")
            .collect::<String>(),
    )
    .unwrap();
    common::write_key(&d.join("k"), &[b'k'; 40]);
    let config = d.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[corrections]\nkeys = [{{ id = \"k\", file = {:?} }}]\nsign_with = \"k\"\n",
            d.join("k")
        ),
    )
    .unwrap();
    let batch = |corrections: Option<&Path>, output: &Path| {
        let mut cmd = bin();
        cmd.args(["batch", "--quiet", "--config"])
            .arg(&config)
            .arg("--input")
            .arg(&input)
            .arg("--output")
            .arg(output)
            .arg("--index-dir")
            .arg(d.join("index"));
        if let Some(c) = corrections {
            cmd.arg("--corrections").arg(c);
        }
        cmd.output().unwrap()
    };
    let out = d.join("out.jsonl");
    assert!(batch(None, &out).status.success());
    let written = d.join("release.jsonl");
    let o = bin()
        .args([
            "correct",
            "release",
            "--id",
            "a",
            "--valid-for",
            "1s",
            "--config",
        ])
        .arg(&config)
        .arg("--records")
        .arg(&out)
        .arg("--write")
        .arg(&written)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::thread::sleep(Duration::from_millis(1_100));
    let applied = d.join("applied.jsonl");
    let o = batch(Some(&written), &applied);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rec = lines(&applied);
    let error = rec[2]["dedup"]["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("expired_correction:") && error.contains("make it again"),
        "{}",
        rec[2]
    );
    std::fs::set_permissions(d.join("k"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = batch(Some(&written), &d.join("refused.jsonl"));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && stderr.contains("chmod 600"),
        "{stderr}"
    );
}

/// An id holding a NUL would make the index's pair keys (`<id>\0<other>`) ambiguous: a correction
/// naming one, as `id` or `into`, is not a correction.
#[test]
fn a_correction_naming_an_id_with_a_nul_is_refused() {
    let r = rig(None);
    let (b, a, _) = false_pair();
    let mut release = correction(CorrectionKind::Release, &a, &r.fp, None, T0);
    release.id = "a\0b".into();
    let merge = correction(CorrectionKind::Merge, &b, &r.fp, Some("x\0y"), T0);
    for c in [release, merge] {
        match pipeline::prepare_correction(
            c.to_json().as_bytes(),
            &r.fp,
            &RULES,
            &Acceptance::default(),
        ) {
            pipeline::Prepared::Invalid(e) => {
                assert_eq!(e.reason, InvalidReason::BadCorrection);
                assert!(e.message.contains("NUL"), "{}", e.message);
            }
            _ => panic!("accepted a correction naming {:?} / {:?}", c.id, c.into),
        }
    }
}

/// The command an audit suggests for an id starting with `-` runs as printed (`--id -a` would
/// hand `-a` to the parser as flags).
#[test]
fn the_suggested_command_works_for_an_id_starting_with_a_dash() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (b, a, _) = false_pair();
    let renamed = |raw: &[u8], id: &str| {
        let mut v: Value = serde_json::from_slice(raw).unwrap();
        v["id"] = json!(id);
        v.to_string()
    };
    let input = d.join("in.jsonl");
    std::fs::write(
        &input,
        format!("{}\n{}\n", renamed(&b, "-b"), renamed(&a, "-a")),
    )
    .unwrap();
    let out = d.join("out.jsonl");
    let o = bin()
        .args(["batch", "--quiet", "--input"])
        .arg(&input)
        .arg("--output")
        .arg(&out)
        .arg("--index-dir")
        .arg(d.join("index"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(lines(&out)[1]["dedup"]["match"]["id"], "-b");
    let command = newsdedup::correction::command_line(CorrectionKind::Release, "-a", None, None);
    // Plain words (nothing to unquote in this id).
    let words: Vec<&str> = command.split(' ').collect();
    assert_eq!(words[0], "newsdedup", "{command}");
    let corrections = d.join("corrections.jsonl");
    let o = bin()
        .args(&words[1..])
        .args(["--by", "ed", "--records"])
        .arg(&out)
        .arg("--write")
        .arg(&corrections)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{command}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let written: Value =
        serde_json::from_str(std::fs::read_to_string(&corrections).unwrap().trim()).unwrap();
    assert_eq!(written["id"], "-a");
}

/// A line of `batch --corrections` embeds its article as an escaped JSON string, longer than the
/// article itself: a correction of an article within `--max-article-bytes` is read, not refused
/// as `oversized`.
#[test]
fn a_correction_line_longer_than_the_article_limit_is_read() {
    const MAX: usize = 4096;
    let r = rig(None);
    // Quotes escape to two bytes each: the article fits the limit, its correction line does not.
    let content = "国务院常务会议部署进一步做好稳就业工作。".to_owned() + &"\"\"".repeat(800);
    let raw = article("q", &content, "2025-10-01T00:00:00Z");
    assert!(raw.len() <= MAX, "{}", raw.len());
    let c = correction(CorrectionKind::Release, &raw, &r.fp, None, T0);
    let line = c.to_json();
    assert!(line.len() > MAX, "{}", line.len());
    let dir = tempfile::tempdir().unwrap();
    let index = RocksIndex::open(dir.path(), r.fp.identity(), &IndexConfig::default()).unwrap();
    let opts = newsdedup::batch::BatchOptions {
        threads: 1,
        max_article_bytes: MAX,
        published_at_offset: UtcOffset::UTC,
        progress_every: None,
        process_start: std::time::Instant::now(),
        correction_acceptance: Default::default(),
    };
    let mut out = Vec::new();
    let (summary, _) = newsdedup::batch::run_batch(
        std::io::Cursor::new(Vec::<u8>::new()),
        Some(std::io::Cursor::new(line + "\n")),
        &mut out,
        &r.fp,
        Deduper::with_config(index, DedupConfig::default()),
        &opts,
    )
    .unwrap();
    // Read and applied: refused because the article was never decided here, not as oversized.
    assert_eq!(
        summary.outcomes.invalid.get("refused_correction"),
        Some(&1),
        "{}",
        String::from_utf8_lossy(&out)
    );
    assert_eq!(summary.outcomes.invalid.get("oversized"), None);
}
