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
//! Value: the bucket's entries, each its fingerprint then its sequence number (8 bytes BE each), in
//! the order they were added. Not sorted: a merge then only appends, so a crowded bucket's read
//! costs a copy, not a sort of all its entries; a lookup sorts the few entries it keeps. Operand:
//! one or more records of a tag (`+` add, `-` remove) and an entry; operands combine by
//! concatenation ([`combine`]), so the levels above the last hold one operand per bucket. An empty
//! bucket (all its articles removed) is dropped by a later compaction ([`is_empty`]). A bucket is
//! never capped: a crowded block value (templated reports, crafted input) costs a longer value to
//! read, not a missed candidate.
//!
//! Operands pile up in the memtable until a flush: a read of a bucket walks each of them, which
//! for a crowded bucket costs more than its packed value (200,000 entries as operands took 13 ms
//! a lookup). So the single writer puts a crowded bucket's merged value back once operands worth
//! a thirty-second of its entries have followed the last such write ([`WriteBack`]): a read then
//! meets one value and at most that many operands (under 1 ms at 200,000 entries), for at most
//! ~512 bytes written per entry added to such a bucket. The value put back is the bucket as it
//! stands, so it needs no atomicity with anything else.

use crate::simhash::Fingerprint;

/// Bytes of one entry: fingerprint, sequence number.
pub const ENTRY_BYTES: usize = 16;
const RECORD_BYTES: usize = 1 + ENTRY_BYTES;
const ADD: u8 = b'+';
const REMOVE: u8 = b'-';

/// A bucket holding more entries than this is counted as crowded (`index stats`, and the
/// lookups that read one: `rocks::read::CROWDED_LOOKUPS`).
pub const CROWDED_BUCKET: usize = 4096;

/// Whether a bucket of `entries` entries is crowded ([`CROWDED_BUCKET`]).
pub fn is_crowded(entries: usize) -> bool {
    entries > CROWDED_BUCKET
}

/// Merges into a bucket between two checks of its size while it is not known to be crowded.
const CHECK_EVERY: u32 = 512;

/// When the single writer puts a bucket's merged value back (see the module comment): counts the
/// merges into every bucket of the block families since its size was last checked. 4 bytes per
/// bucket (1 MiB for the four families), so no map lookup per write.
pub struct WriteBack {
    /// Per family and block value, merges left until the next check.
    countdown: Vec<u32>,
}

impl WriteBack {
    pub fn new(families: usize) -> WriteBack {
        WriteBack {
            countdown: vec![CHECK_EVERY; families << 16],
        }
    }

    /// Counts one merge into `block`'s bucket of family `family`; true when the bucket is due for
    /// a check of its size ([`Self::checked`]).
    pub fn merged(&mut self, family: usize, block: u16) -> bool {
        let Some(left) = self.countdown.get_mut((family << 16) | usize::from(block)) else {
            return false;
        };
        *left = left.saturating_sub(1);
        *left == 0
    }

    /// After a check found `entries` in the bucket: true to put its value back (a crowded bucket),
    /// and when to check it next.
    pub fn checked(&mut self, family: usize, block: u16, entries: usize) -> bool {
        let crowded = is_crowded(entries);
        let next = if crowded {
            u32::try_from(entries / 32)
                .unwrap_or(u32::MAX)
                .max(CHECK_EVERY)
        } else {
            CHECK_EVERY
        };
        if let Some(left) = self.countdown.get_mut((family << 16) | usize::from(block)) {
            *left = next;
        }
        crowded
    }
}

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
    value
        .len()
        .is_multiple_of(ENTRY_BYTES)
        .then_some(value.len() / ENTRY_BYTES)
}

/// A bucket value holding `entries`, as a repacking writes it.
pub fn value_of(entries: &[(Fingerprint, u64)]) -> Vec<u8> {
    let mut v = Vec::with_capacity(entries.len() * ENTRY_BYTES);
    for &(fp, seq) in entries {
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
    let mut value = existing.unwrap_or_default().to_vec();
    len(&value)?;
    for op in operands {
        if !op.len().is_multiple_of(RECORD_BYTES) || op.is_empty() {
            return None;
        }
        for r in op.chunks_exact(RECORD_BYTES) {
            let (tag, e) = (r[0], &r[1..]);
            match tag {
                ADD => value.extend_from_slice(e),
                // Removals are rare (retention, an editor's release): a linear pass is enough.
                REMOVE => {
                    if let Some(at) = value.chunks_exact(ENTRY_BYTES).position(|x| x == e) {
                        value.drain(at * ENTRY_BYTES..(at + 1) * ENTRY_BYTES);
                    }
                }
                _ => return None,
            }
        }
    }
    Some(value)
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
    fn operands_apply_in_order() {
        let ops = [
            add(Fingerprint(9), 0),
            add(Fingerprint(3), 1),
            add(Fingerprint(3), 2),
            remove(Fingerprint(9), 0),
            add(Fingerprint(9), 0),
            add(Fingerprint(5), 3),
            remove(Fingerprint(5), 4),
        ];
        let v = merge(None, ops.iter().map(|o| o.as_slice())).unwrap();
        assert_eq!(decoded(&v), [(3, 1), (3, 2), (9, 0), (5, 3)]);
        // On top of a stored value.
        let more = [add(Fingerprint(4), 7), remove(Fingerprint(3), 1)];
        let v = merge(Some(&v), more.iter().map(|o| o.as_slice())).unwrap();
        assert_eq!(decoded(&v), [(3, 2), (9, 0), (5, 3), (4, 7)]);
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

    /// A bucket is checked every 512 merges, put back only when crowded, and then after a
    /// thirty-second of its entries in merges.
    #[test]
    fn a_crowded_bucket_is_put_back_after_a_thirty_second_of_its_size() {
        let mut wb = WriteBack::new(4);
        let due_after = |wb: &mut WriteBack, family, block| {
            (1..=1_000_000).find(|_| wb.merged(family, block)).unwrap()
        };
        assert_eq!(due_after(&mut wb, 3, 0xffff), CHECK_EVERY);
        assert!(!wb.checked(3, 0xffff, CROWDED_BUCKET));
        assert_eq!(due_after(&mut wb, 3, 0xffff), CHECK_EVERY);
        assert!(wb.checked(3, 0xffff, 80_000));
        assert_eq!(due_after(&mut wb, 3, 0xffff), 2_500);
        assert!(wb.checked(3, 0xffff, CROWDED_BUCKET + 1));
        assert_eq!(due_after(&mut wb, 3, 0xffff), CHECK_EVERY);
        // Buckets count apart; an unknown family counts nothing.
        assert_eq!(due_after(&mut wb, 0, 0xffff), CHECK_EVERY);
        assert!(!wb.merged(4, 0));
    }

    #[test]
    fn a_repacked_value_reads_back() {
        let list = [(Fingerprint(7), 2), (Fingerprint(1), 5)];
        let v = value_of(&list);
        assert_eq!(decoded(&v), [(7, 2), (1, 5)]);
        assert_eq!(merge(Some(&v), []), Some(v.clone()));
    }
}
