//! Inline SVG charts for the report: vertical (optionally stacked) bars and labelled horizontal
//! bars. Plain strings, every text escaped; colours come from the page's CSS classes.

use super::escape::escape;
use std::fmt::Write;

/// One vertical bar: its label, the stacked values (bottom first) and a tooltip.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub label: String,
    pub values: Vec<u64>,
    pub tooltip: String,
}

/// Vertical bar chart, `width` × `height` pixels. `classes[i]` is the CSS class of the i-th
/// stacked value.
pub fn bars(bars: &[Bar], classes: &[&str], x_title: &str, width: u32, height: u32) -> String {
    let (left, right, top, bottom) = (44.0, 8.0, 10.0, 38.0);
    let (w, h) = (f64::from(width), f64::from(height));
    let (plot_w, plot_h) = (w - left - right, h - top - bottom);
    let max = bars
        .iter()
        .map(|b| b.values.iter().sum::<u64>())
        .max()
        .unwrap_or(0);
    let (step, top_value) = ticks(max);
    let scale = |v: f64| plot_h * v / top_value as f64;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{}">"#,
        escape(x_title)
    );
    // Grid and y labels.
    let mut v = 0;
    while v <= top_value {
        let y = top + plot_h - scale(v as f64);
        let _ = write!(
            s,
            r#"<line class="grid" x1="{left}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}"/><text class="tick" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            w - right,
            left - 4.0,
            y + 4.0,
            short_number(v)
        );
        v += step;
    }
    let n = bars.len().max(1) as f64;
    let slot = plot_w / n;
    let bar_w = (slot * 0.8).clamp(1.0, 48.0);
    // Label every k-th bar so that labels do not overlap (~6.5 px per character).
    let longest = bars
        .iter()
        .map(|b| b.label.chars().count())
        .max()
        .unwrap_or(1) as f64;
    let every = ((longest * 6.5 + 6.0) / slot).ceil().max(1.0) as usize;
    for (i, b) in bars.iter().enumerate() {
        let x = left + slot * i as f64 + (slot - bar_w) / 2.0;
        let mut base = 0u64;
        s.push_str("<g>");
        let _ = write!(s, "<title>{}</title>", escape(&b.tooltip));
        for (j, value) in b.values.iter().enumerate() {
            if *value == 0 {
                continue;
            }
            let y0 = top + plot_h - scale((base + value) as f64);
            let bh = scale(*value as f64);
            let class = classes.get(j).copied().unwrap_or("s0");
            let _ = write!(
                s,
                r#"<rect class="{}" x="{x:.1}" y="{y0:.1}" width="{bar_w:.1}" height="{bh:.1}"/>"#,
                escape(class)
            );
            base += value;
        }
        s.push_str("</g>");
        if i % every == 0 {
            let _ = write!(
                s,
                r#"<text class="tick" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                x + bar_w / 2.0,
                top + plot_h + 14.0,
                escape(&b.label)
            );
        }
    }
    let _ = write!(
        s,
        r#"<line class="axis" x1="{left}" x2="{:.1}" y1="{:.1}" y2="{:.1}"/><text class="axis-title" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text></svg>"#,
        w - right,
        top + plot_h,
        top + plot_h,
        left + plot_w / 2.0,
        h - 4.0,
        escape(x_title)
    );
    s
}

/// One horizontal bar: label, value, and the text written after the bar.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub label: String,
    pub value: u64,
    pub note: String,
}

/// Horizontal bars, one row each, `width` pixels wide.
pub fn rows(rows: &[Row], class: &str, width: u32) -> String {
    let (label_w, note_w, row_h, top) = (190.0, 150.0, 22.0, 4.0);
    let w = f64::from(width);
    let plot_w = (w - label_w - note_w).max(40.0);
    let height = (top * 2.0 + row_h * rows.len() as f64).ceil() as u32;
    let max = rows.iter().map(|r| r.value).max().unwrap_or(0).max(1) as f64;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">"#
    );
    for (i, r) in rows.iter().enumerate() {
        let y = top + row_h * i as f64;
        let bw = (plot_w * r.value as f64 / max).max(if r.value > 0 { 1.0 } else { 0.0 });
        let label: String = if r.label.chars().count() > 26 {
            r.label.chars().take(25).chain(['…']).collect()
        } else {
            r.label.clone()
        };
        let _ = write!(
            s,
            r#"<g><title>{}: {}</title><text class="tick" x="{:.1}" y="{:.1}" text-anchor="end">{}</text><rect class="{}" x="{label_w}" y="{:.1}" width="{bw:.1}" height="{:.1}"/><text class="tick" x="{:.1}" y="{:.1}">{}</text></g>"#,
            escape(&r.label),
            escape(&r.note),
            label_w - 6.0,
            y + 15.0,
            escape(&label),
            escape(class),
            y + 4.0,
            row_h - 8.0,
            label_w + bw + 6.0,
            y + 15.0,
            escape(&r.note)
        );
    }
    s.push_str("</svg>");
    s
}

/// Grid step and top of the axis for values up to `max`: a 1-2-5 step, at most ~5 lines.
fn ticks(max: u64) -> (u64, u64) {
    if max == 0 {
        return (1, 1);
    }
    let mut magnitude = 1u64;
    loop {
        for m in [1, 2, 5] {
            let step = m * magnitude;
            if max.div_ceil(step) <= 5 {
                return (step, max.div_ceil(step) * step);
            }
        }
        magnitude = magnitude.saturating_mul(10);
    }
}

/// 1234 -> `1234`, 12345 -> `12k`, 1234567 -> `1.2M`.
fn short_number(v: u64) -> String {
    match v {
        0..=9_999 => v.to_string(),
        10_000..=999_999 => format!("{}k", v / 1000),
        _ => format!("{:.1}M", v as f64 / 1e6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(ticks(0), (1, 1));
        assert_eq!(ticks(3), (1, 3));
        assert_eq!(ticks(7), (2, 8));
        assert_eq!(ticks(23), (5, 25));
        assert_eq!(ticks(480), (100, 500));
        assert_eq!(ticks(10_001), (5000, 15_000));
    }

    #[test]
    fn charts_escape_their_text() {
        let svg = bars(
            &[Bar {
                label: "<b>".into(),
                values: vec![3, 1],
                tooltip: "a&b".into(),
            }],
            &["s0", "s1"],
            "x\"y",
            300,
            150,
        );
        assert!(svg.contains("&lt;b&gt;") && svg.contains("a&amp;b") && svg.contains("x&quot;y"));
        assert!(!svg.contains("<b>"));
        let svg = rows(
            &[Row {
                label: "<script>".into(),
                value: 2,
                note: "2".into(),
            }],
            "s0",
            500,
        );
        assert!(svg.contains("&lt;script&gt;") && !svg.contains("<script>"));
    }
}
