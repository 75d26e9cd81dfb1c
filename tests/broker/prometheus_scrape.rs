//! A real Prometheus (Debian's `prometheus`, installed by scripts/check_prometheus.sh) scrapes a
//! real `newsdedup run` fed through a local Tansu broker, with the shipped scrape configuration
//! (docker/prometheus.yml, scraping every second here) and the shipped alert rules
//! (docker/alerts.yml). Through Prometheus's HTTP API: the consumed counter equals the records
//! produced, the decision counters add up, latency quantiles (histogram_quantile over the
//! `_bucket` series) are finite, every alert rule is loaded and evaluates with health "ok", and
//! every metric name used by the rules and by the Grafana dashboard is one the service exports.
//!
//! The test fails (it does not skip) when the prometheus binary is missing.

use crate::common;

use common::kafka::{free_port, produce, start_service, Broker, Input};

use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------------
// Articles: short synthetic Chinese news (independent of the corpus), reposts, malformed records

/// (title, content) of distinct short news items.
const NEWS: [(&str, &str); 16] = [
    ("暴雨致城区多处积水", "受强降雨影响，本市昨夜多条主干道出现严重积水，部分公交线路临时绕行。气象部门发布暴雨橙色预警，提醒市民减少外出，注意防范山洪和地质灾害。"),
    ("新能源汽车销量创新高", "上月国内新能源汽车销量同比增长三成以上，纯电动车型占比继续提升。业内人士认为，充电设施不断完善和购置税减免政策是推动销量增长的主要原因。"),
    ("高校毕业生就业招聘会举行", "本周末，省人才市场举办大型校园招聘会，三百余家企业提供岗位逾万个。现场求职者踊跃，信息技术、智能制造和医疗健康类岗位最受关注。"),
    ("古镇修缮工程完工", "历时两年的古镇保护修缮工程日前全部完工，青石板路、木结构民居和百年戏台得到修复。景区将于下月重新开放，并推出夜游和非遗体验项目。"),
    ("国家队公布世预赛名单", "中国足协今天公布了新一期国家队集训名单，共有二十六名球员入选，其中包括三名首次入选的年轻球员。球队将于下周在广州集中备战。"),
    ("科学家发现新型超导材料", "某研究团队在国际期刊发表论文称，一种镍基化合物在高压条件下表现出超导特性。专家表示，该发现为探索高温超导机理提供了新的线索。"),
    ("春运首日铁路客流平稳", "春运首日全国铁路预计发送旅客一千余万人次，各大车站秩序井然。铁路部门加开临时列车，并延长售票窗口和进站口的服务时间。"),
    ("社区食堂解决老人吃饭难", "城东街道新开设的社区食堂为辖区六十岁以上老人提供优惠餐，每餐价格不超过十元。开业一个月来，每天就餐人数稳定在两百人左右。"),
    ("跨境电商出口持续增长", "海关数据显示，今年前三季度跨境电商进出口额保持两位数增长，家居用品、服装和小家电是主要出口品类，东南亚和中东市场增长最快。"),
    ("博物馆推出数字展厅", "市博物馆正式上线数字展厅，观众通过手机即可浏览三千余件馆藏文物的高清影像，部分青铜器还支持三维旋转观看和语音讲解。"),
    ("果农喜迎苹果丰收", "秋高气爽，山区万亩果园里的苹果进入采摘期。今年雨水充足、光照好，果品个大色艳，收购价格比去年每斤高出两三毛钱，果农收入明显增加。"),
    ("地铁新线开通试运营", "地铁六号线一期工程今日开通试运营，线路全长二十八公里，设车站二十座。新线串联起高铁站、会展中心和多个大型居住区，将有效缓解地面交通压力。"),
    ("流感进入高发季节", "疾控中心提醒，近期流感病毒检出率明显上升，儿童和老年人是易感人群。专家建议及时接种疫苗，勤洗手、多通风，出现发热症状应尽早就医。"),
    ("航天员完成出舱活动", "神舟乘组航天员今天圆满完成第二次出舱活动，安装了舱外扩展泵组并开展了设备巡检。整个过程历时约七小时，地面与空间站密切协同。"),
    ("农村电商带动特产销售", "在县里的直播基地，返乡青年通过网络直播销售土蜂蜜、香菇和手工粉条。去年全县农产品网络销售额突破五亿元，带动数千户农民增收。"),
    ("围棋新秀夺得冠军", "在刚刚结束的全国围棋锦标赛上，年仅十七岁的小将连胜多位名将，最终夺得个人赛冠军。这是他职业生涯中获得的第一个全国性冠军头衔。"),
];

fn article(id: &str, title: &str, content: &str, url: &str) -> Input {
    Input {
        key: Some(id.to_owned()),
        value: serde_json::to_vec(
            &json!({"id": id, "title": title, "content": content, "url": url}),
        )
        .expect("json"),
        bad: None,
        id: Some(id.to_owned()),
    }
}

/// Originals `range`, then a repost (new id, HTML and an editor line around the same text) of
/// each of `reposts`, then the malformed records `bad`.
fn batch(
    range: std::ops::Range<usize>,
    reposts: std::ops::Range<usize>,
    bad: &[(Vec<u8>, &'static str)],
) -> Vec<Input> {
    let mut out = Vec::new();
    for i in range {
        let (title, content) = NEWS[i];
        let url = format!("https://news.example/{i}");
        out.push(article(&format!("news-{i}"), title, content, &url));
    }
    for i in reposts {
        let (title, content) = NEWS[i];
        let repost = format!("<p>{content}</p>\n责任编辑：王五");
        let url = format!("https://mirror.example/{i}");
        out.push(article(&format!("repost-{i}"), title, &repost, &url));
    }
    for (value, reason) in bad {
        out.push(Input {
            key: Some(format!("bad-{reason}")),
            value: value.clone(),
            bad: Some(reason),
            id: None,
        });
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Prometheus

/// The server binary: $NEWSDEDUP_PROMETHEUS, else Debian's /usr/bin/prometheus, else `prometheus`
/// on PATH.
fn prometheus_binary() -> PathBuf {
    if let Ok(p) = std::env::var("NEWSDEDUP_PROMETHEUS") {
        return PathBuf::from(p);
    }
    let debian = Path::new("/usr/bin/prometheus");
    if debian.exists() {
        return debian.to_owned();
    }
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join("prometheus"))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| {
            panic!(
                "the prometheus server is needed by this test and was not found (/usr/bin/prometheus \
                 or PATH): run scripts/check_prometheus.sh (installs Debian's prometheus) or set \
                 NEWSDEDUP_PROMETHEUS"
            )
        })
}

/// docker/prometheus.yml with the service's address as the target, a 1 s scrape and evaluation
/// interval, and the absolute path of docker/alerts.yml.
fn scrape_config(service_addr: &str) -> String {
    let shipped = std::fs::read_to_string(common::repo_file("docker/prometheus.yml"))
        .expect("read docker/prometheus.yml");
    let alerts = common::repo_file("docker/alerts.yml");
    let mut config = shipped.clone();
    for (from, to) in [
        ("newsdedup:9898", service_addr.to_owned()),
        ("scrape_interval: 15s", "scrape_interval: 1s".to_owned()),
        (
            "evaluation_interval: 15s",
            "evaluation_interval: 1s".to_owned(),
        ),
        ("- alerts.yml", format!("- {}", alerts.display())),
    ] {
        assert!(
            config.contains(from),
            "docker/prometheus.yml no longer contains {from:?}; adapt tests/broker/prometheus_scrape.rs"
        );
        config = config.replace(from, &to);
    }
    config
}

struct Prometheus {
    child: Child,
    addr: String,
    log: PathBuf,
}

impl Prometheus {
    fn start(dir: &Path, config: &str) -> Prometheus {
        let bin = prometheus_binary();
        let config_path = dir.join("prometheus.yml");
        std::fs::write(&config_path, config).expect("write prometheus.yml");
        let addr = format!("127.0.0.1:{}", free_port());
        let log = dir.join("prometheus.log");
        let child = Command::new(&bin)
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("prometheus-data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("prometheus log"))
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        let mut p = Prometheus { child, addr, log };
        let start = Instant::now();
        loop {
            if let Some(status) = p.child.try_wait().expect("try_wait") {
                panic!("prometheus exited at start ({status}); log:\n{}", p.log());
            }
            if matches!(p.get("/-/ready"), Some((200, _))) {
                return p;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "prometheus not ready within 30 s; log:\n{}",
                p.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// HTTP/1.0 GET (no chunked encoding): status and body.
    fn get(&self, target: &str) -> Option<(u16, String)> {
        let mut s = std::net::TcpStream::connect(&self.addr).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        write!(s, "GET {target} HTTP/1.0\r\nHost: {}\r\n\r\n", self.addr).ok()?;
        let mut buf = String::new();
        s.read_to_string(&mut buf).ok()?;
        let status = buf.split_whitespace().nth(1)?.parse().ok()?;
        let body = buf.split_once("\r\n\r\n")?.1.to_owned();
        Some((status, body))
    }

    /// `data` of a successful API answer; panics on an error answer (e.g. a bad expression).
    fn api(&self, target: &str) -> Value {
        let (status, body) = self
            .get(target)
            .unwrap_or_else(|| panic!("no answer from prometheus for {target}"));
        let v: Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("{target}: HTTP {status}, not JSON ({e}): {body}"));
        assert_eq!(v["status"], "success", "{target}: HTTP {status}: {body}");
        v["data"].clone()
    }

    /// Instant query: the result vector as (labels, value).
    fn query(&self, expr: &str) -> Vec<(Value, f64)> {
        let data = self.api(&format!("/api/v1/query?query={}", urlencode(expr)));
        assert_eq!(data["resultType"], "vector", "{expr}: {data}");
        data["result"]
            .as_array()
            .expect("result")
            .iter()
            .map(|r| {
                let v = r["value"][1].as_str().expect("sample value");
                (r["metric"].clone(), v.parse::<f64>().expect("number"))
            })
            .collect()
    }

    /// The single value of `expr`, if it has exactly one.
    fn value(&self, expr: &str) -> Option<f64> {
        match self.query(expr).as_slice() {
            [(_, v)] => Some(*v),
            _ => None,
        }
    }

    /// Polls until `expr` has one value satisfying `ok`; returns it, or panics after `limit`.
    fn wait_value(
        &self,
        expr: &str,
        ok: impl Fn(f64) -> bool,
        limit: Duration,
        service_log: &dyn Fn() -> String,
    ) -> f64 {
        let start = Instant::now();
        loop {
            let got = self.value(expr);
            if let Some(v) = got.filter(|v| ok(*v)) {
                return v;
            }
            assert!(
                start.elapsed() < limit,
                "prometheus: {expr} = {got:?} after {limit:?}\nprometheus log:\n{}\nservice log:\n{}",
                self.log(),
                service_log()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Metric names (`newsdedup_...`) in a text.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("newsdedup_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        names.insert(tail[..end].to_owned());
        rest = &tail[end..];
    }
    names
}

/// The PromQL expressions of the Grafana dashboard, with Grafana's `$__rate_interval` set.
fn dashboard_exprs() -> Vec<String> {
    let path = common::repo_file("docker/grafana/dashboards/newsdedup.json");
    let dash: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read dashboard"))
            .expect("dashboard JSON");
    dash["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .map(|t| {
            t["expr"]
                .as_str()
                .expect("expr")
                .replace("$__rate_interval", "1m")
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------

#[test]
fn prometheus_scrapes_the_service_and_loads_the_alert_rules() {
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    broker.create_service_topics(2);
    let b = broker.bootstrap.as_str();

    let index = dir.path().join("index");
    let service = start_service(
        b,
        &index,
        &dir.path().join("service.log"),
        &["--threads", "2", "--commit-interval-ms", "200"],
    );
    service.wait_http();
    let slog = || service.log();
    let prom = Prometheus::start(dir.path(), &scrape_config(&service.metrics));
    prom.wait_value(
        r#"up{job="newsdedup"}"#,
        |v| v == 1.0,
        Duration::from_secs(30),
        &slog,
    );

    // Two batches, so that the counters and the latency histogram grow between scrapes (a rate
    // needs two samples that differ).
    let bad: Vec<(Vec<u8>, &str)> = common::malformed_records().into_iter().take(4).collect();
    let first = batch(0..8, 0..4, &bad[..1]);
    let second = batch(8..16, 4..10, &bad[1..]);
    let total = (first.len() + second.len()) as f64;
    let reposts = 10.0;
    let consumed = r#"sum(newsdedup_articles_consumed_total{job="newsdedup"})"#;
    produce(b, "articles.raw", &first, None);
    prom.wait_value(
        consumed,
        |v| v == first.len() as f64,
        Duration::from_secs(90),
        &slog,
    );
    produce(b, "articles.raw", &second, None);
    prom.wait_value(consumed, |v| v == total, Duration::from_secs(90), &slog);
    // Every record's output acknowledged (the latency is observed then) and seen by Prometheus.
    prom.wait_value(
        r#"sum(newsdedup_processing_latency_seconds_count{job="newsdedup"})"#,
        |v| v == total,
        Duration::from_secs(60),
        &slog,
    );
    let processed_at = started.elapsed();

    // Decisions add up; every repost is a duplicate; the malformed records went to the DLQ.
    let sum = |name: &str| {
        prom.value(&format!("sum({name}{{job=\"newsdedup\"}})"))
            .unwrap_or_else(|| panic!("no {name} in prometheus"))
    };
    let unique = sum("newsdedup_articles_unique_total");
    let duplicate = sum("newsdedup_articles_duplicate_total");
    let invalid = sum("newsdedup_articles_invalid_total");
    assert_eq!(invalid, bad.len() as f64);
    assert!(duplicate >= reposts, "duplicates {duplicate} < {reposts}");
    assert!(unique >= 1.0, "unique {unique}");
    assert_eq!(unique + duplicate + invalid, total);
    assert_eq!(sum("newsdedup_records_delivered_total"), total);

    // Latency quantiles from the histogram buckets: over everything observed, and as a rate over
    // the run (the dashboard's form).
    for expr in [
        r#"histogram_quantile(0.5, sum by (le) (newsdedup_processing_latency_seconds_bucket{job="newsdedup"}))"#,
        r#"histogram_quantile(0.99, sum by (le) (rate(newsdedup_processing_latency_seconds_bucket{job="newsdedup"}[5m])))"#,
    ] {
        let q = prom
            .value(expr)
            .unwrap_or_else(|| panic!("{expr}: no value"));
        assert!(q.is_finite() && q > 0.0 && q <= 60.0, "{expr} = {q}");
        eprintln!("{expr} = {q}");
    }

    // The alert rules of docker/alerts.yml are loaded and evaluate without error.
    let alerts_text = std::fs::read_to_string(common::repo_file("docker/alerts.yml"))
        .expect("read docker/alerts.yml");
    let want_rules: BTreeSet<String> = alerts_text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert:"))
        .map(|n| n.trim().to_owned())
        .collect();
    assert!(want_rules.len() >= 8, "{want_rules:?}");
    let start = Instant::now();
    loop {
        let data = prom.api("/api/v1/rules");
        let rules: Vec<Value> = data["groups"]
            .as_array()
            .expect("groups")
            .iter()
            .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
            .collect();
        let names: BTreeSet<String> = rules
            .iter()
            .map(|r| r["name"].as_str().unwrap_or_default().to_owned())
            .collect();
        assert_eq!(names, want_rules, "rules loaded by prometheus");
        for r in &rules {
            assert!(
                r["health"] != "err",
                "rule {} fails: {}",
                r["name"],
                r["lastError"]
            );
        }
        if rules.iter().all(|r| r["health"] == "ok") {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "rules not all evaluated: {rules:?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    // Nothing is wrong, so nothing fires (a `for` of minutes keeps a DLQ share alert pending).
    let firing = prom.query(r#"ALERTS{alertstate="firing"}"#);
    assert!(firing.is_empty(), "alerts firing: {firing:?}");

    // Every metric name used by the rules and the dashboard is exported by the service (a renamed
    // metric would silently disable an alert or empty a panel).
    let exprs = dashboard_exprs();
    let mut used = metric_names(&alerts_text);
    for e in &exprs {
        used.extend(metric_names(e));
    }
    // The consumer lag comes from librdkafka statistics (every 5 s).
    prom.wait_value(
        r#"count(newsdedup_consumer_lag{job="newsdedup"})"#,
        |v| v >= 1.0,
        Duration::from_secs(30),
        &slog,
    );
    for name in &used {
        // A histogram's own name (in the rules' descriptions) has only _bucket/_sum/_count series.
        let exported = [name.clone(), format!("{name}_count")].iter().any(|n| {
            prom.value(&format!("count({{__name__=\"{n}\", job=\"newsdedup\"}})"))
                .is_some_and(|c| c >= 1.0)
        });
        assert!(
            exported,
            "{name} (used in docker/alerts.yml or the dashboard) is not exported by the service"
        );
    }
    // Every dashboard query is valid PromQL (an error answer panics in `query`).
    for e in &exprs {
        prom.query(e);
    }
    eprintln!(
        "{} records processed and scraped after {processed_at:?}; whole test {:?}; {} metric names and {} dashboard queries checked",
        total,
        started.elapsed(),
        used.len(),
        exprs.len()
    );
}
