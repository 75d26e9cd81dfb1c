//! A band bucket: the value under one (band, band key) in the `bands` family, and the merge
//! operands that change it.
//!
//! One key per bucket lets a lookup read all of an article's band buckets with one batched
//! `multi_get` (12 point reads that the bloom filters answer without data for nearly every
//! bucket) instead of 12 iterator seeks. Writers never read: adding an article to a bucket or
//! removing it is a merge operand (`append` / `remove`) in the article's own atomic write, and
//! RocksDB applies the operands in order ([`merge`]) when the bucket is read or compacted.
//!
//! A bucket lists its articles (by sequence number; the `ids` family maps a sequence number to its
//! article id, read only for the few buckets a lookup finds) until more than
//! [`cap`] share it. It is then *crowded*: boilerplate every article of a source carries, or a
//! common phrase, which says nothing about a pair. A crowded bucket keeps only its count, so a
//! bucket hit by every article stays a few bytes, and lookups ignore it. It stays crowded until
//! its count falls to zero (its members are no longer known); an empty bucket is dropped by a
//! later compaction ([`is_empty`]).
//!
//! Value: `0` then each article's sequence number, ascending; or, when crowded, `1` then the count.
//! Operand: `+` || one or more sequence numbers (ascending; several when the articles held in
//! memory are written out together, see `recent`), or `-` || sequence number. Numbers are LEB128 varints (a
//! sequence number below 2^28 takes 4 bytes): nearly every bucket holds one article, so a bucket
//! is a 9-byte key and a 5-byte value.

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

/// The operand adding the article `seq` to a bucket.
pub fn append(seq: u64) -> Vec<u8> {
    operand(APPEND, seq)
}

/// One operand adding the articles `seqs` (ascending) to a bucket, as that many `append`s would.
pub fn append_all(seqs: &[u64]) -> Vec<u8> {
    let mut op = Vec::with_capacity(1 + 5 * seqs.len());
    op.push(APPEND);
    for &seq in seqs {
        put_varint(&mut op, seq);
    }
    op
}

/// The operand removing the article `seq` from a bucket.
pub fn remove(seq: u64) -> Vec<u8> {
    operand(REMOVE, seq)
}

fn operand(kind: u8, seq: u64) -> Vec<u8> {
    let mut op = Vec::with_capacity(11);
    op.push(kind);
    put_varint(&mut op, seq);
    op
}

/// A decoded bucket value.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BandBucket {
    /// Articles in the bucket.
    pub count: u64,
    /// Sequence numbers, ascending; empty when crowded.
    pub entries: Vec<u64>,
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
                    if entries.last().is_some_and(|&last| last >= seq) {
                        return None;
                    }
                    entries.push(seq);
                    rest = tail;
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
        let mut v = Vec::with_capacity(1 + 10 * self.entries.len().max(1));
        if self.crowded() {
            v.push(CROWDED);
            put_varint(&mut v, self.count);
            return v;
        }
        v.push(LIST);
        for &seq in &self.entries {
            put_varint(&mut v, seq);
        }
        v
    }

    /// Adds the article `seq` to a bucket of a band whose cap is `cap`.
    pub fn add(&mut self, seq: u64, cap: usize) {
        if self.crowded() {
            self.count += 1;
            return;
        }
        // Appends come in sequence order except in a bulk restore; a repeated one (the same
        // article written twice) changes nothing.
        if let Err(at) = self.entries.binary_search(&seq) {
            self.entries.insert(at, seq);
            self.count += 1;
        }
        if self.entries.len() > cap {
            self.entries.clear();
        }
    }

    /// Applies one operand; false if it is malformed.
    fn apply(&mut self, op: &[u8], cap: usize) -> bool {
        let Some((&kind, mut rest)) = op.split_first() else {
            return false;
        };
        match kind {
            APPEND => {
                if rest.is_empty() {
                    return false;
                }
                while let Some((seq, tail)) = take_varint(rest) {
                    self.add(seq, cap);
                    rest = tail;
                    if rest.is_empty() {
                        return true;
                    }
                }
                false
            }
            REMOVE => {
                let Some((seq, [])) = take_varint(rest) else {
                    return false;
                };
                if self.crowded() {
                    self.count -= 1;
                    if self.count == 0 {
                        *self = BandBucket::default();
                    }
                } else if let Ok(at) = self.entries.binary_search(&seq) {
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
                append(5),
                append(2),
                append(9),
                append(2),
                remove(9),
                remove(77),
            ],
        );
        assert_eq!(b.count, 2);
        assert_eq!(b.entries, vec![2, 5]);
        assert!(!b.crowded());
        // In two steps (an existing value, then more operands) the same.
        let first = merge(&[0], None, [append(5).as_slice()]).unwrap();
        let second = merge(&[0], Some(&first), [append(2).as_slice()]).unwrap();
        assert_eq!(BandBucket::decode(&second).unwrap().entries, vec![2, 5]);
        // One operand of several articles is those appends in turn.
        let all = merge(
            &[0],
            Some(&second),
            [append_all(&[3, 9, 1 << 30]).as_slice()],
        )
        .unwrap();
        assert_eq!(
            BandBucket::decode(&all).unwrap().entries,
            vec![2, 3, 5, 9, 1 << 30]
        );
    }

    #[test]
    fn a_bucket_past_its_cap_keeps_only_its_count_until_empty() {
        let band = BANDS as u8; // a containment band
        let ops: Vec<Vec<u8>> = (0..=MAX_CONTAINMENT_BUCKET as u64).map(append).collect();
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
            entries: vec![3, 1 << 40],
        };
        assert_eq!(BandBucket::decode(&b.encode()), Some(b));
        let crowded = BandBucket {
            count: 300,
            entries: vec![],
        };
        assert_eq!(BandBucket::decode(&crowded.encode()), Some(crowded));
        // One article of sequence number ~10M: 5 bytes.
        let one = BandBucket {
            count: 1,
            entries: vec![10_000_000],
        };
        assert_eq!(one.encode().len(), 1 + 4);
        assert_eq!(take_varint(&[0xff; 11]), None);
    }

    #[test]
    fn malformed_values_and_operands_are_refused() {
        assert_eq!(BandBucket::decode(b""), None);
        assert_eq!(BandBucket::decode(&[7]), None);
        // A varint cut short, and sequence numbers out of order or repeated.
        assert_eq!(BandBucket::decode(&[LIST, 0x87]), None);
        assert_eq!(BandBucket::decode(&[LIST, 7, 3]), None);
        assert_eq!(BandBucket::decode(&[LIST, 7, 7]), None);
        // A crowded bucket of 0, or with bytes after its count.
        assert_eq!(BandBucket::decode(&[CROWDED, 0]), None);
        assert_eq!(BandBucket::decode(&[CROWDED, 9, 9]), None);
        assert_eq!(merge(&[0], None, [b"?1".as_slice()]), None);
        assert_eq!(merge(&[0], None, [b"-1x".as_slice()]), None);
        assert_eq!(merge(&[0], None, [b"+".as_slice()]), None);
        assert_eq!(merge(&[0], None, [b"+\x01\x87".as_slice()]), None);
        assert_eq!(merge(&[0], None, [b"-\x01\x02".as_slice()]), None);
        assert_eq!(merge(&[], None, [append(1).as_slice()]), None);
    }
}
