//! The output record, defined once for `batch` and the Kafka service: the input article's own
//! JSON with a `dedup` member appended (unique, or duplicate with the match that explains it),
//! or, for an input that is not a valid article, a small record with the reason. The Kafka edge
//! only adds its envelope (key and headers, `kafka::record`).

use crate::article::Article;
use crate::dedup::{Decision, Verdict};
use crate::index::{
    CorrectionKind, CorrectionNote, MatchRef, MatchRule, Relation, SegmentMatch, StoredDecision,
};
use crate::simhash::Fingerprint;
use crate::slots::SlotOverlap;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::borrow::Cow;

/// Largest `dedup` member of a decision, as JSON text: the match's id and `via` (at most 512
/// bytes each), url and title (at most `dedup::MAX_MATCH_TEXT_BYTES` each), each of which JSON
/// escaping can grow up to 6 times (`\u0001`), plus the fixed members.
pub const MAX_DEDUP_MEMBER_BYTES: usize =
    6 * (2 * crate::article::MAX_ID_BYTES + 2 * crate::dedup::MAX_MATCH_TEXT_BYTES) + 1024;

/// How much longer the `dedup` member of a correction's own record can be: the `correction`
/// member (`by`, `reason` and the previous match, escaped, plus the fixed members).
pub const MAX_CORRECTION_MEMBER_BYTES: usize = 6
    * (crate::index::MAX_CORRECTION_BY_BYTES
        + crate::index::MAX_CORRECTION_REASON_BYTES
        + 2 * crate::article::MAX_ID_BYTES
        + 2 * crate::dedup::MAX_MATCH_TEXT_BYTES)
    + 1024;

/// The `dedup` member of an output record, defined once: [`dedup_member`] writes it, `restore`
/// and the audit read it back with the same type, so writer and readers cannot drift apart.
/// Field order is the output's member order. Text borrows from the record where it can.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DedupMember<'a> {
    /// `unique`, `duplicate` or `invalid`.
    #[serde(borrow)]
    pub decision: Cow<'a, str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<Fingerprint>,
    #[serde(
        rename = "match",
        borrow,
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub matched: Option<MatchMember<'a>>,
    /// The article's claimed time was too far ahead of its arrival: the arrival time was used.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub event_time_clamped: bool,
    /// An older version of a known id, delivered after the newer one it does not replace.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub superseded: bool,
    /// A later version of a known id: its number, and the fingerprint of what it replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_fingerprint: Option<Fingerprint>,
    /// The editor's correction that made this decision.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub correction: Option<CorrectionMember<'a>>,
    /// Why an input is invalid (`reason: why`).
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Cow<'a, str>>,
}

/// The `match` member: the earlier article a duplicate repeats, and why. Every member is written,
/// `null` when unknown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatchMember<'a> {
    #[serde(borrow)]
    pub id: Cow<'a, str>,
    #[serde(borrow, default)]
    pub url: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub title: Option<Cow<'a, str>>,
    pub fingerprint: Fingerprint,
    pub distance: u32,
    #[serde(default)]
    pub containment: Option<f64>,
    /// RFC 3339 UTC.
    #[serde(borrow, default)]
    pub published_at: Option<Cow<'a, str>>,
    #[serde(default)]
    pub contained: Option<f64>,
    #[serde(default)]
    pub rule: Option<MatchRule>,
    #[serde(default)]
    pub relation: Option<Relation>,
    /// The indexed article the match was found through (one an editor merged into the match).
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub via: Option<Cow<'a, str>>,
    /// The segments shared with the match (`index::SegmentMatch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segments: Option<Box<SegmentMatch>>,
    /// The event slots shared with the match (`slots::SlotOverlap`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slots: Option<Box<SlotOverlap>>,
}

/// The `correction` member: who corrected the decision, when, why, and what it was before.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CorrectionMember<'a> {
    pub kind: CorrectionKind,
    #[serde(borrow, default)]
    pub by: Option<Cow<'a, str>>,
    /// The id of the key the correction was signed with, when the service checks signatures.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub reason: Option<Cow<'a, str>>,
    /// When the service applied it (RFC 3339 UTC; in records written before `made_at`: when the
    /// editor made it): orders the corrections of one article.
    #[serde(borrow)]
    pub at: Cow<'a, str>,
    /// When the editor made it (the correction's own `at`): identifies the correction.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub made_at: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub previous: PreviousMember<'a>,
}

/// The decision a correction replaced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PreviousMember<'a> {
    #[serde(borrow)]
    pub decision: Cow<'a, str>,
    #[serde(
        rename = "match",
        borrow,
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub matched: Option<MatchMember<'a>>,
}

impl<'a> CorrectionMember<'a> {
    pub fn new(note: &'a CorrectionNote) -> Self {
        CorrectionMember {
            kind: note.kind,
            by: note.by.as_deref().map(Cow::Borrowed),
            key_id: note.key_id.as_deref().map(Cow::Borrowed),
            reason: note.reason.as_deref().map(Cow::Borrowed),
            at: Cow::Owned(crate::time::format_rfc3339(note.at_ms)),
            made_at: note
                .made_ms
                .map(|ms| Cow::Owned(crate::time::format_rfc3339(ms))),
            previous: PreviousMember {
                decision: Cow::Borrowed(match note.previous_decision {
                    StoredDecision::Unique => "unique",
                    StoredDecision::Duplicate => "duplicate",
                }),
                matched: note.previous_match.as_ref().map(MatchMember::new),
            },
        }
    }

    /// The correction as the index stores it; None when `at` is not a time.
    pub fn to_stored(&self) -> Option<CorrectionNote> {
        Some(CorrectionNote {
            kind: self.kind,
            by: self.by.as_deref().map(str::to_owned),
            key_id: self.key_id.as_deref().map(str::to_owned),
            reason: self.reason.as_deref().map(str::to_owned),
            at_ms: crate::time::parse_time(&self.at)?,
            made_ms: match &self.made_at {
                Some(made) => Some(crate::time::parse_time(made)?),
                None => None,
            },
            previous_decision: if self.previous.decision == "duplicate" {
                StoredDecision::Duplicate
            } else {
                StoredDecision::Unique
            },
            previous_match: self.previous.matched.as_ref().map(MatchMember::to_stored),
        })
    }
}

impl<'a> MatchMember<'a> {
    /// The member of a stored match.
    pub fn new(m: &'a MatchRef) -> Self {
        MatchMember {
            id: Cow::Borrowed(m.id.as_str()),
            url: m.url.as_deref().map(Cow::Borrowed),
            title: m.title.as_deref().map(Cow::Borrowed),
            fingerprint: m.fingerprint,
            distance: m.distance,
            containment: m.containment,
            published_at: m
                .published_ms
                .map(|ms| Cow::Owned(crate::time::format_rfc3339(ms))),
            contained: m.contained,
            rule: m.rule,
            relation: m.relation,
            via: m.via.as_deref().map(Cow::Borrowed),
            segments: m.segments.clone(),
            slots: m.slots.clone(),
        }
    }
}

impl MatchMember<'_> {
    /// The match as the index stores it.
    pub fn to_stored(&self) -> MatchRef {
        MatchRef {
            id: self.id.to_string(),
            url: self.url.as_deref().map(str::to_owned),
            title: self.title.as_deref().map(str::to_owned),
            fingerprint: self.fingerprint,
            distance: self.distance,
            containment: self.containment,
            published_ms: self
                .published_at
                .as_deref()
                .and_then(crate::time::parse_time),
            contained: self.contained,
            rule: self.rule,
            relation: self.relation,
            via: self.via.as_deref().map(str::to_owned),
            segments: self.segments.clone(),
            slots: self.slots.clone(),
        }
    }
}

/// The `dedup` member of a decided article's output record.
pub fn dedup_member(decision: &Decision) -> DedupMember<'_> {
    let (name, matched) = match &decision.verdict {
        Verdict::Unique => ("unique", None),
        Verdict::Duplicate(m) => ("duplicate", Some(MatchMember::new(m))),
    };
    DedupMember {
        decision: Cow::Borrowed(name),
        fingerprint: Some(decision.fingerprint),
        matched,
        event_time_clamped: decision.event_time_clamped,
        superseded: decision.superseded,
        revision: decision.revision.map(|r| r.number),
        previous_fingerprint: decision.revision.map(|r| r.previous_fingerprint),
        correction: decision.correction.as_ref().map(CorrectionMember::new),
        error: None,
    }
}

/// The article as the start of its output record: the input object with every member except
/// `dedup` (the decision's own `dedup` replaces it), left open for one more member, i.e.
/// `{"id":"a",...,`. [`close_record`] completes it. Rendered apart from the decision because it
/// can run in parallel, before the serial decision.
///
/// The record's own text is reused as it is (members, order, number spelling and escapes
/// untouched) unless it has a `dedup` member, which only a re-encode can take out.
pub fn open_record(article: &Article) -> Result<Vec<u8>, serde_json::Error> {
    let reencoded;
    let object = if article.has_dedup_member() {
        let mut fields: Map<String, Value> = serde_json::from_str(article.raw())?;
        fields.shift_remove("dedup");
        reencoded = serde_json::to_string(&fields)?;
        reencoded.as_str()
    } else {
        article.raw()
    };
    // A valid record is one object, so its text ends with `}` (JSON whitespace aside): drop it
    // and the whitespace before it, `{"id": "a" }` -> `{"id": "a"`.
    let ws = [' ', '\t', '\n', '\r'];
    let body = object.trim_end_matches(ws);
    let body = body.strip_suffix('}').unwrap_or(body).trim_end_matches(ws);
    // Room for the `dedup` member, so appending it does not copy the record again.
    let mut out = Vec::with_capacity(body.len() + 320);
    out.extend_from_slice(body.as_bytes());
    // A valid article has an `id`, so the object is never empty: a member follows.
    out.push(b',');
    Ok(out)
}

/// The input article of an output record (one [`close_record`] wrote): the record without its
/// `dedup` member, byte for byte as it was input. None if `record` does not end with a `dedup`
/// member.
pub fn input_text(record: &[u8]) -> Option<Vec<u8>> {
    // `dedup` is the last member and its text holds no unescaped quote outside its own keys and
    // strings, so its start is the last `,"dedup":`.
    const MEMBER: &[u8] = b",\"dedup\":";
    let record = record.trim_ascii_end();
    if !record.ends_with(b"}") {
        return None;
    }
    let start = record.windows(MEMBER.len()).rposition(|w| w == MEMBER)?;
    let mut out = record[..start].to_vec();
    out.push(b'}');
    Some(out)
}

/// The output record as JSON text: `open` ([`open_record`]) with the decision's `dedup` member
/// and the closing brace appended: the input object plus `dedup` (last; an input `dedup` member
/// is replaced).
pub fn close_record(mut open: Vec<u8>, decision: &Decision) -> Vec<u8> {
    open.extend_from_slice(b"\"dedup\":");
    // Plain data (strings, numbers, enums): serializing it cannot fail.
    if serde_json::to_writer(&mut open, &dedup_member(decision)).is_err() {
        open.extend_from_slice(b"null");
    }
    open.push(b'}');
    open
}

/// The output line (no newline) of an input that is not a valid article: what `batch` writes and
/// `replay --output` writes for a DLQ record.
pub fn invalid_line(line: Option<u64>, error: &crate::article::InvalidArticle) -> Vec<u8> {
    invalid_record(line, error.id.as_deref(), &error.to_string())
        .to_string()
        .into_bytes()
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
    let member = DedupMember {
        decision: Cow::Borrowed("invalid"),
        fingerprint: None,
        matched: None,
        event_time_clamped: false,
        superseded: false,
        revision: None,
        previous_fingerprint: None,
        correction: None,
        error: Some(Cow::Borrowed(error)),
    };
    out.insert(
        "dedup".into(),
        serde_json::to_value(member).unwrap_or(Value::Null),
    );
    Value::Object(out)
}
