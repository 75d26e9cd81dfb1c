//! The retention window through `newsdedup run` and a local Tansu broker: articles without
//! `published_at` take the Kafka record timestamp as their event time (so a repost ten days of
//! record time later is a new story under `--retention 7d`), a duplicate's `match.published_at`
//! names when its original was published, the stream time and the removals show in /metrics and
//! `index stats`, and the index verifies afterwards.

use crate::common;

use common::kafka::{metric, produce_at, start_service, Broker, Input, Reader};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::process::Command;
use std::time::Duration;

const STORY: &str = "新华社北京3月5日电 第十三届全国人民代表大会第二次会议5日上午在人民大会堂开幕。国务院总理李克强作政府工作报告，\
回顾2018年工作，部署2019年任务。报告提出，今年国内生产总值增长预期目标为6%至6.5%，城镇新增就业1100万人以上，\
城镇调查失业率5.5%左右，居民消费价格涨幅3%左右。报告指出，要深化增值税改革，将制造业等行业现行16%的税率降至13%，\
将交通运输业、建筑业等行业现行10%的税率降至9%。政府工作报告还提出，要大力优化营商环境，继续推进简政放权。";

const WEATHER: &str = "上海市气象台发布暴雨黄色预警，预计今天夜间到明天本市将出现大到暴雨，局部地区有大暴雨，请市民注意防范城市内涝，\
减少不必要的出行，车辆避免驶入低洼积水路段。气象部门提醒，雷雨发生时请远离高压电线和大树，户外作业人员应及时停止作业。";

const PRICES: &str = "国家统计局今天发布数据显示，上月全国居民消费价格同比上涨百分之二点一，其中食品价格上涨百分之四点五，\
非食品价格上涨百分之一点六；工业生产者出厂价格同比下降百分之零点三，环比持平。统计局城市司首席统计师对数据进行了解读。";

/// 2024-03-01T00:00:00Z.
const T0: i64 = 1_709_251_200_000;
const DAY: i64 = 86_400_000;

fn input(id: &str, body: &str, published_at: Option<&str>) -> Input {
    let mut a = json!({"id": id, "title": "", "content": body});
    if let Some(p) = published_at {
        a["published_at"] = json!(p);
    }
    Input {
        key: Some(id.to_owned()),
        value: serde_json::to_vec(&a).expect("json"),
        bad: None,
        id: Some(id.to_owned()),
    }
}

fn newsdedup(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_newsdedup"))
        .args(args)
        .output()
        .expect("run newsdedup");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn kafka_record_timestamp_is_the_event_time_and_match_names_published_at() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    broker.create_service_topics(1);
    let b = broker.bootstrap.as_str();
    // (input, record timestamp): no `published_at` except on "p".
    let stream = [
        (input("a", STORY, None), T0),
        (input("w", WEATHER, None), T0 + DAY),
        (input("c", STORY, None), T0 + 3 * DAY),
        (
            input("p", PRICES, Some("2024-03-04 08:00:00")),
            T0 + 3 * DAY,
        ),
        (input("p2", PRICES, None), T0 + 4 * DAY),
        // Ten days of record time after "a": out of its window, a new story.
        (input("b", STORY, None), T0 + 10 * DAY),
    ];
    let inputs: Vec<Input> = stream.iter().map(|(i, _)| i.clone()).collect();
    let times: Vec<i64> = stream.iter().map(|(_, t)| *t).collect();
    let coords = produce_at(b, "articles.raw", &inputs, &times, Some(0));

    let index = dir.path().join("index");
    let log = dir.path().join("service.log");
    let mut service = start_service(b, &index, &log, &["--retention", "7d"]);
    let mut reader = Reader::new(b, &[("articles.unique", 1), ("articles.duplicate", 1)]);
    let want: HashSet<(i32, i64)> = coords.iter().copied().collect();
    reader.wait_covered(&want, Duration::from_secs(120), &|| service.log());
    let by_id: HashMap<String, Value> = reader
        .got
        .iter()
        .map(|o| (o.key.clone().expect("key"), o.json()))
        .collect();
    let dedup = |id: &str| by_id[id]["dedup"].clone();

    assert_eq!(dedup("a")["decision"], "unique");
    assert_eq!(dedup("w")["decision"], "unique");
    assert_eq!(dedup("c")["decision"], "duplicate");
    assert_eq!(dedup("c")["match"]["id"], "a");
    // "a" has no `published_at`: null, not its record time.
    assert_eq!(dedup("c")["match"]["published_at"], Value::Null);
    assert_eq!(dedup("p2")["match"]["id"], "p");
    assert_eq!(dedup("p2")["match"]["published_at"], "2024-03-04T08:00:00Z");
    assert_eq!(
        dedup("b")["decision"],
        "unique",
        "{}; log:\n{}",
        by_id["b"],
        service.log()
    );
    assert!(service.log().contains("retention 7d"), "{}", service.log());

    // Stream time = newest record time (day 10); "a" (day 0) and "w" (day 1) are removed.
    let (_, text) = service.http("/metrics").expect("/metrics");
    assert_eq!(
        metric(&text, "newsdedup_index_stream_time_seconds"),
        ((T0 + 10 * DAY) / 1000) as f64,
        "{text}"
    );
    assert_eq!(metric(&text, "newsdedup_index_expired_total"), 2.0);
    assert_eq!(metric(&text, "newsdedup_index_articles"), 4.0);

    let (status, _) = service.terminate(Duration::from_secs(40));
    assert!(status.success(), "log:\n{}", service.log());

    let index_dir = index.to_str().expect("utf-8 path");
    let (ok, stdout, stderr) = newsdedup(&[
        "index",
        "stats",
        "--index-dir",
        index_dir,
        "--retention",
        "2d",
        "--json",
    ]);
    assert!(ok, "{stderr}");
    let stats: Value = serde_json::from_str(&stdout).expect("stats JSON");
    let age = &stats["age"];
    assert_eq!(age["stream_time"], "2024-03-11T00:00:00Z");
    assert_eq!(age["oldest"], "2024-03-04T00:00:00Z");
    assert_eq!(age["newest"], "2024-03-11T00:00:00Z");
    // Under a 2-day window, c (day 3), p (day 3 08:00) and p2 (day 4) would go.
    assert_eq!(age["due_for_expiry"], 3);
    assert_eq!(
        age["per_day"],
        json!([["2024-03-04", 2], ["2024-03-05", 1], ["2024-03-11", 1]])
    );
    let (ok, stdout, stderr) = newsdedup(&["index", "verify", "--index-dir", index_dir]);
    assert!(ok, "{stdout}{stderr}");

    // A bad window is refused with the form to use.
    let (ok, _, stderr) = newsdedup(&[
        "index",
        "stats",
        "--index-dir",
        index_dir,
        "--retention",
        "30 days",
    ]);
    assert!(!ok);
    assert!(stderr.contains("e.g. 30d"), "{stderr}");
}
