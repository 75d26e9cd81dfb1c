//! A band bucket: the value under one (band, band key) in the `bands` family, and the merge
//! operands that change it.
//!
//! One key per bucket lets a lookup read all of an article's band buckets with one batched
//! `multi_get` (12 point reads that the bloom filters answer without data for nearly every
//! bucket) instead of 12 iterator seeks. Writers never read: adding an article to a bucket or
//! removing it is a merge operand (`append` / `remove`) in the article's own atomic write, and
//! RocksDB applies the operands in order ([`merge`]) when the bucket is read or compacted.
//!
//! A bucket lists its articles (sequence number and id, by sequence number) until more than
//! [`cap`] share it. It is then *crowded*: boilerplate every article of a source carries, or a
//! common phrase, which says nothing about a pair. A crowded bucket keeps only its count, so a
//! bucket hit by every article stays a few bytes, and lookups ignore it. It stays crowded until
//! its count falls to zero (its members are no longer known); an empty bucket is dropped by a
//! later compaction ([`is_empty`]).
//!
//! Value: `0` then, for each article, sequence number || id length || id (UTF-8); or, when crowded,
//! `1` then the count. Operand: `+` || sequence number || id, or `-` || sequence number. Numbers
//! are LEB128 varints (a sequence number below 2^28 takes 4 bytes): nearly every bucket holds one
//! article, so these bytes are most of the family.

use crate::sketch::BANDS;

/// A Jaccard band (two bins) shared by more articles than this is crowded.
pub const MAX_BAND_BUCKET: usize = 32;
/// The same for a containment band (one bin: a single 4-gram, which common phrases share far
/// more often than two bins together), kept low so they cannot flood a lookup with candidates.
pub const MAX_CONTAINMENT_BUCKET: usize = 8;

/// How many articles a bucket of band `band` lists before it is crowded.
pub fn cap(band: u8) -> usize {
    if usize::from(band) < BANDS {
        MAX_BAND_BUCKET
    } else {
        MAX_CONTAINMENT_BUCKET
    }
}

const APPEND: u8 = b'+';
const REMOVE: u8 = b'-';
const LIST: u8 = 0;
const CROWDED: u8 = 1;

fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// A varint and the bytes after it; None if `bytes` ends inside it or it overflows 64 bits.
fn take_varint(bytes: &[u8]) -> Option<(u64, &[u8])> {
    let mut n = 0u64;
    for (i, &b) in bytes.iter().enumerate().take(10) {
        n |= u64::from(b & 0x7f).checked_shl(7 * i as u32)?;
        if b < 0x80 {
            return Some((n, &bytes[i + 1..]));
        }
    }
    None
}

/// The operand adding the article `seq` / `id` to a bucket.
pub fn append(seq: u64, id: &str) -> Vec<u8> {
    let mut op = Vec::with_capacity(11 + id.len());
    op.push(APPEND);
    put_varint(&mut op, seq);
    op.extend_from_slice(id.as_bytes());
    op
}

/// The operand removing the article `seq` from a bucket.
pub fn remove(seq: u64) -> Vec<u8> {
    let mut op = Vec::with_capacity(11);
    op.push(REMOVE);
    put_varint(&mut op, seq);
    op
}

/// A decoded bucket value.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BandBucket {
    /// Articles in the bucket.
    pub count: u64,
    /// (sequence number, id) by sequence number; empty when crowded.
    pub entries: Vec<(u64, String)>,
}

impl BandBucket {
    /// More articles than the band's cap share it: lookups ignore it.
    pub fn crowded(&self) -> bool {
        self.count != self.entries.len() as u64
    }

    /// Decodes a stored value; None if it is malformed.
    pub fn decode(value: &[u8]) -> Option<BandBucket> {
        match value.split_first()? {
            (&LIST, mut rest) => {
                let mut entries = Vec::new();
                while !rest.is_empty() {
                    let (seq, tail) = take_varint(rest)?;
                    let (len, tail) = take_varint(tail)?;
                    let id = tail.get(..usize::try_from(len).ok()?)?;
                    entries.push((seq, std::str::from_utf8(id).ok()?.to_owned()));
                    rest = &tail[id.len()..];
                }
                Some(BandBucket {
                    count: entries.len() as u64,
                    entries,
                })
            }
            (&CROWDED, rest) => match take_varint(rest)? {
                (count, []) if count > 0 => Some(BandBucket {
                    count,
                    entries: Vec::new(),
                }),
                _ => None,
            },
            _ => None,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut v =
            Vec::with_capacity(1 + self.entries.iter().map(|e| 6 + e.1.len()).sum::<usize>());
        if self.crowded() {
            v.push(CROWDED);
            put_varint(&mut v, self.count);
            return v;
        }
        v.push(LIST);
        for (seq, id) in &self.entries {
            put_varint(&mut v, *seq);
            put_varint(&mut v, id.len() as u64);
            v.extend_from_slice(id.as_bytes());
        }
        v
    }

    /// Applies one operand; false if it is malformed.
    fn apply(&mut self, op: &[u8], cap: usize) -> bool {
        let Some((&kind, rest)) = op.split_first() else {
            return false;
        };
        let Some((seq, id)) = take_varint(rest) else {
            return false;
        };
        let crowded = self.crowded();
        match kind {
            APPEND => {
                let Ok(id) = std::str::from_utf8(id) else {
                    return false;
                };
                if crowded {
                    self.count += 1;
                    return true;
                }
                // Appends come in sequence order except in a bulk restore; a repeated one (the
                // same article written twice) changes nothing.
                if let Err(at) = self.entries.binary_search_by_key(&seq, |e| e.0) {
                    self.entries.insert(at, (seq, id.to_owned()));
                    self.count += 1;
                }
                if self.entries.len() > cap {
                    self.entries.clear();
                }
                true
            }
            REMOVE if id.is_empty() => {
                if crowded {
                    self.count -= 1;
                    if self.count == 0 {
                        *self = BandBucket::default();
                    }
                } else if let Ok(at) = self.entries.binary_search_by_key(&seq, |e| e.0) {
                    self.entries.remove(at);
                    self.count -= 1;
                }
                true
            }
            _ => false,
        }
    }
}

/// The full merge of a bucket: `existing` (None: no value) with `operands` applied in order.
/// None if anything is malformed, which RocksDB reports as corruption on read.
pub fn merge<'a>(
    key: &[u8],
    existing: Option<&[u8]>,
    operands: impl IntoIterator<Item = &'a [u8]>,
) -> Option<Vec<u8>> {
    let cap = cap(*key.first()?);
    let mut bucket = match existing {
        Some(v) => BandBucket::decode(v)?,
        None => BandBucket::default(),
    };
    for op in operands {
        if !bucket.apply(op, cap) {
            return None;
        }
    }
    Some(bucket.encode())
}

/// True for the value of a bucket no article shares any more (a compaction drops it).
pub fn is_empty(value: &[u8]) -> bool {
    value == [LIST]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(key: u8, ops: &[Vec<u8>]) -> BandBucket {
        let v = merge(&[key], None, ops.iter().map(Vec::as_slice)).unwrap();
        BandBucket::decode(&v).unwrap()
    }

    #[test]
    fn appends_list_by_sequence_and_removals_delete() {
        let b = run(
            0,
            &[
                append(5, "e"),
                append(2, "b"),
                append(9, "i"),
                append(2, "b"),
                remove(9),
                remove(77),
            ],
        );
        assert_eq!(b.count, 2);
        assert_eq!(b.entries, vec![(2, "b".into()), (5, "e".into())]);
        assert!(!b.crowded());
        // In two steps (an existing value, then more operands) the same.
        let first = merge(&[0], None, [append(5, "e").as_slice()]).unwrap();
        let second = merge(&[0], Some(&first), [append(2, "b").as_slice()]).unwrap();
        assert_eq!(
            BandBucket::decode(&second).unwrap().entries,
            vec![(2, "b".into()), (5, "e".into())]
        );
    }

    #[test]
    fn a_bucket_past_its_cap_keeps_only_its_count_until_empty() {
        let band = BANDS as u8; // a containment band
        let ops: Vec<Vec<u8>> = (0..=MAX_CONTAINMENT_BUCKET as u64)
            .map(|s| append(s, "x"))
            .collect();
        let b = run(band, &ops[..MAX_CONTAINMENT_BUCKET]);
        assert!(!b.crowded());
        let crowded = run(band, &ops);
        assert!(crowded.crowded());
        assert_eq!(crowded.count, MAX_CONTAINMENT_BUCKET as u64 + 1);
        assert!(crowded.entries.is_empty());
        // A Jaccard band lists that many.
        assert!(!run(0, &ops).crowded());
        // Removals count down; the last one empties it.
        let mut all = ops.clone();
        all.extend((0..=MAX_CONTAINMENT_BUCKET as u64).map(remove));
        let v = merge(&[band], None, all.iter().map(Vec::as_slice)).unwrap();
        assert!(is_empty(&v));
        assert_eq!(BandBucket::decode(&v).unwrap(), BandBucket::default());
    }

    #[test]
    fn values_round_trip_and_stay_small() {
        let b = BandBucket {
            count: 2,
            entries: vec![(3, "a".into()), (1 << 40, "长".into())],
        };
        assert_eq!(BandBucket::decode(&b.encode()), Some(b));
        let crowded = BandBucket {
            count: 300,
            entries: vec![],
        };
        assert_eq!(BandBucket::decode(&crowded.encode()), Some(crowded));
        // One article of sequence number ~10M and a 20-byte id: 25 bytes.
        let one = BandBucket {
            count: 1,
            entries: vec![(10_000_000, "x".repeat(20))],
        };
        assert_eq!(one.encode().len(), 1 + 4 + 1 + 20);
        assert_eq!(take_varint(&[0xff; 11]), None);
    }

    #[test]
    fn malformed_values_and_operands_are_refused() {
        assert_eq!(BandBucket::decode(b""), None);
        assert_eq!(BandBucket::decode(&[7]), None);
        // An id longer than what is left.
        assert_eq!(BandBucket::decode(&[LIST, 7, 3, b'a']), None);
        // A crowded bucket of 0, or with bytes after its count.
        assert_eq!(BandBucket::decode(&[CROWDED, 0]), None);
        assert_eq!(BandBucket::decode(&[CROWDED, 9, 9]), None);
        assert_eq!(merge(&[0], None, [b"?1".as_slice()]), None);
        assert_eq!(merge(&[0], None, [b"-1x".as_slice()]), None);
        assert_eq!(merge(&[0], None, [b"+".as_slice()]), None);
        assert_eq!(merge(&[], None, [append(1, "a").as_slice()]), None);
    }
}
