//! Editors' corrections of decisions: *release* a false duplicate (it becomes unique, and it and
//! its old match never link again) and *merge* a missed one (it becomes a duplicate of an earlier
//! article, and later copies of it link to that article). A [`Correction`] is what the `correct`
//! command writes (to the corrections topic, or a line of `batch --corrections`); the single
//! writer applies it with [`Deduper::correct`], which refuses what it cannot apply with a
//! [`Refusal`] that says why and what to do instead.
//!
//! The index keeps no article text, so a correction carries the article it corrects (as it was
//! input): the corrected decision is published as that article's own output record with a
//! `dedup.correction` member, and the standby and `index rebuild` restore it from there like any
//! decision. Applying a correction twice changes nothing (it is recognised by its time), and an
//! older correction of an article than the one applied is refused.

use crate::dedup::{Decision, Deduper, Verdict};
use crate::error::IndexError;
use crate::index::{
    ArticleStore, CorrectionKind, CorrectionNote, MatchRef, MatchRule, PairChange, SegmentMatch,
    StoredArticle, StoredDecision,
};
use crate::simhash::Fingerprint;
use serde::{Deserialize, Serialize};

/// The limits on `by` and `reason`, in bytes (kept with the stored correction).
pub use crate::index::{
    MAX_CORRECTION_BY_BYTES as MAX_BY_BYTES, MAX_CORRECTION_REASON_BYTES as MAX_REASON_BYTES,
};

/// One correction, as the `correct` command writes it (schema: `schemas/correction.schema.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Correction {
    pub kind: CorrectionKind,
    /// The article corrected.
    pub id: String,
    /// A merge's original: the earlier article `id` repeats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub into: Option<String>,
    /// Who made it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// Why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When (RFC 3339): identifies the correction and orders the corrections of one article.
    pub at: String,
    /// The version of the article corrected (its `dedup.fingerprint`): a correction of a version
    /// the index no longer holds is refused.
    pub fingerprint: Fingerprint,
    /// The article as it was input (JSON object text, without `dedup`): the corrected output
    /// record is this plus the corrected `dedup` member.
    pub article: String,
}

/// Why a correction record cannot be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("not a correction: {0}")]
pub struct BadCorrection(pub String);

impl Correction {
    /// Reads and checks one correction record.
    pub fn parse(bytes: &[u8]) -> Result<Correction, BadCorrection> {
        let c: Correction =
            serde_json::from_slice(bytes).map_err(|e| BadCorrection(e.to_string()))?;
        c.check()?;
        Ok(c)
    }

    fn check(&self) -> Result<(), BadCorrection> {
        let bad = |m: String| Err(BadCorrection(m));
        if self.id.is_empty() || self.id.len() > crate::article::MAX_ID_BYTES {
            return bad(format!(
                "`id` must be 1..{} bytes",
                crate::article::MAX_ID_BYTES
            ));
        }
        if self.id.contains('\0') || self.into.as_ref().is_some_and(|i| i.contains('\0')) {
            return bad("an id may not hold a NUL character (\\u0000)".into());
        }
        match (self.kind, &self.into) {
            (CorrectionKind::Merge, None) => return bad("a merge needs `into`".into()),
            (CorrectionKind::Release, Some(_)) => return bad("a release has no `into`".into()),
            _ => {}
        }
        if self.by.as_ref().is_some_and(|b| b.len() > MAX_BY_BYTES) {
            return bad(format!("`by` is longer than {MAX_BY_BYTES} bytes"));
        }
        if self
            .reason
            .as_ref()
            .is_some_and(|r| r.len() > MAX_REASON_BYTES)
        {
            return bad(format!("`reason` is longer than {MAX_REASON_BYTES} bytes"));
        }
        if crate::time::parse_time(&self.at).is_none() {
            return bad(format!("`at` {:?} is not an RFC 3339 time", self.at));
        }
        Ok(())
    }

    /// When it was made (Unix ms).
    pub fn at_ms(&self) -> i64 {
        crate::time::parse_time(&self.at).unwrap_or(i64::MIN)
    }

    /// The correction as one JSON line (no newline).
    pub fn to_json(&self) -> String {
        // Plain strings and enums: serializing cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Why a correction was not applied. Each says what to do instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "article {0:?} is not in the index: no such id was decided, or the retention window \
         removed it"
    )]
    UnknownId(String),
    #[error(
        "article {id:?} is outside the retention window: its event time {event} is more than \
         {window} before the newest ({newest}); it no longer matches any new article, so a \
         correction would change nothing"
    )]
    OutsideRetention {
        id: String,
        event: String,
        window: String,
        newest: String,
    },
    #[error("cannot merge article {0:?} into itself")]
    MergeIntoItself(String),
    #[error(
        "cannot merge {id:?} into {into:?}: {into:?} was published later ({into_at}) than {id:?} \
         ({id_at}); merge the later article into the earlier one: `newsdedup correct merge --id \
         {into} --into {id}`"
    )]
    MergeIntoLater {
        id: String,
        into: String,
        id_at: String,
        into_at: String,
    },
    #[error(
        "cannot merge {id:?} into {into:?}: {into:?} is itself a duplicate of {original:?}; merge \
         into its original instead: `newsdedup correct merge --id {id} --into {original}`"
    )]
    MergeIntoDuplicate {
        id: String,
        into: String,
        original: String,
    },
    #[error("article {0:?} is unique: there is no duplicate decision to release")]
    ReleaseOfUnique(String),
    #[error(
        "article {id:?} is already a duplicate of {of:?}: to link it to another article, release \
         it first (`newsdedup correct release --id {id}`)"
    )]
    AlreadyDuplicate { id: String, of: String },
    #[error(
        "article {id:?} changed since the correction was made: the index holds version {stored}, \
         the correction names {named}; look at its latest decision and correct that"
    )]
    OtherVersion {
        id: String,
        stored: Fingerprint,
        named: Fingerprint,
    },
    #[error(
        "a later correction of article {id:?} is already applied (made {applied}); this one \
         (made {at}) would undo it"
    )]
    Superseded {
        id: String,
        applied: String,
        at: String,
    },
}

impl Refusal {
    /// A short name for metrics and headers.
    pub fn as_str(&self) -> &'static str {
        match self {
            Refusal::UnknownId(_) => "unknown_id",
            Refusal::OutsideRetention { .. } => "outside_retention",
            Refusal::MergeIntoItself(_) => "merge_into_itself",
            Refusal::MergeIntoLater { .. } => "merge_into_later",
            Refusal::MergeIntoDuplicate { .. } => "merge_into_duplicate",
            Refusal::ReleaseOfUnique(_) => "release_of_unique",
            Refusal::AlreadyDuplicate { .. } => "already_duplicate",
            Refusal::OtherVersion { .. } => "other_version",
            Refusal::Superseded { .. } => "superseded",
        }
    }
}

/// A correction applied: the decision the article now has (with its `correction`), and whether
/// the index changed (false: this correction was applied before, and only its output is made
/// again).
#[derive(Debug, Clone, PartialEq)]
pub struct Corrected {
    pub decision: Decision,
    pub changed: bool,
}

fn rfc3339(ms: i64) -> String {
    crate::time::format_rfc3339(ms)
}

impl<S: ArticleStore> Deduper<S> {
    /// Applies an editor's correction (see the module documentation). `Ok(Err(_))`: refused, the
    /// index unchanged.
    pub fn correct(&mut self, c: &Correction) -> Result<Result<Corrected, Refusal>, IndexError> {
        let at_ms = c.at_ms();
        let Some(stored) = self.store().get(&c.id)? else {
            return Ok(Err(Refusal::UnknownId(c.id.clone())));
        };
        if stored.fingerprint != c.fingerprint {
            return Ok(Err(Refusal::OtherVersion {
                id: c.id.clone(),
                stored: stored.fingerprint,
                named: c.fingerprint,
            }));
        }
        if let Some(applied) = &stored.correction {
            if applied.at_ms == at_ms && applied.kind == c.kind {
                return Ok(Ok(Corrected {
                    decision: decision_of(&stored),
                    changed: false,
                }));
            }
            if applied.at_ms > at_ms {
                return Ok(Err(Refusal::Superseded {
                    id: c.id.clone(),
                    applied: rfc3339(applied.at_ms),
                    at: c.at.clone(),
                }));
            }
        }
        if let Some(refusal) = self.outside_retention(&c.id, &stored) {
            return Ok(Err(refusal));
        }
        let note = CorrectionNote {
            kind: c.kind,
            by: c.by.clone(),
            reason: c.reason.clone(),
            at_ms,
            previous_decision: stored.decision,
            previous_match: stored.matched.clone(),
        };
        let seq = self.store().counts().next_seq;
        let (article, pair) = match c.kind {
            CorrectionKind::Release => {
                let Some(old) = stored
                    .matched
                    .as_ref()
                    .filter(|_| stored.decision == StoredDecision::Duplicate)
                else {
                    return Ok(Err(Refusal::ReleaseOfUnique(c.id.clone())));
                };
                let pair = PairChange {
                    other: old.id.clone(),
                    separated: true,
                    at_ms,
                };
                let article = StoredArticle {
                    seq,
                    decision: StoredDecision::Unique,
                    matched: None,
                    indexed_extension: false,
                    correction: Some(note),
                    ..stored.clone()
                };
                (article, pair)
            }
            CorrectionKind::Merge => {
                let into = c.into.clone().unwrap_or_default();
                let matched = match self.merge_target(c, &stored, &into)? {
                    Ok(m) => m,
                    Err(refusal) => return Ok(Err(refusal)),
                };
                let pair = PairChange {
                    other: into,
                    separated: false,
                    at_ms,
                };
                let article = StoredArticle {
                    seq,
                    decision: StoredDecision::Duplicate,
                    matched: Some(matched),
                    indexed_extension: false,
                    correction: Some(note),
                    ..stored.clone()
                };
                (article, pair)
            }
        };
        self.store_mut()
            .write_correction(&c.id, &stored, &article, &pair)?;
        Ok(Ok(Corrected {
            decision: decision_of(&article),
            changed: true,
        }))
    }

    /// The refusal of an article older than the retention window, if it is.
    fn outside_retention(&self, id: &str, stored: &StoredArticle) -> Option<Refusal> {
        let window = self.store().retention()?;
        let newest = self.store().counts().stream_time_ms;
        (stored.event_ms < newest.saturating_sub(window.as_ms())).then(|| {
            Refusal::OutsideRetention {
                id: id.to_owned(),
                event: rfc3339(stored.event_ms),
                window: window.to_string(),
                newest: rfc3339(newest),
            }
        })
    }

    /// The match reference a merge of `stored` into `into` gives it, or why it cannot be made.
    fn merge_target(
        &self,
        c: &Correction,
        stored: &StoredArticle,
        into: &str,
    ) -> Result<Result<MatchRef, Refusal>, IndexError> {
        if into == c.id {
            return Ok(Err(Refusal::MergeIntoItself(c.id.clone())));
        }
        if stored.decision == StoredDecision::Duplicate {
            let of = stored
                .matched
                .as_ref()
                .map_or_else(String::new, |m| m.id.clone());
            return Ok(Err(Refusal::AlreadyDuplicate {
                id: c.id.clone(),
                of,
            }));
        }
        let Some(original) = self.store().get(into)? else {
            return Ok(Err(Refusal::UnknownId(into.to_owned())));
        };
        if let Some(refusal) = self.outside_retention(into, &original) {
            return Ok(Err(refusal));
        }
        if original.decision == StoredDecision::Duplicate {
            return Ok(Err(Refusal::MergeIntoDuplicate {
                id: c.id.clone(),
                into: into.to_owned(),
                original: original
                    .matched
                    .as_ref()
                    .map_or_else(String::new, |m| m.id.clone()),
            }));
        }
        if original.event_ms > stored.event_ms {
            return Ok(Err(Refusal::MergeIntoLater {
                id: c.id.clone(),
                into: into.to_owned(),
                id_at: rfc3339(stored.event_ms),
                into_at: rfc3339(original.event_ms),
            }));
        }
        let sim = match (&stored.sketch, &original.sketch) {
            (Some(a), Some(b)) => Some(a.similarity(b)),
            _ => None,
        };
        Ok(Ok(MatchRef {
            id: into.to_owned(),
            url: original.url.clone(),
            title: original.title.clone(),
            fingerprint: original.fingerprint,
            distance: stored.fingerprint.distance(original.fingerprint),
            containment: sim.map(|s| (s.containment * 1000.0).round() / 1000.0),
            published_ms: original.published_ms,
            contained: sim.map(|s| (s.a_in_b * 1000.0).round() / 1000.0),
            rule: Some(MatchRule::Editor),
            relation: Some(self.config().relation_of(sim)),
            via: None,
            segments: sim.and_then(|s| SegmentMatch::of(&s.segments)),
        }))
    }
}

/// The decision a stored (corrected) article stands for, as its output record shows it.
fn decision_of(a: &StoredArticle) -> Decision {
    let verdict = match (&a.decision, &a.matched) {
        (StoredDecision::Duplicate, Some(m)) => Verdict::Duplicate(m.clone()),
        _ => Verdict::Unique,
    };
    Decision {
        verdict,
        fingerprint: a.fingerprint,
        replayed: false,
        candidates: 0,
        similarity: None,
        revision: a.revision,
        event_ms: a.event_ms,
        event_time_clamped: a.event_time_clamped,
        superseded: false,
        correction: a.correction.clone(),
        // The record republished is the correction's copy of the article, whose text the stored
        // sketch need not be of: a reader computes its sketch from that text.
        sketch: None,
    }
}

/// The longest line a correction of an article of at most `max_article_bytes` can take (`batch
/// --corrections`): the article is embedded as a JSON string, where every byte of a valid
/// article's text escapes to at most 2 (`"`, `\\` and the whitespace JSON allows between
/// tokens), and the other strings (ids, `by`, `reason`) to at most 6 per byte (`\u00XX`).
pub fn max_line_bytes(max_article_bytes: usize) -> usize {
    /// Member names, `kind`, `at`, `fingerprint` and punctuation, with room to spare.
    const FIXED_BYTES: usize = 512;
    max_article_bytes
        .saturating_mul(2)
        .saturating_add(6 * (2 * crate::article::MAX_ID_BYTES + MAX_BY_BYTES + MAX_REASON_BYTES))
        .saturating_add(FIXED_BYTES)
}

/// The exact command that makes a correction, for reports (shell-quoted where needed); with
/// `since_ms`, `--since` that time (the record the command looks for is not older).
pub fn command_line(
    kind: CorrectionKind,
    id: &str,
    into: Option<&str>,
    since_ms: Option<i64>,
) -> String {
    let quote = |s: &str| {
        if !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.:/@+=,".contains(c))
        {
            s.to_owned()
        } else {
            format!("'{}'", s.replace('\'', "'\\''"))
        }
    };
    // `--id=VALUE`, not `--id VALUE`: an id starting with `-` would be read as a flag.
    let mut line = format!("newsdedup correct {} --id={}", kind.as_str(), quote(id));
    if let Some(into) = into {
        line.push_str(&format!(" --into={}", quote(into)));
    }
    if let Some(ms) = since_ms {
        line.push_str(&format!(" --since {}", crate::time::format_rfc3339(ms)));
    }
    line
}
