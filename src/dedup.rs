//! The decision: fingerprint -> candidate lookup -> verdict -> atomic insert.
//!
//! `Deduper::decide` takes `&mut self`: whoever holds the deduper is the single writer, so a lookup
//! and the insert that follows it cannot interleave with another article's (two near-duplicates in
//! flight can never both come out unique). Fingerprinting, the expensive part, happens before and
//! in parallel; only this step is serial.

use crate::error::IndexError;
use crate::index::{
    event_time, ArticleStore, Candidate, EarlierVersion, MatchRef, MatchRule, Revision,
    StoredArticle, StoredDecision,
};
use crate::simhash::Fingerprint;
use crate::sketch::{Similarity, Sketch};
use serde::{Deserialize, Serialize};

/// Settings of the decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DedupConfig {
    /// Largest Hamming distance at which two articles are near-duplicates. Up to 3 is exhaustive
    /// (pigeonhole over four 16-bit blocks); above 3 only candidates sharing a block are seen.
    pub threshold: u32,
    /// Second check of candidates within `threshold`: the estimated 4-gram containment must be at
    /// least this (0 disables). Removes templated reports whose word mix is alike but text is not.
    pub confirm_min_containment: f64,
    /// Candidates beyond `threshold` up to this distance (found because they share a 16-bit block)
    /// are duplicates if the second check is strong: admits reposts whose edits moved the simhash a
    /// little too far. 0 disables.
    pub rescue_distance: u32,
    /// The resemblance rule, for candidates beyond `threshold` (up to `rescue_distance`, or any
    /// found by `sketch_search`): a duplicate when at least this share of the new article's
    /// 4-grams is estimated to be in the candidate and their Jaccard is at least
    /// `rescue_min_jaccard` (a repost whose edits moved the simhash too far). Directional: a
    /// later article quoting an earlier one among as much material of its own is not caught.
    pub rescue_min_containment: f64,
    /// Minimum estimated 4-gram Jaccard for the resemblance rule.
    pub rescue_min_jaccard: f64,
    /// The containment rule, for the same candidates: a duplicate when at least this share of
    /// the new article's 4-grams is estimated to be in the candidate, however much longer the
    /// candidate is (an excerpt: it says nothing the earlier article did not). Stricter than
    /// `rescue_min_containment`, since with a low Jaccard the estimate rests on fewer bins. 0
    /// disables.
    pub excerpt_min_containment: f64,
    /// Evidence floor of the containment rule: minimum estimated Jaccard (this share of the
    /// sketch's 32 bins must agree), so a short text is not "contained" in a much longer one on
    /// two or three bins; it bounds how much longer the candidate may be (about 1 / this).
    pub excerpt_min_jaccard: f64,
    /// Also look for candidates through the content sketch's LSH bands (finds reposts whose simhash
    /// moved far, e.g. truncated ones); they are judged by the rescue rule.
    pub sketch_search: bool,
}

impl DedupConfig {
    /// Whether a candidate at simhash `distance` with second-check score `sim` (the new article
    /// as A, the candidate as B) is a duplicate.
    pub fn accepts(&self, distance: u32, sim: Option<Similarity>) -> bool {
        self.rule_for(distance, sim).is_some()
    }

    /// The rule that makes the new article a duplicate of the candidate, if one does.
    pub fn rule_for(&self, distance: u32, sim: Option<Similarity>) -> Option<MatchRule> {
        if distance <= self.threshold {
            sim.is_none_or(|s| s.containment >= self.confirm_min_containment)
                .then_some(MatchRule::Simhash)
        } else {
            let s = sim.filter(|_| self.sketch_search || distance <= self.rescue_distance)?;
            if s.a_in_b >= self.rescue_min_containment && s.jaccard >= self.rescue_min_jaccard {
                Some(MatchRule::Resemblance)
            } else if self.excerpt_min_containment > 0.0
                && s.a_in_b >= self.excerpt_min_containment
                && s.jaccard >= self.excerpt_min_jaccard
            {
                Some(MatchRule::Containment)
            } else {
                None
            }
        }
    }

    /// Whether a sketch rule (resemblance or containment) accepts `sim` for a candidate beyond
    /// the threshold that is searched (found through a band).
    pub fn sketch_rule_may_accept(&self, sim: Similarity) -> bool {
        self.rule_for(self.threshold.saturating_add(1), Some(sim))
            .is_some()
    }

    /// Why `rule_for` decided as it did, in one sentence (for `compare`).
    pub fn explain(&self, distance: u32, sim: Option<Similarity>) -> String {
        let beyond = format!("distance {distance} > threshold {}", self.threshold);
        let Some(s) = sim else {
            return match self.rule_for(distance, sim) {
                Some(_) => format!(
                    "simhash: distance {distance} <= threshold {}",
                    self.threshold
                ),
                None => format!("none: {beyond}, and no sketch to compare"),
            };
        };
        let share = format!(
            "an estimated {:.0}% of A's 4-grams are in B ({} of A's sampled 4-grams seen in B, {} not)",
            100.0 * s.a_in_b,
            s.shared_bins,
            s.a_only_bins
        );
        match self.rule_for(distance, sim) {
            Some(MatchRule::Simhash) => {
                format!("simhash: distance {distance} <= threshold {}", self.threshold)
            }
            Some(MatchRule::Resemblance) => format!(
                "resemblance: {beyond}, but {share} (>= {}) and Jaccard {:.2} >= {}",
                self.rescue_min_containment, s.jaccard, self.rescue_min_jaccard
            ),
            Some(MatchRule::Containment) => format!(
                "containment: {beyond}, but {share} (>= {}; Jaccard {:.2} >= {}): A says nothing B did not",
                self.excerpt_min_containment, s.jaccard, self.excerpt_min_jaccard
            ),
            None if distance <= self.threshold => format!(
                "none: distance {distance} <= threshold, but containment {:.2} < {}",
                s.containment, self.confirm_min_containment
            ),
            None if self.sketch_search || distance <= self.rescue_distance => format!(
                "none: {beyond}; {share}, Jaccard {:.2}: below both resemblance (>= {} with \
                 Jaccard >= {}) and containment (>= {} with Jaccard >= {})",
                s.jaccard,
                self.rescue_min_containment,
                self.rescue_min_jaccard,
                self.excerpt_min_containment,
                self.excerpt_min_jaccard
            ),
            None => format!("none: {beyond}"),
        }
    }
}

impl Default for DedupConfig {
    fn default() -> Self {
        DedupConfig {
            threshold: 3,
            confirm_min_containment: 0.0,
            rescue_distance: 0,
            rescue_min_containment: 0.8,
            rescue_min_jaccard: 0.45,
            excerpt_min_containment: 0.9,
            excerpt_min_jaccard: 0.15,
            sketch_search: true,
        }
    }
}

/// What the decision needs to know about an article.
#[derive(Debug, Clone, Copy)]
pub struct DecisionInput<'a> {
    pub id: &'a str,
    pub url: Option<&'a str>,
    pub title: Option<&'a str>,
    pub fingerprint: Fingerprint,
    /// Content sketch for the second check (None: simhash distance alone decides).
    pub sketch: Option<&'a Sketch>,
    /// The article's `published_at` (Unix ms), when it has a readable one.
    pub published_ms: Option<i64>,
    /// The timestamp of the record that carried it (Kafka), if any.
    pub record_time_ms: Option<i64>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Unique,
    Duplicate(MatchRef),
}

/// The decision for one article.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub verdict: Verdict,
    /// The fingerprint the decision was made with (the stored one on a replay).
    pub fingerprint: Fingerprint,
    /// True if the id was already indexed and the stored decision was returned.
    pub replayed: bool,
    /// Candidates within the search distance that the lookup saw.
    pub candidates: usize,
    /// Second-check score against the match (when both sides have a sketch).
    pub similarity: Option<Similarity>,
    /// Set when the id was known with other content: this decision replaced that version.
    pub revision: Option<Revision>,
    /// The article's event time (Unix ms, see [`event_time`]).
    pub event_ms: i64,
    /// The claimed event time was too far in the future: the arrival time was used.
    pub event_time_clamped: bool,
    /// An older version of a stored id (published before it) that arrived after it: decided and
    /// remembered, but the stored version stays the one that matches.
    pub superseded: bool,
}

impl Decision {
    pub fn is_duplicate(&self) -> bool {
        matches!(self.verdict, Verdict::Duplicate(_))
    }
}

/// Longest `match.url` / `match.title` in bytes: they only name the original for a reader, and a
/// bound on them bounds the output record (`output::MAX_DEDUP_MEMBER_BYTES`).
pub const MAX_MATCH_TEXT_BYTES: usize = 1024;

/// `text` cut to [`MAX_MATCH_TEXT_BYTES`] at a character boundary.
fn match_text(text: &str) -> String {
    let mut end = text.len().min(MAX_MATCH_TEXT_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// Nearest first, then earliest seen: the rule that picks the match among candidates.
pub fn best_candidate(candidates: &[Candidate]) -> Option<&Candidate> {
    candidates.iter().min_by_key(|c| (c.distance, c.seq))
}

pub struct Deduper<S: ArticleStore> {
    store: S,
    rule: DedupConfig,
    scratch: Vec<Candidate>,
}

impl<S: ArticleStore> Deduper<S> {
    /// A deduper with the default decision rule at `threshold`.
    pub fn new(store: S, threshold: u32) -> Self {
        Self::with_config(
            store,
            DedupConfig {
                threshold,
                ..DedupConfig::default()
            },
        )
    }

    pub fn with_config(store: S, rule: DedupConfig) -> Self {
        Deduper {
            store,
            rule,
            scratch: Vec::new(),
        }
    }

    pub fn threshold(&self) -> u32 {
        self.rule.threshold
    }

    pub fn config(&self) -> &DedupConfig {
        &self.rule
    }

    pub fn store(&self) -> &S {
        &self.store
    }

    /// The store, for what is not a decision (taking an article out whose output could not be
    /// delivered).
    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }

    pub fn into_store(self) -> S {
        self.store
    }

    /// Decides one article and records the decision. `now_ms` is the first-seen time to store
    /// (and the arrival time of [`event_time`]). With a retention window, indexed articles whose
    /// event time is more than the window before this article's are not matched.
    pub fn decide(
        &mut self,
        input: &DecisionInput<'_>,
        now_ms: u64,
    ) -> Result<Decision, IndexError> {
        // A known id with content it had before (the stored version or a remembered earlier
        // one) is a replay: the decision that version got, unchanged, and nothing is written, so
        // a re-delivered older version never replaces a newer one. With other content it is a
        // new revision, decided afresh.
        let previous = match self.store.get(input.id)? {
            Some(stored) => match stored.version(input.fingerprint) {
                Some(version) => return Ok(Self::replay(version)),
                None => Some(stored),
            },
            None => None,
        };
        let (event_ms, event_time_clamped) = event_time(
            input.published_ms,
            input.record_time_ms,
            i64::try_from(now_ms).unwrap_or(i64::MAX),
        );
        // A version first seen after a newer one (published before the stored version):
        // decided, and remembered with its decision, but the stored version stays.
        let superseded = previous.as_ref().is_some_and(
            |p| matches!((input.published_ms, p.published_ms), (Some(new), Some(old)) if new < old),
        );
        // Older than this: outside the retention window, not matched (even before its removal).
        let oldest_matched = self
            .store
            .retention()
            .map_or(i64::MIN, |r| event_ms.saturating_sub(r.as_ms()));
        let search = self.rule.threshold.max(self.rule.rescue_distance);
        self.scratch.clear();
        let mut fetched: Vec<(u64, StoredArticle)> = Vec::new();
        // Both candidate paths in one pass: simhash blocks, and (second path) articles whose
        // content sketch shares an LSH band — those may be far apart in simhash, e.g. a truncated
        // repost.
        let sketch = input.sketch.filter(|_| self.rule.sketch_search);
        let mut banded = Vec::new();
        self.store.lookup(
            input.fingerprint,
            search,
            sketch,
            &mut self.scratch,
            &mut banded,
        )?;
        // A revision is never judged against the version it replaces.
        self.scratch.retain(|c| c.id != input.id);
        // Within distance 3 every candidate shares a block, so one found through a band alone is
        // beyond it and needs a sketch rule: its sketch (no record to decode) says whether one can
        // accept it. Most band-only candidates are chance agreements on a common 4-gram.
        let beyond_threshold = self.rule.threshold <= 3;
        for (seq, id) in banded {
            if id == input.id || self.scratch.iter().any(|c| c.seq == seq) {
                continue;
            }
            if let (Some(query), true) = (sketch, beyond_threshold) {
                let hopeless = match self.store.get_sketch(&id)? {
                    Some(other) => !self.rule.sketch_rule_may_accept(query.similarity(&other)),
                    None => true,
                };
                if hopeless {
                    continue;
                }
            }
            if let Some(art) = self.store.get(&id)? {
                self.scratch.push(Candidate {
                    seq,
                    fingerprint: art.fingerprint,
                    distance: input.fingerprint.distance(art.fingerprint),
                    id,
                });
                fetched.push((seq, art));
            }
        }
        // Nearest first, then earliest seen: the first candidate the rule accepts is the match.
        self.scratch.sort_by_key(|c| (c.distance, c.seq));
        let candidates = self.scratch.len();
        let mut matched = None;
        let mut similarity = None;
        for c in &self.scratch {
            let original = match fetched.iter().position(|(seq, _)| *seq == c.seq) {
                Some(i) => Some(fetched.swap_remove(i).1),
                None => self.store.get(&c.id)?,
            };
            if original
                .as_ref()
                .is_some_and(|o| o.event_ms < oldest_matched)
            {
                continue;
            }
            let sim = match (
                input.sketch,
                original.as_ref().and_then(|o| o.sketch.as_ref()),
            ) {
                (Some(a), Some(b)) => Some(a.similarity(b)),
                _ => None,
            };
            if let Some(rule) = self.rule.rule_for(c.distance, sim) {
                similarity = sim;
                matched = Some(MatchRef {
                    id: c.id.clone(),
                    url: original
                        .as_ref()
                        .and_then(|o| o.url.as_deref().map(match_text)),
                    title: original
                        .as_ref()
                        .and_then(|o| o.title.as_deref().map(match_text)),
                    fingerprint: c.fingerprint,
                    distance: c.distance,
                    containment: sim.map(|s| (s.containment * 1000.0).round() / 1000.0),
                    published_ms: original.as_ref().and_then(|o| o.published_ms),
                    contained: sim.map(|s| (s.a_in_b * 1000.0).round() / 1000.0),
                    rule: Some(rule),
                });
                break;
            }
        }
        let record = StoredArticle {
            seq: self.store.counts().next_seq,
            fingerprint: input.fingerprint,
            url: input.url.map(str::to_owned),
            title: input.title.map(str::to_owned),
            first_seen_ms: now_ms,
            decision: if matched.is_some() {
                StoredDecision::Duplicate
            } else {
                StoredDecision::Unique
            },
            matched: matched.clone(),
            sketch: input.sketch.copied(),
            revision: previous.as_ref().filter(|_| !superseded).map(|p| Revision {
                number: p.revision.map_or(1, |r| r.number.saturating_add(1)),
                previous_fingerprint: p.fingerprint,
            }),
            event_ms,
            published_ms: input.published_ms,
            event_time_clamped,
            earlier: previous
                .as_ref()
                .map(StoredArticle::history_after)
                .unwrap_or_default(),
        };
        // Only unique articles become searchable: a duplicate always points at the first copy of
        // its story, never at another copy.
        let searchable = matched.is_none();
        match &previous {
            None => self.store.insert(input.id, &record, searchable)?,
            Some(p) if superseded => {
                // The stored version is rewritten unchanged but for the remembered one.
                let mut kept = p.clone();
                let stale = EarlierVersion {
                    superseded: true,
                    ..record.as_earlier()
                };
                kept.earlier = std::iter::once(stale)
                    .chain(p.earlier.iter().cloned())
                    .take(crate::index::MAX_EARLIER_VERSIONS)
                    .collect();
                let searchable = p.decision == StoredDecision::Unique;
                self.store.replace(input.id, p, &kept, searchable)?
            }
            Some(p) => self.store.replace(input.id, p, &record, searchable)?,
        }
        Ok(Decision {
            verdict: matched.map_or(Verdict::Unique, Verdict::Duplicate),
            fingerprint: input.fingerprint,
            replayed: false,
            candidates,
            similarity,
            revision: record.revision,
            event_ms,
            event_time_clamped,
            superseded,
        })
    }

    fn replay(stored: EarlierVersion) -> Decision {
        let verdict = match (stored.decision, stored.matched) {
            (StoredDecision::Duplicate, Some(m)) => Verdict::Duplicate(m),
            _ => Verdict::Unique,
        };
        Decision {
            verdict,
            fingerprint: stored.fingerprint,
            replayed: true,
            candidates: 0,
            similarity: None,
            revision: stored.revision,
            event_ms: stored.event_ms,
            event_time_clamped: stored.event_time_clamped,
            superseded: stored.superseded,
        }
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
