//! Key and value layout of the RocksDB column families.
//!
//! Block families `block0`..`block3` (one per 16-bit block position, most significant first):
//!   key   = block value (2 bytes, big endian)
//!   value = the bucket: every unique article whose fingerprint has that block value there, as
//!           (fingerprint, sequence number) pairs, in the order they were added (see `block_bucket`)
//! A candidate lookup is one batched point read of 4 buckets that reads fingerprints straight from
//! the values; an insert is 4 blind merge operands (no read-modify-write). The article's id is in
//! `ids`, under the sequence number.
//!
//! `bands`: the content-sketch LSH bands of unique articles (the candidate path of the second
//! check): 8 Jaccard bands (two bins each) and 4 containment bands (one bin each), one key per
//! bucket (band, band key):
//!   key   = band number (1 byte) || band key (8, BE)
//!   value = the bucket: the sequence numbers of the articles sharing it, or only their count when
//!           crowded (see `bucket`)
//! Articles join and leave a bucket by merge operands, so writes stay blind. The entries of the
//! most recent articles are held in memory and reach the family as ingested files (see `recent`);
//! one more key, `BANDED_BELOW_KEY`, says which articles have theirs in the family. A lookup reads an
//! article's 12 buckets with one batched point read; a bucket no indexed article shares — nearly
//! every one — is answered by the bloom filters without reading a data block. Keeping them out of
//! the block buckets keeps those short.
//!
//! `ids`: key = sequence number (8, BE), value = article id (UTF-8), for every unique article: the
//! one copy of the id that the 16 block and band entries refer to by sequence number. Read only
//! for the candidates a lookup finds (a few per lookup; most lookups find none), which keeps the
//! families every lookup reads small: an id in each of them would be 16 copies per article.
//! `articles`: key = article id, value = format byte || sketch (binary) || JSON `StoredArticle`
//! (see `ARTICLE_VALUE_FORMAT`).
//! `expiry`: every article (unique or duplicate) by event time, the retention window's queue:
//!   key   = event time (Unix ms, 8 bytes BE, times before 1970 as 0) || sequence number (8, BE)
//!   value = article id (UTF-8)
//! Keys sort oldest first, so the articles due for removal are one range at the start.
//! `meta`: fingerprint identity, format and counters (articles, unique, next sequence number and
//! stream time: 4 x 8 bytes BE), the read positions of a rebuilt index, how far corrections were
//! read into it (`corrections/...`, see `META_CORRECTIONS_PREFIX`), the pairs editors
//! separated (`pair/...`, see `META_PAIR_PREFIX`) and what each article's latest correction
//! replaced (`undo/...`, see `META_UNDO_PREFIX`).

use crate::simhash::BLOCKS;

pub const BLOCK_FAMILIES: [&str; BLOCKS] = ["block0", "block1", "block2", "block3"];
pub const BANDS_FAMILY: &str = "bands";
pub const IDS: &str = "ids";
pub const ARTICLES: &str = "articles";
pub const EXPIRY: &str = "expiry";
pub const META: &str = "meta";
/// Every column family, in the order `index stats` lists them.
pub const ALL_FAMILIES: [&str; BLOCKS + 5] = [
    BLOCK_FAMILIES[0],
    BLOCK_FAMILIES[1],
    BLOCK_FAMILIES[2],
    BLOCK_FAMILIES[3],
    BANDS_FAMILY,
    IDS,
    ARTICLES,
    EXPIRY,
    META,
];

pub const META_IDENTITY: &[u8] = b"fingerprint_identity";
pub const META_COUNTS: &[u8] = b"counts";
pub const META_FORMAT: &[u8] = b"format";
/// A random id given to the index when it is first asked for one (16 hex digits): names what
/// belongs to this index alone, such as its position in the corrections topic when several
/// members, each with its own index, share a consumer group.
pub const META_INSTANCE: &[u8] = b"instance";
/// Prefix of the `meta` keys `position/<topic>/<partition>` (value: the next offset to read, 8
/// bytes BE): how far an index built from the service's output topics (`index rebuild`,
/// `standby`) has read them, written in the same atomic write as the articles read.
pub const META_POSITION_PREFIX: &[u8] = b"position/";
/// Prefix of the `meta` keys `corrections/<topic>/<partition>` (value: the next offset, 8 bytes
/// BE): how far the corrections topic was read into this index: written by `run` once each
/// correction's outcome is acknowledged (and at its first start on an index without articles:
/// the topic's end), by a rebuild or standby with each corrected record. It follows the index (a
/// copy, a restored backup), never expires like a consumer group's offsets, and a takeover keeps
/// it.
pub const META_CORRECTIONS_PREFIX: &[u8] = b"corrections/";

/// Prefix of the `meta` keys `pair/<id>\0<other id>` (value: the time of the latest correction of
/// the pair, 8 bytes BE Unix ms, then 1 if an editor separated the two, 0 if joined again): the
/// pairs editors keep apart, each stored under both orders.
pub const META_PAIR_PREFIX: &[u8] = b"pair/";

/// The `meta` key of the pair (`id`, `other`).
pub fn pair_key(id: &str, other: &str) -> Vec<u8> {
    let mut k = META_PAIR_PREFIX.to_vec();
    k.extend_from_slice(id.as_bytes());
    k.push(0);
    k.extend_from_slice(other.as_bytes());
    k
}

/// (id, other) of a pair key, or None if it is not one.
pub fn parse_pair_key(key: &[u8]) -> Option<(String, String)> {
    let rest = key.strip_prefix(META_PAIR_PREFIX)?;
    let split = rest.iter().position(|&b| b == 0)?;
    Some((
        std::str::from_utf8(&rest[..split]).ok()?.to_owned(),
        std::str::from_utf8(&rest[split + 1..]).ok()?.to_owned(),
    ))
}

/// Prefix of the `meta` keys `undo/<id>`: what the latest correction of `id` replaced (the
/// correction's time, 8 bytes BE Unix ms; the other id of the pair it changed, its length 4 bytes
/// BE first; that pair's value before it, its length 4 bytes BE first, 0 when it had none, or
/// `u32::MAX` when the correction left the pair alone; then the article's `articles` value
/// before it), written with the correction, so that a correction whose output can never be
/// published is undone exactly (`RocksIndex::revert_correction`). Overwritten by the next
/// correction of the id, removed when undone.
pub const META_UNDO_PREFIX: &[u8] = b"undo/";

/// The `meta` key of what the latest correction of `id` replaced.
pub fn undo_key(id: &str) -> Vec<u8> {
    let mut k = META_UNDO_PREFIX.to_vec();
    k.extend_from_slice(id.as_bytes());
    k
}

/// The `meta` key of the read position of `topic` [`partition`].
pub fn position_key(topic: &str, partition: i32) -> Vec<u8> {
    topic_partition_key(META_POSITION_PREFIX, topic, partition)
}

/// (topic, partition) of a position key, or None if it is not one.
pub fn parse_position_key(key: &[u8]) -> Option<(String, i32)> {
    parse_topic_partition_key(META_POSITION_PREFIX, key)
}

/// The `meta` key of the corrections position in `topic` [`partition`].
pub fn corrections_key(topic: &str, partition: i32) -> Vec<u8> {
    topic_partition_key(META_CORRECTIONS_PREFIX, topic, partition)
}

/// (topic, partition) of a corrections position key, or None if it is not one.
pub fn parse_corrections_key(key: &[u8]) -> Option<(String, i32)> {
    parse_topic_partition_key(META_CORRECTIONS_PREFIX, key)
}

fn topic_partition_key(prefix: &[u8], topic: &str, partition: i32) -> Vec<u8> {
    let mut k = prefix.to_vec();
    k.extend_from_slice(topic.as_bytes());
    k.push(b'/');
    k.extend_from_slice(partition.to_string().as_bytes());
    k
}

fn parse_topic_partition_key(prefix: &[u8], key: &[u8]) -> Option<(String, i32)> {
    let rest = std::str::from_utf8(key.strip_prefix(prefix)?).ok()?;
    let (topic, partition) = rest.rsplit_once('/')?;
    Some((topic.to_owned(), partition.parse().ok()?))
}

/// Version of this layout, stored under `META_FORMAT`. An index of another version is refused
/// (`IndexError::FormatMismatch`) with an error that says how to rebuild it (`index rebuild`). 10:
/// each article's event slots stored with its sketch, after the segment signatures. 9:
/// each article's segment signatures stored with its sketch, and the segment entries of unique
/// articles in `bands` (band number `SEGMENT_BAND`). 8: one key per block bucket, its articles
/// packed in the value. 7: the band entries of recent articles are ingested as files, under
/// `BANDED_BELOW_KEY`. 6: block and band entries name articles by sequence number, the `ids`
/// family holds each id once. 5: one `bands` key per bucket, its articles in the value. 4: the
/// `bands` family also holds the sketch's single-bin containment bands (band numbers 8..12). 3:
/// event times, the `expiry` family and the stream time (the retention window). 2: sketch bands in
/// their own `bands` family (1: in the block families, flagged by the top bit of the sequence
/// number).
pub const FORMAT_VERSION: &str = "newsdedup-index/10";
/// First byte of an `articles` value; then one byte (1 if a sketch follows), the binary sketch if
/// so (132 bytes of bins, then the segment signatures and the event slots: `Sketch::to_bytes`),
/// then the JSON record
/// without its sketch.
pub const ARTICLE_VALUE_FORMAT: u8 = 3;

pub const BLOCK_KEY_LEN: usize = 2;

/// The key of the block bucket of `block`.
pub fn block_key(block: u16) -> [u8; BLOCK_KEY_LEN] {
    block.to_be_bytes()
}

/// The block value of a block bucket's key, or None if it is not one.
pub fn parse_block_key(key: &[u8]) -> Option<u16> {
    Some(u16::from_be_bytes(key.try_into().ok()?))
}

pub const ID_KEY_LEN: usize = 8;

/// The `ids` key of the article with sequence number `seq`.
pub fn id_key(seq: u64) -> [u8; ID_KEY_LEN] {
    seq.to_be_bytes()
}

/// The sequence number of an `ids` key, or None if it is not one.
pub fn parse_id_key(key: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(key.try_into().ok()?))
}

pub const BAND_KEY_LEN: usize = 9;
// The band number is one byte of the key.
const _: () = assert!(crate::sketch::ALL_BANDS <= 256);

/// The `bands` key of the bucket of band `band` (0..12) with 64-bit key `key`.
pub fn band_key(band: u8, key: u64) -> [u8; BAND_KEY_LEN] {
    let mut k = [0u8; BAND_KEY_LEN];
    k[0] = band;
    k[1..9].copy_from_slice(&key.to_be_bytes());
    k
}

/// The `bands` key (after every bucket's) whose value, 8 bytes BE, is the sequence number below
/// which every unique article has its band entries in the family (see `recent`). Absent: 0 (a
/// new index), written with each ingested file.
pub const BANDED_BELOW_KEY: [u8; BAND_KEY_LEN] = [0xff; BAND_KEY_LEN];
const _: () = assert!(crate::sketch::ALL_BANDS < 0xff);

/// (band, band key) of a `bands` key, or None if it is not one.
pub fn parse_band_key(key: &[u8]) -> Option<(u8, u64)> {
    if key.len() != BAND_KEY_LEN || key == BANDED_BELOW_KEY {
        return None;
    }
    Some((key[0], u64::from_be_bytes(key[1..9].try_into().ok()?)))
}

pub const EXPIRY_KEY_LEN: usize = 16;

/// The `expiry` key of the article with event time `event_ms` and sequence `seq`.
pub fn expiry_key(event_ms: i64, seq: u64) -> [u8; EXPIRY_KEY_LEN] {
    let mut k = [0u8; EXPIRY_KEY_LEN];
    k[0..8].copy_from_slice(&expiry_time(event_ms).to_be_bytes());
    k[8..16].copy_from_slice(&seq.to_be_bytes());
    k
}

/// The time part of an `expiry` key: event times before 1970 sort as 1970.
fn expiry_time(event_ms: i64) -> u64 {
    u64::try_from(event_ms).unwrap_or(0)
}

/// (event time, seq) of an `expiry` key, or None if it is not one.
pub fn parse_expiry_key(key: &[u8]) -> Option<(i64, u64)> {
    if key.len() != EXPIRY_KEY_LEN {
        return None;
    }
    let time = u64::from_be_bytes(key[0..8].try_into().ok()?);
    let seq = u64::from_be_bytes(key[8..16].try_into().ok()?);
    Some((i64::try_from(time).ok()?, seq))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_key_round_trip_and_order() {
        assert_eq!(parse_block_key(&block_key(0xabcd)), Some(0xabcd));
        assert!(block_key(1) < block_key(2));
        assert!(block_key(0xff) < block_key(0x100));
        assert_eq!(parse_block_key(b"abc"), None);
    }

    #[test]
    fn id_key_round_trip_and_order() {
        assert_eq!(parse_id_key(&id_key(42)), Some(42));
        assert!(id_key(255) < id_key(256));
        assert_eq!(parse_id_key(&id_key(7)[..7]), None);
    }

    #[test]
    fn position_key_round_trip() {
        let k = position_key("articles.unique", 7);
        assert_eq!(k, b"position/articles.unique/7");
        assert_eq!(parse_position_key(&k), Some(("articles.unique".into(), 7)));
        assert_eq!(parse_position_key(b"position/t/x"), None);
        assert_eq!(parse_position_key(b"counts"), None);
        let k = corrections_key("articles.corrections", 0);
        assert_eq!(k, b"corrections/articles.corrections/0");
        assert_eq!(
            parse_corrections_key(&k),
            Some(("articles.corrections".into(), 0))
        );
        assert_eq!(parse_position_key(&k), None);
    }

    #[test]
    fn expiry_key_round_trip_and_order() {
        let k = expiry_key(1_709_280_000_000, 42);
        assert_eq!(parse_expiry_key(&k), Some((1_709_280_000_000, 42)));
        assert!(expiry_key(5, 9) < expiry_key(6, 0));
        assert!(expiry_key(-5, 9) < expiry_key(0, 10));
        assert_eq!(parse_expiry_key(&expiry_key(-5, 1)), Some((0, 1)));
        assert_eq!(parse_expiry_key(&k[..15]), None);
    }

    #[test]
    fn band_key_round_trip_and_order() {
        let k = band_key(7, 0x1122334455667788);
        assert_eq!(parse_band_key(&k), Some((7, 0x1122334455667788)));
        assert!(band_key(1, 5) < band_key(1, 6));
        assert!(band_key(1, u64::MAX) < band_key(2, 0));
        assert_eq!(parse_band_key(&k[..8]), None);
    }
}
