//! One decided record as the audit reads it: a line of `batch` output or the value of a record
//! of the unique / duplicate topic, i.e. the input article plus its `dedup` member (README,
//! "Output"). Only what the report shows is decoded; everything else is skipped.

use serde::Deserialize;
use std::borrow::Cow;

/// Why a record cannot be audited (counted and reported, never fatal).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BadRecord {
    #[error("line is {0} bytes; the limit is {1}")]
    TooLong(usize, usize),
    #[error("not UTF-8")]
    BadUtf8,
    #[error("not a decided record: {0}")]
    Json(String),
    #[error("no `dedup` member: not an output record of newsdedup")]
    NoDedup,
    #[error("decided record without an `id`")]
    NoId,
    #[error("duplicate without `dedup.match`")]
    NoMatch,
    #[error("unknown decision {0:?}")]
    UnknownDecision(String),
    #[error("a {0} record where only unique ones are expected")]
    NotUnique(&'static str),
}

/// The decision of a record.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision<'a> {
    Unique,
    Duplicate(Match<'a>),
    Invalid,
}

impl Decision<'_> {
    pub fn name(&self) -> &'static str {
        match self {
            Decision::Unique => "unique",
            Decision::Duplicate(_) => "duplicate",
            Decision::Invalid => "invalid",
        }
    }
}

/// `dedup.match` of a duplicate: the original it was matched to, and why.
/// The `match` member of a duplicate, as the output writes it.
pub type Match<'a> = crate::output::MatchMember<'a>;

/// A decided record.
#[derive(Debug, Clone, PartialEq)]
pub struct Decided<'a> {
    /// "" for an invalid record without a readable id.
    pub id: Cow<'a, str>,
    pub title: Option<Cow<'a, str>>,
    pub content: Option<Cow<'a, str>>,
    pub url: Option<Cow<'a, str>>,
    pub source: Option<Cow<'a, str>>,
    pub published_at: Option<Cow<'a, str>>,
    pub fingerprint: Option<Cow<'a, str>>,
    pub decision: Decision<'a>,
    /// `dedup.correction`: the editor's correction that made this decision.
    pub correction: Option<Correction<'a>>,
}

/// The `correction` member of a corrected decision, as the output writes it.
pub type Correction<'a> = crate::output::CorrectionMember<'a>;

#[derive(Deserialize)]
struct RawRecord<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    title: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    url: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    source: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    published_at: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    dedup: Option<crate::output::DedupMember<'a>>,
}

/// Reads one decided record.
pub fn parse(bytes: &[u8]) -> Result<Decided<'_>, BadRecord> {
    let text = std::str::from_utf8(bytes).map_err(|_| BadRecord::BadUtf8)?;
    let raw: RawRecord = serde_json::from_str(text).map_err(|e| BadRecord::Json(e.to_string()))?;
    let dedup = raw.dedup.ok_or(BadRecord::NoDedup)?;
    let decision = match dedup.decision.as_ref() {
        "unique" => Decision::Unique,
        "duplicate" => Decision::Duplicate(dedup.matched.ok_or(BadRecord::NoMatch)?),
        "invalid" => Decision::Invalid,
        other => return Err(BadRecord::UnknownDecision(other.chars().take(40).collect())),
    };
    let id = raw.id.unwrap_or_default();
    if id.is_empty() && decision != Decision::Invalid {
        return Err(BadRecord::NoId);
    }
    Ok(Decided {
        id,
        title: raw.title,
        content: raw.content,
        url: raw.url,
        source: raw.source,
        published_at: raw.published_at,
        fingerprint: dedup.fingerprint.map(|f| Cow::Owned(f.to_hex())),
        decision,
        correction: dedup.correction,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_output_records() {
        let d = parse(br#"{"id":"b","title":"T","content":"C","source":"s","extra":[1,{"x":null}],"dedup":{"decision":"duplicate","fingerprint":"00000000000000ff","match":{"id":"a","url":null,"title":"T","fingerprint":"00000000000000fe","distance":1,"containment":0.97}}}"#).unwrap();
        assert_eq!(d.id, "b");
        assert_eq!(d.source.as_deref(), Some("s"));
        match &d.decision {
            Decision::Duplicate(m) => {
                assert_eq!(
                    (m.id.as_ref(), m.distance, m.containment),
                    ("a", 1, Some(0.97))
                )
            }
            other => panic!("{other:?}"),
        }
        let u = parse(br#"{"id":"a","content":"C","dedup":{"decision":"unique","fingerprint":"00000000000000fe"}}"#).unwrap();
        assert_eq!(u.decision, Decision::Unique);
        let i =
            parse(br#"{"line":3,"dedup":{"decision":"invalid","error":"bad_json: x"}}"#).unwrap();
        assert_eq!(i.decision, Decision::Invalid);
    }

    #[test]
    fn bad_records_say_why() {
        assert_eq!(parse(b"\xff"), Err(BadRecord::BadUtf8));
        assert!(matches!(parse(b"not json"), Err(BadRecord::Json(_))));
        assert!(matches!(
            parse(br#"{"id":5,"dedup":{}}"#),
            Err(BadRecord::Json(_))
        ));
        assert_eq!(parse(br#"{"id":"a"}"#), Err(BadRecord::NoDedup));
        assert_eq!(
            parse(br#"{"id":"a","dedup":{"decision":"duplicate"}}"#),
            Err(BadRecord::NoMatch)
        );
        assert_eq!(
            parse(br#"{"dedup":{"decision":"unique"}}"#),
            Err(BadRecord::NoId)
        );
        assert_eq!(
            parse(br#"{"id":"a","dedup":{"decision":"maybe"}}"#),
            Err(BadRecord::UnknownDecision("maybe".into()))
        );
    }
}
