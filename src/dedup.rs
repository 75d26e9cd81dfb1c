//! The decision: fingerprint -> candidate lookup -> verdict -> atomic insert.
//!
//! `Deduper::decide` takes `&mut self`: whoever holds the deduper is the single writer, so a lookup
//! and the insert that follows it cannot interleave with another article's (two near-duplicates in
//! flight can never both come out unique). Fingerprinting, the expensive part, happens before and
//! in parallel; only this step is serial. What makes one candidate a duplicate is the decision
//! rule, `DedupConfig` (`dedup/rule.rs`): `Deduper` asks it about each candidate, nearest first.

use crate::error::IndexError;
use crate::headline::ChromeCheck;
use crate::index::{
    event_time, ArticleStore, Candidate, CorrectionNote, EarlierVersion, IndexWrite, MatchRef,
    MatchRule, Relation, Revision, SegmentMatch, StoredArticle, StoredDecision,
};
use crate::simhash::Fingerprint;
use crate::sketch::{Similarity, Sketch};
use crate::topic::Outline;

mod rule;
pub use rule::{DedupConfig, EXTENSION_SHARE_SLACK};

/// What the decision needs to know about an article.
#[derive(Debug, Clone, Copy)]
pub struct DecisionInput<'a> {
    pub id: &'a str,
    pub url: Option<&'a str>,
    pub title: Option<&'a str>,
    pub fingerprint: Fingerprint,
    /// Content sketch for the second check (None: simhash distance alone decides).
    pub sketch: Option<&'a Sketch>,
    /// The cleaned content when it holds almost nothing of the title
    /// ([`crate::fingerprint::Fingerprinted::off_title_text`]): candidates' titles are read
    /// against it by the page-chrome check. None: the check cannot refuse.
    pub off_title_text: Option<&'a str>,
    /// The article's cleaned content and heaviest words, for the topic check of an extension
    /// (None: no such check, a B that is a small part of A is never an extension).
    pub outline: Option<&'a Outline>,
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
    /// Set when this is an editor's correction applied: who made it, when, why, and the
    /// decision it replaced.
    pub correction: Option<CorrectionNote>,
    /// The content sketch of the article's text as the decision computed it (what it stores with
    /// a new version; None for a correction): the output record carries it, so that a standby or
    /// a rebuild restores it without cleaning the text again.
    pub sketch: Option<Sketch>,
    /// What the decision wrote to the index (None: nothing, a replay or a correction applied
    /// before): what is undone if its output can never be published.
    pub written: Option<IndexWrite>,
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
                Some(version) => return Ok(Self::replay(version, input.sketch.copied())),
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
        let crowded = self.store.lookup(
            input.fingerprint,
            search,
            sketch,
            &mut self.scratch,
            &mut banded,
        )?;
        // A revision is never judged against the version it replaces, nor against an article an
        // editor separated it from.
        let separated = self.store.separated(input.id);
        self.scratch
            .retain(|c| c.id != input.id && !separated.contains(&c.id));
        // Within distance 3 every candidate shares a block, so one found through a band alone is
        // beyond it and needs a sketch rule: its sketch (no record to decode) says whether one can
        // accept it. Most band-only candidates are chance agreements on a common 4-gram.
        let beyond_threshold = self.rule.threshold <= 3;
        // The article's bins whose value many indexed articles hold: template text, left out of
        // the second check (the band lookup just read their buckets, so this costs nothing).
        let common = self.rule.template_bins(crowded.bands);
        let template = self.rule.template_segments(crowded.segments);
        for (seq, id) in banded {
            if id == input.id
                || separated.contains(&id)
                || self.scratch.iter().any(|c| c.seq == seq)
            {
                continue;
            }
            if let (Some(query), true) = (sketch, beyond_threshold) {
                let hopeless = match self.store.get_sketch(&id)? {
                    Some(other) => !self
                        .rule
                        .sketch_rule_may_accept(query.similarity_with(&other, common, template)),
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
        // Nearest first, then earliest seen: the first candidate the rule accepts is the match,
        // unless an editor separated it from another accepted candidate (a release): the
        // article then links to the one of the two it resembles more.
        self.scratch.sort_by_key(|c| (c.distance, c.seq));
        let candidates = self.scratch.len();
        let mut best: Option<Accepted> = None;
        let mut rivals: Vec<String> = Vec::new();
        for c in &self.scratch {
            let original = match fetched.iter().position(|(seq, _)| *seq == c.seq) {
                Some(i) => Some(fetched.swap_remove(i).1),
                None => self.store.get(&c.id)?,
            };
            let Some(original) = original.filter(|o| o.event_ms >= oldest_matched) else {
                continue;
            };
            // The article a match with this candidate would name (a merged one's original).
            let merged_into = original.resolves_to().map(str::to_owned);
            let target = merged_into.as_deref().unwrap_or(&c.id);
            let is = |ids: &[String]| ids.iter().any(|id| id == target);
            if is(&separated) || (best.is_some() && !is(&rivals)) {
                continue;
            }
            let sim = match (input.sketch, original.sketch.as_ref()) {
                (Some(a), Some(b)) => Some(a.similarity_with(b, common, template)),
                _ => None,
            };
            let mut verdict = self.rule.judge(c.distance, sim);
            // The rare candidate B that A holds whole but as a small part: whether A is an update
            // or a digest depends on what A adds (the only place the decision reads A's text).
            if verdict.is_none() && self.rule.wants_topic(c.distance, sim) {
                if let (Some(outline), Some(b)) = (input.outline, original.sketch.as_ref()) {
                    verdict = self.rule.judge_with(c.distance, sim, outline.topic(b));
                }
            }
            let Some((rule, relation)) = verdict else {
                continue;
            };
            // Through an update, only a copy or a further update of it repeats the original the
            // match names: an excerpt or a rewrite of it may be its new text alone.
            if original.routes_update() && !matches!(relation, Relation::Copy | Relation::Extension)
            {
                continue;
            }
            let chrome = ChromeCheck::for_pair(
                input.title.unwrap_or_default(),
                original.title.as_deref().unwrap_or_default(),
                input.off_title_text,
            );
            if self.rule.chrome_refuses(chrome.as_ref()) {
                continue;
            }
            let accepted = Accepted {
                candidate: c.clone(),
                original,
                sim,
                rule,
                relation,
            };
            match &best {
                None => {
                    rivals = self.store.separated(target);
                    best = Some(accepted);
                    if rivals.is_empty() {
                        break;
                    }
                }
                Some(b) if accepted.preferred_to(b) => best = Some(accepted),
                Some(_) => {}
            }
        }
        let similarity = best.as_ref().and_then(|b| b.sim);
        let matched = best.map(Accepted::into_match);
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
            correction: None,
            indexed_extension: matched
                .as_ref()
                .is_some_and(StoredArticle::indexes_extension),
        };
        // Unique articles become searchable, and updates (a copy of an update may not find the
        // original, a small part of it); a match with an update names its original, so a
        // duplicate always points at the first copy of its story, never at another copy.
        let searchable = record.searchable();
        let written = match &previous {
            None => {
                self.store.insert(input.id, &record, searchable)?;
                IndexWrite::Inserted {
                    fingerprint: input.fingerprint,
                }
            }
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
                self.store.replace(input.id, p, &kept, p.searchable())?;
                IndexWrite::Remembered {
                    fingerprint: input.fingerprint,
                }
            }
            Some(p) => {
                self.store.replace(input.id, p, &record, searchable)?;
                IndexWrite::Revised {
                    fingerprint: input.fingerprint,
                    previous: Box::new(p.clone()),
                }
            }
        };
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
            correction: None,
            sketch: input.sketch.copied(),
            written: Some(written),
        })
    }

    fn replay(stored: EarlierVersion, sketch: Option<Sketch>) -> Decision {
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
            // The correction's own record said who corrected it and why; a replay only repeats
            // the decision (so its output is bounded like any other).
            correction: None,
            sketch,
            written: None,
        }
    }
}

/// A candidate the rule accepted, with what its match reference is made of.
struct Accepted {
    candidate: Candidate,
    original: StoredArticle,
    sim: Option<Similarity>,
    rule: MatchRule,
    relation: Relation,
}

impl Accepted {
    /// How much the two texts resemble each other, to choose between accepted candidates an
    /// editor separated: the estimated Jaccard, else closeness in simhash.
    fn resemblance(&self) -> f64 {
        self.sim
            .map_or(-f64::from(self.candidate.distance), |s| s.jaccard)
    }

    /// Whether this candidate, rather than `other` (an editor separated the two), is the one the
    /// article repeats: the one it resembles more; on a tie the one an editor released (its own
    /// story, which its copies repeat).
    fn preferred_to(&self, other: &Accepted) -> bool {
        let released = |a: &Accepted| {
            a.original
                .correction
                .as_ref()
                .is_some_and(|c| c.kind == crate::index::CorrectionKind::Release)
        };
        match self.resemblance().partial_cmp(&other.resemblance()) {
            Some(std::cmp::Ordering::Greater) => true,
            Some(std::cmp::Ordering::Equal) => released(self) && !released(other),
            _ => false,
        }
    }

    /// The match reference. A candidate an editor merged into an earlier article, or an update
    /// of one, resolves to that article, found `via` the candidate.
    fn into_match(self) -> MatchRef {
        let c = self.candidate;
        let o = self.original;
        let sim = self.sim;
        let scores = MatchRef {
            id: c.id.clone(),
            url: o.url.as_deref().map(match_text),
            title: o.title.as_deref().map(match_text),
            fingerprint: c.fingerprint,
            distance: c.distance,
            containment: sim.map(|s| (s.containment * 1000.0).round() / 1000.0),
            published_ms: o.published_ms,
            contained: sim.map(|s| (s.a_in_b * 1000.0).round() / 1000.0),
            rule: Some(self.rule),
            relation: Some(self.relation),
            via: None,
            segments: sim.and_then(|s| SegmentMatch::of(&s.segments)),
            slots: sim.and_then(|s| crate::slots::SlotOverlap::of_pair(&s.slots)),
        };
        match (o.resolves_to().is_some(), o.matched) {
            (true, Some(target)) => MatchRef {
                id: target.id,
                url: target.url,
                title: target.title,
                fingerprint: target.fingerprint,
                published_ms: target.published_ms,
                via: Some(c.id),
                ..scores
            },
            _ => scores,
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
