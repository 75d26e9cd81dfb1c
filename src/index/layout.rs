//! Key and value layout of the RocksDB column families.
//!
//! Block families `block0`..`block3` (one per 16-bit block position, most significant first):
//!   key   = block value (2 bytes, big endian) || fingerprint (8, BE) || sequence number (8, BE)
//!   value = article id (UTF-8)
//! With a fixed 2-byte prefix extractor, all fingerprints sharing a block value are one contiguous
//! key range: a candidate lookup is 4 short range scans that read fingerprints straight from the
//! keys, and an insert is 4 blind puts (no read-modify-write, unlike a list-per-block value).
//! Sorting by fingerprint then sequence keeps the scan output deterministic.
//!
//! The same families also hold the content-sketch LSH bands of unique articles (see
//! `SKETCH_ENTRY`), the candidate path of the second check.
//!
//! `articles`: key = article id, value = format byte || sketch (binary) || JSON `StoredArticle`
//! (see `ARTICLE_VALUE_FORMAT`).
//! `meta`: fingerprint identity and counters.

use crate::simhash::{Fingerprint, BLOCKS};

pub const BLOCK_FAMILIES: [&str; BLOCKS] = ["block0", "block1", "block2", "block3"];
pub const ARTICLES: &str = "articles";
pub const META: &str = "meta";

pub const META_IDENTITY: &[u8] = b"fingerprint_identity";
pub const META_COUNTS: &[u8] = b"counts";
pub const META_FORMAT: &[u8] = b"format";

/// Version of this layout, stored under `META_FORMAT`.
pub const FORMAT_VERSION: &str = "newsdedup-index/1";
/// First byte of an `articles` value. Format 2: then one byte (1 if a sketch follows), the
/// 132-byte binary sketch if so, then the JSON record without its sketch. Format 1 (JSON with the
/// sketch in hex) is still read.
pub const ARTICLE_VALUE_FORMAT: u8 = 2;
pub const ARTICLE_VALUE_FORMAT_JSON: u8 = 1;

pub const BLOCK_KEY_LEN: usize = 18;

/// Sequence numbers of content-sketch band entries carry this bit, so a simhash scan and a band
/// scan of the same bucket never confuse each other's entries. Band b lives in family b % 4,
/// keyed by the top 16 bits of its 64-bit band key; the 8-byte "fingerprint" slot holds the whole
/// band key, which a match must equal exactly.
pub const SKETCH_ENTRY: u64 = 1 << 63;

pub fn block_key(block: u16, fp: Fingerprint, seq: u64) -> [u8; BLOCK_KEY_LEN] {
    let mut k = [0u8; BLOCK_KEY_LEN];
    k[0..2].copy_from_slice(&block.to_be_bytes());
    k[2..10].copy_from_slice(&fp.0.to_be_bytes());
    k[10..18].copy_from_slice(&seq.to_be_bytes());
    k
}

/// (block, fingerprint, seq) of a block key, or None if it is not one.
pub fn parse_block_key(key: &[u8]) -> Option<(u16, Fingerprint, u64)> {
    if key.len() != BLOCK_KEY_LEN {
        return None;
    }
    let block = u16::from_be_bytes([key[0], key[1]]);
    let fp = u64::from_be_bytes(key[2..10].try_into().ok()?);
    let seq = u64::from_be_bytes(key[10..18].try_into().ok()?);
    Some((block, Fingerprint(fp), seq))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_key_round_trip_and_order() {
        let k = block_key(0xabcd, Fingerprint(0x1122334455667788), 42);
        assert_eq!(
            parse_block_key(&k),
            Some((0xabcd, Fingerprint(0x1122334455667788), 42))
        );
        assert!(block_key(1, Fingerprint(5), 9) < block_key(1, Fingerprint(6), 0));
        assert!(block_key(1, Fingerprint(u64::MAX), 9) < block_key(2, Fingerprint(0), 0));
        assert_eq!(parse_block_key(b"short"), None);
    }
}
