//! The report as one self-contained HTML page: inline CSS and SVG, no script, no external
//! resource of any kind. Every text that comes from a record (ids, titles, contents, sources,
//! urls) is escaped, in text and in attributes alike; urls are shown as text, never as links.

use super::collect::{Reason, SampleKind};
use super::escape::{escape, push_escaped};
use super::report::{Pair, Report, Side, CONTAINMENT_BINS};
use super::svg::{self, Bar, Row};
use crate::time::format_utc;
use std::fmt::Write;
use std::ops::Range;

const STYLE: &str = r#"
:root { --ink: #1d2733; --muted: #5f6b7a; --line: #dde3ea; --bg: #f6f8fa; --dup: #2b64a8;
  --far: #93b7e3; --uniq: #c9d1db; --warn: #c62828; --mark: #fff0a8; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--ink); background: var(--bg); font: 15px/1.5 "Noto Sans CJK SC",
  "Source Han Sans SC", "PingFang SC", "Microsoft YaHei", "WenQuanYi Zen Hei", system-ui, sans-serif; }
main { max-width: 1240px; margin: 0 auto; padding: 20px 24px 60px; }
h1 { font-size: 26px; margin: 0 0 2px; }
h2 { font-size: 19px; margin: 0 0 12px; }
h3 { font-size: 14px; margin: 0 0 6px; text-transform: uppercase; letter-spacing: .06em; color: var(--muted); }
section { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 16px 20px; margin: 16px 0; }
.sub { color: var(--muted); margin: 0 0 12px; }
dl.scope { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 0; font-size: 14px; }
dl.scope dt { color: var(--muted); }
dl.scope dd { margin: 0; overflow-wrap: anywhere; }
nav { font-size: 14px; margin: 8px 0 0; }
nav a { margin-right: 14px; color: #1d4ed8; text-decoration: none; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin-bottom: 14px; }
.card { flex: 1 1 160px; border: 1px solid var(--line); border-radius: 8px; padding: 10px 14px; }
.card .n { font-size: 26px; font-weight: 700; }
.card .l { color: var(--muted); font-size: 13px; }
.card.warn .n { color: var(--warn); }
table { border-collapse: collapse; font-size: 14px; }
th, td { text-align: left; padding: 4px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
table.totals { min-width: 420px; }
.charts { display: flex; flex-wrap: wrap; gap: 18px; }
figure { margin: 0; }
figcaption { font-size: 13px; color: var(--muted); margin-top: 4px; max-width: 560px; }
svg.chart { display: block; font-size: 11px; max-width: 100%; height: auto; }
svg .grid { stroke: #eef1f4; } svg .axis { stroke: #8a96a3; }
svg .tick { fill: var(--muted); } svg .axis-title { fill: var(--ink); font-size: 12px; }
svg .s0 { fill: var(--dup); } svg .s1 { fill: var(--uniq); } svg .s2 { fill: var(--warn); }
svg .s3 { fill: var(--far); }
.legend { font-size: 13px; color: var(--muted); }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin: 0 4px 0 10px; }
.badge { display: inline-block; font-size: 12px; padding: 1px 8px; border-radius: 10px; margin-right: 6px;
  background: #e8edf2; color: var(--ink); white-space: nowrap; }
.badge.bad { background: #fee2e2; color: var(--warn); font-weight: 600; }
.pair { border-left: 5px solid var(--uniq); }
.pair.suspicious { border-left-color: var(--warn); }
.pair-head { display: flex; flex-wrap: wrap; align-items: flex-start; gap: 8px 24px; margin-bottom: 10px; }
.pair-head .rank { font-size: 20px; font-weight: 700; }
.numbers td, .numbers th { padding: 2px 8px; }
.shared { font-size: 13px; color: var(--muted); }
.sides { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; }
.side { min-width: 0; border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px; }
.side .title { font-weight: 700; font-size: 16px; margin: 0 0 6px; overflow-wrap: anywhere; }
.side dl { display: grid; grid-template-columns: max-content 1fr; gap: 0 10px; margin: 0 0 8px; font-size: 12px; }
.side dt { color: var(--muted); } .side dd { margin: 0; overflow-wrap: anywhere; }
.side .warn { color: var(--warn); font-weight: 600; }
.text { white-space: pre-wrap; overflow-wrap: anywhere; line-height: 1.75; font-size: 14px; max-height: 26em;
  overflow: auto; border-top: 1px solid var(--line); padding-top: 6px; }
mark { background: var(--mark); color: inherit; padding: 0 1px; border-radius: 2px; }
.missing { color: var(--warn); font-style: italic; }
.notes { font-size: 13px; color: var(--warn); margin: 8px 0 0; padding-left: 18px; }
.more { color: var(--muted); font-style: italic; }
.muted { color: var(--muted); }
.commands-label { font-size: 13px; margin: 10px 0 2px; }
pre.commands { margin: 0; padding: 6px 10px; background: var(--bg); border: 1px solid var(--line);
  border-radius: 6px; font-size: 13px; white-space: pre-wrap; overflow-wrap: anywhere; }
table.corrections td.reason { overflow-wrap: anywhere; max-width: 420px; }
@media (max-width: 820px) { .sides { grid-template-columns: 1fr; } }
"#;

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

fn ratio(n: u64, d: u64) -> String {
    if d == 0 {
        "–".into()
    } else {
        pct(n as f64 / d as f64)
    }
}

fn opt_num(x: Option<f64>) -> String {
    x.map_or_else(|| "–".into(), |v| format!("{v:.3}"))
}

/// `text` with the character ranges `spans` wrapped in `<mark>`, cut to `max_chars`.
fn marked_text(text: &str, spans: &[Range<usize>], max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len() + spans.len() * 13);
    let mut spans = spans.iter().peekable();
    let mut open = false;
    let mut shown = 0;
    for (i, c) in text.chars().enumerate() {
        if i >= max_chars {
            break;
        }
        while spans.peek().is_some_and(|r| r.end <= i) {
            spans.next();
        }
        let inside = spans.peek().is_some_and(|r| r.start <= i);
        if inside != open {
            out.push_str(if inside { "<mark>" } else { "</mark>" });
            open = inside;
        }
        push_escaped(&mut out, c);
        shown += 1;
    }
    if open {
        out.push_str("</mark>");
    }
    let total = text.chars().count();
    if total > shown {
        let _ = write!(
            out,
            "<span class=\"more\"> … ({} more characters)</span>",
            total - shown
        );
    }
    out
}

/// The whole page.
pub fn render(r: &Report) -> String {
    let mut h = String::with_capacity(64 * 1024 + r.pairs.len() * 16 * 1024);
    let title = r
        .header
        .scope
        .first()
        .map(|(_, v)| v.as_str())
        .unwrap_or("");
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"zh-CN\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<meta name=\"generator\" content=\"newsdedup audit\">\n<title>Duplicate audit – {}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<main>\n",
        escape(title)
    );
    header(&mut h, r);
    totals(&mut h, r);
    distributions(&mut h, r);
    sources(&mut h, r);
    over_time(&mut h, r);
    suspicious(&mut h, r);
    corrections(&mut h, r);
    pairs(&mut h, r);
    h.push_str("</main>\n</body>\n</html>\n");
    h
}

fn header(h: &mut String, r: &Report) {
    let _ = write!(
        h,
        "<header>\n<h1>Duplicate audit</h1>\n<p class=\"sub\">newsdedup · generated {}</p>\n<dl class=\"scope\">",
        escape(&format_utc(r.header.generated_ms))
    );
    for (k, v) in &r.header.scope {
        let _ = write!(h, "<dt>{}</dt><dd>{}</dd>", escape(k), escape(v));
    }
    let rule = &r.rule;
    let mut text = format!("duplicate within simhash distance {}", rule.threshold);
    if rule.confirm_min_containment > 0.0 {
        let _ = write!(text, " with containment ≥ {}", rule.confirm_min_containment);
    }
    if rule.sketch_search || rule.rescue_distance > rule.threshold {
        let _ = write!(
            text,
            "; beyond it{} when the share of its text found in the original is ≥ {} with Jaccard ≥ {} (resemblance) or ≥ {} with Jaccard ≥ {} (containment)",
            if rule.sketch_search {
                " (candidates found through the content sketch)".to_owned()
            } else {
                format!(" up to distance {}", rule.rescue_distance)
            },
            rule.rescue_min_containment,
            rule.rescue_min_jaccard,
            rule.excerpt_min_containment,
            rule.excerpt_min_jaccard
        );
        if rule.near_distance > rule.threshold {
            let _ = write!(
                text,
                ", or within distance {} ≥ {} with Jaccard ≥ {} (resemblance)",
                rule.near_distance, rule.near_min_containment, rule.near_min_jaccard
            );
        }
        if rule.extension_min_contained > 0.0 {
            let _ = write!(
                text,
                ", or when ≥ {} of the original's text is in it and the original is ≥ {:.0}% of its length (extension)",
                rule.extension_min_contained,
                100.0 * rule.extension_min_share
            );
            if rule.extension_min_coherence > 0.0 {
                let _ = write!(
                    text,
                    ", or a smaller part of its length when the text it adds repeats ≥ {:.0}% of the heavy words of the original's part (extension, topic check)",
                    100.0 * rule.extension_min_coherence
                );
            }
        }
    }
    let relations: Vec<&str> = rule
        .duplicate_relations
        .iter()
        .map(|r| r.as_str())
        .collect();
    let _ = write!(
        text,
        "; relations counted as duplicates: {}",
        relations.join(", ")
    );
    let _ = write!(h, "<dt>rule</dt><dd>{}</dd>", escape(&text));
    let o = &r.options;
    let _ = writeln!(
        h,
        "<dt>pairs shown</dt><dd>every suspicious pair first (at most {}), then {} drawn at random from the others (seed {})</dd><dt>suspicious</dt><dd>containment below {}, original published later, or original missing</dd></dl>",
        o.max_suspicious_pairs, o.sample, o.seed, o.low_containment
    );
    let _ = write!(
        h,
        "<nav><a href=\"#totals\">Totals</a><a href=\"#distributions\">Distance and containment</a><a href=\"#sources\">Sources</a><a href=\"#time\">Over time</a><a href=\"#suspicious\">Suspicious ({})</a><a href=\"#corrections\">Corrections ({})</a><a href=\"#pairs\">Pairs ({})</a></nav>\n</header>\n",
        r.suspicious.len(),
        r.corrections.len(),
        r.pairs.len()
    );
}

fn totals(h: &mut String, r: &Report) {
    let c = &r.counts;
    let decided = c.unique + c.duplicate;
    h.push_str("<section id=\"totals\">\n<h2>Totals</h2>\n<div class=\"cards\">");
    let cards = [
        (
            "duplicates",
            c.duplicate.to_string(),
            "duplicates".to_owned(),
            false,
        ),
        (
            "rate",
            pct(r.duplicate_rate()),
            format!("duplicate rate (of {decided} decided)"),
            false,
        ),
        (
            "suspicious",
            r.suspicious.len().to_string(),
            format!(
                "look wrong ({} of duplicates)",
                ratio(r.suspicious.len() as u64, c.duplicate)
            ),
            !r.suspicious.is_empty(),
        ),
        (
            "pairs",
            r.pairs.len().to_string(),
            "pairs shown side by side".to_owned(),
            false,
        ),
    ];
    for (key, n, label, warn) in cards {
        let _ = write!(
            h,
            "<div class=\"card{}\" data-card=\"{key}\"><div class=\"n\">{}</div><div class=\"l\">{}</div></div>",
            if warn { " warn" } else { "" },
            escape(&n),
            escape(&label)
        );
    }
    h.push_str("</div>\n<table class=\"totals\">\n");
    let mut row = |key: &str, label: &str, value: String, note: String| {
        let _ = writeln!(
            h,
            "<tr data-key=\"{key}\"><th>{}</th><td class=\"num\">{}</td><td class=\"muted\">{}</td></tr>",
            escape(label),
            escape(&value),
            escape(&note)
        );
    };
    row(
        "records",
        "records read",
        c.records.to_string(),
        String::new(),
    );
    row(
        "unique",
        "unique",
        c.unique.to_string(),
        ratio(c.unique, decided),
    );
    row(
        "duplicate",
        "duplicates",
        c.duplicate.to_string(),
        ratio(c.duplicate, decided),
    );
    row("invalid", "invalid", c.invalid.to_string(), String::new());
    row(
        "bad",
        "not readable (skipped)",
        c.bad.to_string(),
        String::new(),
    );
    row(
        "repeated",
        "repeats of an id already read",
        c.repeated.to_string(),
        "counted once".into(),
    );
    row(
        "originals_found",
        "originals found",
        r.originals_found.to_string(),
        ratio(r.originals_found, c.duplicate),
    );
    row(
        "originals_missing",
        "originals missing",
        r.originals_missing.to_string(),
        ratio(r.originals_missing, c.duplicate),
    );
    row(
        "suspicious",
        "suspicious pairs",
        r.suspicious.len().to_string(),
        ratio(r.suspicious.len() as u64, c.duplicate),
    );
    for (reason, n) in &r.reason_counts {
        row(
            reason.as_str(),
            &format!("· {}", reason.label()),
            n.to_string(),
            ratio(*n, c.duplicate),
        );
    }
    row(
        "pairs",
        "pairs shown",
        r.pairs.len().to_string(),
        String::new(),
    );
    h.push_str("</table>\n");
    if !r.bad_examples.is_empty() {
        let _ = write!(
            h,
            "<details><summary>{} unreadable record(s){}</summary><ul>",
            c.bad,
            if (c.bad as usize) > r.bad_examples.len() {
                ", the first ones:"
            } else {
                ":"
            }
        );
        for e in &r.bad_examples {
            let _ = write!(h, "<li>{}</li>", escape(e));
        }
        h.push_str("</ul></details>\n");
    }
    h.push_str("</section>\n");
}

fn legend(items: &[(&str, &str)]) -> String {
    let mut s = String::from("<div class=\"legend\">");
    for (var, label) in items {
        let _ = write!(
            s,
            "<span class=\"swatch\" style=\"background: var({var})\"></span>{}",
            escape(label)
        );
    }
    s.push_str("</div>");
    s
}

fn distributions(h: &mut String, r: &Report) {
    h.push_str("<section id=\"distributions\">\n<h2>Distance and containment of the decisions</h2>\n<div class=\"charts\">");
    let threshold = r.rule.threshold as usize;
    let bars: Vec<Bar> = r
        .distance
        .iter()
        .enumerate()
        .map(|(d, n)| Bar {
            label: d.to_string(),
            values: if d > threshold { vec![0, *n] } else { vec![*n] },
            tooltip: format!("distance {d}: {n} duplicate(s)"),
        })
        .collect();
    let _ = write!(
        h,
        "<figure>{}<figcaption>Simhash Hamming distance to the matched original. Beyond the threshold ({threshold}, light) a duplicate was accepted on a strong containment.</figcaption></figure>",
        svg::bars(&bars, &["s0", "s3"], "simhash distance", 560, 220)
    );
    let low = r.options.low_containment;
    let bars: Vec<Bar> = (0..CONTAINMENT_BINS)
        .map(|i| {
            let from = i as f64 / CONTAINMENT_BINS as f64;
            let n = r.containment[i];
            Bar {
                label: format!("{from:.2}"),
                values: if from + 1e-9 < low {
                    vec![0, n]
                } else {
                    vec![n]
                },
                tooltip: format!(
                    "containment {from:.2}–{:.2}: {n} duplicate(s)",
                    from + 1.0 / CONTAINMENT_BINS as f64
                ),
            }
        })
        .collect();
    let _ = write!(
        h,
        "<figure>{}<figcaption>Estimated share of the shorter text's 4-grams found in the other. Below {low} (red) the pair is suspicious.{}</figcaption></figure>",
        svg::bars(&bars, &["s0", "s2"], "containment", 560, 220),
        if r.containment_none > 0 {
            format!(" {} duplicate(s) have no containment (a side without text to sketch).", r.containment_none)
        } else {
            String::new()
        }
    );
    h.push_str("</div>\n</section>\n");
}

/// Sources shown in the chart; the rest are summed in one row.
const TOP_SOURCES: usize = 20;

fn sources(h: &mut String, r: &Report) {
    h.push_str("<section id=\"sources\">\n<h2>Duplicates by source</h2>\n");
    if r.by_source.is_empty() {
        h.push_str("<p class=\"muted\">No records.</p>\n</section>\n");
        return;
    }
    let row = |label: String, dups: u64, unique: u64| Row {
        label,
        value: dups,
        note: format!("{dups} · {} duplicates", ratio(dups, dups + unique)),
    };
    let mut rows: Vec<Row> = r
        .by_source
        .iter()
        .take(TOP_SOURCES)
        .map(|s| {
            row(
                s.source.clone().unwrap_or_else(|| "(no source)".into()),
                s.duplicates,
                s.unique,
            )
        })
        .collect();
    if r.by_source.len() > TOP_SOURCES {
        let rest = &r.by_source[TOP_SOURCES..];
        rows.push(row(
            format!("{} other sources", rest.len()),
            rest.iter().map(|s| s.duplicates).sum(),
            rest.iter().map(|s| s.unique).sum(),
        ));
    }
    let _ = write!(
        h,
        "<figure>{}<figcaption>Duplicates per source, and the share of the source's decided articles that are duplicates.</figcaption></figure>\n</section>\n",
        svg::rows(&rows, "s0", 900)
    );
}

fn over_time(h: &mut String, r: &Report) {
    h.push_str("<section id=\"time\">\n<h2>Over time</h2>\n");
    let Some(t) = &r.over_time else {
        h.push_str("<p class=\"muted\">No record has a usable time (record timestamp or <code>published_at</code>).</p>\n</section>\n");
        return;
    };
    let bars: Vec<Bar> = t
        .rows
        .iter()
        .map(|&(start, dups, unique)| Bar {
            label: t.bucket.label(start),
            values: vec![dups, unique],
            tooltip: format!(
                "{}: {dups} duplicate(s), {unique} unique ({} duplicates)",
                t.bucket.label(start),
                ratio(dups, dups + unique)
            ),
        })
        .collect();
    let basis = if t.record_timestamps {
        "record timestamp"
    } else {
        "published_at"
    };
    let mut caption = format!("Articles per {} by {basis}.", t.bucket.name());
    if t.untimed != (0, 0) {
        let _ = write!(
            caption,
            " Without a usable time: {} duplicate(s), {} unique.",
            t.untimed.0, t.untimed.1
        );
    }
    if t.outside != (0, 0) {
        let _ = write!(
            caption,
            " Outside the chart (earliest and latest 1%): {} duplicate(s), {} unique.",
            t.outside.0, t.outside.1
        );
    }
    let _ = write!(
        h,
        "<figure>{}{}<figcaption>{}</figcaption></figure>\n</section>\n",
        legend(&[("--dup", "duplicates"), ("--uniq", "unique")]),
        svg::bars(&bars, &["s0", "s1"], basis, 1140, 240),
        escape(&caption)
    );
}

/// Rows of the list of suspicious pairs (all are counted).
const MAX_SUSPICIOUS_ROWS: usize = 5000;

fn reason_badges(reasons: &[Reason]) -> String {
    reasons
        .iter()
        .map(|r| format!("<span class=\"badge bad\">{}</span>", escape(r.label())))
        .collect()
}

fn suspicious(h: &mut String, r: &Report) {
    let _ = write!(
        h,
        "<section id=\"suspicious\">\n<h2>Suspicious pairs ({})</h2>\n",
        r.suspicious.len()
    );
    if r.suspicious.is_empty() {
        h.push_str("<p class=\"muted\">None: every duplicate has a containment of at least the limit, an original that was found and not published after it.</p>\n</section>\n");
        return;
    }
    h.push_str("<table class=\"suspicious\">\n<tr><th>pair</th><th>why</th><th>duplicate</th><th>original</th><th class=\"num\">distance</th><th class=\"num\">containment</th></tr>\n");
    for s in r.suspicious.iter().take(MAX_SUSPICIOUS_ROWS) {
        let link = s.shown_as.map_or_else(
            || "–".to_owned(),
            |n| format!("<a href=\"#pair-{n}\">#{n}</a>"),
        );
        let _ = writeln!(
            h,
            "<tr data-duplicate=\"{}\"><td>{link}</td><td>{}</td><td>{}<br><span class=\"muted\">{}</span></td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            escape(&s.id),
            reason_badges(&s.reasons),
            escape(&s.title),
            escape(&s.id),
            escape(&s.match_id),
            s.distance,
            opt_num(s.containment)
        );
    }
    h.push_str("</table>\n");
    if r.suspicious.len() > MAX_SUSPICIOUS_ROWS {
        let _ = writeln!(
            h,
            "<p class=\"more\">and {} more.</p>",
            r.suspicious.len() - MAX_SUSPICIOUS_ROWS
        );
    }
    h.push_str("</section>\n");
}

fn corrections(h: &mut String, r: &Report) {
    let _ = write!(
        h,
        "<section id=\"corrections\">\n<h2>Corrections ({})</h2>\n",
        r.corrections.len()
    );
    if r.corrections.is_empty() {
        h.push_str("<p class=\"muted\">None in this range.</p>\n</section>\n");
        return;
    }
    h.push_str("<p class=\"muted\">Decisions editors corrected (<code>newsdedup correct</code>), by the time they were made.</p>\n<table class=\"corrections\">\n<tr><th>when</th><th>correction</th><th>article</th><th>into</th><th>was</th><th>by</th><th>reason</th></tr>\n");
    for c in &r.corrections {
        let was = match &c.previous_match {
            Some(m) => format!("{} of {m}", c.previous_decision),
            None => c.previous_decision.clone(),
        };
        let _ = writeln!(
            h,
            "<tr data-kind=\"{}\" data-id=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"reason\">{}</td></tr>",
            c.kind.as_str(),
            escape(&c.id),
            escape(&c.at),
            c.kind.as_str(),
            escape(&c.id),
            escape(c.into.as_deref().unwrap_or("–")),
            escape(&was),
            escape(c.by.as_deref().unwrap_or("–")),
            escape(c.reason.as_deref().unwrap_or("–"))
        );
    }
    h.push_str("</table>\n</section>\n");
}

fn pairs(h: &mut String, r: &Report) {
    let _ = write!(
        h,
        "<section id=\"pairs\">\n<h2>Pairs side by side ({})</h2>\n<p class=\"muted\">Shared passages (runs of {}+ letters or digits found in the other text) are <mark>highlighted</mark>. The decision's numbers are those recorded in <code>dedup.match</code>; the recomputed ones come from both texts by the code of <code>newsdedup compare</code>.</p>\n</section>\n",
        r.pairs.len(),
        r.pairs.first().and_then(|p| p.shared.as_ref()).map_or(super::highlight::CJK_NGRAM, |s| s.n)
    );
    for p in &r.pairs {
        pair(h, p, r.options.max_text_chars);
    }
}

fn pair(h: &mut String, p: &Pair, max_chars: usize) {
    let reasons: Vec<&str> = p.reasons.iter().map(|r| r.as_str()).collect();
    let suspicious = p.sample == SampleKind::Suspicious;
    let _ = write!(
        h,
        "<section class=\"pair{}\" id=\"pair-{}\" data-rank=\"{}\" data-sample=\"{}\" data-duplicate=\"{}\" data-original=\"{}\" data-reasons=\"{}\">\n<div class=\"pair-head\"><div><span class=\"rank\">#{}</span> {}</div>",
        if suspicious { " suspicious" } else { "" },
        p.rank,
        p.rank,
        if suspicious { "suspicious" } else { "random" },
        escape(&p.duplicate.id),
        escape(&p.decision.match_id),
        reasons.join(" "),
        p.rank,
        if suspicious { reason_badges(&p.reasons) } else { "<span class=\"badge\">random sample</span>".into() }
    );
    let d = &p.decision;
    let _ = write!(
        h,
        "<table class=\"numbers\"><tr><th></th><th class=\"num\">distance</th><th class=\"num\">containment</th><th class=\"num\">jaccard</th><th>verdict</th><th>relation</th></tr><tr><th>decision</th><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">–</td><td>duplicate</td><td>{}</td></tr>",
        d.distance,
        opt_num(d.containment),
        escape(d.relation.as_deref().unwrap_or("–"))
    );
    match &p.recomputed {
        Some(c) => {
            let _ = write!(
                h,
                "<tr><th>recomputed</th><td class=\"num\">{}</td><td class=\"num\">{:.3}</td><td class=\"num\">{:.3}</td><td>{}</td><td>{}</td></tr><tr><th>why</th><td colspan=\"5\" class=\"muted\">{}</td></tr>",
                c.distance, c.containment, c.jaccard, c.verdict, c.relation, escape(&c.why)
            );
        }
        None => {
            let _ = write!(
                h,
                "<tr><th>recomputed</th><td colspan=\"5\" class=\"muted\">{}</td></tr>",
                if p.original.is_none() {
                    "needs the original's text"
                } else {
                    "not possible (see below)"
                }
            );
        }
    }
    h.push_str("</table>");
    if let Some(s) = &p.shared {
        let _ = write!(
            h,
            "<div class=\"shared\">shared passages: {} of the duplicate's text, {} of the original's<br>{} passage(s)</div>",
            pct(s.share_a),
            pct(s.share_b),
            s.spans_a.len()
        );
    }
    h.push_str("</div>\n<div class=\"sides\">");
    let later = p.reasons.contains(&Reason::PublishedLater);
    side(
        h,
        "Duplicate",
        Some(&p.duplicate),
        p.shared.as_ref().map(|s| &s.spans_a[..]),
        later,
        max_chars,
        p,
    );
    side(
        h,
        "Original",
        p.original.as_ref(),
        p.shared.as_ref().map(|s| &s.spans_b[..]),
        later,
        max_chars,
        p,
    );
    h.push_str("</div>\n");
    if !p.commands.is_empty() {
        h.push_str(
            "<p class=\"commands-label muted\">To correct it:</p><pre class=\"commands\"><code>",
        );
        h.push_str(&escape(&p.commands.join("\n")));
        h.push_str("</code></pre>\n");
    }
    if !p.notes.is_empty() {
        h.push_str("<ul class=\"notes\">");
        for n in &p.notes {
            let _ = write!(h, "<li>{}</li>", escape(n));
        }
        h.push_str("</ul>\n");
    }
    h.push_str("</section>\n");
}

fn side(
    h: &mut String,
    heading: &str,
    s: Option<&Side>,
    spans: Option<&[Range<usize>]>,
    later: bool,
    max_chars: usize,
    p: &Pair,
) {
    let _ = write!(h, "<div class=\"side\"><h3>{heading}</h3>");
    let Some(s) = s else {
        let d = &p.decision;
        let _ = write!(
            h,
            "<p class=\"title\">{}</p><dl><dt>id</dt><dd>{}</dd>{}{}</dl><p class=\"missing\">Not found among the unique records read: only the decision's record of it is known.</p></div>",
            escape(d.match_title.as_deref().unwrap_or("")),
            escape(&d.match_id),
            d.match_url.as_deref().map_or_else(String::new, |u| format!("<dt>url</dt><dd>{}</dd>", escape(u))),
            d.match_fingerprint.as_deref().map_or_else(String::new, |f| format!("<dt>fingerprint</dt><dd>{}</dd>", escape(f))),
        );
        return;
    };
    let _ = write!(h, "<p class=\"title\">{}</p><dl>", escape(&s.title));
    let mut meta = |k: &str, v: Option<&str>, warn: bool| {
        if let Some(v) = v {
            let _ = write!(
                h,
                "<dt>{k}</dt><dd{}>{}</dd>",
                if warn { " class=\"warn\"" } else { "" },
                escape(v)
            );
        }
    };
    meta("id", Some(&s.id), false);
    meta("source", s.source.as_deref(), false);
    meta("published", s.published_at.as_deref(), later);
    meta("url", s.url.as_deref(), false);
    meta("fingerprint", s.fingerprint.as_deref(), false);
    meta("record", Some(&s.location), false);
    h.push_str("</dl><div class=\"text\">");
    h.push_str(&marked_text(&s.content, spans.unwrap_or(&[]), max_chars));
    h.push_str("</div></div>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_spans_escaped_and_cut() {
        assert_eq!(
            marked_text("ab<cd>ef", std::slice::from_ref(&(1..4)), 100),
            "a<mark>b&lt;c</mark>d&gt;ef"
        );
        assert_eq!(
            marked_text("abcdef", &[0..2, 4..6], 100),
            "<mark>ab</mark>cd<mark>ef</mark>"
        );
        assert_eq!(
            marked_text("abcdef", std::slice::from_ref(&(2..6)), 4),
            "ab<mark>cd</mark><span class=\"more\"> … (2 more characters)</span>"
        );
    }
}
