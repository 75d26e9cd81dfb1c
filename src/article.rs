//! The input article: parsing and validation of one raw record (a JSONL line or a Kafka message value).
//!
//! Validation is strict about the fields newsdedup relies on and lenient about everything else: any
//! field we do not know is passed through to the output untouched, in its original order.

use serde_json::{Map, Value};
use std::fmt;

/// Longest accepted article id, in bytes (ids are Kafka keys and RocksDB keys).
pub const MAX_ID_BYTES: usize = 512;
/// Default cap on one raw article record. Large enough for a 10 MB article body.
pub const DEFAULT_MAX_ARTICLE_BYTES: usize = 16 * 1024 * 1024;

/// Optional string fields: if present (and not null) they must be strings.
const OPTIONAL_STRING_FIELDS: [&str; 4] = ["title", "url", "source", "published_at"];

/// Why a record is not a valid article. The code (`as_str`) is stable: it is a metrics label and
/// appears in DLQ headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InvalidReason {
    Oversized,
    BadUtf8,
    BadJson,
    NotObject,
    MissingField,
    WrongType,
    BadId,
    EmptyText,
    NoFeatures,
}

impl InvalidReason {
    pub const ALL: [InvalidReason; 9] = [
        InvalidReason::Oversized,
        InvalidReason::BadUtf8,
        InvalidReason::BadJson,
        InvalidReason::NotObject,
        InvalidReason::MissingField,
        InvalidReason::WrongType,
        InvalidReason::BadId,
        InvalidReason::EmptyText,
        InvalidReason::NoFeatures,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            InvalidReason::Oversized => "oversized",
            InvalidReason::BadUtf8 => "bad_utf8",
            InvalidReason::BadJson => "bad_json",
            InvalidReason::NotObject => "not_object",
            InvalidReason::MissingField => "missing_field",
            InvalidReason::WrongType => "wrong_type",
            InvalidReason::BadId => "bad_id",
            InvalidReason::EmptyText => "empty_text",
            InvalidReason::NoFeatures => "no_features",
        }
    }
}

/// A record that could not be processed, with a human-readable message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidArticle {
    pub reason: InvalidReason,
    pub message: String,
    /// The article id, when one could be read from the record.
    pub id: Option<String>,
}

impl fmt::Display for InvalidArticle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.reason.as_str(), self.message)
    }
}

impl std::error::Error for InvalidArticle {}

impl InvalidArticle {
    pub fn new(reason: InvalidReason, message: impl Into<String>) -> Self {
        InvalidArticle {
            reason,
            message: message.into(),
            id: None,
        }
    }

    fn with_id(mut self, id: Option<String>) -> Self {
        self.id = id;
        self
    }
}

/// A validated article. Holds the whole input object so the output can echo it unchanged.
#[derive(Debug, Clone, PartialEq)]
pub struct Article {
    fields: Map<String, Value>,
}

impl Article {
    /// Parses and validates one raw record.
    pub fn parse(raw: &[u8], max_bytes: usize) -> Result<Article, InvalidArticle> {
        if raw.len() > max_bytes {
            return Err(InvalidArticle::new(
                InvalidReason::Oversized,
                format!("record is {} bytes; the limit is {max_bytes}", raw.len()),
            ));
        }
        let text = match std::str::from_utf8(raw) {
            Ok(text) => text,
            Err(e) => {
                // Best effort: a lossy decode may still reveal the id, which helps operators find the record.
                let lossy = String::from_utf8_lossy(raw);
                let id = serde_json::from_str::<Value>(&lossy)
                    .ok()
                    .and_then(|v| v.get("id").and_then(Value::as_str).map(str::to_owned));
                return Err(InvalidArticle::new(
                    InvalidReason::BadUtf8,
                    format!("record is not valid UTF-8 ({e})"),
                )
                .with_id(id));
            }
        };
        let value: Value = serde_json::from_str(text).map_err(|e| {
            InvalidArticle::new(InvalidReason::BadJson, format!("not valid JSON: {e}"))
        })?;
        match value {
            Value::Object(fields) => Article::from_object(fields),
            other => Err(InvalidArticle::new(
                InvalidReason::NotObject,
                format!("expected a JSON object, got {}", json_type(&other)),
            )),
        }
    }

    /// Validates an already-decoded JSON object.
    pub fn from_object(fields: Map<String, Value>) -> Result<Article, InvalidArticle> {
        let id = match fields.get("id") {
            None | Some(Value::Null) => {
                return Err(InvalidArticle::new(
                    InvalidReason::MissingField,
                    "missing required field `id`",
                ))
            }
            Some(Value::String(id)) => id.clone(),
            Some(other) => {
                return Err(InvalidArticle::new(
                    InvalidReason::WrongType,
                    format!("field `id` must be a string, got {}", json_type(other)),
                ))
            }
        };
        let fail = |reason, message: String| {
            Err(InvalidArticle::new(reason, message).with_id(Some(id.clone())))
        };
        if id.is_empty() {
            return Err(InvalidArticle::new(
                InvalidReason::BadId,
                "field `id` is empty",
            ));
        }
        if id.len() > MAX_ID_BYTES {
            return Err(InvalidArticle::new(
                InvalidReason::BadId,
                format!(
                    "field `id` is {} bytes; the limit is {MAX_ID_BYTES}",
                    id.len()
                ),
            ));
        }
        match fields.get("content") {
            None | Some(Value::Null) => {
                return fail(
                    InvalidReason::MissingField,
                    "missing required field `content`".into(),
                )
            }
            Some(Value::String(_)) => {}
            Some(other) => {
                return fail(
                    InvalidReason::WrongType,
                    format!("field `content` must be a string, got {}", json_type(other)),
                )
            }
        }
        for name in OPTIONAL_STRING_FIELDS {
            match fields.get(name) {
                None | Some(Value::Null) | Some(Value::String(_)) => {}
                Some(other) => {
                    return fail(
                        InvalidReason::WrongType,
                        format!("field `{name}` must be a string, got {}", json_type(other)),
                    )
                }
            }
        }
        let article = Article { fields };
        if article.content().trim().is_empty() && article.title().trim().is_empty() {
            return fail(
                InvalidReason::EmptyText,
                "nothing to fingerprint: `content` and `title` are both empty".into(),
            );
        }
        Ok(article)
    }

    fn str_field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).and_then(Value::as_str)
    }

    pub fn id(&self) -> &str {
        self.str_field("id").unwrap_or_default()
    }

    pub fn content(&self) -> &str {
        self.str_field("content").unwrap_or_default()
    }

    /// The title, or "" when absent.
    pub fn title(&self) -> &str {
        self.str_field("title").unwrap_or_default()
    }

    pub fn url(&self) -> Option<&str> {
        self.str_field("url")
    }

    /// The whole input object.
    pub fn fields(&self) -> &Map<String, Value> {
        &self.fields
    }

    pub fn into_fields(self) -> Map<String, Value> {
        self.fields
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Article, InvalidArticle> {
        Article::parse(s.as_bytes(), DEFAULT_MAX_ARTICLE_BYTES)
    }

    fn reason(s: &[u8]) -> InvalidReason {
        Article::parse(s, 64).unwrap_err().reason
    }

    #[test]
    fn valid_article_keeps_unknown_fields_in_order() {
        let a = parse(r#"{"z":1,"id":"a1","content":"正文","title":"标题","extra":{"k":[1,2]}}"#)
            .unwrap();
        assert_eq!(a.id(), "a1");
        assert_eq!(a.content(), "正文");
        assert_eq!(a.title(), "标题");
        assert_eq!(a.url(), None);
        let keys: Vec<&str> = a.fields().keys().map(String::as_str).collect();
        assert_eq!(keys, ["z", "id", "content", "title", "extra"]);
    }

    #[test]
    fn title_only_is_valid_and_null_optionals_are_absent() {
        let a = parse(r#"{"id":"a","content":"","title":"只有标题","url":null}"#).unwrap();
        assert_eq!(a.url(), None);
    }

    #[test]
    fn every_invalid_class_has_its_reason() {
        assert_eq!(reason(&[b'x'; 65]), InvalidReason::Oversized);
        assert_eq!(reason(b"{\"id\":\"a\xff\"}"), InvalidReason::BadUtf8);
        assert_eq!(reason(b"{\"id\":"), InvalidReason::BadJson);
        assert_eq!(reason(b"[1,2]"), InvalidReason::NotObject);
        assert_eq!(reason(b"{\"content\":\"x\"}"), InvalidReason::MissingField);
        assert_eq!(reason(b"{\"id\":\"a\"}"), InvalidReason::MissingField);
        assert_eq!(
            reason(b"{\"id\":7,\"content\":\"x\"}"),
            InvalidReason::WrongType
        );
        assert_eq!(
            reason(b"{\"id\":\"a\",\"content\":5}"),
            InvalidReason::WrongType
        );
        assert_eq!(
            reason(b"{\"id\":\"a\",\"content\":\"x\",\"title\":[]}"),
            InvalidReason::WrongType
        );
        assert_eq!(
            reason(b"{\"id\":\"\",\"content\":\"x\"}"),
            InvalidReason::BadId
        );
        assert_eq!(
            reason(b"{\"id\":\"a\",\"content\":\" \"}"),
            InvalidReason::EmptyText
        );
    }

    #[test]
    fn id_is_reported_when_readable() {
        let e = parse(r#"{"id":"a9","content":3}"#).unwrap_err();
        assert_eq!(e.id.as_deref(), Some("a9"));
        let e = Article::parse(b"{\"id\":\"a9\",\"content\":\"\xff\"}", 1000).unwrap_err();
        assert_eq!(e.reason, InvalidReason::BadUtf8);
        assert_eq!(e.id.as_deref(), Some("a9"));
    }

    #[test]
    fn id_length_limit() {
        let long = "x".repeat(MAX_ID_BYTES + 1);
        let e = parse(&format!(r#"{{"id":"{long}","content":"x"}}"#)).unwrap_err();
        assert_eq!(e.reason, InvalidReason::BadId);
        let ok = "x".repeat(MAX_ID_BYTES);
        assert!(parse(&format!(r#"{{"id":"{ok}","content":"x"}}"#)).is_ok());
    }
}
