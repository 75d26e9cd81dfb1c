//! The decision: fingerprint -> candidate lookup -> verdict -> atomic insert.
//!
//! `Deduper::decide` takes `&mut self`: whoever holds the deduper is the single writer, so a lookup
//! and the insert that follows it cannot interleave with another article's (two near-duplicates in
//! flight can never both come out unique). Fingerprinting, the expensive part, happens before and
//! in parallel; only this step is serial.

use crate::config::DedupConfig;
use crate::error::IndexError;
use crate::index::{ArticleStore, Candidate, MatchRef, StoredArticle, StoredDecision};
use crate::simhash::Fingerprint;
use crate::sketch::{Similarity, Sketch};
use serde_json::{json, Map, Value};

/// What the decision needs to know about an article.
#[derive(Debug, Clone, Copy)]
pub struct DecisionInput<'a> {
    pub id: &'a str,
    pub url: Option<&'a str>,
    pub title: Option<&'a str>,
    pub fingerprint: Fingerprint,
    /// Content sketch for the second check (None: simhash distance alone decides).
    pub sketch: Option<&'a Sketch>,
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
}

impl Decision {
    pub fn is_duplicate(&self) -> bool {
        matches!(self.verdict, Verdict::Duplicate(_))
    }

    /// The `dedup` object of the output record.
    pub fn to_json(&self) -> Value {
        match &self.verdict {
            Verdict::Unique => {
                json!({"decision": "unique", "fingerprint": self.fingerprint.to_hex()})
            }
            Verdict::Duplicate(m) => json!({
                "decision": "duplicate",
                "fingerprint": self.fingerprint.to_hex(),
                "match": {
                    "id": m.id,
                    "url": m.url,
                    "title": m.title,
                    "fingerprint": m.fingerprint.to_hex(),
                    "distance": m.distance,
                    "containment": m.containment,
                }
            }),
        }
    }
}

/// The output record as JSON text: `open` (the article rendered by
/// [`crate::article::Article::render_open`]) with the decision's `dedup` member and the closing
/// brace appended: the input object plus `dedup` (last; an input `dedup` member is replaced).
pub fn close_record(mut open: Vec<u8>, decision: &Decision) -> Vec<u8> {
    open.extend_from_slice(b"\"dedup\":");
    open.extend_from_slice(decision.to_json().to_string().as_bytes());
    open.push(b'}');
    open
}

/// The output record of an input line that is not a valid article.
pub fn invalid_record(line: Option<u64>, id: Option<&str>, error: &str) -> Value {
    let mut out = Map::new();
    if let Some(line) = line {
        out.insert("line".into(), json!(line));
    }
    if let Some(id) = id {
        out.insert("id".into(), json!(id));
    }
    out.insert(
        "dedup".into(),
        json!({"decision": "invalid", "error": error}),
    );
    Value::Object(out)
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

    pub fn into_store(self) -> S {
        self.store
    }

    /// Decides one article and records the decision. `now_ms` is the first-seen time to store.
    pub fn decide(
        &mut self,
        input: &DecisionInput<'_>,
        now_ms: u64,
    ) -> Result<Decision, IndexError> {
        if let Some(stored) = self.store.get(input.id)? {
            return Ok(Self::replay(stored));
        }
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
        for (seq, id) in banded {
            if self.scratch.iter().any(|c| c.seq == seq) {
                continue;
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
            let sim = match (
                input.sketch,
                original.as_ref().and_then(|o| o.sketch.as_ref()),
            ) {
                (Some(a), Some(b)) => Some(a.similarity(b)),
                _ => None,
            };
            if self.rule.accepts(c.distance, sim) {
                similarity = sim;
                matched = Some(MatchRef {
                    id: c.id.clone(),
                    url: original.as_ref().and_then(|o| o.url.clone()),
                    title: original.and_then(|o| o.title),
                    fingerprint: c.fingerprint,
                    distance: c.distance,
                    containment: sim.map(|s| (s.containment * 1000.0).round() / 1000.0),
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
        };
        // Only unique articles become searchable: a duplicate always points at the first copy of
        // its story, never at another copy.
        self.store.insert(input.id, &record, matched.is_none())?;
        Ok(Decision {
            verdict: matched.map_or(Verdict::Unique, Verdict::Duplicate),
            fingerprint: input.fingerprint,
            replayed: false,
            candidates,
            similarity,
        })
    }

    fn replay(stored: StoredArticle) -> Decision {
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
