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
//! decision. The carried article is trusted for nothing: it is fingerprinted and sketched like an
//! input, and refused ([`Refusal::NotTheStoredArticle`]) unless its fingerprint, sketch, title,
//! url and `published_at` are the stored article's, so the record published under an id is the
//! article the index holds for it, with the stored sketch (which a reader then checks against the
//! text and finds equal).
//!
//! Corrections take effect in the order the service reads them, never by the times editors'
//! clocks wrote: each names the correction in effect it was made after ([`Correction::follows`])
//! and applies only on top of it, and the service stamps the time it applies one
//! ([`CorrectionNote::at_ms`], later than every earlier correction of the article and of its
//! pair), which is what replicas order corrections by. The same correction read again (its
//! `at` and kind) changes nothing and only publishes the stored article again; an older one sent
//! again after a later one was applied is refused.

use crate::dedup::{Decision, Deduper, Verdict};
use crate::error::IndexError;
use crate::index::{
    ArticleStore, CorrectionKind, CorrectionNote, IndexWrite, MatchRef, MatchRule, PairChange,
    SegmentMatch, StoredArticle, StoredDecision,
};
use crate::signing::{SignatureError, SigningKey, SigningKeys};
use crate::simhash::Fingerprint;
use crate::sketch::Sketch;
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
    /// The id of the key it is signed with (`signing`), when it is signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// Why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When the editor made it (RFC 3339): with `kind`, identifies the correction (read again,
    /// it changes nothing). It orders nothing: the service stamps the time it applies a
    /// correction, so an editor's clock (skewed, or a year ahead) cannot reorder or freeze an
    /// article's corrections.
    pub at: String,
    /// The time (`dedup.correction.at`) of the correction in effect on the article when this one
    /// was made, from its latest output record; absent when none was. A correction applies only
    /// on top of that one: corrections take effect in the topic's order, and an older one sent
    /// again after a later one was applied is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follows: Option<String>,
    /// The service it is for: the consumer group of the `run` that applies it (`[service]
    /// group_id`; `batch` reads it from its configuration too). Required when signed: a signed
    /// correction applies only where it was meant to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    /// When it stops applying (RFC 3339; at most [`MAX_VALIDITY_MS`] after `at`). Required when
    /// signed: a correction read again once the article's history is empty again (retention,
    /// `index delete` and the article sent again), from the topic, the DLQ or a file, is refused
    /// once expired rather than applied a second time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<String>,
    /// The version of the article corrected (its `dedup.fingerprint`): a correction of a version
    /// the index no longer holds is refused.
    pub fingerprint: Fingerprint,
    /// The article as it was input (JSON object text, without `dedup`): the corrected output
    /// record is this plus the corrected `dedup` member.
    pub article: String,
    /// HMAC-SHA256 (hex) of [`Correction::canonical`] under the key `key_id`
    /// (`signing::SigningKey::sign`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// The article a correction carries, as the prepare stage read it (fingerprinted and sketched
/// like an input): what is compared with the article the index holds under its id.
#[derive(Debug, Clone, PartialEq)]
pub struct CarriedArticle {
    pub fingerprint: Fingerprint,
    pub sketch: Sketch,
    /// None when it has no title (or an empty one), as the index stores it.
    pub title: Option<String>,
    pub url: Option<String>,
    /// `published_at` read as a time.
    pub published_ms: Option<i64>,
    /// The id of the key whose signature of the correction was verified (`signing`); None when
    /// no key is configured.
    pub signed_with: Option<String>,
}

impl CarriedArticle {
    /// The first member in which it is not `stored` (None: it is the stored article, as far as
    /// the index can tell without its text).
    pub fn differs_from(&self, stored: &StoredArticle) -> Option<&'static str> {
        if self.fingerprint != stored.fingerprint {
            Some("fingerprint")
        } else if stored.sketch.is_some_and(|s| s != self.sketch) {
            Some("content sketch")
        } else if self.title != stored.title {
            Some("title")
        } else if self.url != stored.url {
            Some("url")
        } else if self.published_ms != stored.published_ms {
            Some("published_at")
        } else {
            None
        }
    }
}

/// The longest a correction may apply after it was made (31 days): longer, and a copy kept that
/// long (a topic's retention, a DLQ, a file) could be applied again.
pub const MAX_VALIDITY_MS: i64 = 31 * 24 * 3_600_000;

/// The longest `audience` (a consumer group id), in bytes.
pub const MAX_AUDIENCE_BYTES: usize = 255;

/// What a correction must be to apply at this service: signed with one of `keys` (none: not
/// checked), meant for `audience` and not expired.
#[derive(Debug, Clone, Default)]
pub struct Acceptance {
    pub keys: SigningKeys,
    /// This service's consumer group (`[service] group_id`).
    pub audience: String,
}

/// Why a correction may not apply here (DLQ reasons `unsigned_correction` and
/// `expired_correction`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NotAccepted {
    #[error(transparent)]
    Signature(#[from] SignatureError),
    #[error(
        "it is signed but names no `audience` and `expires` (made by a newsdedup correct older \
         than this service): make it again"
    )]
    Unbounded,
    #[error(
        "it is for the service of group {named:?}, not this one ({ours:?}): send it to that \
         service's corrections topic, or make it again with --audience"
    )]
    OtherAudience { named: String, ours: String },
    #[error(
        "it expired at {expires} (now {now}): a correction applies for a limited time (`correct \
         --valid-for`); if it is still wanted, make it again"
    )]
    Expired { expires: String, now: String },
    #[error("its `expires` is more than 31 days after its `at`: make it again with a shorter --valid-for")]
    TooLong,
}

impl NotAccepted {
    /// Whether it is refused for its time only (DLQ reason `expired_correction`).
    pub fn is_expiry(&self) -> bool {
        matches!(self, NotAccepted::Expired { .. })
    }
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
        if let Some(follows) = &self.follows {
            if crate::time::parse_time(follows).is_none() {
                return bad(format!("`follows` {follows:?} is not an RFC 3339 time"));
            }
        }
        if let Some(expires) = &self.expires {
            if crate::time::parse_time(expires).is_none() {
                return bad(format!("`expires` {expires:?} is not an RFC 3339 time"));
            }
        }
        if self
            .audience
            .as_ref()
            .is_some_and(|a| a.is_empty() || a.len() > MAX_AUDIENCE_BYTES)
        {
            return bad(format!("`audience` must be 1..={MAX_AUDIENCE_BYTES} bytes"));
        }
        Ok(())
    }

    /// When it was made (Unix ms).
    pub fn at_ms(&self) -> i64 {
        crate::time::parse_time(&self.at).unwrap_or(i64::MIN)
    }

    /// When the correction it follows was applied (Unix ms; None: it follows none).
    pub fn follows_ms(&self) -> Option<i64> {
        self.follows.as_deref().and_then(crate::time::parse_time)
    }

    /// The correction as one JSON line (no newline).
    pub fn to_json(&self) -> String {
        // Plain strings and enums: serializing cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// What a signature covers: the correction as this program writes it (members in their
    /// order, absent ones left out, minimal escapes), without `signature`; the same whatever
    /// encoding of it a record holds.
    pub fn canonical(&self) -> String {
        Correction {
            signature: None,
            ..self.clone()
        }
        .to_json()
    }

    /// This correction signed with `key` (`key_id` set to its id, `signature` over the rest).
    pub fn signed(&self, key: &SigningKey) -> Correction {
        let mut signed = Correction {
            key_id: Some(key.id.clone()),
            signature: None,
            ..self.clone()
        };
        signed.signature = Some(key.sign(&signed.canonical()));
        signed
    }

    /// Whether it may apply under `acceptance` at `now_ms` (Unix ms): Ok(Some(id)), verified
    /// with key `id`; Ok(None), no key is configured. With keys, it must be signed (see
    /// `signing`), name this service's audience and an expiry; an audience or an expiry it
    /// names is checked even without keys.
    pub fn accept(
        &self,
        acceptance: &Acceptance,
        now_ms: i64,
    ) -> Result<Option<String>, NotAccepted> {
        let signed_with = acceptance.keys.verify(
            self.key_id.as_deref(),
            self.signature.as_deref(),
            &self.canonical(),
        )?;
        if signed_with.is_some() && (self.audience.is_none() || self.expires.is_none()) {
            return Err(NotAccepted::Unbounded);
        }
        if let Some(named) = &self.audience {
            if *named != acceptance.audience {
                return Err(NotAccepted::OtherAudience {
                    named: named.clone(),
                    ours: acceptance.audience.clone(),
                });
            }
        }
        if let Some(expires_ms) = self.expires.as_deref().and_then(crate::time::parse_time) {
            if expires_ms.saturating_sub(self.at_ms()) > MAX_VALIDITY_MS {
                return Err(NotAccepted::TooLong);
            }
            if now_ms >= expires_ms {
                return Err(NotAccepted::Expired {
                    expires: rfc3339(expires_ms),
                    now: rfc3339(now_ms),
                });
            }
        }
        Ok(signed_with)
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
        "the article the correction carries is not the one the index holds under {id:?}: its \
         {differs} differs; a correction can only re-publish the stored article: make it with \
         `newsdedup correct`, which copies the article from its latest output record"
    )]
    NotTheStoredArticle { id: String, differs: &'static str },
    #[error(
        "a later correction of article {id:?} is already applied (applied {applied}) than the \
         one this correction was made after ({follows}): it would undo it; look at the \
         article's latest decision and correct that"
    )]
    Superseded {
        id: String,
        applied: String,
        follows: String,
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
            Refusal::NotTheStoredArticle { .. } => "not_the_stored_article",
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
    /// Applies an editor's correction carrying `carried` (see the module documentation).
    /// `Ok(Err(_))`: refused, the index unchanged.
    pub fn correct(
        &mut self,
        c: &Correction,
        carried: &CarriedArticle,
        now_ms: u64,
    ) -> Result<Result<Corrected, Refusal>, IndexError> {
        let made_ms = c.at_ms();
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
        if let Some(differs) = carried.differs_from(&stored) {
            return Ok(Err(Refusal::NotTheStoredArticle {
                id: c.id.clone(),
                differs,
            }));
        }
        if let Some(applied) = &stored.correction {
            // The one applied, read again (a restart, a re-sent record): its output is made
            // again from the stored article, nothing changes. (Notes written before `made_ms`
            // was kept hold the editor's time as `at_ms`.)
            if applied.made_ms.unwrap_or(applied.at_ms) == made_ms && applied.kind == c.kind {
                return Ok(Ok(Corrected {
                    decision: decision_of(&stored),
                    changed: false,
                }));
            }
        }
        let in_effect = stored.correction.as_ref().map(|a| a.at_ms);
        if in_effect != c.follows_ms() {
            return Ok(Err(Refusal::Superseded {
                id: c.id.clone(),
                applied: in_effect.map_or_else(|| "never".to_owned(), rfc3339),
                follows: c.follows_ms().map_or_else(|| "none".to_owned(), rfc3339),
            }));
        }
        if let Some(refusal) = self.outside_retention(&c.id, &stored) {
            return Ok(Err(refusal));
        }
        let other = match c.kind {
            CorrectionKind::Release => stored.matched.as_ref().map(|m| m.id.as_str()),
            CorrectionKind::Merge => c.into.as_deref(),
        };
        let at_ms = self.stamp(&c.id, &stored, other, now_ms)?;
        let note = CorrectionNote {
            kind: c.kind,
            by: c.by.clone(),
            key_id: carried.signed_with.clone(),
            reason: c.reason.clone(),
            at_ms,
            made_ms: Some(made_ms),
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
                    ..stored.with_correction_of(&StoredArticle {
                        decision: StoredDecision::Unique,
                        matched: None,
                        indexed_extension: false,
                        correction: Some(note),
                        ..stored.clone()
                    })
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
                    ..stored.with_correction_of(&StoredArticle {
                        decision: StoredDecision::Duplicate,
                        matched: Some(matched),
                        indexed_extension: false,
                        correction: Some(note),
                        ..stored.clone()
                    })
                };
                (article, pair)
            }
        };
        self.store_mut()
            .write_correction(&c.id, &stored, &article, &pair)?;
        Ok(Ok(Corrected {
            decision: Decision {
                written: Some(IndexWrite::Corrected {
                    fingerprint: article.fingerprint,
                    at_ms,
                }),
                ..decision_of(&article)
            },
            changed: true,
        }))
    }

    /// The time a correction of `id` (stored as `stored`, paired with `other`) applied now is
    /// stamped with: the service's clock, but later than the correction in effect on the article
    /// and on the pair, so that the stamps order them as they were applied (what a replica
    /// reading the output, in any interleaving of the topics, orders them by) whatever the
    /// clocks of editors, or of the instance that applied the earlier ones.
    fn stamp(
        &self,
        id: &str,
        stored: &StoredArticle,
        other: Option<&str>,
        now_ms: u64,
    ) -> Result<i64, IndexError> {
        let mut at_ms = i64::try_from(now_ms)
            .unwrap_or(i64::MAX)
            .max(stored.corrected_at().saturating_add(1));
        if let Some(other) = other {
            if let Some(pair_ms) = self.store().pair_changed_at(id, other)? {
                at_ms = at_ms.max(pair_ms.saturating_add(1));
            }
        }
        Ok(at_ms)
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
            slots: sim.and_then(|s| crate::slots::SlotOverlap::of_pair(&s.slots)),
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
        // The record republished carries the article checked to be the stored one
        // (`CarriedArticle::differs_from`): its readers take the sketch stored, as the index has it.
        sketch: a.sketch,
        written: None,
    }
}

/// The longest line a correction of an article of at most `max_article_bytes` can take (`batch
/// --corrections`): the article is embedded as a JSON string, where every byte of a valid
/// article's text escapes to at most 2 (`"`, `\\` and the whitespace JSON allows between
/// tokens), and the other strings (ids, `by`, `reason`) to at most 6 per byte (`\u00XX`).
pub fn max_line_bytes(max_article_bytes: usize) -> usize {
    /// Member names, `kind`, the times, `fingerprint`, `key_id`, `signature` and punctuation,
    /// with room to spare.
    const FIXED_BYTES: usize = 512;
    max_article_bytes
        .saturating_mul(2)
        .saturating_add(
            6 * (2 * crate::article::MAX_ID_BYTES
                + MAX_BY_BYTES
                + MAX_REASON_BYTES
                + MAX_AUDIENCE_BYTES),
        )
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

#[cfg(test)]
mod tests {
    use super::*;

    fn correction() -> Correction {
        Correction {
            kind: CorrectionKind::Release,
            id: "a".into(),
            into: None,
            by: Some("ed".into()),
            key_id: None,
            reason: None,
            at: "2026-01-01T00:00:00Z".into(),
            follows: None,
            audience: Some("newsdedup".into()),
            expires: Some("2026-01-02T00:00:00Z".into()),
            fingerprint: Fingerprint(1),
            article: r#"{"id":"a","content":"x"}"#.into(),
            signature: None,
        }
    }

    /// Accepted by the service of group "newsdedup" with key k1 at a time before the
    /// correction's expiry.
    fn acceptance(keys: &[&SigningKey]) -> Acceptance {
        Acceptance {
            keys: SigningKeys::from_keys(keys.iter().map(|k| (*k).clone())),
            audience: "newsdedup".into(),
        }
    }

    const BEFORE_EXPIRY_MS: i64 = 1_767_225_600_000 + 3_600_000;

    #[test]
    fn a_signed_correction_verifies_as_written_and_re_encoded_and_not_once_altered() {
        let key = SigningKey::new("k1", &[7; 32]).unwrap();
        let keys = acceptance(&[&key]);
        let signed = correction().signed(&key);
        assert_eq!(
            signed.accept(&keys, BEFORE_EXPIRY_MS),
            Ok(Some("k1".to_owned()))
        );
        // Members reordered and spaced on the way: the same canonical JSON.
        let value: serde_json::Value = serde_json::from_str(&signed.to_json()).unwrap();
        let mut members: Vec<_> = value.as_object().unwrap().iter().collect();
        members.reverse();
        let reordered = format!(
            "{{ {} }}",
            members
                .iter()
                .map(|(k, v)| format!("{k:?} : {v}"))
                .collect::<Vec<_>>()
                .join(" , ")
        );
        let reparsed = Correction::parse(reordered.as_bytes()).unwrap();
        assert_eq!(
            reparsed.accept(&keys, BEFORE_EXPIRY_MS),
            Ok(Some("k1".to_owned()))
        );
        let altered = Correction {
            by: Some("someone else".into()),
            ..signed
        };
        assert!(matches!(
            altered.accept(&keys, BEFORE_EXPIRY_MS),
            Err(NotAccepted::Signature(SignatureError::Wrong))
        ));
        assert!(matches!(
            correction().accept(&keys, BEFORE_EXPIRY_MS),
            Err(NotAccepted::Signature(SignatureError::Missing))
        ));
    }

    /// A signed correction applies only at the service it names and before its expiry, and a
    /// signed one that names neither (or an expiry too far off) is refused: each bound is signed,
    /// so none can be moved without breaking the signature.
    #[test]
    fn a_signed_correction_applies_only_to_its_audience_and_before_it_expires() {
        let key = SigningKey::new("k1", &[7; 32]).unwrap();
        let here = acceptance(&[&key]);
        let signed = correction().signed(&key);
        assert_eq!(
            signed.accept(&here, BEFORE_EXPIRY_MS),
            Ok(Some("k1".into()))
        );
        let expires_ms = crate::time::parse_time("2026-01-02T00:00:00Z").unwrap();
        let expired = signed.accept(&here, expires_ms).unwrap_err();
        assert!(expired.is_expiry(), "{expired}");
        assert!(expired.to_string().contains("make it again"), "{expired}");
        let elsewhere = Acceptance {
            audience: "other-service".into(),
            ..here.clone()
        };
        assert!(matches!(
            signed.accept(&elsewhere, BEFORE_EXPIRY_MS),
            Err(NotAccepted::OtherAudience { .. })
        ));
        let moved = Correction {
            expires: Some("2026-01-30T00:00:00Z".into()),
            ..signed.clone()
        };
        assert!(matches!(
            moved.accept(&here, expires_ms),
            Err(NotAccepted::Signature(SignatureError::Wrong))
        ));
        for unbounded in [
            Correction {
                audience: None,
                ..correction()
            },
            Correction {
                expires: None,
                ..correction()
            },
        ] {
            assert_eq!(
                unbounded.signed(&key).accept(&here, BEFORE_EXPIRY_MS),
                Err(NotAccepted::Unbounded)
            );
        }
        let too_long = Correction {
            expires: Some("2026-02-02T00:00:01Z".into()),
            ..correction()
        }
        .signed(&key);
        assert_eq!(
            too_long.accept(&here, BEFORE_EXPIRY_MS),
            Err(NotAccepted::TooLong)
        );
        // Without keys nothing must be signed, but what is named still holds.
        let unchecked = Acceptance {
            audience: "newsdedup".into(),
            ..Acceptance::default()
        };
        let unsigned = Correction {
            audience: None,
            expires: None,
            ..correction()
        };
        assert_eq!(unsigned.accept(&unchecked, BEFORE_EXPIRY_MS), Ok(None));
        assert!(correction()
            .accept(&unchecked, expires_ms)
            .unwrap_err()
            .is_expiry());
    }
}
