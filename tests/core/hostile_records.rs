//! A bounded fuzz of the article parser, the cleaner and the fingerprint: records built at random
//! (a fixed seed, so a failure is reproduced by its case number) from the fragments hostile
//! records are made of — markup openers without closers, entities, escapes of lone surrogates,
//! NULs, deep nesting, huge numbers, bytes that are not UTF-8 — then cut, flipped and spliced.
//! Every one must be prepared without a panic into a valid article or an invalid one with a
//! reason, the same way twice, and whatever mix of fragments a record is made of, preparing it
//! must cost time in proportion to its size (checked as a ratio of two sizes in one run, which a
//! quadratic step misses by a factor of eight). `NEWSDEDUP_FUZZ_CASES` runs more cases (the
//! default keeps the suite's time; the harness runs it in `scripts/test.sh`).

use newsdedup::article::{ReadRules, MAX_ID_BYTES};
use newsdedup::config::FingerprintConfig;
use newsdedup::correction::{Acceptance, Correction};
use newsdedup::fingerprint::Fingerprinter;
use newsdedup::pipeline::{self, Prepared};
use newsdedup::time::UtcOffset;
use std::time::{Duration, Instant};

const RULES: ReadRules = ReadRules {
    max_bytes: 1 << 20,
    published_at_offset: UtcOffset::UTC,
};

/// Cases run by default.
const DEFAULT_CASES: u64 = 20_000;

/// What hostile texts are made of.
const FRAGMENTS: &[&str] = &[
    "<!--",
    "-->",
    "<a",
    "<a href=\"",
    ">",
    "</p>",
    "<script>",
    "</script>",
    "<style",
    "&",
    "&#",
    "&#x",
    "&#12345678",
    "&amp;",
    "&nbsp;",
    "&#xD800;",
    ";",
    "\"",
    "'",
    "=\"",
    "http://",
    "www.",
    "\u{0}",
    "\u{3000}",
    " ",
    "\t",
    "\n",
    "\r\n",
    "来源：",
    "阅读全文",
    "新闻",
    "經濟發展",
    "ＡＢＣ１２３",
    "一二三",
    "2026年12月7日",
    "100万元",
    "\u{200b}",
    "\u{feff}",
    "\u{fffd}",
    "🙂",
    "\u{202e}",
    "a",
    "中",
];

/// What hostile JSON is made of, besides strings of fragments.
const JSON_PIECES: &[&str] = &[
    "\\ud800",
    "\\udfff",
    "\\u0000",
    "\\\"",
    "\\\\",
    "\\n",
    "\\u00e9",
    "[[[[[[[[",
    "]]]]",
    "{",
    "}",
    "1e999999",
    "-0",
    "123456789012345678901234567890",
    "null",
    "true",
    ",",
    ":",
];

/// xorshift64*: reproducible, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }
}

/// A text of about `bytes` bytes from a random mix of a few fragments.
fn hostile_text(rng: &mut Rng, bytes: usize) -> String {
    let mix: Vec<&str> = (0..1 + rng.below(4)).map(|_| rng.pick(FRAGMENTS)).collect();
    let mut text = String::with_capacity(bytes + 16);
    while text.len() < bytes {
        text.push_str(mix[rng.below(mix.len())]);
    }
    text
}

/// One record: an article whose members are hostile texts, or JSON that is broken on purpose.
fn hostile_record(rng: &mut Rng) -> Vec<u8> {
    let size = [0, 1, 16, 300, 4_000, 40_000][rng.below(6)];
    let text = |rng: &mut Rng| serde_json::Value::String(hostile_text(rng, size)).to_string();
    let mut record = match rng.below(4) {
        // A well-formed article of hostile texts.
        0 | 1 => format!(
            "{{\"id\":{},\"title\":{},\"content\":{},\"url\":{},\"published_at\":{}}}",
            text(rng),
            text(rng),
            text(rng),
            text(rng),
            text(rng)
        ),
        // Members of the wrong type, repeated, or JSON escapes that no text holds.
        2 => {
            let mut r = String::from("{\"id\":\"x");
            for _ in 0..rng.below(40) {
                r.push_str(rng.pick(JSON_PIECES));
            }
            r.push_str("\",\"content\":");
            r.push_str(&text(rng));
            for _ in 0..rng.below(8) {
                r.push(',');
                r.push_str(rng.pick(&["\"content\":", "\"id\":", "\"title\":", "\"dedup\":"]));
                r.push_str(rng.pick(JSON_PIECES));
            }
            r.push('}');
            r
        }
        // Anything at all.
        _ => (0..rng.below(200))
            .map(|_| rng.pick(JSON_PIECES))
            .collect::<String>(),
    }
    .into_bytes();
    // Cut, flipped or spliced with bytes that are not UTF-8.
    if !record.is_empty() {
        match rng.below(5) {
            0 => record.truncate(rng.below(record.len())),
            1 => {
                let at = rng.below(record.len());
                record[at] ^= 1 << rng.below(8);
            }
            2 => {
                let at = rng.below(record.len());
                record.splice(at..at, [0xff, 0xc0, 0x80, 0xed, 0xa0, 0x80]);
            }
            _ => {}
        }
    }
    record
}

/// What preparing a record came to, compared between two runs.
fn outcome(prepared: &Prepared) -> String {
    match prepared {
        Prepared::Valid {
            article,
            fingerprint,
            ..
        } => format!("valid {} {:?}", article.id, fingerprint.fingerprint),
        Prepared::Correction { correction, .. } => format!("correction {}", correction.id),
        Prepared::Invalid(e) => format!("invalid {} {}", e.reason.as_str(), e.message),
    }
}

fn cases() -> u64 {
    std::env::var("NEWSDEDUP_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_CASES)
}

#[test]
fn no_hostile_record_panics_and_each_is_prepared_the_same_way_twice() {
    let fp = Fingerprinter::new(&FingerprintConfig::default()).expect("fingerprinter");
    let acceptance = Acceptance::default();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut valid, mut invalid) = (0, 0);
    for case in 0..cases() {
        let record = hostile_record(&mut rng);
        let prepared = std::panic::catch_unwind(|| pipeline::prepare(&record, &fp, &RULES))
            .unwrap_or_else(|_| {
                panic!(
                    "case {case} panicked on {:?}",
                    String::from_utf8_lossy(&record)
                )
            });
        assert_eq!(
            outcome(&prepared),
            outcome(&pipeline::prepare(&record, &fp, &RULES)),
            "case {case}"
        );
        match &prepared {
            Prepared::Valid { article, .. } => {
                valid += 1;
                assert!(
                    !article.id.is_empty() && article.id.len() <= MAX_ID_BYTES,
                    "case {case}: id {:?} ({} bytes) of {:?}",
                    article.id.chars().take(80).collect::<String>(),
                    article.id.len(),
                    String::from_utf8_lossy(&record)
                        .chars()
                        .take(200)
                        .collect::<String>()
                );
            }
            Prepared::Invalid(e) => {
                invalid += 1;
                assert!(!e.message.is_empty(), "case {case}: {}", e.reason.as_str());
                assert!(
                    e.id.as_ref().is_none_or(|id| id.len() <= MAX_ID_BYTES),
                    "case {case}: {} {} id of {} bytes",
                    e.reason.as_str(),
                    e.message.chars().take(200).collect::<String>(),
                    e.id.as_ref().map_or(0, String::len)
                );
            }
            Prepared::Correction { .. } => panic!("case {case}: an article read as a correction"),
        }
        // The same bytes on the corrections topic: refused with a reason, never a panic.
        let correction = std::panic::catch_unwind(|| {
            let _ = Correction::parse(&record);
            pipeline::prepare_correction(&record, &fp, &RULES, &acceptance)
        });
        assert!(correction.is_ok(), "case {case} panicked as a correction");
    }
    // The generator reaches both sides (or it tests nothing).
    assert!(
        valid > 100 && invalid > 100,
        "valid {valid}, invalid {invalid}"
    );
}

/// The fastest of three preparations of an article with `content` (and a title of it).
fn fastest_prepare(fp: &Fingerprinter, content: &str) -> Duration {
    let title: String = content.chars().take(2_000).collect();
    let record = serde_json::json!({"id": "x", "title": title, "content": content})
        .to_string()
        .into_bytes();
    (0..3)
        .map(|_| {
            let start = Instant::now();
            let _ = pipeline::prepare(&record, fp, &RULES);
            start.elapsed()
        })
        .min()
        .unwrap_or_default()
}

#[test]
fn preparing_a_hostile_text_costs_time_in_proportion_to_its_size() {
    let fp = Fingerprinter::new(&FingerprintConfig::default()).expect("fingerprinter");
    let mut rng = Rng(0x51_7cc1_b727_220a);
    let (small, large) = (96 << 10, 768 << 10);
    for mix in 0..24 {
        let seed = rng.next();
        // The same mix of fragments at both sizes.
        let small_text = hostile_text(&mut Rng(seed), small);
        let large_text = hostile_text(&mut Rng(seed), large);
        let (t_small, t_large) = (
            fastest_prepare(&fp, &small_text),
            fastest_prepare(&fp, &large_text),
        );
        // Eight times the bytes: ~8x the time when linear, ~64x when quadratic. A floor keeps
        // texts that prepare in microseconds (all refused early) from measuring noise.
        let ratio = t_large.as_secs_f64() / t_small.as_secs_f64().max(0.002);
        assert!(
            ratio < 24.0,
            "mix {mix} ({:?}...): {t_small:?} at {small} bytes, {t_large:?} at {large} bytes",
            small_text.chars().take(40).collect::<String>()
        );
    }
}
