//! The input article: parsing and validation of one raw record (a JSONL line or a Kafka message value).
//!
//! Validation is strict about the fields newsdedup relies on and lenient about everything else: any
//! field we do not know is passed through to the output untouched (as its original text), in its
//! original order.

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::borrow::Cow;
use std::fmt;

use crate::time::UtcOffset;

/// Longest accepted article id, in bytes (ids are Kafka keys and RocksDB keys).
pub const MAX_ID_BYTES: usize = 512;
/// Default cap on one raw article record. Large enough for a 10 MB article body.
pub const DEFAULT_MAX_ARTICLE_BYTES: usize = 16 * 1024 * 1024;

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
    /// A correction record that cannot be read (`newsdedup correct` writes them).
    BadCorrection,
    /// A correction the index cannot apply (`correction::Refusal`).
    RefusedCorrection,
    /// A correction not signed with one of the configured keys (`signing`), or not meant for
    /// this service (`correction::NotAccepted`).
    UnsignedCorrection,
    /// A correction past its `expires`.
    ExpiredCorrection,
}

impl InvalidReason {
    pub const ALL: [InvalidReason; 13] = [
        InvalidReason::Oversized,
        InvalidReason::BadUtf8,
        InvalidReason::BadJson,
        InvalidReason::NotObject,
        InvalidReason::MissingField,
        InvalidReason::WrongType,
        InvalidReason::BadId,
        InvalidReason::EmptyText,
        InvalidReason::NoFeatures,
        InvalidReason::BadCorrection,
        InvalidReason::RefusedCorrection,
        InvalidReason::UnsignedCorrection,
        InvalidReason::ExpiredCorrection,
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
            InvalidReason::BadCorrection => "bad_correction",
            InvalidReason::RefusedCorrection => "refused_correction",
            InvalidReason::UnsignedCorrection => "unsigned_correction",
            InvalidReason::ExpiredCorrection => "expired_correction",
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

/// A validated article, borrowing the record it was read from. Only the fields newsdedup reads
/// are decoded (strings without escapes stay borrowed); every other member is checked for syntax
/// and skipped, and reaches the output as the original text (see [`crate::output::open_record`]).
/// How input records are read: the size limit and the `[input]` section of the configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReadRules {
    /// Largest record, in bytes.
    pub max_bytes: usize,
    /// The UTC offset of a `published_at` written without one.
    pub published_at_offset: UtcOffset,
}

impl ReadRules {
    /// Records up to `max_bytes`, offset-less times read as UTC.
    pub fn new(max_bytes: usize) -> ReadRules {
        ReadRules {
            max_bytes,
            published_at_offset: UtcOffset::UTC,
        }
    }
}

/// The `[input]` section of the configuration file.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InputConfig {
    /// The UTC offset of a `published_at` written without one (`+08:00` for feeds that write
    /// Beijing time bare). Default: UTC.
    pub published_at_offset: UtcOffset,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Article<'a> {
    /// The whole record: valid UTF-8, one JSON object.
    raw: &'a str,
    id: Cow<'a, str>,
    content: Cow<'a, str>,
    /// "" when absent or null.
    title: Cow<'a, str>,
    url: Option<Cow<'a, str>>,
    /// `published_at` as written.
    published_at: Option<Cow<'a, str>>,
    /// The record has a `dedup` member of its own (the output replaces it).
    has_dedup: bool,
}

impl<'a> Article<'a> {
    /// Parses and validates one raw record.
    pub fn parse(raw: &'a [u8], max_bytes: usize) -> Result<Article<'a>, InvalidArticle> {
        if raw.len() > max_bytes {
            return Err(InvalidArticle::new(
                InvalidReason::Oversized,
                format!("record is {} bytes; the limit is {max_bytes}", raw.len()),
            ));
        }
        // SIMD validation: news text is mostly 3-byte CJK, where the standard library's
        // validator took ~2% of a `batch` run.
        let text = match simdutf8::basic::from_utf8(raw) {
            Ok(text) => text,
            Err(_) => return Err(bad_utf8(raw)),
        };
        let mut de = serde_json::Deserializer::from_str(text);
        let top = match TopLevel::deserialize(&mut de).and_then(|top| de.end().map(|()| top)) {
            Ok(top) => top,
            Err(e) => {
                return Err(InvalidArticle::new(
                    InvalidReason::BadJson,
                    format!("not valid JSON: {e}"),
                ))
            }
        };
        let fields = match top {
            TopLevel::Object(fields) => fields,
            TopLevel::Other(kind) => {
                return Err(InvalidArticle::new(
                    InvalidReason::NotObject,
                    format!("expected a JSON object, got {kind}"),
                ))
            }
        };
        Article::validate(text, fields)
    }

    fn validate(raw: &'a str, f: Fields<'a>) -> Result<Article<'a>, InvalidArticle> {
        let id = match f.id {
            None | Some(FieldValue::Null) => {
                return Err(InvalidArticle::new(
                    InvalidReason::MissingField,
                    "missing required field `id`",
                ))
            }
            Some(FieldValue::Str(id)) => id,
            Some(FieldValue::Other(kind)) => {
                return Err(InvalidArticle::new(
                    InvalidReason::WrongType,
                    format!("field `id` must be a string, got {kind}"),
                ))
            }
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
        if id.contains('\0') {
            // The index keys a pair of articles as `<id>\0<other>`: a NUL inside an id would
            // make that key ambiguous.
            return Err(InvalidArticle::new(
                InvalidReason::BadId,
                "field `id` contains a NUL character (\\u0000), which an id may not hold",
            ));
        }
        let invalid = |reason, message: String| {
            InvalidArticle::new(reason, message).with_id(Some(id.clone().into_owned()))
        };
        let content = match f.content {
            None | Some(FieldValue::Null) => {
                return Err(invalid(
                    InvalidReason::MissingField,
                    "missing required field `content`".into(),
                ))
            }
            Some(FieldValue::Str(content)) => content,
            Some(FieldValue::Other(kind)) => {
                return Err(invalid(
                    InvalidReason::WrongType,
                    format!("field `content` must be a string, got {kind}"),
                ))
            }
        };
        // Optional string fields: if present (and not null) they must be strings.
        let optional = |name: &str, v: Option<FieldValue<'a>>| match v {
            None | Some(FieldValue::Null) => Ok(None),
            Some(FieldValue::Str(s)) => Ok(Some(s)),
            Some(FieldValue::Other(kind)) => Err(invalid(
                InvalidReason::WrongType,
                format!("field `{name}` must be a string, got {kind}"),
            )),
        };
        let title = optional("title", f.title)?.unwrap_or_default();
        let url = optional("url", f.url)?;
        optional("source", f.source)?;
        let published_at = optional("published_at", f.published_at)?;
        if content.trim().is_empty() && title.trim().is_empty() {
            return Err(invalid(
                InvalidReason::EmptyText,
                "nothing to fingerprint: `content` and `title` are both empty".into(),
            ));
        }
        Ok(Article {
            raw,
            id,
            content,
            title,
            url,
            published_at,
            has_dedup: f.has_dedup,
        })
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn content(&self) -> &str {
        &self.content
    }

    /// The title, or "" when absent.
    pub fn title(&self) -> &str {
        &self.title
    }

    pub fn url(&self) -> Option<&str> {
        self.url.as_deref()
    }

    /// `published_at` as written (any text; see [`Article::published_ms`]).
    pub fn published_at(&self) -> Option<&str> {
        self.published_at.as_deref()
    }

    /// `published_at` read as a time (Unix ms, see [`crate::time::parse_time_in`]; a time without
    /// an offset is in `naive`): None when absent or not a time this reads (the article is still
    /// valid; its event time then comes from the record or the arrival).
    pub fn published_ms(&self, naive: UtcOffset) -> Option<i64> {
        self.published_at()
            .and_then(|t| crate::time::parse_time_in(t, naive))
    }

    /// The record's own text (trimmed of nothing; see `output::open_record`).
    pub(crate) fn raw(&self) -> &'a str {
        self.raw
    }

    /// The record has a `dedup` member (which the output replaces).
    pub(crate) fn has_dedup_member(&self) -> bool {
        self.has_dedup
    }
}

/// A record that is not UTF-8; a lossy decode may still reveal the id, which helps operators find
/// the record.
fn bad_utf8(raw: &[u8]) -> InvalidArticle {
    let detail = match std::str::from_utf8(raw) {
        Err(e) => e.to_string(),
        Ok(_) => "invalid UTF-8".to_owned(),
    };
    // The borrowing walk, which skips every member but the few it reads: decoding the record
    // into a `Value` to find the id took ~40 times the record's size in memory.
    let lossy = String::from_utf8_lossy(raw);
    let mut de = serde_json::Deserializer::from_str(&lossy);
    let id = match TopLevel::deserialize(&mut de).and_then(|top| de.end().map(|()| top)) {
        Ok(TopLevel::Object(Fields {
            id: Some(FieldValue::Str(id)),
            ..
        // Only an id the record could be decided under: a longer one would make the DLQ record
        // twice the record's size.
        })) if !id.is_empty() && id.len() <= MAX_ID_BYTES && !id.contains('\0') => {
            Some(id.into_owned())
        }
        _ => None,
    };
    InvalidArticle::new(
        InvalidReason::BadUtf8,
        format!("record is not valid UTF-8 ({detail})"),
    )
    .with_id(id)
}

/// The record's top level: an object's fields, or the kind of value it is instead.
enum TopLevel<'a> {
    Object(Fields<'a>),
    Other(&'static str),
}

/// The members newsdedup reads (the last one wins if a name repeats, as in a JSON object
/// decoded into a map); everything else is syntax-checked and skipped.
#[derive(Default)]
struct Fields<'a> {
    id: Option<FieldValue<'a>>,
    content: Option<FieldValue<'a>>,
    title: Option<FieldValue<'a>>,
    url: Option<FieldValue<'a>>,
    source: Option<FieldValue<'a>>,
    published_at: Option<FieldValue<'a>>,
    has_dedup: bool,
}

/// A member's value as far as validation cares: a string, null, or something else (named for the
/// error message).
enum FieldValue<'a> {
    Str(Cow<'a, str>),
    Null,
    Other(&'static str),
}

/// Visitor methods for values a caller only names (in an error message): numbers, booleans and
/// arrays (skipped without decoding), as `$other("a number")` and so on.
macro_rules! visit_named_kinds {
    ($other:path) => {
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok($other("a boolean"))
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok($other("a number"))
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok($other("a number"))
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok($other("a number"))
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok($other("an array"))
        }
    };
}

impl<'de> Deserialize<'de> for TopLevel<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = TopLevel<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut fields = Fields::default();
                while let Some(key) = map.next_key::<Key<'de>>()? {
                    let slot = match key.0.as_ref() {
                        "id" => &mut fields.id,
                        "content" => &mut fields.content,
                        "title" => &mut fields.title,
                        "url" => &mut fields.url,
                        "source" => &mut fields.source,
                        "published_at" => &mut fields.published_at,
                        other => {
                            fields.has_dedup |= other == "dedup";
                            map.next_value::<IgnoredAny>()?;
                            continue;
                        }
                    };
                    *slot = Some(map.next_value::<FieldValue<'de>>()?);
                }
                Ok(TopLevel::Object(fields))
            }
            visit_named_kinds!(TopLevel::Other);
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(TopLevel::Other("a string"))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(TopLevel::Other("null"))
            }
        }
        d.deserialize_any(V)
    }
}

/// A member name, borrowed from the record unless it has escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(s.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> Deserialize<'de> for FieldValue<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = FieldValue<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(FieldValue::Str(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
                Ok(FieldValue::Str(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
                Ok(FieldValue::Str(Cow::Owned(s)))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(FieldValue::Null)
            }
            fn visit_none<E>(self) -> Result<Self::Value, E> {
                Ok(FieldValue::Null)
            }
            visit_named_kinds!(FieldValue::Other);
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(FieldValue::Other("an object"))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn parse(s: &str) -> Result<Article<'_>, InvalidArticle> {
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
        let open = String::from_utf8(crate::output::open_record(&a).unwrap()).unwrap();
        assert_eq!(
            open,
            r#"{"z":1,"id":"a1","content":"正文","title":"标题","extra":{"k":[1,2]},"#
        );
    }

    #[test]
    fn render_keeps_the_record_text_and_replaces_its_dedup_member() {
        // Number spelling, escapes and spacing are the input's own.
        let raw = r#" {"id": "a", "n": 1.50e3, "big": 123456789012345678901234567890, "content": "\u6b63文"}  "#;
        let a = parse(raw).unwrap();
        assert_eq!(a.content(), "正文");
        let open = String::from_utf8(crate::output::open_record(&a).unwrap()).unwrap();
        let body = raw.trim_end();
        assert_eq!(open, format!("{},", &body[..body.len() - 1]));
        let a = parse("{\"id\": \"a\", \"content\": \"x\" \t}").unwrap();
        assert_eq!(
            crate::output::open_record(&a).unwrap(),
            br#"{"id": "a", "content": "x","#
        );
        // A `dedup` member of the input is dropped (the decision's own is appended).
        let a = parse(r#"{"id":"a","dedup":{"decision":"forged"},"content":"x","k":2}"#).unwrap();
        let open = String::from_utf8(crate::output::open_record(&a).unwrap()).unwrap();
        assert_eq!(open, r#"{"id":"a","content":"x","k":2,"#);
    }

    #[test]
    fn member_names_are_compared_after_unescaping_and_the_last_repeat_wins() {
        let a = parse(r#"{"\u0069d":"esc","content":"x","content":"正文"}"#).unwrap();
        assert_eq!(a.id(), "esc");
        assert_eq!(a.content(), "正文");
        let e = parse(r#"{"id":"a","content":"x","content":7}"#).unwrap_err();
        assert_eq!(e.reason, InvalidReason::WrongType);
    }

    #[test]
    fn deep_nesting_is_not_a_crash() {
        // Members newsdedup does not read are skipped without recursion, so depth costs nothing
        // and the record passes through as it is.
        let nested = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let deep = format!(r#"{{"id":"a","content":"x","k":{nested}}}"#);
        let a = parse(&deep).unwrap();
        assert_eq!(crate::output::open_record(&a).unwrap().len(), deep.len());
        // Re-encoding (only to drop an input `dedup` member) is depth-limited: an error, not a
        // stack overflow.
        let deep = format!(r#"{{"id":"a","content":"x","dedup":1,"k":{nested}}}"#);
        assert!(crate::output::open_record(&parse(&deep).unwrap()).is_err());
        // A field newsdedup reads is decoded, and must be a string.
        let deep = format!(r#"{{"id":"a","content":{nested}}}"#);
        assert_eq!(parse(&deep).unwrap_err().reason, InvalidReason::WrongType);
        let e = parse(r#"{"id":"a","content":"x"} trailing"#).unwrap_err();
        assert_eq!(e.reason, InvalidReason::BadJson);
        let e = parse(r#""just a string""#).unwrap_err();
        assert_eq!(e.reason, InvalidReason::NotObject);
        assert!(e.message.contains("a string"), "{}", e.message);
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

    /// The validation rules as they were written against a decoded `serde_json::Value` map
    /// (before fields were parsed borrowed): the reason class and the fields read.
    fn reference(raw: &str) -> Result<(String, String, String, Option<String>), InvalidReason> {
        let v: Value = serde_json::from_str(raw).map_err(|_| InvalidReason::BadJson)?;
        let m = v.as_object().ok_or(InvalidReason::NotObject)?;
        let string = |k: &str| -> Result<Option<String>, InvalidReason> {
            match m.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(InvalidReason::WrongType),
            }
        };
        let id = string("id")?.ok_or(InvalidReason::MissingField)?;
        if id.is_empty() || id.len() > MAX_ID_BYTES || id.contains('\0') {
            return Err(InvalidReason::BadId);
        }
        let content = string("content")?.ok_or(InvalidReason::MissingField)?;
        let title = string("title")?.unwrap_or_default();
        let url = string("url")?;
        string("source")?;
        string("published_at")?;
        if content.trim().is_empty() && title.trim().is_empty() {
            return Err(InvalidReason::EmptyText);
        }
        Ok((id, content, title, url))
    }

    /// Random records built from awkward pieces (escaped and repeated member names, nulls, nested
    /// values, numbers, \u escapes and surrogate pairs, broken syntax) are judged as the
    /// `Value`-map rules judged them, with the same fields read.
    #[test]
    fn borrowed_parse_agrees_with_the_value_map_rules() {
        let names = [
            r#""id""#,
            r#""\u0069d""#,
            r#""content""#,
            r#""cont\u0065nt""#,
            r#""title""#,
            r#""url""#,
            r#""source""#,
            r#""published_at""#,
            r#""dedup""#,
            r#""extra""#,
            r#""""#,
        ];
        let values = [
            r#""a1""#,
            r#""""#,
            r#""  ""#,
            r#""\u4e2d\u6587 正文""#,
            r#""\ud83d\ude00 x""#,
            r#""line\nbreak \"quoted\"""#,
            "null",
            "true",
            "0",
            "-1.5e300",
            "123456789012345678901234567890",
            "[]",
            r#"[1,{"a":[null]}]"#,
            r#"{"k":"v"}"#,
            r#"{"id":"nested"}"#,
        ];
        let mut state = 0x2545f4914f6cdd1du64;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        let mut seen = std::collections::BTreeSet::new();
        for round in 0..20_000 {
            let members = next(6);
            let mut raw = String::from("{");
            for i in 0..members {
                if i > 0 {
                    raw.push(',');
                }
                raw.push_str(names[next(names.len())]);
                raw.push(':');
                raw.push_str(values[next(values.len())]);
            }
            raw.push('}');
            match next(20) {
                0 => {
                    raw.pop(); // truncated
                }
                1 => raw.push_str(" x"),            // trailing garbage
                2 => raw = format!(" \t{raw}\r\n"), // surrounding whitespace
                _ => {}
            }
            let ours = parse(&raw).map(|a| {
                (
                    a.id().to_owned(),
                    a.content().to_owned(),
                    a.title().to_owned(),
                    a.url().map(str::to_owned),
                )
            });
            let ours = ours.map_err(|e| e.reason);
            assert_eq!(ours, reference(&raw), "round {round}: {raw}");
            seen.insert(ours.err().map(InvalidReason::as_str));
        }
        // Every outcome a record can have here did occur.
        for want in [
            None,
            Some("bad_json"),
            Some("missing_field"),
            Some("wrong_type"),
            Some("bad_id"),
            Some("empty_text"),
        ] {
            assert!(seen.contains(&want), "{want:?} never produced: {seen:?}");
        }
    }

    /// The index keys a pair of articles as `<id>\0<other>`: an id holding a NUL would make
    /// the key ambiguous, so it is refused at input.
    #[test]
    fn an_id_holding_a_nul_is_refused() {
        let e = parse(r#"{"id":"a\u0000b","content":"x"}"#).unwrap_err();
        assert_eq!(e.reason, InvalidReason::BadId);
        assert!(e.message.contains("NUL"), "{}", e.message);
        assert!(parse(r#"{"id":"a\u0001b","content":"x"}"#).is_ok());
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
