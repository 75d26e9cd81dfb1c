//! The decision against a real RocksDB index with the real fingerprinter (no broker).

use crate::common;

use newsdedup::config::{FingerprintConfig, IndexConfig};
use newsdedup::dedup::{DecisionInput, Deduper, Verdict};
use newsdedup::error::IndexError;
use newsdedup::fingerprint::{Fingerprinter, ImageUse, NoFeatures};
use newsdedup::index::{ArticleStore, RocksIndex};
use std::sync::{Arc, Mutex};

fn fingerprinter() -> Fingerprinter {
    Fingerprinter::new(&FingerprintConfig::default()).unwrap()
}

const STORY: &str = "新华社北京3月5日电 第十三届全国人民代表大会第二次会议5日上午在人民大会堂开幕。国务院总理李克强作政府工作报告，\
回顾2018年工作，部署2019年任务。报告提出，今年国内生产总值增长预期目标为6%至6.5%，城镇新增就业1100万人以上，\
城镇调查失业率5.5%左右，居民消费价格涨幅3%左右。报告指出，要深化增值税改革，将制造业等行业现行16%的税率降至13%，\
将交通运输业、建筑业等行业现行10%的税率降至9%。政府工作报告还提出，要大力优化营商环境，继续推进简政放权，\
加快建设全国统一的大市场，稳步推进高水平对外开放，支持民营企业和中小企业发展。";

#[test]
fn chinese_is_segmented_into_many_weighted_words() {
    let fp = fingerprinter();
    let (f, feats) = fp.analyze("政府工作报告", STORY).unwrap();
    assert!(f.features > 30, "only {} features", f.features);
    let words: Vec<&str> = feats.iter().map(|x| x.word.as_str()).collect();
    assert!(
        words.contains(&"政府工作报告") || words.contains(&"政府"),
        "{words:?}"
    );
    assert!(!words.contains(&"的"));
    // Two unrelated texts do not collide (the naive one-token failure mode).
    let other = fp.fingerprint("", "上海市气象台发布暴雨黄色预警，预计今天夜间到明天本市将出现大到暴雨，局部地区有大暴雨。").unwrap();
    assert!(f.fingerprint.distance(other.fingerprint) > 10);
}

#[test]
fn fingerprints_are_deterministic_across_threads_and_instances() {
    let a = fingerprinter().fingerprint("标题", STORY).unwrap();
    let fp = Arc::new(fingerprinter());
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let fp = Arc::clone(&fp);
            std::thread::spawn(move || fp.fingerprint("标题", STORY).unwrap())
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), a);
    }
    // Pinned: a change here means every stored index is invalidated; bump the algorithm or
    // cleaning version in the same commit.
    assert_eq!(a.fingerprint.to_hex(), PINNED_STORY_FINGERPRINT);
}

const PINNED_STORY_FINGERPRINT: &str = "2f1dae0240eabc6c";

/// Dictionary words are decided from jieba's word ids through a precomputed lexicon; everything
/// else from the string. Both must give exactly the features the string path alone gives: same
/// fingerprint, same feature count, same sketch, same weights, on real articles of every source
/// and on hand-made texts where HMM words, Latin, numbers and stop words mix.
#[test]
fn word_id_path_equals_string_path() {
    let fast = fingerprinter();
    let reference = fingerprinter().without_word_ids();
    assert!(
        fast.lexicon_features() > 100_000,
        "{}",
        fast.lexicon_features()
    );
    assert_eq!(reference.lexicon_features(), 0);
    let mut texts: Vec<(String, String)> = vec![
        ("标题".into(), STORY.into()),
        (
            "".into(),
            "iPhone 15 Pro和5G网络、A股3.5%的涨幅，NBA总决赛".into(),
        ),
        (
            "新冠".into(),
            "这是一个的了在是我们他们 l5 h9 x 2019 年 abc-def".into(),
        ),
        (
            "".into(),
            "王小明和李华去了北京大学参加马拉松比赛，冠军是张三丰。".into(),
        ),
        (
            "蔡英文".into(),
            "綜合報導：台灣新北市今天舉行記者會，市長表示將推動新政策。".into(),
        ),
    ];
    texts.extend(common::corpus_texts(250));
    for (title, content) in &texts {
        assert_same_analysis(&fast, &reference, title, content);
    }
}

/// `got` and `want` find the same features, weights and fingerprint in an article.
fn assert_same_analysis(got: &Fingerprinter, want: &Fingerprinter, title: &str, content: &str) {
    match (got.analyze(title, content), want.analyze(title, content)) {
        (Ok((g, gf)), Ok((w, wf))) => {
            assert_eq!(g, w, "{title}");
            assert_eq!(gf, wf, "{title}");
        }
        (Err(NoFeatures), Err(NoFeatures)) => {}
        (g, w) => panic!("{title}: {:?} vs {:?}", g.map(|x| x.0), w.map(|x| x.0)),
    }
    assert_eq!(
        got.fingerprint(title, content),
        want.fingerprint(title, content)
    );
}

#[test]
fn unicode_edge_cases() {
    let fp = fingerprinter();
    assert_eq!(
        fp.fingerprint("", "，。！？……——“”《》【】!?.,;:"),
        Err(NoFeatures)
    );
    assert_eq!(fp.fingerprint("😀🎉👍", "🇨🇳🇺🇸 ❤️✨"), Err(NoFeatures));
    assert_eq!(fp.fingerprint("", "的 了 是 在 我们"), Err(NoFeatures));
    let (_, feats) = fp
        .analyze("", "苹果公司发布iPhone 15，搭载A17 Pro芯片，售价5999元。")
        .unwrap();
    let words: Vec<&str> = feats.iter().map(|f| f.word.as_str()).collect();
    assert!(words.contains(&"iphone"), "{words:?}");
    assert!(
        words.contains(&"苹果公司") || words.contains(&"苹果"),
        "{words:?}"
    );
    // Full-width and half-width spellings fingerprint the same.
    let half = fp
        .fingerprint("", "ＮＢＡ总决赛，勇士队１２０比１１０获胜")
        .unwrap();
    let full = fp.fingerprint("", "NBA总决赛,勇士队120比110获胜").unwrap();
    assert_eq!(half, full);
    // Control characters, lone combining marks and private-use characters do not break anything.
    assert!(fp
        .fingerprint("", "\u{0}\u{301}\u{e000}新闻\u{200b}发布会")
        .is_ok());
}

#[test]
fn ten_megabytes_of_content_is_bounded() {
    let fp = fingerprinter();
    let big = STORY.repeat(10 * 1024 * 1024 / STORY.len() + 1);
    assert!(big.len() >= 10 * 1024 * 1024);
    let f = fp.fingerprint("", &big).unwrap();
    // Content past max_content_bytes is ignored, so a 10 MB article costs what 1 MiB does.
    let capped = newsdedup::fingerprint::truncate_at_char_boundary(
        &big,
        FingerprintConfig::default().max_content_bytes,
    );
    assert_eq!(f, fp.fingerprint("", capped).unwrap());
    // A 10 MB run of one character (no separators, no dictionary words): must simply return.
    let _ = fp.fingerprint("", &"中".repeat(3_500_000));
}

fn decide(
    d: &mut Deduper<RocksIndex>,
    fp: &Fingerprinter,
    id: &str,
    title: &str,
    body: &str,
) -> newsdedup::dedup::Decision {
    let (f, outline) = fp.fingerprint_outlined(title, body).unwrap();
    let url = format!("https://news.example/{id}");
    d.decide(
        &DecisionInput {
            published_ms: None,
            record_time_ms: None,
            id,
            url: Some(&url),
            title: Some(title),
            fingerprint: f.fingerprint,
            sketch: Some(&f.sketch),
            off_title_text: f.off_title_text.as_deref(),
            outline: Some(&outline),
        },
        1,
    )
    .unwrap()
}

#[test]
fn duplicate_carries_the_match_and_replays_are_stable() {
    let dir = tempfile::tempdir().unwrap();
    let fp = fingerprinter();
    let index = RocksIndex::open(dir.path(), fp.identity(), &IndexConfig::default()).unwrap();
    let mut d = Deduper::new(index, 3);
    let first = decide(&mut d, &fp, "orig", "两会开幕", STORY);
    assert_eq!(first.verdict, Verdict::Unique);
    let repost = format!("来源：某某网\n{STORY}\n责任编辑：王五");
    let second = decide(&mut d, &fp, "copy", "两会开幕", &repost);
    match &second.verdict {
        Verdict::Duplicate(m) => {
            assert_eq!(m.id, "orig");
            assert_eq!(m.url.as_deref(), Some("https://news.example/orig"));
            assert_eq!(m.title.as_deref(), Some("两会开幕"));
            assert_eq!(m.fingerprint, first.fingerprint);
            assert_eq!(m.distance, first.fingerprint.distance(second.fingerprint));
        }
        v => panic!("expected duplicate, got {v:?}"),
    }
    // Each decision carries the sketch of the text it decided (the output record's
    // `newsdedup.sketch`), which is what the index stored for a new version.
    let sketch = fp.sketch("两会开幕", STORY);
    assert_eq!(first.sketch, Some(sketch));
    assert_eq!(
        d.store().get("orig").unwrap().and_then(|a| a.sketch),
        Some(sketch)
    );
    // Replays: same decisions, never a duplicate of itself, and the same sketch.
    let again = decide(&mut d, &fp, "orig", "两会开幕", STORY);
    assert_eq!(again.verdict, Verdict::Unique);
    assert!(again.replayed);
    assert_eq!(again.sketch, Some(sketch));
    let again = decide(&mut d, &fp, "copy", "两会开幕", &repost);
    assert_eq!(again.verdict, second.verdict);
    // Decisions persist across reopen.
    drop(d);
    let index = RocksIndex::open(dir.path(), fp.identity(), &IndexConfig::default()).unwrap();
    let mut d = Deduper::new(index, 3);
    let replay = decide(&mut d, &fp, "copy", "两会开幕", &repost);
    assert_eq!(replay.verdict, second.verdict);
    assert!(replay.replayed);
    assert!(d.store().verify().unwrap().problems.is_empty());
}

#[test]
fn index_refuses_another_identity_and_a_second_opener() {
    let dir = tempfile::tempdir().unwrap();
    let fp = fingerprinter();
    let index = RocksIndex::open(dir.path(), fp.identity(), &IndexConfig::default()).unwrap();
    match RocksIndex::open(dir.path(), fp.identity(), &IndexConfig::default()) {
        Err(IndexError::Locked { .. }) => {}
        other => panic!("expected Locked, got {:?}", other.err()),
    }
    drop(index);
    let other = Fingerprinter::new(&FingerprintConfig {
        title_weight: 3.0,
        ..Default::default()
    })
    .unwrap();
    match RocksIndex::open(dir.path(), other.identity(), &IndexConfig::default()) {
        Err(e @ IndexError::IdentityMismatch { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("rebuild"), "{msg}");
            assert!(msg.contains("\"title_weight\":3.0"), "{msg}");
        }
        other => panic!("expected IdentityMismatch, got {:?}", other.err()),
    }
}

#[test]
fn concurrent_near_duplicates_never_both_unique() {
    let dir = tempfile::tempdir().unwrap();
    let fp = Arc::new(fingerprinter());
    let index = RocksIndex::open(dir.path(), fp.identity(), &IndexConfig::default()).unwrap();
    let deduper = Arc::new(Mutex::new(Deduper::new(index, 3)));
    let stories = common::corpus_articles("peoples_daily_2019_2020.jsonl", 40);
    // Four threads each process a copy of every story at the same time (copies differ by
    // boilerplate only), racing on the same fingerprints.
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let fp = Arc::clone(&fp);
            let deduper = Arc::clone(&deduper);
            let stories = stories.clone();
            std::thread::spawn(move || {
                let mut out = Vec::new();
                for (i, s) in stories.iter().enumerate() {
                    let body = format!("{}\n来源：转载站{t}", common::str_field(s, "content"));
                    let f = fp
                        .fingerprint(common::str_field(s, "title"), &body)
                        .unwrap();
                    let id = format!("s{i}-t{t}");
                    let d = deduper
                        .lock()
                        .unwrap()
                        .decide(
                            &DecisionInput {
                                published_ms: None,
                                record_time_ms: None,
                                id: &id,
                                url: None,
                                title: None,
                                fingerprint: f.fingerprint,
                                sketch: Some(&f.sketch),
                                off_title_text: None,
                                outline: None,
                            },
                            0,
                        )
                        .unwrap();
                    out.push((i, d.is_duplicate()));
                }
                out
            })
        })
        .collect();
    let mut uniques = vec![0; stories.len()];
    for h in handles {
        for (i, dup) in h.join().unwrap() {
            uniques[i] += usize::from(!dup);
        }
    }
    // Distinct People's Daily stories may legitimately be near-duplicates of each other (front-page
    // continuations), so a story can have 0 uniques; never more than 1.
    assert!(uniques.iter().all(|&u| u <= 1), "{uniques:?}");
    assert!(uniques.iter().filter(|&&u| u == 1).count() > 30);
}

#[test]
fn index_refuses_another_layout_version_and_leaves_it_as_it_was() {
    use newsdedup::index::layout::{FORMAT_VERSION, META, META_FORMAT, META_IDENTITY};
    use rocksdb::{Options, DB};
    let fp = fingerprinter();
    let expect_refusal = |dir: &std::path::Path, stored: &str| {
        for result in [
            RocksIndex::open(dir, fp.identity(), &IndexConfig::default()),
            RocksIndex::open_raw(dir, &IndexConfig::default()),
        ] {
            match result {
                Err(e @ IndexError::FormatMismatch { .. }) => {
                    let msg = e.to_string();
                    assert!(msg.contains(stored), "{msg}");
                    assert!(msg.contains(FORMAT_VERSION), "{msg}");
                    assert!(msg.contains("rebuilt"), "{msg}");
                    assert!(msg.contains(&dir.display().to_string()), "{msg}");
                }
                other => panic!("expected FormatMismatch, got {:?}", other.err()),
            }
        }
    };

    // A directory as an older version wrote it: these families and that format in `meta`.
    let write_old_layout = |dir: &std::path::Path, families: &[&str], format: &str| {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        let db = DB::open_cf(&opts, dir, families).unwrap();
        let meta = db.cf_handle(META).unwrap();
        db.put_cf(meta, META_IDENTITY, fp.identity().to_json())
            .unwrap();
        db.put_cf(meta, META_FORMAT, format.as_bytes()).unwrap();
    };

    // A current index whose meta records the previous layout version.
    let dir = tempfile::tempdir().unwrap();
    drop(RocksIndex::open(dir.path(), fp.identity(), &IndexConfig::default()).unwrap());
    {
        let families = DB::list_cf(&Options::default(), dir.path()).unwrap();
        let db = DB::open_cf(&Options::default(), dir.path(), &families).unwrap();
        db.put_cf(
            db.cf_handle(META).unwrap(),
            META_FORMAT,
            b"newsdedup-index/1",
        )
        .unwrap();
    }
    expect_refusal(dir.path(), "newsdedup-index/1");

    // A directory as the previous version wrote it: no `bands` family.
    let old = tempfile::tempdir().unwrap();
    let old_families = ["block0", "block1", "block2", "block3", "articles", "meta"];
    write_old_layout(old.path(), &old_families, "newsdedup-index/1");
    expect_refusal(old.path(), "newsdedup-index/1");
    // Refusing did not add the new families: the previous version can still open the directory.
    let families_of = |dir: &std::path::Path| {
        let mut families = DB::list_cf(&Options::default(), dir).unwrap();
        families.sort();
        families
    };
    let expected = |names: &[&str]| {
        let mut expected: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        expected.push("default".into());
        expected.sort();
        expected
    };
    assert_eq!(families_of(old.path()), expected(&old_families));

    // Format 2: `bands` but no `expiry` family (no event times).
    let v2 = tempfile::tempdir().unwrap();
    let v2_families = [
        "block0", "block1", "block2", "block3", "bands", "articles", "meta",
    ];
    write_old_layout(v2.path(), &v2_families, "newsdedup-index/2");
    expect_refusal(v2.path(), "newsdedup-index/2");
    assert_eq!(families_of(v2.path()), expected(&v2_families));

    // Format 5: every family but `ids` (block and band entries held the ids).
    let v5 = tempfile::tempdir().unwrap();
    let v5_families = [
        "block0", "block1", "block2", "block3", "bands", "articles", "expiry", "meta",
    ];
    write_old_layout(v5.path(), &v5_families, "newsdedup-index/5");
    expect_refusal(v5.path(), "newsdedup-index/5");
    assert_eq!(families_of(v5.path()), expected(&v5_families));
}

/// The same id with other content is a new revision: decided afresh (not as a replay, never
/// against its own earlier version), replacing that version's index entries in one write; the
/// same content again replays the latest decision.
#[test]
fn same_id_with_new_content_is_a_revision_decided_afresh() {
    use newsdedup::index::ArticleStore;
    let dir = tempfile::tempdir().unwrap();
    let fp = fingerprinter();
    let index = RocksIndex::open(dir.path(), fp.identity(), &IndexConfig::default()).unwrap();
    let mut d = Deduper::new(index, 3);
    let weather = "上海市气象台发布暴雨黄色预警，预计今天夜间到明天本市将出现大到暴雨，局部地区有大暴雨，请市民注意防范城市内涝，减少不必要的出行，车辆避免驶入低洼积水路段。";
    let v0 = decide(&mut d, &fp, "orig", "两会开幕", STORY);
    assert_eq!((v0.verdict.clone(), v0.revision), (Verdict::Unique, None));

    // Someone reuses an earlier id to push a repost of another story past dedup: caught.
    let other = decide(&mut d, &fp, "w", "暴雨预警", weather);
    assert_eq!(other.verdict, Verdict::Unique);
    let reused = decide(
        &mut d,
        &fp,
        "orig",
        "暴雨预警",
        &format!("{weather}\n责任编辑：李四"),
    );
    assert!(!reused.replayed);
    match &reused.verdict {
        Verdict::Duplicate(m) => assert_eq!(m.id, "w"),
        v => panic!("a reused id must not bypass dedup, got {v:?}"),
    }
    let r = reused.revision.expect("revision");
    assert_eq!((r.number, r.previous_fingerprint), (1, v0.fingerprint));

    // The replaced version is gone from the index: its repost is now unique.
    let repost = decide(
        &mut d,
        &fp,
        "copy",
        "两会开幕",
        &format!("来源：某某网\n{STORY}"),
    );
    assert_eq!(
        repost.verdict,
        Verdict::Unique,
        "matched a replaced version"
    );
    // Replaying the latest content replays its decision, revision included.
    let again = decide(
        &mut d,
        &fp,
        "orig",
        "暴雨预警",
        &format!("{weather}\n责任编辑：李四"),
    );
    assert!(again.replayed);
    assert_eq!(
        (again.verdict, again.revision),
        (reused.verdict, reused.revision)
    );
    // The first content delivered again (a re-delivery, a replay of an older range) gets the
    // decision it got the first time and does not replace the newer version.
    let back = decide(&mut d, &fp, "orig", "两会开幕", STORY);
    assert!(back.replayed);
    assert_eq!((back.verdict, back.revision), (Verdict::Unique, None));
    let stored = d.store().get("orig").unwrap().expect("stored");
    assert_eq!(
        stored.fingerprint, reused.fingerprint,
        "the newer version stays"
    );

    let store = d.into_store();
    assert_eq!(
        store.counts().articles,
        3,
        "a revision replaces, never adds"
    );
    let report = store.verify().unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

/// Sentences of `text` (ending at 。！？), terminators kept.
fn sentences(text: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    for c in text.chars() {
        out.last_mut().unwrap().push(c);
        if matches!(c, '。' | '！' | '？') {
            out.push(String::new());
        }
    }
    out.retain(|s| !s.trim().is_empty());
    out
}

/// The containment rule: an excerpt (the middle half of a story's sentences, with a source line)
/// is a duplicate of the story, by the `containment` or `resemblance` rule, with most of its text
/// in the story; a roundup (a short story among other stories' paragraphs) is not a duplicate of
/// the short story; and the story itself, arriving after its excerpt, says more: unique.
#[test]
fn excerpt_is_a_duplicate_and_a_roundup_is_not() {
    use newsdedup::index::{MatchRule, Relation};
    let fp = fingerprinter();
    let stories = common::sample_stories();
    let text = |i: usize| common::str_field(&stories[i], "content").to_owned();
    let title = |i: usize| common::str_field(&stories[i], "title").to_owned();
    let long: Vec<usize> = (0..stories.len())
        .filter(|&i| text(i).chars().count() >= 500)
        .collect();
    let short: Vec<usize> = (0..stories.len())
        .filter(|&i| text(i).chars().count() < 400)
        .collect();
    assert!(long.len() >= 3 && short.len() >= 3);
    let mut excerpts = 0;
    for &i in &long {
        let s = sentences(&text(i));
        let (from, n) = (s.len() / 4, s.len() / 2);
        let excerpt = format!("来源：某网\n{}", s[from..from + n].concat());
        // Excerpt after its story: a duplicate, and by a sketch rule when the simhash moved far.
        let dir = tempfile::tempdir().unwrap();
        let index = RocksIndex::open(dir.path(), fp.identity(), &IndexConfig::default()).unwrap();
        let mut d = Deduper::new(index, 3);
        assert_eq!(
            decide(&mut d, &fp, "story", &title(i), &text(i)).verdict,
            Verdict::Unique
        );
        let later = decide(&mut d, &fp, "excerpt", &title(i), &excerpt);
        let Verdict::Duplicate(m) = &later.verdict else {
            panic!("excerpt of story {i} came out unique: {later:?}");
        };
        assert_eq!(m.id, "story");
        assert!(m.contained.is_some_and(|c| c >= 0.8), "{m:?}");
        if m.distance > 3 {
            assert!(
                matches!(
                    m.rule,
                    Some(MatchRule::Containment | MatchRule::Resemblance)
                ),
                "{m:?}"
            );
            excerpts += usize::from(m.rule == Some(MatchRule::Containment));
        }
        // The story after its excerpt says more: unique, unless the excerpt is most of it (then
        // the story is the excerpt plus new text of the same report: an extension).
        let dir = tempfile::tempdir().unwrap();
        let index = RocksIndex::open(dir.path(), fp.identity(), &IndexConfig::default()).unwrap();
        let mut d = Deduper::new(index, 3);
        decide(&mut d, &fp, "excerpt", &title(i), &excerpt);
        let story = decide(&mut d, &fp, "story", &title(i), &text(i));
        if let Verdict::Duplicate(m) = &story.verdict {
            let share = story.similarity.map_or(0.0, |s| s.b_share_of_a());
            assert_eq!(m.relation, Some(Relation::Extension), "story {i}: {m:?}");
            assert!(share >= 0.55, "story {i} after its excerpt: {story:?}");
        }
    }
    assert!(excerpts >= 1, "no excerpt needed the containment rule");
    // A roundup adds at least the item's length of other stories (the item is at most half of
    // it; an earlier item that is most of the later would make the later an extension).
    for (k, &i) in short.iter().enumerate() {
        let item_chars = text(i).chars().count();
        let others: Vec<String> = [long[k % long.len()], long[(k + 1) % long.len()]]
            .iter()
            .map(|&o| {
                let mut taken = String::new();
                for s in sentences(&text(o)) {
                    if 2 * taken.chars().count() >= item_chars + 40 {
                        break;
                    }
                    taken.push_str(&s);
                }
                taken
            })
            .collect();
        let roundup = format!("{}\n{}\n{}", others[0], text(i), others[1]);
        let dir = tempfile::tempdir().unwrap();
        let index = RocksIndex::open(dir.path(), fp.identity(), &IndexConfig::default()).unwrap();
        let mut d = Deduper::new(index, 3);
        decide(&mut d, &fp, "item", &title(i), &text(i));
        let r = decide(
            &mut d,
            &fp,
            "roundup",
            &format!("要闻汇总｜{}", title(i)),
            &roundup,
        );
        assert_eq!(r.verdict, Verdict::Unique, "roundup of story {i}: {r:?}");
    }
}

/// Deterministic made-up text: `chars` characters drawn from the characters of [`STORY`] by a
/// seeded generator, with a comma or a full stop every 9 to 16 of them. Every 4-gram of one seed
/// is (almost surely) new to another.
fn made_up_text(seed: u64, chars: usize) -> String {
    let pool: Vec<char> = {
        let mut p: Vec<char> = STORY
            .chars()
            .filter(|c| ('\u{4e00}'..='\u{9fff}').contains(c))
            .collect();
        p.sort_unstable();
        p.dedup();
        p
    };
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut out = String::new();
    let mut until_stop = 9 + next() % 8;
    for _ in 0..chars {
        out.push(pool[(next() % pool.len() as u64) as usize]);
        until_stop -= 1;
        if until_stop == 0 {
            out.push(if next() % 3 == 0 { '。' } else { '，' });
            until_stop = 9 + next() % 8;
        }
    }
    out.push('。');
    out
}

/// Templates are not content. 2,000 forum posts of one site share its page chrome (half of each
/// page); nearly all are unique, each saying something else, and the band buckets of the
/// chrome's 4-grams are crowded. Two more pages with the same chrome and a one-line post each
/// share nothing but the chrome: both stay unique. (Without the template discount the chrome makes
/// each a duplicate of an earlier page.) A repost of a post is still a duplicate.
#[test]
fn template_pages_sharing_only_chrome_stay_unique() {
    let fp = fingerprinter();
    let dir = tempfile::tempdir().unwrap();
    let index = RocksIndex::open(dir.path(), fp.identity(), &IndexConfig::default()).unwrap();
    let mut d = Deduper::new(index, 3);
    let chrome = made_up_text(1, 300);
    let page = |body: &str| format!("{chrome}\n{body}");
    let mut unique = 0;
    for i in 0..2000u64 {
        let body = made_up_text(10_000 + i, 300);
        let v = decide(&mut d, &fp, &format!("post{i}"), "论坛", &page(&body));
        unique += usize::from(v.verdict == Verdict::Unique);
    }
    // The one-permutation sketch estimates a share of 1/2 within about 0.09: a few posts may pass
    // for a repost of another.
    assert!(unique >= 1900, "{unique} of 2000 posts unique");
    for name in ["page-a", "page-b"] {
        let body = made_up_text(if name == "page-a" { 7 } else { 8 }, 24);
        let v = decide(&mut d, &fp, name, "论坛", &page(&body));
        assert_eq!(v.verdict, Verdict::Unique, "{name}: {v:?}");
    }
    // A repost of a post under another title (its first words, as a reposting site makes one)
    // still is one: its own text is shared too.
    let post = made_up_text(10_007, 300);
    let title: String = post.chars().take(8).collect();
    let again = decide(&mut d, &fp, "post7-again", &title, &page(&post));
    let Verdict::Duplicate(m) = &again.verdict else {
        panic!("the repost of post 7 came out unique: {again:?}");
    };
    assert_eq!(m.id, "post7", "{again:?}");
}

/// Page chrome under a headline carries no decision. Three pages of a portal hold only its
/// disclaimer, under three unrelated titles: all unique (without the check, copies of the first).
/// A fourth under a title that agrees with the first's (one item, its text lost to the portal's
/// chrome) is a copy of it; a repost of a real report under another title is a duplicate, since
/// its text carries the original's title. `compare` says why each pair went as it did.
#[test]
fn chrome_only_pages_under_unrelated_titles_stay_unique() {
    use newsdedup::compare::{compare, CompareInput};
    use newsdedup::dedup::DedupConfig;
    let fp = fingerprinter();
    let disclaimer = "本网站所刊载的信息不代表本站观点，如有侵权请联系本站删除。转载请注明出处，违者\
        必究。本站对文中陈述、观点判断保持中立，不对所包含内容的准确性、可靠性或完整性提供任何明示或暗示的\
        保证。请读者仅作参考，并请自行核实相关内容。";
    let pages = [
        ("p1", "中东盛产美女 王妃夫人各个是传奇"),
        ("p2", "全球最佳国家排名公布"),
        ("p3", "超惊险！蟒蛇暴起咬人全过程"),
        ("p4", "中东盛产美女：王妃个个是传奇"),
    ];
    let run = |config: DedupConfig| -> Vec<(String, Option<String>)> {
        let dir = tempfile::tempdir().unwrap();
        let index = RocksIndex::open(dir.path(), fp.identity(), &IndexConfig::default()).unwrap();
        let mut d = Deduper::with_config(index, config);
        let mut out = Vec::new();
        for (id, title) in pages {
            let v = decide(&mut d, &fp, id, title, disclaimer);
            let m = match v.verdict {
                Verdict::Duplicate(m) => Some(m.id),
                Verdict::Unique => None,
            };
            out.push((id.to_owned(), m));
        }
        assert_eq!(
            decide(&mut d, &fp, "report", "政府工作报告", STORY).verdict,
            Verdict::Unique
        );
        let repost = decide(
            &mut d,
            &fp,
            "repost",
            "总理作报告：今年预期目标6%至6.5%",
            STORY,
        );
        assert!(repost.is_duplicate(), "{repost:?}");
        out
    };
    let matched = |v: &[(String, Option<String>)]| -> Vec<Option<String>> {
        v.iter().map(|(_, m)| m.clone()).collect()
    };
    assert_eq!(
        matched(&run(DedupConfig::default())),
        vec![None, None, None, Some("p1".to_owned())]
    );
    let unchecked = DedupConfig {
        headline_check: false,
        ..DedupConfig::default()
    };
    assert_eq!(
        matched(&run(unchecked)),
        vec![
            None,
            Some("p1".to_owned()),
            Some("p1".to_owned()),
            Some("p1".to_owned())
        ]
    );
    let input = |(id, title): (&str, &str), content: &str| CompareInput {
        id: id.to_owned(),
        title: title.to_owned(),
        content: content.to_owned(),
    };
    let report = |a, b, content: &str| {
        compare(
            &fp,
            &input(a, content),
            &input(b, content),
            &DedupConfig::default(),
            3,
            false,
            &|_| newsdedup::index::Crowded::default(),
        )
        .unwrap()
    };
    let refused = report(pages[1], pages[0], disclaimer);
    assert_eq!(refused["verdict"], "distinct", "{refused}");
    assert_eq!(refused["page_chrome"]["is_chrome"], true, "{refused}");
    assert!(
        refused["why"]
            .as_str()
            .unwrap()
            .starts_with("none: page chrome"),
        "{refused}"
    );
    let agreed = report(pages[3], pages[0], disclaimer);
    assert_eq!(agreed["verdict"], "duplicate", "{agreed}");
    assert_eq!(agreed["page_chrome"]["is_chrome"], false, "{agreed}");
    let story = report(("repost", "总理作报告"), ("report", "政府工作报告"), STORY);
    assert_eq!(story["page_chrome"], serde_json::Value::Null, "{story}");
}

/// An extension (the earlier report whole plus two thirds more text of its own: an update) is a
/// duplicate with `relation` `extension`, by the `extension` rule; a digest in which the earlier
/// item is an eighth of the text stays unique (its items here share the report's vocabulary, so
/// only its share tells it; `an_update_with_a_small_earlier_share_is_linked_and_a_digest_of_that_shape_is_not`
/// has the topic check tell them); with `duplicate_relations` without `extension`, the
/// update is unique too. (Before the extension rule, the update was unique: only 60% of its
/// 4-grams are in the earlier report.)
#[test]
fn an_extension_is_linked_and_a_digest_is_not() {
    use newsdedup::dedup::DedupConfig;
    use newsdedup::index::{MatchRule, Relation};
    let fp = fingerprinter();
    let report = made_up_text(20, 600);
    let update = format!("{report}\n{}", made_up_text(21, 400));
    let digest = format!(
        "{}\n{report}\n{}",
        made_up_text(22, 2100),
        made_up_text(23, 2100)
    );
    let run = |config: DedupConfig, later: &str| {
        let dir = tempfile::tempdir().unwrap();
        let index = RocksIndex::open(dir.path(), fp.identity(), &IndexConfig::default()).unwrap();
        let mut d = Deduper::with_config(index, config);
        assert_eq!(
            decide(&mut d, &fp, "report", "快讯", &report).verdict,
            Verdict::Unique
        );
        decide(&mut d, &fp, "later", "快讯", later)
    };
    let v = run(DedupConfig::default(), &update);
    let Verdict::Duplicate(m) = &v.verdict else {
        panic!("the update came out unique: {v:?}");
    };
    assert_eq!(
        (m.id.as_str(), m.rule, m.relation),
        (
            "report",
            Some(MatchRule::Extension),
            Some(Relation::Extension)
        ),
        "{v:?}"
    );
    let v = run(DedupConfig::default(), &digest);
    assert_eq!(v.verdict, Verdict::Unique, "the digest: {v:?}");
    let only_same_text = DedupConfig {
        duplicate_relations: vec![Relation::Copy, Relation::Rewrite, Relation::Excerpt],
        ..DedupConfig::default()
    };
    let v = run(only_same_text, &update);
    assert_eq!(v.verdict, Verdict::Unique, "{v:?}");
}

/// The earlier item (a county's reservoir project) is whole inside both later texts and about 40%
/// of each, too small a share for the extension rule alone. The update adds a report from the
/// site that repeats the story's names and figures: an extension, by the topic check. The digest
/// adds three other local items: unique. Both have the same shape to the sketch (B whole in A, a
/// small share of it); only what A adds tells them apart.
#[test]
fn an_update_with_a_small_earlier_share_is_linked_and_a_digest_of_that_shape_is_not() {
    use newsdedup::compare::{compare, CompareInput};
    use newsdedup::dedup::DedupConfig;
    use newsdedup::index::{MatchRule, Relation};
    const ITEM: &str = "本报讯 青山县人民政府3日发布消息，位于该县东部的云溪水库扩建工程当天正式开工。\
工程总投资约12亿元，计划新增库容3800万立方米，建成后可为下游五个乡镇的8万多名群众提供稳定的饮用水源，\
并改善2.6万亩农田的灌溉条件。青山县水利局局长周明远介绍，工程预计于2027年底完工，施工期间将采取分段围堰\
的方式，尽量减少对周边生态环境的影响。";
    const SITE: &str = "青山县水利局局长周明远表示，云溪水库始建于上世纪七十年代，库容不足，近年来每逢旱季，下游五个乡镇的饮用水源\
和农田灌溉都会紧张。此次扩建工程总投资12亿元，将加高大坝6米，新增库容3800万立方米，并新建一条长14公里的\
输水干渠，把水库的水直接引到2.6万亩灌溉片区。周明远说，青山县已经成立扩建工程建设指挥部，每周召开一次调度\
会，确保2027年底完工；分段围堰施工和生态环境保护措施同步落实。下游石桥镇的村民告诉记者，过去一到夏天家里就\
经常断水，听说云溪水库扩建开工了，8万多名群众心里都踏实了。";
    const OTHERS: [&str; 3] = [
        "【本地快讯】市图书馆新馆本周六起试运行，馆内设有少儿阅览区、古籍修复展示区和24小时自助借阅区，\
市民凭身份证即可免费办理借书证，开馆首月每天延长开放两小时。",
        "【体育】第十二届全市中学生篮球联赛昨日落幕，实验中学男队以68比61战胜育才中学，时隔五年再次夺得\
冠军，女队冠军由第三中学获得，两支冠军队将代表本市参加省赛。",
        "【天气】受冷空气影响，未来三天全市气温将下降6到8摄氏度，北部山区有小雪，气象部门提醒市民注意防寒\
保暖，驾车出行注意路面结冰，老人和儿童尽量减少户外活动。",
    ];
    let fp = fingerprinter();
    let rule = DedupConfig::default();
    let update = format!("{ITEM}\n{SITE}");
    let digest = format!("{ITEM}\n{}", OTHERS.join("\n"));
    let item = fp.fingerprint("云溪水库扩建工程开工", ITEM).unwrap();
    for later in [&update, &digest] {
        let a = fp.fingerprint("", later).unwrap();
        let sim = a.sketch.similarity(&item.sketch);
        assert!(sim.b_in_a >= 0.85 && sim.b_share_of_a() < 0.5, "{sim:?}");
        let distance = a.fingerprint.distance(item.fingerprint);
        assert!(rule.wants_topic(distance, Some(sim)), "{sim:?}");
    }
    let run = |later: &str| {
        let dir = tempfile::tempdir().unwrap();
        let index = RocksIndex::open(dir.path(), fp.identity(), &IndexConfig::default()).unwrap();
        let mut d = Deduper::new(index, 3);
        let first = decide(&mut d, &fp, "item", "云溪水库扩建工程开工", ITEM);
        assert_eq!(first.verdict, Verdict::Unique);
        decide(&mut d, &fp, "later", "云溪水库扩建工程开工", later)
    };
    let v = run(&update);
    let Verdict::Duplicate(m) = &v.verdict else {
        panic!("the update came out unique: {v:?}");
    };
    assert_eq!(
        (m.id.as_str(), m.rule, m.relation),
        (
            "item",
            Some(MatchRule::Extension),
            Some(Relation::Extension)
        ),
        "{v:?}"
    );
    let v = run(&digest);
    assert_eq!(v.verdict, Verdict::Unique, "the digest: {v:?}");
    // The update stays searchable: a copy of it finds it (the nearest candidate) and names the
    // item it updates, through it.
    let dir = tempfile::tempdir().unwrap();
    let index = RocksIndex::open(dir.path(), fp.identity(), &IndexConfig::default()).unwrap();
    let mut d = Deduper::new(index, 3);
    decide(&mut d, &fp, "item", "云溪水库扩建工程开工", ITEM);
    decide(&mut d, &fp, "later", "云溪水库扩建工程开工", &update);
    let v = decide(&mut d, &fp, "copy", "云溪水库扩建工程开工", &update);
    let Verdict::Duplicate(m) = &v.verdict else {
        panic!("the update's copy came out unique: {v:?}");
    };
    assert_eq!(
        (m.id.as_str(), m.via.as_deref(), m.distance, m.relation),
        ("item", Some("later"), 0, Some(Relation::Copy)),
        "{v:?}"
    );
    // The update's new text alone is an excerpt of the update, not a repeat of the item: it is
    // not linked to the item through the update.
    let v = decide(&mut d, &fp, "part", "云溪水库扩建工程开工", SITE);
    if let Verdict::Duplicate(m) = &v.verdict {
        assert_ne!(m.via.as_deref(), Some("later"), "{v:?}");
    }
    // `compare` shows the topic check and why it decided.
    let input = |id: &str, content: &str| CompareInput {
        id: id.to_owned(),
        title: "云溪水库扩建工程开工".to_owned(),
        content: content.to_owned(),
    };
    for (later, verdict, why) in [
        (&update, "duplicate", "extension: "),
        (&digest, "distinct", "none: "),
    ] {
        let report = compare(
            &fp,
            &input("later", later),
            &input("item", ITEM),
            &rule,
            5,
            false,
            &|_| newsdedup::index::Crowded::default(),
        )
        .unwrap();
        let topic = &report["second_check"]["topic"];
        assert!(topic["coherence"].is_number(), "{report}");
        assert_eq!(report["verdict"], verdict, "{report}");
        let text = report["why"].as_str().unwrap_or_default();
        assert!(
            text.starts_with(why) && text.contains("heavy words"),
            "{text}"
        );
    }
}

/// A one-line alert that cleaning empties (a bracketed line is a dateline tag to it) is
/// fingerprinted from its characters instead of refused as having no features; a repeat of it is
/// a duplicate, another alert is not. Texts without a real character still have no features.
#[test]
fn a_short_alert_is_fingerprinted_from_its_characters() {
    let fp = fingerprinter();
    let alert = "【大风蓝色预警信号】";
    let f = fp.fingerprint("", alert).expect("the alert has characters");
    assert!(f.features >= 5, "{f:?}");
    let (g, features) = fp.analyze("", alert).unwrap();
    assert_eq!(g, f);
    assert!(features.iter().any(|x| x.word == "预警"), "{features:?}");
    let other = fp.fingerprint("", "【暴雨红色预警信号】").unwrap();
    assert!(f.fingerprint.distance(other.fingerprint) > 3);
    assert_eq!(fp.fingerprint("", "，。！？【】"), Err(NoFeatures));
    let dir = tempfile::tempdir().unwrap();
    let index = RocksIndex::open(dir.path(), fp.identity(), &IndexConfig::default()).unwrap();
    let mut d = Deduper::new(index, 3);
    assert_eq!(
        decide(&mut d, &fp, "alert-1", "", alert).verdict,
        Verdict::Unique
    );
    assert_eq!(
        decide(&mut d, &fp, "alert-2", "", "【暴雨红色预警信号】").verdict,
        Verdict::Unique
    );
    let Verdict::Duplicate(m) = decide(&mut d, &fp, "alert-3", "", alert).verdict else {
        panic!("the repeated alert came out unique");
    };
    assert_eq!(m.id, "alert-1");
}

/// A fingerprinter whose tables come from a start-up image fingerprints exactly like one built
/// from the resource texts (features, weights, fingerprints, sketches), with the default and a
/// non-default configuration; a damaged image is never read, but rebuilt and rewritten.
#[test]
fn a_start_up_image_fingerprints_like_the_texts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let configs = [
        FingerprintConfig::default(),
        FingerprintConfig {
            keep_single_chars: true,
            keep_numbers: false,
            unknown_idf: Some(9.5),
            ..FingerprintConfig::default()
        },
    ];
    let mut texts: Vec<(String, String)> = vec![("标题".into(), STORY.into())];
    texts.extend(common::corpus_texts(150));
    for config in &configs {
        let plain = Fingerprinter::new(config).expect("plain");
        let first = Fingerprinter::load(config, Some(dir.path())).expect("first");
        let ImageUse::Written(path) = first.image_use().clone() else {
            panic!("first load: {:?}", first.image_use());
        };
        let imaged = Fingerprinter::load(config, Some(dir.path())).expect("imaged");
        assert_eq!(imaged.image_use(), &ImageUse::Read(path.clone()));
        assert_eq!(imaged.identity(), plain.identity());
        assert_eq!(imaged.lexicon_features(), plain.lexicon_features());
        for (title, content) in &texts {
            assert_same_analysis(&imaged, &plain, title, content);
        }
        // One flipped byte in the middle: refused, rebuilt, rewritten.
        let mut bytes = std::fs::read(&path).expect("image");
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x40;
        std::fs::write(&path, &bytes).expect("damage");
        let rebuilt = Fingerprinter::load(config, Some(dir.path())).expect("rebuilt");
        assert_eq!(rebuilt.image_use(), &ImageUse::Written(path.clone()));
        assert_eq!(
            rebuilt.fingerprint("标题", STORY),
            plain.fingerprint("标题", STORY)
        );
    }
    // An unwritable place costs only the image.
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, "x").expect("file");
    let f = Fingerprinter::load(&configs[0], Some(&file)).expect("no image");
    assert!(
        matches!(f.image_use(), ImageUse::NotWritten { .. }),
        "{:?}",
        f.image_use()
    );
}

/// A restore that takes the recorded fingerprint computes only the sketch: it must be the sketch
/// `fingerprint` gives, for ordinary articles and for texts fingerprinted from their characters.
#[test]
fn the_sketch_alone_equals_the_fingerprints_sketch() {
    let fp = Fingerprinter::new(&FingerprintConfig::default()).expect("fingerprinter");
    let text = |a: &serde_json::Map<String, serde_json::Value>, k: &str| {
        a.get(k).and_then(|v| v.as_str()).unwrap_or("").to_owned()
    };
    let mut cases: Vec<(String, String)> = Vec::new();
    for file in [
        "peoples_daily_2019_2020.jsonl",
        "sina_2018_patrick233.jsonl",
        "bdci2019_inews.jsonl",
        "sogou_smarty_2008_2012.jsonl",
    ] {
        for a in common::corpus_articles(file, 300) {
            cases.push((text(&a, "title"), text(&a, "content")));
        }
    }
    cases.push(("".into(), "【大风蓝色预警信号】".into()));
    cases.push(("【暴雨黄色预警】".into(), "".into()));
    cases.push(("标题".into(), "<p>内容很短</p>".into()));
    let mut compared = 0;
    for (title, content) in &cases {
        if let Ok(f) = fp.fingerprint(title, content) {
            assert_eq!(fp.sketch(title, content), f.sketch, "{title:?}");
            compared += 1;
        }
    }
    assert!(compared >= cases.len() / 2, "{compared} of {}", cases.len());
}
