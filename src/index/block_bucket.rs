//! A block bucket: the value under one 16-bit block value in a block family, and the merge
//! operands that change it.
//!
//! One key per block value lets a lookup read the four buckets of a fingerprint with one batched
//! point read and scan each as a packed array, instead of four iterator seeks each followed by a
//! step per entry through every level of the LSM tree (the steps were most of a lookup's time at
//! millions of articles). Writers never read: adding an article to a bucket or removing it is a
//! merge operand ([`add`] / [`remove`]) in the article's own atomic write, and RocksDB applies
//! the operands in order ([`merge`]) when the bucket is read or compacted.
//!
//! Value: the bucket's entries, each its fingerprint then its sequence number (8 bytes BE each),
//! ascending, so a lookup lists candidates in the order the entries sort (by fingerprint, then
//! sequence number). Operand: one or more records of a tag (`+` add, `-` remove) and an entry;
//! operands combine by concatenation ([`combine`]), so the levels above the last hold one operand
//! per bucket. An empty bucket (all its articles removed) is dropped by a later compaction
//! ([`is_empty`]). A bucket is never capped: a crowded block value (templated reports, crafted
//! input) costs a longer value to read, not a missed candidate.

use crate::simhash::Fingerprint;

/// Bytes of one entry: fingerprint, sequence number.
pub const ENTRY_BYTES: usize = 16;
const RECORD_BYTES: usize = 1 + ENTRY_BYTES;
const ADD: u8 = b'+';
const REMOVE: u8 = b'-';

/// A bucket holding more entries than this is counted as crowded (`index stats`, and the
/// lookups that read one: `rocks::read::CROWDED_LOOKUPS`).
pub const CROWDED_BUCKET: usize = 4096;

fn entry(fp: Fingerprint, seq: u64) -> [u8; ENTRY_BYTES] {
    let mut e = [0u8; ENTRY_BYTES];
    e[..8].copy_from_slice(&fp.0.to_be_bytes());
    e[8..].copy_from_slice(&seq.to_be_bytes());
    e
}

fn record(tag: u8, fp: Fingerprint, seq: u64) -> [u8; RECORD_BYTES] {
    let mut r = [0u8; RECORD_BYTES];
    r[0] = tag;
    r[1..].copy_from_slice(&entry(fp, seq));
    r
}

/// The operand adding the article `seq` with fingerprint `fp` to a bucket.
pub fn add(fp: Fingerprint, seq: u64) -> [u8; RECORD_BYTES] {
    record(ADD, fp, seq)
}

/// The operand removing the article `seq` with fingerprint `fp` from a bucket.
pub fn remove(fp: Fingerprint, seq: u64) -> [u8; RECORD_BYTES] {
    record(REMOVE, fp, seq)
}

/// The entries (fingerprint, sequence number) of a stored bucket value, in stored order; None if
/// it is malformed.
pub fn entries(value: &[u8]) -> Option<impl Iterator<Item = (Fingerprint, u64)> + '_> {
    if !value.len().is_multiple_of(ENTRY_BYTES) {
        return None;
    }
    Some(value.chunks_exact(ENTRY_BYTES).map(|e| {
        let (fp, seq) = e.split_at(8);
        (
            Fingerprint(u64::from_be_bytes(fp.try_into().unwrap_or_default())),
            u64::from_be_bytes(seq.try_into().unwrap_or_default()),
        )
    }))
}

/// The number of entries of a stored bucket value (malformed: None).
pub fn len(value: &[u8]) -> Option<usize> {
    value.len().is_multiple_of(ENTRY_BYTES).then_some(value.len() / ENTRY_BYTES)
}

/// A bucket value holding `entries` (any order; duplicates kept once), as a repacking writes it.
pub fn value_of(entries: &mut Vec<(Fingerprint, u64)>) -> Vec<u8> {
    entries.sort_unstable_by_key(|&(fp, seq)| (fp.0, seq));
    entries.dedup();
    let mut v = Vec::with_capacity(entries.len() * ENTRY_BYTES);
    for &(fp, seq) in entries.iter() {
        v.extend_from_slice(&entry(fp, seq));
    }
    v
}

/// The full merge of a bucket: `existing` (None: no value) with `operands` applied in order.
/// None if anything is malformed, which RocksDB reports as corruption on read.
pub fn merge<'a>(
    existing: Option<&[u8]>,
    operands: impl IntoIterator<Item = &'a [u8]>,
) -> Option<Vec<u8>> {
    let existing = existing.unwrap_or_default();
    len(existing)?;
    let mut list: Vec<[u8; ENTRY_BYTES]> = existing
        .chunks_exact(ENTRY_BYTES)
        .map(|e| e.try_into().unwrap_or_default())
        .collect();
    let mut sorted = true;
    for op in operands {
        if !op.len().is_multiple_of(RECORD_BYTES) || op.is_empty() {
            return None;
        }
        for r in op.chunks_exact(RECORD_BYTES) {
            let e: [u8; ENTRY_BYTES] = r[1..].try_into().unwrap_or_default();
            match r[0] {
                ADD => {
                    sorted &= list.last().is_none_or(|last| *last < e);
                    list.push(e);
                }
                // Removals are rare (retention, an editor's release): a linear pass is enough.
                REMOVE => list.retain(|x| *x != e),
                _ => return None,
            }
        }
    }
    if !sorted {
        // Adds arrive in sequence order, not fingerprint order; duplicates (a write applied
        // twice) are kept once.
        list.sort_unstable();
        list.dedup();
    }
    Some(list.concat())
}

/// Operands combined into one (the partial merge): their records, in order.
pub fn combine<'a>(operands: impl IntoIterator<Item = &'a [u8]>) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    for op in operands {
        if !op.len().is_multiple_of(RECORD_BYTES) || op.is_empty() {
            return None;
        }
        out.extend_from_slice(op);
    }
    Some(out)
}

/// True for the value of a bucket no article shares any more (a compaction drops it).
pub fn is_empty(value: &[u8]) -> bool {
    value.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(v: &[u8]) -> Vec<(u64, u64)> {
        entries(v).unwrap().map(|(fp, seq)| (fp.0, seq)).collect()
    }

    #[test]
    fn operands_apply_in_order_and_the_value_stays_sorted() {
        let ops = [
            add(Fingerprint(9), 0),
            add(Fingerprint(3), 1),
            add(Fingerprint(3), 2),
            remove(Fingerprint(9), 0),
            add(Fingerprint(9), 0),
            add(Fingerprint(5), 3),
        ];
        let v = merge(None, ops.iter().map(|o| o.as_slice())).unwrap();
        assert_eq!(decoded(&v), [(3, 1), (3, 2), (5, 3), (9, 0)]);
        // On top of a stored value; an add applied twice is kept once.
        let more = [
            add(Fingerprint(4), 7),
            add(Fingerprint(4), 7),
            remove(Fingerprint(3), 1),
        ];
        let v = merge(Some(&v), more.iter().map(|o| o.as_slice())).unwrap();
        assert_eq!(decoded(&v), [(3, 2), (4, 7), (5, 3), (9, 0)]);
        let gone = [
            remove(Fingerprint(3), 2),
            remove(Fingerprint(4), 7),
            remove(Fingerprint(5), 3),
            remove(Fingerprint(9), 0),
        ];
        let v = merge(Some(&v), gone.iter().map(|o| o.as_slice())).unwrap();
        assert!(is_empty(&v));
    }

    /// Combined operands mean what the operands meant one after another.
    #[test]
    fn a_combined_operand_applies_as_its_parts() {
        let ops = [
            add(Fingerprint(1), 1),
            add(Fingerprint(2), 2),
            remove(Fingerprint(1), 1),
        ];
        let one = combine(ops.iter().map(|o| o.as_slice())).unwrap();
        let base = merge(None, [add(Fingerprint(1), 0).as_slice()]).unwrap();
        assert_eq!(
            merge(Some(&base), [one.as_slice()]),
            merge(Some(&base), ops.iter().map(|o| o.as_slice()))
        );
        assert_eq!(
            decoded(&merge(Some(&base), [one.as_slice()]).unwrap()),
            [(1, 0), (2, 2)]
        );
    }

    #[test]
    fn malformed_values_and_operands_are_refused() {
        assert_eq!(
            merge(Some(&[0u8; 15]), [add(Fingerprint(1), 1).as_slice()]),
            None
        );
        assert_eq!(merge(None, [&add(Fingerprint(1), 1)[..16]]), None);
        assert_eq!(merge(None, [b"".as_slice()]), None);
        let mut bad = add(Fingerprint(1), 1);
        bad[0] = b'?';
        assert_eq!(merge(None, [bad.as_slice()]), None);
        assert_eq!(combine([b"+".as_slice()]), None);
        assert!(entries(&[0u8; 17]).is_none());
        assert_eq!(len(&[0u8; 32]), Some(2));
    }

    #[test]
    fn a_repacked_value_is_sorted_and_without_repeats() {
        let mut list = vec![
            (Fingerprint(7), 2),
            (Fingerprint(1), 5),
            (Fingerprint(7), 2),
        ];
        let v = value_of(&mut list);
        assert_eq!(decoded(&v), [(1, 5), (7, 2)]);
        assert_eq!(merge(Some(&v), []), Some(v.clone()));
    }
}
