//! The records the service reads and writes, independent of the Kafka client: an input message
//! with its coordinates, and the output record (topic kind, key, value, headers) built from a
//! decision or an invalid input.

use crate::article::{InvalidArticle, InvalidReason};
use crate::dedup::Decision;
use crate::index::IndexWrite;
use std::sync::Arc;
use std::time::Instant;

/// The value of the header `key` of a record read from Kafka (the first one, if several).
pub fn header_value<'m>(m: &'m impl rdkafka::message::Message, key: &str) -> Option<&'m [u8]> {
    use rdkafka::message::Headers;
    m.headers()?.iter().find(|h| h.key == key)?.value
}

/// Header: topic the input record was read from.
pub const H_SOURCE_TOPIC: &str = "newsdedup.source.topic";
/// Header: partition of the input record (decimal).
pub const H_SOURCE_PARTITION: &str = "newsdedup.source.partition";
/// Header: offset of the input record (decimal).
pub const H_SOURCE_OFFSET: &str = "newsdedup.source.offset";
/// Header: timestamp of the input record, Unix milliseconds (decimal), when it has one.
pub const H_SOURCE_TIMESTAMP: &str = "newsdedup.source.timestamp";
/// Header: `unique`, `duplicate` or `invalid`.
pub const H_DECISION: &str = "newsdedup.decision";
/// Header of a decided article: the content sketch of its text as the decision computed it
/// (binary, `Sketch::to_bytes`), so that a standby or a rebuild restores it without recomputing
/// it.
pub const H_SKETCH: &str = "newsdedup.sketch";
/// DLQ header: the stable reason code (`bad_json`, `oversized`, ...).
pub const H_ERROR_REASON: &str = "newsdedup.error.reason";
/// DLQ header: human-readable explanation.
pub const H_ERROR_MESSAGE: &str = "newsdedup.error.message";
/// DLQ header: present when the value was cut to fit the broker's size limit: original length.
pub const H_ERROR_TRUNCATED: &str = "newsdedup.error.truncated_from";
/// DLQ fallback header: the input's key was too large and dropped: its length.
pub const H_ERROR_KEY_DROPPED: &str = "newsdedup.error.key_dropped_bytes";
/// DLQ fallback header: the input's own headers were too large and dropped: their total bytes.
pub const H_ERROR_HEADERS_DROPPED: &str = "newsdedup.error.headers_dropped_bytes";
/// Input headers with this prefix are dropped (they would collide with ours).
pub const HEADER_PREFIX: &str = "newsdedup.";

/// Most headers read from one input record. A real producer sets a handful; a record with more
/// goes to the DLQ (reason `oversized`) carrying these, so that no count of headers, however
/// small each is, sets the memory or the size of what the service holds and produces.
pub const MAX_INPUT_HEADERS: usize = 1024;

/// Bytes a header adds to a produced record as librdkafka counts it against
/// `message.max.bytes`: key and value plus their two length fields (varints of at most 5 bytes).
pub fn encoded_header_bytes(key: &str, value: &[u8]) -> usize {
    key.len() + value.len() + 10
}

/// The headers an input record of `count` headers is read with: the first [`MAX_INPUT_HEADERS`]
/// of `headers` (a missing value read as empty), and how many more there were.
pub fn detach_headers<'h>(
    count: usize,
    headers: impl Iterator<Item = (&'h str, Option<&'h [u8]>)>,
) -> (Vec<(String, Vec<u8>)>, usize) {
    let dropped = count.saturating_sub(MAX_INPUT_HEADERS);
    let kept = headers
        .take(MAX_INPUT_HEADERS)
        .map(|(k, v)| (k.to_owned(), v.map(<[u8]>::to_vec).unwrap_or_default()))
        .collect();
    (kept, dropped)
}

/// Bytes the service holds for one consumed record, for the in-flight bound: value, key, and per
/// kept header its bytes and its two heap allocations' bookkeeping.
pub fn held_bytes<'h>(
    payload_len: usize,
    key_len: usize,
    headers: impl Iterator<Item = (&'h str, Option<&'h [u8]>)>,
) -> usize {
    payload_len
        + key_len
        + headers
            .take(MAX_INPUT_HEADERS)
            .map(|(k, v)| {
                k.len() + v.map_or(0, <[u8]>::len) + std::mem::size_of::<(String, Vec<u8>)>()
            })
            .sum::<usize>()
}

/// Longest `newsdedup.error.message` header value, in bytes.
const MAX_ERROR_MESSAGE_BYTES: usize = 1024;

/// One consumed record, detached from the client.
#[derive(Debug, Clone)]
pub struct InputMessage {
    pub topic: Arc<str>,
    pub partition: i32,
    pub offset: i64,
    /// Epoch of the partition's assignment when the message was registered (see `tracker`).
    pub epoch: u64,
    pub timestamp_ms: Option<i64>,
    pub key: Option<Vec<u8>>,
    /// None when the record has no value (a tombstone).
    pub payload: Option<Vec<u8>>,
    /// The first [`MAX_INPUT_HEADERS`] headers of the record.
    pub headers: Vec<(String, Vec<u8>)>,
    /// How many headers the record carried beyond [`MAX_INPUT_HEADERS`] (not kept): such a
    /// record goes to the DLQ.
    pub headers_dropped: usize,
    /// When the service received it (for the processing-latency histogram).
    pub received: Instant,
    /// A record of the corrections topic (an editor's correction), not of the input topic.
    pub correction: bool,
}

/// Which output topic a record goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutputKind {
    Unique,
    Duplicate,
    Dlq,
}

impl OutputKind {
    pub fn as_str(self) -> &'static str {
        match self {
            OutputKind::Unique => "unique",
            OutputKind::Duplicate => "duplicate",
            OutputKind::Dlq => "dlq",
        }
    }
}

/// A record to produce.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputRecord {
    pub kind: OutputKind,
    pub key: Option<Vec<u8>>,
    pub payload: Vec<u8>,
    pub headers: Vec<(String, Vec<u8>)>,
    /// For a decided article, its id and what its decision wrote to the index: if the record
    /// can never reach its topic, that write is undone (`RunnerHandle::undo`), so that the index
    /// and the output topics (what a standby or a rebuild reads) agree.
    pub indexed: Option<Indexed>,
    /// For a DLQ record, the line `batch` writes for the same invalid input (id, when known, and
    /// the reason), so that a sink writing JSONL (`replay --output`) writes exactly that.
    pub invalid_line: Option<Vec<u8>>,
}

/// A decided article's id and what its decision wrote to the index.
#[derive(Debug, Clone, PartialEq)]
pub struct Indexed {
    pub id: String,
    /// None when the decision wrote nothing (a replay of a published version, a correction read
    /// again): a refusal of its record then changes nothing already published.
    pub written: Option<IndexWrite>,
}

/// Identifies the input message an output record answers, for acknowledgement.
#[derive(Debug, Clone, Copy)]
pub struct Ticket {
    pub partition: i32,
    pub offset: i64,
    pub epoch: u64,
    pub received: Instant,
    /// Of a correction: its acknowledgement goes to the corrections loop, not the offset
    /// tracker.
    pub correction: bool,
}

impl InputMessage {
    pub fn ticket(&self) -> Ticket {
        Ticket {
            partition: self.partition,
            offset: self.offset,
            epoch: self.epoch,
            received: self.received,
            correction: self.correction,
        }
    }

    /// Pass-through input headers followed by the source coordinates. `source_time` is the
    /// input's time as a rebuild reads it (`newsdedup.source.timestamp`).
    fn output_headers(&self, decision: &str, source_time: Option<i64>) -> Vec<(String, Vec<u8>)> {
        let mut h: Vec<(String, Vec<u8>)> = self
            .headers
            .iter()
            .filter(|(k, _)| !k.starts_with(HEADER_PREFIX))
            .cloned()
            .collect();
        h.push((H_SOURCE_TOPIC.into(), self.topic.as_bytes().to_vec()));
        h.push((
            H_SOURCE_PARTITION.into(),
            self.partition.to_string().into_bytes(),
        ));
        h.push((H_SOURCE_OFFSET.into(), self.offset.to_string().into_bytes()));
        if let Some(ts) = source_time {
            h.push((H_SOURCE_TIMESTAMP.into(), ts.to_string().into_bytes()));
        }
        h.push((H_DECISION.into(), decision.as_bytes().to_vec()));
        h
    }
}

/// Bytes of the service's own headers, at most (source coordinates, decision and sketch).
const OWN_HEADER_BYTES: usize = 512;
/// Per-record overhead of the Kafka record format (lengths, offsets, attributes), at most.
const RECORD_OVERHEAD_BYTES: usize = 128;

/// The largest size the output record of `input` can reach when its value starts with
/// `open_len` bytes (`output::open_record`) and its key is `id`: known before the decision.
pub fn worst_case_output_bytes(input: &InputMessage, id: &str, open_len: usize) -> usize {
    let passthrough: usize = input
        .headers
        .iter()
        .filter(|(k, _)| !k.starts_with(HEADER_PREFIX))
        .map(|(k, v)| encoded_header_bytes(k, v))
        .sum();
    open_len
        + crate::output::MAX_DEDUP_MEMBER_BYTES
        + id.len()
        + passthrough
        + OWN_HEADER_BYTES
        + input.topic.len()
        + RECORD_OVERHEAD_BYTES
}

/// The output record of a decided article: the same JSON as `batch` (input object + `dedup`),
/// keyed by article id.
pub fn decided_record(
    input: &InputMessage,
    id: &str,
    record: Vec<u8>,
    decision: &Decision,
) -> OutputRecord {
    let kind = if decision.is_duplicate() {
        OutputKind::Duplicate
    } else {
        OutputKind::Unique
    };
    // A correction republishes an article decided earlier: a rebuild must read the event time
    // the article was decided with, not the correction's.
    let mut headers = input.output_headers(
        kind.as_str(),
        if input.correction {
            Some(decision.event_ms)
        } else {
            input.timestamp_ms
        },
    );
    if let Some(sketch) = &decision.sketch {
        headers.push((H_SKETCH.into(), sketch.to_bytes().to_vec()));
    }
    OutputRecord {
        kind,
        key: Some(id.as_bytes().to_vec()),
        payload: record,
        headers,
        indexed: Some(Indexed {
            id: id.to_owned(),
            written: decision.written.clone(),
        }),
        invalid_line: None,
    }
}

/// The DLQ record of an invalid input: its original bytes and key, plus reason headers;
/// `invalid_line` is the input's invalid-record line (`pipeline::Outcome::Invalid`).
pub fn dlq_record(
    input: InputMessage,
    error: &InvalidArticle,
    invalid_line: Vec<u8>,
) -> OutputRecord {
    let mut headers = input.output_headers("invalid", input.timestamp_ms);
    headers.push((
        H_ERROR_REASON.into(),
        error.reason.as_str().as_bytes().to_vec(),
    ));
    headers.push((
        H_ERROR_MESSAGE.into(),
        truncate_utf8(&error.message, MAX_ERROR_MESSAGE_BYTES)
            .as_bytes()
            .to_vec(),
    ));
    OutputRecord {
        kind: OutputKind::Dlq,
        key: input.key,
        payload: input.payload.unwrap_or_default(),
        headers,
        indexed: None,
        invalid_line: Some(invalid_line),
    }
}

/// Bounds of a DLQ fallback record (value, key, pass-through headers), so that its total size
/// is known before it is produced: with the service's own headers it stays under 80 KiB, far
/// below any broker's limit, and a second refusal can only mean a misconfigured topic.
pub const FALLBACK_MAX_VALUE_BYTES: usize = 64 * 1024;
pub const FALLBACK_MAX_KEY_BYTES: usize = 1024;
pub const FALLBACK_MAX_PASSTHROUGH_HEADER_BYTES: usize = 8 * 1024;

/// A record the broker refused as too large becomes a DLQ record (reason `oversized`) whose value
/// is the first [`FALLBACK_MAX_VALUE_BYTES`] of the refused value; the source headers locate the
/// original. A key or pass-through headers larger than their bound are dropped, with a header
/// giving their size.
pub fn oversized_fallback(rejected: OutputRecord, broker_error: &str) -> OutputRecord {
    let original_len = rejected.payload.len();
    let mut payload = rejected.payload;
    payload.truncate(FALLBACK_MAX_VALUE_BYTES);
    let (ours, passthrough): (Vec<_>, Vec<_>) = rejected
        .headers
        .into_iter()
        .filter(|(k, _)| k != H_DECISION && k != H_ERROR_REASON && k != H_ERROR_MESSAGE)
        .partition(|(k, _)| k.starts_with(HEADER_PREFIX));
    let passthrough_bytes: usize = passthrough
        .iter()
        .map(|(k, v)| encoded_header_bytes(k, v))
        .sum();
    let mut headers = ours;
    if passthrough_bytes <= FALLBACK_MAX_PASSTHROUGH_HEADER_BYTES {
        headers.extend(passthrough);
    } else {
        headers.push((
            H_ERROR_HEADERS_DROPPED.into(),
            passthrough_bytes.to_string().into_bytes(),
        ));
    }
    let key = match rejected.key {
        Some(k) if k.len() > FALLBACK_MAX_KEY_BYTES => {
            headers.push((H_ERROR_KEY_DROPPED.into(), k.len().to_string().into_bytes()));
            None
        }
        other => other,
    };
    let what = match rejected.kind {
        OutputKind::Dlq => "the dead-letter record".to_owned(),
        kind => format!("the {} output record", kind.as_str()),
    };
    let correction = rejected
        .indexed
        .as_ref()
        .and_then(|i| i.written.as_ref())
        .is_some_and(IndexWrite::is_correction);
    let message = if correction {
        format!("correction refused: the broker refused {what} of {original_len} bytes ({broker_error}); the correction is not applied and the article keeps its earlier decision; value truncated")
    } else {
        format!(
            "the broker refused {what} of {original_len} bytes ({broker_error}); value truncated"
        )
    };
    let error = InvalidArticle {
        reason: InvalidReason::Oversized,
        message: truncate_utf8(&message, MAX_ERROR_MESSAGE_BYTES).to_owned(),
        id: rejected.indexed.as_ref().map(|i| i.id.clone()),
    };
    headers.push((H_DECISION.into(), b"invalid".to_vec()));
    headers.push((H_ERROR_REASON.into(), b"oversized".to_vec()));
    headers.push((H_ERROR_MESSAGE.into(), error.message.as_bytes().to_vec()));
    headers.push((
        H_ERROR_TRUNCATED.into(),
        original_len.to_string().into_bytes(),
    ));
    OutputRecord {
        kind: OutputKind::Dlq,
        key,
        payload,
        headers,
        indexed: None,
        invalid_line: Some(crate::output::invalid_line(None, &error)),
    }
}

/// True for a record made by [`oversized_fallback`]: if the broker refuses it too, nothing
/// smaller can be sent.
pub fn is_fallback(record: &OutputRecord) -> bool {
    record.headers.iter().any(|(k, _)| k == H_ERROR_TRUNCATED)
}

/// Bytes the record counts against `message.max.bytes`: value, key and encoded headers.
pub fn record_bytes(record: &OutputRecord) -> usize {
    record.payload.len()
        + record.key.as_ref().map_or(0, Vec::len)
        + record
            .headers
            .iter()
            .map(|(k, v)| encoded_header_bytes(k, v))
            .sum::<usize>()
}

fn truncate_utf8(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn input() -> InputMessage {
        InputMessage {
            topic: Arc::from("articles.raw"),
            partition: 2,
            offset: 41,
            epoch: 1,
            timestamp_ms: Some(1_700_000_000_000),
            key: Some(b"k".to_vec()),
            payload: Some(b"{not json".to_vec()),
            headers: vec![
                ("trace".into(), b"t1".to_vec()),
                ("newsdedup.decision".into(), b"forged".to_vec()),
                ("newsdedup.sketch".into(), b"forged".to_vec()),
            ],
            headers_dropped: 0,
            received: Instant::now(),
            correction: false,
        }
    }

    fn header<'a>(r: &'a OutputRecord, k: &str) -> Vec<&'a [u8]> {
        r.headers
            .iter()
            .filter(|(n, _)| n == k)
            .map(|(_, v)| v.as_slice())
            .collect()
    }

    /// A real duplicate decision (built through the public pipeline, not a struct literal, so the
    /// test does not depend on the decision's fields).
    fn duplicate_decision() -> Decision {
        let dir = tempfile::tempdir().unwrap();
        let config = crate::config::Config::default();
        let fp = crate::fingerprint::Fingerprinter::new(&config.fingerprint).unwrap();
        let index =
            crate::index::RocksIndex::open(dir.path(), fp.identity(), &config.index).unwrap();
        let mut deduper = crate::dedup::Deduper::new(index, 3);
        let text = "国务院常务会议部署进一步做好稳就业工作，要求各地区各部门加大援企稳岗力度，支持高校毕业生就业创业。";
        let mut last = None;
        for id in ["a", "b"] {
            let raw = serde_json::json!({"id": id, "title": "稳就业", "content": text}).to_string();
            let prepared = crate::pipeline::prepare(
                raw.as_bytes(),
                &fp,
                &crate::article::ReadRules::new(1 << 20),
            );
            last = match crate::pipeline::decide(&mut deduper, prepared, None, 0).unwrap() {
                crate::pipeline::Outcome::Decided { decision, .. } => Some(decision),
                other => panic!("{other:?}"),
            };
        }
        let decision = last.unwrap();
        assert!(decision.is_duplicate());
        decision
    }

    #[test]
    fn decided_record_has_id_key_and_source_headers() {
        let decision = duplicate_decision();
        let value = serde_json::json!({"id": "b", "content": "x", "dedup": crate::output::dedup_member(&decision)});
        let r = decided_record(&input(), "b", value.to_string().into_bytes(), &decision);
        assert_eq!(r.kind, OutputKind::Duplicate);
        assert_eq!(r.key.as_deref(), Some(&b"b"[..]));
        assert_eq!(serde_json::from_slice::<Value>(&r.payload).unwrap(), value);
        assert_eq!(header(&r, H_SOURCE_TOPIC), [b"articles.raw"]);
        assert_eq!(header(&r, H_SOURCE_PARTITION), [b"2"]);
        assert_eq!(header(&r, H_SOURCE_OFFSET), [b"41"]);
        assert_eq!(header(&r, H_SOURCE_TIMESTAMP), [b"1700000000000"]);
        assert_eq!(
            header(&r, H_DECISION),
            [b"duplicate"],
            "forged input header dropped"
        );
        assert_eq!(
            header(&r, "trace"),
            [b"t1"],
            "other input headers pass through"
        );
        let sketch = decision.sketch.expect("a decision stores its sketch");
        assert_eq!(header(&r, H_SKETCH), [&sketch.to_bytes()[..]]);
    }

    #[test]
    fn dlq_record_keeps_original_bytes() {
        let err = InvalidArticle::new(
            InvalidReason::BadJson,
            "not valid JSON: ".to_owned() + &"é".repeat(2000),
        );
        let r = dlq_record(input(), &err, crate::output::invalid_line(None, &err));
        assert_eq!(r.kind, OutputKind::Dlq);
        assert_eq!(r.payload, b"{not json");
        assert_eq!(r.key.as_deref(), Some(&b"k"[..]));
        assert_eq!(header(&r, H_ERROR_REASON), [b"bad_json"]);
        let msg = header(&r, H_ERROR_MESSAGE)[0];
        assert!(msg.len() <= MAX_ERROR_MESSAGE_BYTES && std::str::from_utf8(msg).is_ok());
        assert_eq!(header(&r, H_DECISION), [b"invalid"]);

        let f = oversized_fallback(r, "Broker: Message size too large");
        assert_eq!(f.payload, b"{not json");
        assert_eq!(header(&f, H_ERROR_REASON), [b"oversized"]);
        assert_eq!(header(&f, H_ERROR_TRUNCATED), [b"9"]);
        assert_eq!(header(&f, H_SOURCE_OFFSET), [b"41"]);
        assert_eq!(f.key.as_deref(), Some(&b"k"[..]));
        assert_eq!(header(&f, "trace"), [b"t1"]);
        assert!(is_fallback(&f));
    }

    #[test]
    fn fallback_is_bounded_whatever_the_input() {
        // A 1.1 MB key, 200 KB of headers and a 2 MB value: the fallback fits in 80 KiB.
        let mut msg = input();
        msg.key = Some(vec![b'k'; 1_100_000]);
        msg.payload = Some(vec![b'x'; 2_000_000]);
        msg.headers = (0..200)
            .map(|i| (format!("h{i}"), vec![b'v'; 1000]))
            .collect();
        let err = InvalidArticle::new(InvalidReason::BadJson, "not valid JSON");
        let refused = dlq_record(msg, &err, crate::output::invalid_line(None, &err));
        assert!(!is_fallback(&refused));
        let f = oversized_fallback(refused, "Broker: Message size too large");
        assert!(record_bytes(&f) < 80 * 1024, "{} bytes", record_bytes(&f));
        assert_eq!(f.key, None);
        assert_eq!(header(&f, H_ERROR_KEY_DROPPED), [b"1100000"]);
        assert_eq!(header(&f, H_ERROR_HEADERS_DROPPED), [b"202690"]);
        assert!(header(&f, "h1").is_empty());
        assert_eq!(
            header(&f, H_SOURCE_OFFSET),
            [b"41"],
            "source coordinates kept"
        );
        assert_eq!(header(&f, H_ERROR_TRUNCATED), [b"2000000"]);
        assert!(is_fallback(&f));
    }

    /// Half a million empty headers (a 1 MB record under the default topic limit) are read as
    /// the first 1024 and a count: the memory held and the DLQ record are bounded, and the
    /// encoded size counts each header's two length fields.
    #[test]
    fn headers_are_read_up_to_the_cap_and_counted_as_librdkafka_encodes_them() {
        let many: Vec<(&str, Option<&[u8]>)> = vec![("", None); 520_000];
        let (kept, dropped) = detach_headers(many.len(), many.iter().copied());
        assert_eq!(kept.len(), MAX_INPUT_HEADERS);
        assert_eq!(dropped, 520_000 - MAX_INPUT_HEADERS);
        let held = held_bytes(1, 0, many.iter().copied());
        assert!(
            (MAX_INPUT_HEADERS * 48..64 * 1024).contains(&held),
            "{held}"
        );
        let (few, none_dropped) = detach_headers(1, [("trace", Some(&b"t1"[..]))].into_iter());
        assert_eq!(
            (few, none_dropped),
            (vec![("trace".into(), b"t1".to_vec())], 0)
        );
        assert_eq!(encoded_header_bytes("", b""), 10);

        // A DLQ record with every kept header: its fallback drops them by their encoded size.
        let mut msg = input();
        msg.headers = vec![(String::new(), Vec::new()); 900];
        let err = InvalidArticle::new(InvalidReason::Oversized, "too many headers");
        let refused = dlq_record(msg, &err, crate::output::invalid_line(None, &err));
        assert!(record_bytes(&refused) >= 9_000);
        let f = oversized_fallback(refused, "Broker: Message size too large");
        assert_eq!(header(&f, H_ERROR_HEADERS_DROPPED), [b"9000"]);
        assert!(header(&f, "").is_empty());
    }
}
