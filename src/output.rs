//! The output record, defined once for `batch` and the Kafka service: the input article's own
//! JSON with a `dedup` member appended (unique, or duplicate with the match that explains it),
//! or, for an input that is not a valid article, a small record with the reason. The Kafka edge
//! only adds its envelope (key and headers, `kafka::record`).

use crate::article::Article;
use crate::dedup::{Decision, Verdict};
use serde_json::{json, Map, Value};

/// Largest `dedup` member, as JSON text: the match's id (at most 512 bytes), url and title (at
/// most `dedup::MAX_MATCH_TEXT_BYTES` each), each of which JSON escaping can grow up to 6 times
/// (`\u0001`), plus the fixed members.
pub const MAX_DEDUP_MEMBER_BYTES: usize =
    6 * (crate::article::MAX_ID_BYTES + 2 * crate::dedup::MAX_MATCH_TEXT_BYTES) + 1024;

/// The `dedup` member of a decided article's output record.
pub fn dedup_member(decision: &Decision) -> Value {
    let mut member = match &decision.verdict {
        Verdict::Unique => {
            json!({"decision": "unique", "fingerprint": decision.fingerprint.to_hex()})
        }
        Verdict::Duplicate(m) => json!({
            "decision": "duplicate",
            "fingerprint": decision.fingerprint.to_hex(),
            "match": {
                "id": m.id,
                "url": m.url,
                "title": m.title,
                "fingerprint": m.fingerprint.to_hex(),
                "distance": m.distance,
                "containment": m.containment,
                "published_at": m.published_ms.map(crate::time::format_rfc3339),
                "contained": m.contained,
                "rule": m.rule.map(|r| r.as_str()),
                "relation": m.relation.map(|r| r.as_str()),
            }
        }),
    };
    // The article's claimed time was too far ahead of its arrival: the arrival time was used.
    if let (true, Some(obj)) = (decision.event_time_clamped, member.as_object_mut()) {
        obj.insert("event_time_clamped".into(), json!(true));
    }
    // An older version of a known id, delivered after the newer one it does not replace.
    if let (true, Some(obj)) = (decision.superseded, member.as_object_mut()) {
        obj.insert("superseded".into(), json!(true));
    }
    // A later version of a known id: which one, and what it replaced.
    if let (Some(r), Some(obj)) = (decision.revision, member.as_object_mut()) {
        obj.insert("revision".into(), json!(r.number));
        obj.insert(
            "previous_fingerprint".into(),
            json!(r.previous_fingerprint.to_hex()),
        );
    }
    member
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

/// The output record as JSON text: `open` ([`open_record`]) with the decision's `dedup` member
/// and the closing brace appended: the input object plus `dedup` (last; an input `dedup` member
/// is replaced).
pub fn close_record(mut open: Vec<u8>, decision: &Decision) -> Vec<u8> {
    open.extend_from_slice(b"\"dedup\":");
    open.extend_from_slice(dedup_member(decision).to_string().as_bytes());
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
