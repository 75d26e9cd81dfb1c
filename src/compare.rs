//! `compare`: why two articles are (or are not) near-duplicates, by the same rule and the same
//! candidate search as the decision. Pure: texts in, a JSON report out.

use crate::dedup::DedupConfig;
use crate::fingerprint::{Feature, Fingerprinted, Fingerprinter, NoFeatures};
use crate::headline::ChromeCheck;
use crate::index::{Crowded, MatchRule};
use crate::segments::{Overlap, SegmentMask, Segments};
use crate::sketch::{BinMask, Similarity, Sketch};
use crate::slots::{SlotOverlap, Slots};
use crate::topic::{Outline, Topic};
use serde_json::{json, Value};
use std::collections::HashMap;

/// One side of a comparison.
#[derive(Debug, Clone)]
pub struct CompareInput {
    /// The article id, or the file name of a plain-text input.
    pub id: String,
    pub title: String,
    pub content: String,
}

/// Which side of a comparison had nothing to fingerprint.
#[derive(Debug, Clone, thiserror::Error)]
// The cause is in the message, not chained as a source: printed with its causes it would be told
// twice.
#[error("{id}: {error}")]
pub struct CompareError {
    pub id: String,
    pub error: NoFeatures,
}

/// A feature as JSON (`word`, `weight`, `tf`, `in_title`), weights rounded to 0.001.
pub fn feature_json(f: &Feature) -> Value {
    json!({"word": f.word, "weight": round3(f.weight), "tf": f.tf, "in_title": f.in_title})
}

/// The comparison report of `newsdedup compare` (README): distance, second check, whether the
/// index would see the pair, the verdict by `rule`, and the features that made it.
///
/// `crowded` says which of A's sketch bands are crowded in an index and which of its segments are
/// template there (`compare --index-dir`), as the decision's lookup finds them: they are left out
/// of the second check. Without an index nothing is left out.
pub fn compare(
    fp: &Fingerprinter,
    a: &CompareInput,
    b: &CompareInput,
    rule: &DedupConfig,
    top: usize,
    explain: bool,
    crowded: &dyn Fn(&Sketch) -> Crowded,
) -> Result<Value, CompareError> {
    let analyze = |x: &CompareInput| {
        fp.analyze(&x.title, &x.content)
            .map_err(|error| CompareError {
                id: x.id.clone(),
                error,
            })
    };
    let (fa, feats_a) = analyze(a)?;
    let (fb, feats_b) = analyze(b)?;
    let (id_a, id_b) = (&a.id, &b.id);
    let crowded = crowded(&fa.sketch);
    let common = rule.template_bins(crowded.bands);
    let template = rule.template_segments(crowded.segments);
    let chrome = ChromeCheck::for_pair(&a.title, &b.title, fa.off_title_text.as_deref());
    // A's outline, for the topic check the decision makes of a B that A holds as a small part.
    let outline = fp
        .fingerprint_outlined(&a.title, &a.content)
        .ok()
        .map(|(_, outline)| outline);
    let scores =
        pair_scores_discounting(&fa, &fb, rule, (common, template), chrome, outline.as_ref());
    let PairScores {
        distance,
        similarity: sim,
        shares_block,
        shares_band,
        ..
    } = scores;
    let weights_b: HashMap<&str, f64> = feats_b
        .iter()
        .map(|f| (f.word.as_str(), f.weight))
        .collect();
    let weights_a: HashMap<&str, f64> = feats_a
        .iter()
        .map(|f| (f.word.as_str(), f.weight))
        .collect();
    let shared: Vec<Value> = feats_a
        .iter()
        .filter(|f| weights_b.contains_key(f.word.as_str()))
        .take(top)
        .map(|f| json!({"word": f.word, "weight_a": round3(f.weight), "weight_b": round3(weights_b[f.word.as_str()])}))
        .collect();
    let only = |feats: &[Feature], other: &HashMap<&str, f64>| -> Vec<Value> {
        feats
            .iter()
            .filter(|f| !other.contains_key(f.word.as_str()))
            .take(top)
            .map(feature_json)
            .collect()
    };
    let total_a: f64 = feats_a.iter().map(|f| f.weight).sum();
    let total_b: f64 = feats_b.iter().map(|f| f.weight).sum();
    let shared_weight: f64 = feats_a
        .iter()
        .filter_map(|f| weights_b.get(f.word.as_str()).map(|wb| f.weight.min(*wb)))
        .sum();
    let mut report = json!({
        "a": {"id": id_a, "fingerprint": fa.fingerprint.to_hex(), "features": fa.features},
        "b": {"id": id_b, "fingerprint": fb.fingerprint.to_hex(), "features": fb.features},
        "distance": distance,
        "threshold": rule.threshold,
        "second_check": {
            "jaccard": round3(sim.jaccard),
            "containment": round3(sim.containment),
            "a_in_b": round3(sim.a_in_b),
            "b_in_a": round3(sim.b_in_a),
            "bins": {"shared": sim.shared_bins, "a_only": sim.a_only_bins, "b_only": sim.b_only_bins,
                     "template": sim.template_bins},
            "shingles": {"a": sim.a_shingles, "b": sim.b_shingles},
            "b_share_of_a": round3(sim.b_share_of_a()),
            "topic": scores.topic.map(|t| json!({
                "located": t.located,
                "sampled": t.sampled,
                "added_share": round3(t.added_share),
                "coherence": round3(t.coherence),
            })),
            "crowded_bands": (0..crate::sketch::ALL_BANDS).filter(|b| crowded.bands & (1 << b) != 0).collect::<Vec<_>>(),
        },
        "segments": segments_json(&fa.sketch.segments, &fb.sketch.segments, &sim.segments, template),
        "slots": slots_json(fp, a, b, &fa.sketch.slots, &fb.sketch.slots, &sim.slots),
        "shares_block": shares_block,
        "shares_sketch_band": shares_band,
        "verdict": if scores.duplicate { "duplicate" } else { "distinct" },
        "match_rule": scores.rule.filter(|_| scores.duplicate).map(|r| r.as_str()),
        "relation": scores.relation.as_str(),
        "page_chrome": chrome.map(|c| json!({
            "a_title_in_text": round3(c.a_title_in_text),
            "b_title_in_text": round3(c.b_title_in_text),
            "titles_agree": round3(c.titles_agree),
            "is_chrome": c.is_chrome(),
        })),
        "why": scores.why(rule),
        "rule": rule,
        "weighted_feature_overlap": round3(shared_weight / total_a.max(total_b).max(1e-9)),
        "top_shared": shared,
        "top_only_in_a": only(&feats_a, &weights_b),
        "top_only_in_b": only(&feats_b, &weights_a),
    });
    if explain {
        if let Some(obj) = report.as_object_mut() {
            obj.insert(
                "features_a".into(),
                Value::Array(feats_a.iter().map(feature_json).collect()),
            );
            obj.insert(
                "features_b".into(),
                Value::Array(feats_b.iter().map(feature_json).collect()),
            );
        }
    }
    Ok(report)
}

/// The numbers that decide a pair, computed exactly as the decision computes them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairScores {
    /// Simhash Hamming distance.
    pub distance: u32,
    /// Second check: estimated 4-gram Jaccard and containment of the content sketches.
    pub similarity: Similarity,
    /// The two fingerprints share a 16-bit block (always the case within distance 3).
    pub shares_block: bool,
    /// With `sketch_search`, the content sketches share an LSH band.
    pub shares_band: bool,
    /// The index would see one as a candidate of the other (a shared block or band).
    pub found: bool,
    /// The verdict by the rule: found, accepted by `DedupConfig::judge` and not refused as
    /// page chrome.
    pub duplicate: bool,
    /// The rule that accepts the pair (`DedupConfig::judge`: a rule fired and the relation counts
    /// as a duplicate), found by the index or not, unless the page-chrome check refuses it.
    pub rule: Option<MatchRule>,
    /// A rule accepted the pair but the page-chrome check refused it
    /// (`DedupConfig::chrome_refuses`).
    pub chrome_refused: bool,
    /// The pair's page-chrome check (None when A's text holds its title).
    pub chrome: Option<ChromeCheck>,
    /// What kind of repeat A is of B (`DedupConfig::relation_of`), whatever the verdict.
    pub relation: crate::index::Relation,
    /// The topic check, made when the decision makes it (`DedupConfig::wants_topic`: B whole
    /// inside A but a small part of it) and A's outline was given.
    pub topic: Option<Topic>,
}

impl PairScores {
    /// Why the verdict is what it is, in one sentence (`compare`'s and the audit's `why`): not
    /// a candidate, refused as page chrome, or the rule's own explanation
    /// (`DedupConfig::explain`).
    pub fn why(&self, rule: &DedupConfig) -> String {
        match self.chrome.filter(|_| self.chrome_refused) {
            _ if !self.found => "none: the index would not see B as a candidate of A (no shared \
                                 simhash block or sketch band)"
                .to_owned(),
            Some(check) => format!("none: page chrome: {}", check.explain()),
            None => rule.explain_with(self.distance, Some(self.similarity), self.topic),
        }
    }
}

/// Distance, second check, candidate paths and verdict of two fingerprinted articles by `rule`
/// (the numbers of [`compare`]); `chrome` is the pair's page-chrome check ([`ChromeCheck::for_pair`])
/// and `outline` A's outline for the topic check (None: no topic check, as without A's text).
pub fn pair_scores(
    a: &Fingerprinted,
    b: &Fingerprinted,
    rule: &DedupConfig,
    chrome: Option<ChromeCheck>,
    outline: Option<&Outline>,
) -> PairScores {
    pair_scores_discounting(a, b, rule, (0, 0), chrome, outline)
}

/// [`pair_scores`] with A's bins and segments in `template` left out of the second check as
/// template text.
pub fn pair_scores_discounting(
    a: &Fingerprinted,
    b: &Fingerprinted,
    rule: &DedupConfig,
    template: (BinMask, SegmentMask),
    chrome: Option<ChromeCheck>,
    outline: Option<&Outline>,
) -> PairScores {
    let distance = a.fingerprint.distance(b.fingerprint);
    let similarity = a.sketch.similarity_with(&b.sketch, template.0, template.1);
    let shares_block = a
        .fingerprint
        .blocks()
        .iter()
        .zip(b.fingerprint.blocks())
        .any(|(x, y)| *x == y);
    // A band, or a segment B indexes that A looks up.
    let shares_band = rule.sketch_search
        && (a
            .sketch
            .bands()
            .any(|band| b.sketch.bands().any(|other| other == band))
            || b.sketch
                .segments
                .indexed()
                .any(|h| a.sketch.segments.searchable().any(|(_, g)| g == h)));
    // The index only sees candidates that share a 16-bit simhash block (always, within distance 3)
    // or, with sketch_search, a content-sketch band.
    let found = shares_block || shares_band;
    let mut judged = rule.judge(distance, Some(similarity));
    // The topic check, as the decision makes it: only for a B that A holds whole as a small part.
    let topic = if judged.is_none() && rule.wants_topic(distance, Some(similarity)) {
        outline.and_then(|o| o.topic(&b.sketch))
    } else {
        None
    };
    if topic.is_some() {
        judged = rule.judge_with(distance, Some(similarity), topic);
    }
    let chrome_refused = judged.is_some() && rule.chrome_refuses(chrome.as_ref());
    let accepted = judged.filter(|_| !chrome_refused);
    PairScores {
        distance,
        similarity,
        shares_block,
        shares_band,
        found,
        duplicate: found && accepted.is_some(),
        rule: accepted.map(|(r, _)| r),
        chrome_refused,
        chrome,
        relation: rule.relation_of(Some(similarity)),
        topic,
    }
}

/// Fingerprints both articles as the decision does and scores the pair ([`pair_scores`]).
pub fn score_pair(
    fp: &Fingerprinter,
    a: &CompareInput,
    b: &CompareInput,
    rule: &DedupConfig,
) -> Result<PairScores, CompareError> {
    let refused = |x: &CompareInput| {
        let id = x.id.clone();
        move |error| CompareError { id, error }
    };
    let (fa, outline) = fp
        .fingerprint_outlined(&a.title, &a.content)
        .map_err(refused(a))?;
    let fb = fp.fingerprint(&b.title, &b.content).map_err(refused(b))?;
    let chrome = ChromeCheck::for_pair(&a.title, &b.title, fa.off_title_text.as_deref());
    Ok(pair_scores(&fa, &fb, rule, chrome, Some(&outline)))
}

/// The event slots of a pair for `compare`: the counts of `match.slots`, and the names and
/// figures themselves (shared, A's only, B's only, heaviest first).
fn slots_json(
    fp: &Fingerprinter,
    a: &CompareInput,
    b: &CompareInput,
    slots_a: &Slots,
    slots_b: &Slots,
    o: &SlotOverlap,
) -> Value {
    let (words_a, words_b) = (
        fp.slot_words(&a.title, &a.content),
        fp.slot_words(&b.title, &b.content),
    );
    let word = |hash: u32| {
        words_a
            .get(&hash)
            .or_else(|| words_b.get(&hash))
            .cloned()
            .unwrap_or_else(|| format!("#{hash:08x}"))
    };
    let names = |of: &[(u32, u8)], other: &[(u32, u8)], shared: bool| -> Vec<String> {
        of.iter()
            .filter(|x| other.iter().any(|y| y.0 == x.0) == shared)
            .map(|x| word(x.0))
            .collect()
    };
    let kind = |a: &[(u32, u8)], b: &[(u32, u8)]| {
        json!({
            "shared": names(a, b, true),
            "only_a": names(a, b, false),
            "only_b": names(b, a, false),
        })
    };
    json!({
        "counts": o,
        "entities": kind(slots_a.entities(), slots_b.entities()),
        "figures": kind(slots_a.figures(), slots_b.figures()),
        "entity_share_of_poorer": o.entities.poorer_share().map(round3),
        "figure_share_of_poorer": o.figures.poorer_share().map(round3),
        "top_agreement": o.top_agreement().map(round3),
    })
}

/// The segments of a pair for `compare`: how many each text has, what they share (characters, and
/// the share of each text), and the template segments of A left out, with their shared characters.
fn segments_json(a: &Segments, b: &Segments, o: &Overlap, template: SegmentMask) -> Value {
    let share = |x: Option<f64>| x.map(round3);
    json!({
        "a": {"kept": a.iter().count(), "chars": a.chars(), "sampled": !a.whole()},
        "b": {"kept": b.iter().count(), "chars": b.chars(), "sampled": !b.whole()},
        "shared": o.shared,
        "shared_chars": o.shared_chars,
        "a_in_b": share(o.a_in_b()),
        "b_in_a": share(o.b_in_a()),
        "template": o.template,
        "template_shared_chars": o.template_chars,
        "template_segments_of_a": template.count_ones(),
    })
}

/// Rounded to 0.001, for reports.
pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
