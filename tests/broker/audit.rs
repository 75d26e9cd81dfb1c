//! `newsdedup audit` end to end: a `batch` output with reposts, a hostile title and id, a
//! duplicate whose original is in another file, one whose original was published later, one
//! that shares little text with its original, and lines that are not decided records; then the
//! same through Kafka (`newsdedup run` against a local Tansu broker, `audit --brokers`).
//!
//! What is checked is what an editor and a machine read: the totals, every shown pair present
//! (suspicious ones first, in the JSONL's order), hostile text escaped, nothing fetched from
//! anywhere, and the numbers recomputed equal to the decision's.

use crate::common;

use common::kafka::{produce, start_service, Broker, Input, Reader};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_newsdedup"))
}

/// Distinct news-like originals: (id, title, content).
fn originals() -> Vec<(&'static str, &'static str, &'static str)> {
    vec![
        ("o1", "地铁十号线二期工程全线贯通", "本报讯 记者从市轨道交通集团获悉，地铁十号线二期工程今天实现全线贯通，预计明年六月开通试运营。二期工程全长二十一公里，设车站十四座，连接城市北部的三个大型居住区和科技园区。开通后，沿线居民前往市中心的通勤时间将由一个半小时缩短到四十分钟左右。工程建设过程中，施工单位采用了新型盾构设备，有效减少了对地面交通和周边建筑的影响。"),
        ("o2", "秋粮收购工作全面展开", "连日来，全省各地秋粮收购工作全面展开，各收储企业敞开收购农民余粮。据省粮食和物资储备局统计，截至目前已累计收购玉米和水稻四百二十万吨，收购价格总体平稳。为方便农民售粮，各地延长了收购时间，并推广线上预约和移动支付，农民排队等候的时间明显减少。有关部门提醒，农民朋友要注意粮食晾晒和保管，防止霉变造成损失。"),
        ("o3", "新建市图书馆正式对外开放", "经过三年建设，新建的市图书馆今天正式对外开放，首日接待读者超过八千人次。新馆建筑面积六万平方米，藏书容量四百万册，设有少儿阅览区、古籍修复室、数字体验区和二十四小时自助借还区。图书馆负责人介绍，新馆全面实行免费开放，读者凭身份证即可办理借阅证，还可以通过手机预约座位和研讨室。"),
        ("o4", "城市马拉松赛鸣枪开跑", "今天上午，二零二四城市马拉松赛在市民广场鸣枪开跑，来自二十多个国家和地区的三万名选手参加了全程、半程和健康跑三个项目的比赛。赛道沿江而设，途经老城区和多个城市公园。经过激烈角逐，男子组和女子组冠军均刷新了赛会纪录。组委会在沿途设置了二十个补给站和医疗点，确保比赛安全顺利进行。"),
        ("o6", "<script>alert(1)</script>", "科技企业发布新款移动芯片，<img src=x onerror=alert(2)> 采用先进制程工艺，性能较上一代提升百分之三十，功耗降低三成。发布会上，企业负责人表示，新芯片将率先用于明年上市的多款手机和平板电脑，并向合作伙伴开放“人工智能”加速接口 & 开发工具。业内人士认为，这款芯片的推出将进一步提升国产终端产品的竞争力。"),
        ("ol", "气象台发布暴雨橙色预警", "市气象台今天下午发布暴雨橙色预警信号，预计未来六小时内，我市大部分地区将出现大暴雨，局地伴有雷电和短时大风。气象部门提醒，市民应尽量减少外出，远离低洼地带和地下空间，驾车途经积水路段时注意安全。防汛部门已启动应急响应，排水泵站全部进入待命状态，抢险队伍在重点区域值守。"),
        ("ow", "词语排列测试", "经济，发展，城市，建设，交通，教育，医疗，科技，农业，文化，旅游，环境，能源，金融，体育，卫生，住房，就业，养老，消防，水利，森林，海洋，航天"),
    ]
}

/// A repost: same title, a dateline in front and a sign-off at the end.
fn repost(content: &str) -> String {
    format!("（转载自本地新闻网）{content}（责任编辑：王明）")
}

fn article(id: &str, title: &str, content: &str, source: &str, published: &str) -> Value {
    json!({"id": id, "title": title, "content": content, "source": source, "published_at": published, "url": format!("https://news.example/{id}")})
}

/// The input of the audited `batch` run: originals, then their reposts and the special cases.
/// The original of `rm` (`om`) is decided by an earlier run, so it is not in this output.
fn inputs() -> (Vec<Value>, Vec<Value>) {
    let os = originals();
    let mut lines: Vec<Value> = os
        .iter()
        .map(|(id, title, content)| {
            let published = if *id == "ol" {
                "2024-03-05T10:00:00+08:00"
            } else {
                "2024-03-01T08:00:00Z"
            };
            article(id, title, content, "本地日报", published)
        })
        .collect();
    let find = |id: &str| os.iter().find(|o| o.0 == id).copied().expect("original");
    for (id, of, source) in [
        ("r1", "o1", "门户甲"),
        ("r2", "o2", "门户甲"),
        ("r3", "o3", "门户乙"),
        ("r4", "o4", "门户乙"),
        ("r6\"<b>", "o6", "门户甲"),
    ] {
        let (_, title, content) = find(of);
        lines.push(article(
            id,
            title,
            &repost(content),
            source,
            "2024-03-02T09:30:00Z",
        ));
    }
    // Published before the original it is matched to.
    let (_, title, content) = find("ol");
    lines.push(article(
        "rl",
        title,
        &repost(content),
        "门户乙",
        "2024-03-04T08:00:00+08:00",
    ));
    // The same words in the reverse order: the same simhash, little shared text.
    let (_, title, content) = find("ow");
    let reversed: Vec<&str> = content.split('，').rev().collect();
    lines.push(article(
        "rw",
        title,
        &reversed.join("，"),
        "门户乙",
        "2024-03-02T10:00:00Z",
    ));
    lines.push(article(
        "rm",
        "国际航班恢复运营",
        &repost(MISSING),
        "门户甲",
        "2024-03-03T12:00:00Z",
    ));
    // Not an article: batch writes an invalid record for it.
    lines.push(json!({"id": "bad", "title": "no content"}));
    let earlier = vec![article(
        "om",
        "国际航班恢复运营",
        MISSING,
        "本地日报",
        "2024-03-01T06:00:00Z",
    )];
    (earlier, lines)
}

const MISSING: &str = "民航局消息，本周起多条国际航线陆续恢复运营，每周新增往返航班六十余班，覆盖东南亚、欧洲和大洋洲的二十多个城市。各航空公司表示，将根据市场需求逐步加密航班，并推出多种优惠票价。机场方面已做好旅客通关保障工作，增加值机柜台和边检通道，确保旅客顺利出行。";

fn write_jsonl(path: &Path, values: &[Value]) {
    let text: String = values.iter().map(|v| format!("{v}\n")).collect();
    std::fs::write(path, text).expect("write input");
}

/// Runs `newsdedup audit ARGS --html H --jsonl J`; returns (html, pairs, stderr).
fn audit(dir: &Path, name: &str, args: &[&str]) -> (String, Vec<Value>, String) {
    let html = dir.join(format!("{name}.html"));
    let jsonl = dir.join(format!("{name}.jsonl"));
    let out = bin()
        .arg("audit")
        .args(args)
        .arg("--html")
        .arg(&html)
        .arg("--jsonl")
        .arg(&jsonl)
        .output()
        .expect("run audit");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "audit failed: {stderr}");
    let pairs = std::fs::read_to_string(&jsonl)
        .expect("read jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSONL line"))
        .collect();
    (
        std::fs::read_to_string(&html).expect("read html"),
        pairs,
        stderr,
    )
}

/// The value of the totals row `key`.
fn total(html: &str, key: &str) -> u64 {
    let row = &html[html
        .find(&format!("<tr data-key=\"{key}\">"))
        .unwrap_or_else(|| panic!("no totals row {key}"))..];
    let cell = &row[row.find("<td class=\"num\">").expect("value cell") + 16..];
    cell[..cell.find("</td>").expect("end of cell")]
        .parse()
        .unwrap_or_else(|e| panic!("totals row {key}: {e}"))
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

fn str_of<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    path.iter()
        .fold(v, |v, k| &v[*k])
        .as_str()
        .unwrap_or_else(|| panic!("{path:?} is not a string in {v}"))
}

/// Every pair of the JSONL is in the HTML, in the same order, with its ids (escaped).
fn assert_pairs_present(html: &str, pairs: &[Value]) {
    let mut at = 0;
    for (i, p) in pairs.iter().enumerate() {
        assert_eq!(p["rank"], json!(i + 1));
        let tag = format!(
            "<section class=\"pair{}\" id=\"pair-{}\" data-rank=\"{}\" data-sample=\"{}\" data-duplicate=\"{}\" data-original=\"{}\"",
            if p["sample"] == "suspicious" { " suspicious" } else { "" },
            i + 1,
            i + 1,
            str_of(p, &["sample"]),
            escape(str_of(p, &["duplicate", "id"])),
            escape(str_of(p, &["decision", "match_id"])),
        );
        let found = html[at..]
            .find(&tag)
            .unwrap_or_else(|| panic!("pair {} ({tag}) missing or out of order", i + 1));
        at += found + tag.len();
    }
    assert_eq!(
        html.matches("<section class=\"pair").count(),
        pairs.len(),
        "the HTML shows other pairs than the JSONL"
    );
}

/// Nothing in the page loads anything: no script, no stylesheet or font link, no image.
fn assert_self_contained(html: &str) {
    for needle in [
        "<script",
        "<link",
        "@import",
        "url(",
        "<img",
        "<iframe",
        "<object",
        "<embed",
        // Quoted: markup, since text quotes are escaped (`src=x` in article text is harmless).
        "src=\"",
        "src='",
        "href=\"http",
        "href=\"//",
        "javascript:",
    ] {
        assert!(!html.contains(needle), "the report contains {needle:?}");
    }
}

#[test]
fn audit_of_a_batch_output() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let index = d.join("index");
    let (earlier, lines) = inputs();
    write_jsonl(&d.join("earlier.jsonl"), &earlier);
    write_jsonl(&d.join("in.jsonl"), &lines);
    common::run_batch(
        &d.join("earlier.jsonl"),
        &d.join("earlier.out.jsonl"),
        &index,
    );
    let decided = d.join("decided.jsonl");
    // The decisions the test is built on.
    let outputs = common::run_batch(&d.join("in.jsonl"), &decided, &index);
    let decision = |id: &str| {
        outputs
            .iter()
            .find(|o| o["id"] == id)
            .map(|o| o["dedup"].clone())
            .unwrap_or_else(|| panic!("no output for {id}"))
    };
    for (id, of) in [
        ("r1", "o1"),
        ("r2", "o2"),
        ("r3", "o3"),
        ("r4", "o4"),
        ("r6\"<b>", "o6"),
        ("rl", "ol"),
        ("rw", "ow"),
        ("rm", "om"),
    ] {
        let d = decision(id);
        assert_eq!(d["decision"], "duplicate", "{id}: {d}");
        assert_eq!(d["match"]["id"], of, "{id}: {d}");
    }
    let rw = decision("rw");
    let low = rw["match"]["containment"].as_f64().expect("containment");
    assert!(
        low < 0.5,
        "the reversed word list should share little text: {rw}"
    );
    // Lines that are not decided records: counted, never fatal.
    let mut text = std::fs::read_to_string(&decided).expect("read output");
    text.push_str("this is not json\n{\"id\":\"x\",\"dedup\":{\"decision\":\"duplicate\"}}\n\n");
    std::fs::write(&decided, text).expect("append bad lines");
    let input = decided.to_str().expect("path");

    let start = Instant::now();
    let (html, pairs, stderr) = audit(d, "small", &["--input", input, "--sample", "2"]);
    eprintln!(
        "audit of {} lines: {:?}",
        outputs.len() + 2,
        start.elapsed()
    );
    assert!(stderr.contains("audit: done:"), "{stderr}");
    // Totals.
    for (key, want) in [
        ("records", 18),
        ("unique", 7),
        ("duplicate", 8),
        ("invalid", 1),
        ("bad", 2),
        ("repeated", 0),
        ("originals_found", 7),
        ("originals_missing", 1),
        ("suspicious", 3),
        ("low_containment", 1),
        ("published_later", 1),
        ("original_missing", 1),
        ("pairs", 5),
    ] {
        assert_eq!(total(&html, key), want, "totals row {key}");
    }
    assert!(
        html.contains("<div class=\"n\">53.3%</div>"),
        "duplicate rate 8 / 15"
    );
    // Suspicious pairs first, most telling reason first; then the 2 sampled ones.
    assert_eq!(pairs.len(), 5);
    let order: Vec<(&str, &str, Vec<Value>)> = pairs
        .iter()
        .map(|p| {
            (
                str_of(p, &["sample"]),
                str_of(p, &["duplicate", "id"]),
                p["reasons"].as_array().expect("reasons").clone(),
            )
        })
        .collect();
    assert_eq!(
        order[0],
        ("suspicious", "rw", vec![json!("low_containment")])
    );
    assert_eq!(
        order[1],
        ("suspicious", "rl", vec![json!("published_later")])
    );
    assert_eq!(
        order[2],
        ("suspicious", "rm", vec![json!("original_missing")])
    );
    for o in &order[3..] {
        assert_eq!(o.0, "random");
        assert!(o.2.is_empty());
    }
    assert_pairs_present(&html, &pairs);
    // The JSONL per pair: where both records are, the decision's and the recomputed numbers
    // (the same code: equal), and the shared share.
    for p in &pairs {
        let id = str_of(p, &["duplicate", "id"]);
        assert!(
            str_of(p, &["duplicate", "location"]).starts_with("line "),
            "{p}"
        );
        assert!(p["decision"]["distance"].is_u64(), "{p}");
        if id == "rm" {
            assert!(
                p["original"].is_null() && p["recomputed"].is_null() && p["shared"].is_null(),
                "{p}"
            );
            assert_eq!(str_of(p, &["decision", "match_title"]), "国际航班恢复运营");
            continue;
        }
        assert_eq!(p["original"]["id"], p["decision"]["match_id"], "{p}");
        assert_eq!(
            p["recomputed"]["distance"], p["decision"]["distance"],
            "{p}"
        );
        let (a, b) = (
            p["recomputed"]["containment"]
                .as_f64()
                .expect("recomputed containment"),
            p["decision"]["containment"]
                .as_f64()
                .expect("decision containment"),
        );
        assert!((a - b).abs() < 0.0015, "{p}");
        assert_eq!(p["recomputed"]["verdict"], "duplicate", "{p}");
        let share = p["shared"]["duplicate_share"].as_f64().expect("share");
        if id == "rw" {
            assert!(share < 0.5, "{p}");
        } else {
            assert!(share > 0.8, "{p}");
            assert!(p["shared"]["passages"].as_u64() >= Some(1), "{p}");
        }
    }
    let rl = &pairs[1];
    assert_eq!(
        str_of(rl, &["original", "published_at"]),
        "2024-03-05T10:00:00+08:00"
    );
    assert_eq!(
        str_of(rl, &["duplicate", "published_at"]),
        "2024-03-04T08:00:00+08:00"
    );
    assert!(html.contains("<mark>"), "shared passages are highlighted");
    assert_self_contained(&html);

    // Every pair: suspicious ones then all the others; the hostile title and id escaped.
    let (html, pairs, _) = audit(d, "all", &["--input", input, "--sample", "100", "--quiet"]);
    assert_eq!(pairs.len(), 8);
    assert_eq!(total(&html, "pairs"), 8);
    assert_pairs_present(&html, &pairs);
    let shown: HashSet<&str> = pairs
        .iter()
        .map(|p| str_of(p, &["duplicate", "id"]))
        .collect();
    assert_eq!(
        shown,
        ["r1", "r2", "r3", "r4", "r6\"<b>", "rl", "rw", "rm"]
            .into_iter()
            .collect()
    );
    assert_self_contained(&html);
    assert!(!html.contains("<script>alert(1)</script>"));
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("&lt;img src=x onerror=alert(2)&gt;"));
    assert!(html.contains("data-duplicate=\"r6&quot;&lt;b&gt;\""));
    assert!(!html.contains("r6\"<b>"));
    let hostile = pairs
        .iter()
        .find(|p| p["duplicate"]["id"] == "r6\"<b>")
        .expect("hostile pair");
    assert_eq!(
        str_of(hostile, &["duplicate", "title"]),
        "<script>alert(1)</script>"
    );

    // The same records and seed give the same sample; the order of the pairs is the report's.
    let (_, again, _) = audit(d, "again", &["--input", input, "--sample", "2", "--quiet"]);
    let ids = |ps: &[Value]| -> Vec<String> {
        ps.iter()
            .map(|p| str_of(p, &["duplicate", "id"]).to_owned())
            .collect()
    };
    let (_, first, _) = audit(d, "first", &["--input", input, "--sample", "2", "--quiet"]);
    assert_eq!(ids(&again), ids(&first));

    // Kafka flags make no sense with --input.
    let out = bin()
        .args([
            "audit",
            "--input",
            input,
            "--from-time",
            "2024-03-01",
            "--html",
        ])
        .arg(d.join("x.html"))
        .output()
        .expect("run audit");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--from-time is for reading Kafka"));
}

#[test]
fn audit_of_the_kafka_topics() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let broker = Broker::start(d);
    broker.create_topics(&[
        "articles.raw:1",
        "articles.unique:2",
        "articles.duplicate:1",
        "articles.dlq:1",
    ]);
    let b = broker.bootstrap.as_str();
    let (_, lines) = inputs();
    // Originals, the reposts of four of them and the hostile pair.
    let wanted = [
        "o1", "o2", "o3", "o4", "o6", "ol", "r1", "r2", "r3", "r6\"<b>",
    ];
    let inputs: Vec<Input> = wanted
        .iter()
        .map(|id| {
            let v = lines.iter().find(|l| l["id"] == *id).expect("article");
            Input {
                key: Some((*id).to_owned()),
                value: serde_json::to_vec(v).expect("json"),
                bad: None,
                id: Some((*id).to_owned()),
            }
        })
        .collect();
    let coords = produce(b, "articles.raw", &inputs, Some(0));
    let service = start_service(
        b,
        &d.join("index"),
        &d.join("service.log"),
        &["--commit-interval-ms", "200"],
    );
    let mut reader = Reader::new(b, &[("articles.unique", 2), ("articles.duplicate", 1)]);
    let want: HashSet<(i32, i64)> = coords.iter().copied().collect();
    reader.wait_covered(&want, Duration::from_secs(90), &|| service.log());
    let duplicates = reader
        .got
        .iter()
        .filter(|o| o.topic == "articles.duplicate")
        .count();
    assert_eq!(
        duplicates,
        4,
        "the reposts are duplicates; log:\n{}",
        service.log()
    );

    let start = Instant::now();
    let (html, pairs, stderr) = audit(d, "kafka", &["--brokers", b, "--sample", "10"]);
    eprintln!("audit over Kafka: {:?}", start.elapsed());
    assert!(stderr.contains("audit: done:"), "{stderr}");
    for (key, want) in [
        ("unique", 6),
        ("duplicate", 4),
        ("bad", 0),
        ("originals_found", 4),
        ("originals_missing", 0),
        ("pairs", 4),
    ] {
        assert_eq!(
            total(&html, key),
            want,
            "totals row {key}; stderr:\n{stderr}"
        );
    }
    assert_eq!(pairs.len(), 4);
    assert_pairs_present(&html, &pairs);
    assert_self_contained(&html);
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    for p in &pairs {
        assert!(
            str_of(p, &["duplicate", "location"]).starts_with("articles.duplicate [0] @"),
            "{p}"
        );
        assert!(
            str_of(p, &["original", "location"]).starts_with("articles.unique ["),
            "{p}"
        );
        assert_eq!(
            p["recomputed"]["distance"], p["decision"]["distance"],
            "{p}"
        );
        // The command that releases it reads the topics from the duplicate's record on.
        // (An id with shell characters is quoted.)
        let release = p["commands"][0].as_str().unwrap_or_default();
        assert!(
            release.starts_with("newsdedup correct release --id=")
                && release.contains(" --since 20"),
            "{p}"
        );
    }
    assert!(
        html.contains("record timestamp"),
        "the chart over time uses record timestamps"
    );

    // A time range after every record: nothing in scope, still a report.
    let later = (common_now_ms() + 3_600_000).to_string();
    let (html, pairs, stderr) = audit(
        d,
        "empty",
        &["--brokers", b, "--from-time", &later, "--quiet"],
    );
    assert_eq!(total(&html, "duplicate"), 0, "{stderr}");
    assert_eq!(total(&html, "unique"), 0, "{stderr}");
    assert!(pairs.is_empty());
    // A range that holds every record.
    let earlier = (common_now_ms() - 3_600_000).to_string();
    let (html, _, stderr) = audit(
        d,
        "range",
        &[
            "--brokers",
            b,
            "--from-time",
            &earlier,
            "--to-time",
            &later,
            "--quiet",
        ],
    );
    assert_eq!(total(&html, "duplicate"), 4, "{stderr}");
    assert_eq!(total(&html, "unique"), 6, "{stderr}");

    // A topic that does not exist: an error that names it.
    let out = bin()
        .args([
            "audit",
            "--brokers",
            b,
            "--duplicate-topic",
            "no.such.topic",
            "--quiet",
            "--html",
        ])
        .arg(d.join("x.html"))
        .output()
        .expect("run audit");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no.such.topic"));
    drop(service);
}

fn common_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
