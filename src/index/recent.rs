//! The band entries of the most recently indexed articles, held in memory until they are written
//! to the `bands` family as one sorted file.
//!
//! Why: a band entry is a random 9-byte key, twelve per unique article. Through RocksDB's
//! memtable, each flush re-sorted every one of them into a skiplist in hash-bucket order, a cache
//! miss per level (a fifth of the CPU of a bulk load, and the core a live instance lost for
//! ~0.4 s at every flush). Here an entry is one hash-map insert. When the table reaches
//! [`RECENT_BAND_ENTRIES`] entries it is frozen and a new one takes the next articles; `rocks::write`
//! sorts the frozen table and writes it as one SST file on a thread of its own, and the single
//! writer ingests that file once it is ready (a few ms). The index's flush and close write out
//! both tables.
//!
//! What it holds, exactly: the band entries of every unique article whose sequence number is at
//! or above [`RecentBands::banded_below`], and nothing else; every article below has its entries
//! in the family. The ingested file carries the new bound itself (`layout::BANDED_BELOW_KEY`), so
//! the bound and the entries change in one atomic step, and a process that dies with entries in
//! memory loses nothing: on open, `rocks` reads the bound and puts the entries of every unique
//! article from there on back, from their stored sketches. An article below the bound that is
//! written again (an editor's release) has its entries written to the family directly, as does
//! the removal of an article below it; the removal of one above only drops its entries from
//! memory. A change to an article of the frozen table first waits for its file to be ingested
//! (rare: an article replaced or removed within moments of being indexed).
//!
//! A lookup sees a bucket as the family's value with the entries held here added (the frozen
//! table's, then the active one's), which is exactly what the family holds once they are ingested.

use crate::index::bucket::{self, BandBucket};
use crate::index::layout::BAND_KEY_LEN;
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// A `bands` key (see `layout::band_key`).
pub type BandKey = [u8; BAND_KEY_LEN];

/// Band entries held in memory before they are written out as one file: about 22,000 unique
/// articles, ~25 MB of hash table. Larger files mean fewer of them for the compactions to merge; the size also
/// bounds what a restart after a crash reads back (one stored sketch per article).
pub const RECENT_BAND_ENTRIES: usize = 1 << 18;

/// Where a full table stops filling while the previous one is still on its way to the family
/// (`rocks::write`): 1.5 times the size, ~33,000 articles, still within the slots `Table::sized`
/// made (so no rehash), and what a restart after a crash may read back.
pub const RECENT_BAND_ENTRIES_MAX: usize = RECENT_BAND_ENTRIES / 2 * 3;

/// The articles of one bucket held here, ascending.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Members {
    /// Nearly every bucket: one article (no allocation).
    One(u64),
    Many(Vec<u64>),
}

impl Members {
    fn as_slice(&self) -> &[u64] {
        match self {
            Members::One(seq) => std::slice::from_ref(seq),
            Members::Many(seqs) => seqs,
        }
    }
}

/// A change of the table staged with a write, applied once the write succeeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecentChange {
    /// The article `seq` joins the bucket.
    Add(u64, BandKey),
    /// The article `seq` (removed or replaced) leaves the bucket.
    Drop(u64, BandKey),
}

/// A stored bucket value that does not decode (see `bucket`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MalformedBucket;

/// Where the band entries of an article are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Home {
    /// In the `bands` family.
    Family,
    /// In the frozen table, which is being written out (and must be, before it changes).
    Frozen,
    /// In the table that takes new entries.
    Active,
}

/// Band entries by bucket.
#[derive(Debug, Default)]
pub struct Table {
    buckets: FxHashMap<BandKey, Members>,
    entries: usize,
}

impl Table {
    /// A table with room for a full one's buckets: growing it by rehashing would hold the
    /// decision for milliseconds at every doubling (~20 ms at the last). The slots are only
    /// address space until used.
    fn sized() -> Table {
        Table {
            buckets: FxHashMap::with_capacity_and_hasher(RECENT_BAND_ENTRIES, Default::default()),
            entries: 0,
        }
    }

    fn add(&mut self, key: BandKey, seq: u64) {
        match self.buckets.get_mut(&key) {
            None => {
                self.buckets.insert(key, Members::One(seq));
            }
            Some(members) => {
                let mut seqs = members.as_slice().to_vec();
                match seqs.binary_search(&seq) {
                    Ok(_) => return,
                    Err(at) => seqs.insert(at, seq),
                }
                *members = Members::Many(seqs);
            }
        }
        self.entries += 1;
    }

    fn drop_entry(&mut self, key: BandKey, seq: u64) {
        let Some(members) = self.buckets.get_mut(&key) else {
            return;
        };
        let mut seqs = members.as_slice().to_vec();
        let Ok(at) = seqs.binary_search(&seq) else {
            return;
        };
        seqs.remove(at);
        self.entries -= 1;
        match seqs.as_slice() {
            [] => {
                self.buckets.remove(&key);
            }
            [one] => *members = Members::One(*one),
            _ => *members = Members::Many(seqs),
        }
    }

    /// The articles of bucket `key`, ascending (empty if none).
    pub fn members(&self, key: &BandKey) -> &[u64] {
        self.buckets.get(key).map_or(&[], Members::as_slice)
    }

    /// Entries held.
    pub fn entries(&self) -> usize {
        self.entries
    }

    /// Calls `write` with every bucket in key order (the order of an SST file). Sorted one run at
    /// a time (the keys that share their first two bytes: the band and the top byte of its hash,
    /// ~1/3,000 of the table), with each bucket's members copied next to its key: no sort holds
    /// a core for long, and writing reads memory in order instead of the table at random (one
    /// cache miss per bucket was most of the write-out's time).
    pub fn for_each_sorted<E>(
        &self,
        mut write: impl FnMut(&BandKey, &[u64]) -> Result<(), E>,
    ) -> Result<(), E> {
        const RUNS: usize = 1 << 16;
        let run_of = |key: &BandKey| usize::from(u16::from_be_bytes([key[0], key[1]]));
        // A counting sort by run, then each run sorted in place.
        let mut starts = vec![0usize; RUNS + 1];
        for key in self.buckets.keys() {
            starts[run_of(key) + 1] += 1;
        }
        for run in 0..RUNS {
            starts[run + 1] += starts[run];
        }
        let mut next = starts.clone();
        let mut all = vec![([0; BAND_KEY_LEN], Members::One(0)); self.buckets.len()];
        for (key, members) in &self.buckets {
            let at = &mut next[run_of(key)];
            all[*at] = (*key, members.clone());
            *at += 1;
        }
        for bounds in starts.windows(2) {
            let run = &mut all[bounds[0]..bounds[1]];
            run.sort_unstable_by_key(|(key, _)| *key);
            for (key, members) in run.iter() {
                write(key, members.as_slice())?;
            }
        }
        Ok(())
    }
}

/// See the module comment. Two tables: the active one takes new entries; once it is full it is
/// frozen and written out while a new active one fills, so the writer never waits for the sort.
#[derive(Debug, Default)]
pub struct RecentBands {
    active: Table,
    frozen: Option<Arc<Table>>,
    /// Every article below has its entries in the family.
    banded_below: u64,
    /// Every article below has its entries in the family or the frozen table (`banded_below`
    /// when there is none).
    active_from: u64,
}

impl RecentBands {
    /// Empty tables: every article below `banded_below` has its entries in the family.
    pub fn new(banded_below: u64) -> RecentBands {
        RecentBands {
            active: Table::sized(),
            frozen: None,
            banded_below,
            active_from: banded_below,
        }
    }

    /// Articles at or above this sequence number have their band entries here.
    pub fn banded_below(&self) -> u64 {
        self.banded_below
    }

    /// Where the band entries of the article `seq` belong.
    pub fn home(&self, seq: u64) -> Home {
        if seq < self.banded_below {
            Home::Family
        } else if seq < self.active_from {
            Home::Frozen
        } else {
            Home::Active
        }
    }

    /// Entries of the active table (the frozen one is on its way out).
    pub fn entries(&self) -> usize {
        self.active.entries
    }

    /// Nothing held: neither table has an entry.
    pub fn is_empty(&self) -> bool {
        self.active.entries == 0 && self.frozen.is_none()
    }

    /// Applies a change of an article whose home is `Home::Active`.
    pub fn apply(&mut self, change: RecentChange) {
        match change {
            RecentChange::Add(seq, key) => self.active.add(key, seq),
            RecentChange::Drop(seq, key) => self.active.drop_entry(key, seq),
        }
    }

    /// Adds an entry to the active table (staged changes go through `apply`).
    pub fn add(&mut self, key: BandKey, seq: u64) {
        self.active.add(key, seq);
    }

    /// Bucket `key` as lookups see it: `stored`, the family's value, with the entries held here
    /// added. `Ok(None)` if neither has the bucket.
    pub fn bucket(
        &self,
        key: &BandKey,
        stored: Option<&[u8]>,
    ) -> Result<Option<BandBucket>, MalformedBucket> {
        let mut found = match stored {
            Some(value) => BandBucket::decode(value).ok_or(MalformedBucket)?,
            None if !self.holds_bucket(key) => return Ok(None),
            None => BandBucket::default(),
        };
        self.add_to(key, &mut found);
        Ok(Some(found))
    }

    fn holds_bucket(&self, key: &BandKey) -> bool {
        !self.active.members(key).is_empty()
            || self
                .frozen
                .as_ref()
                .is_some_and(|t| !t.members(key).is_empty())
    }

    /// Adds the articles of bucket `key` held here to `found`, the family's value of the bucket,
    /// in the order they will reach the family: the frozen table's, then the active one's.
    fn add_to(&self, key: &BandKey, found: &mut BandBucket) {
        let cap = bucket::cap(key[0]);
        let frozen = self.frozen.as_ref().map_or(&[][..], |t| t.members(key));
        for &seq in frozen.iter().chain(self.active.members(key)) {
            found.add(seq, cap);
        }
    }

    /// Every key either table holds, ascending, once.
    pub fn keys(&self) -> Vec<BandKey> {
        let mut keys: Vec<BandKey> = self.active.buckets.keys().copied().collect();
        if let Some(frozen) = &self.frozen {
            keys.extend(frozen.buckets.keys().copied());
        }
        keys.sort_unstable();
        keys.dedup();
        keys
    }

    /// The table being written out, if any.
    pub fn frozen(&self) -> Option<Arc<Table>> {
        self.frozen.clone()
    }

    /// Every article below has its entries in the family or the frozen table: the bound the
    /// frozen table's file carries.
    pub fn frozen_below(&self) -> u64 {
        self.active_from
    }

    /// Freezes the active table to be written out (none may be frozen already): the articles
    /// below `next_seq` then have their entries in the family or the frozen table.
    pub fn freeze(&mut self, next_seq: u64) -> Arc<Table> {
        let table = Arc::new(std::mem::replace(&mut self.active, Table::sized()));
        self.frozen = Some(table.clone());
        self.active_from = next_seq.max(self.active_from);
        table
    }

    /// The frozen table is in the family, with every article below `active_from`.
    pub fn frozen_written(&mut self) {
        self.frozen = None;
        self.banded_below = self.active_from;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::bucket::MAX_CONTAINMENT_BUCKET;
    use crate::index::layout::band_key;
    use crate::sketch::BANDS;

    /// The keys `table` writes out, in the order it writes them.
    fn written_keys(table: &Table) -> Vec<BandKey> {
        let mut keys = Vec::new();
        table
            .for_each_sorted(|key, _| {
                keys.push(*key);
                Ok::<(), ()>(())
            })
            .unwrap();
        keys
    }

    /// Every bucket is written once, in key order across runs too, with its members.
    #[test]
    fn a_table_is_written_out_in_key_order() {
        let mut t = RecentBands::new(0);
        let mut seq = 0;
        for band in [3u8, 0, 11, 7] {
            for i in 0u64..3_000 {
                // Spread over the hash's top bytes, with some buckets shared by two articles.
                let key = band_key(band, i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 5_000);
                t.add(key, seq);
                seq += 1;
            }
        }
        let frozen = t.freeze(seq);
        let keys = written_keys(&frozen);
        assert_eq!(keys.len(), frozen.buckets.len());
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "keys out of order");
        let mut members = 0;
        frozen
            .for_each_sorted(|key, seqs| {
                assert_eq!(seqs, frozen.members(key));
                members += seqs.len();
                Ok::<(), ()>(())
            })
            .unwrap();
        assert_eq!(members, frozen.entries());
    }

    #[test]
    fn adds_and_drops_keep_each_bucket_sorted_and_the_count_exact() {
        let mut t = RecentBands::new(10);
        let k = band_key(0, 7);
        t.add(k, 12);
        t.add(k, 11);
        t.add(k, 12);
        t.add(band_key(3, 1), 11);
        let mut found = BandBucket::default();
        t.add_to(&k, &mut found);
        assert_eq!(found.entries, [11, 12]);
        assert_eq!(t.entries(), 3);
        t.apply(RecentChange::Drop(11, k));
        t.apply(RecentChange::Drop(99, k));
        t.apply(RecentChange::Drop(12, k));
        assert_eq!(t.bucket(&k, None), Ok(None));
        assert_eq!(t.entries(), 1);
        assert_eq!(t.keys(), [band_key(3, 1)]);
    }

    /// Freezing hands the full table over to be written out while a new one fills: lookups see
    /// both, the articles of each have their home, and once written the frozen ones are the
    /// family's.
    #[test]
    fn a_frozen_table_is_seen_until_it_is_written_out() {
        let mut t = RecentBands::new(10);
        let k = band_key(1, 1);
        t.add(k, 10);
        t.add(band_key(2, 2), 11);
        let frozen = t.freeze(12);
        assert_eq!(written_keys(&frozen).len(), 2);
        assert_eq!(t.entries(), 0);
        assert!(!t.is_empty());
        t.apply(RecentChange::Add(12, k));
        assert_eq!(
            [t.home(9), t.home(11), t.home(12)],
            [Home::Family, Home::Frozen, Home::Active]
        );
        let mut found = BandBucket::default();
        t.add_to(&k, &mut found);
        assert_eq!(found.entries, [10, 12]);
        assert_eq!(t.keys(), [k, band_key(2, 2)]);
        t.frozen_written();
        assert_eq!(t.banded_below(), 12);
        assert_eq!(t.home(11), Home::Family);
        assert!(t.frozen().is_none());
        let mut found = BandBucket::default();
        t.add_to(&k, &mut found);
        assert_eq!(found.entries, [12]);
    }

    /// A bucket seen through the table is the family's value plus the entries held, crowded
    /// past its cap as the family's own merge would make it.
    #[test]
    fn a_lookup_adds_the_entries_held_to_the_stored_bucket() {
        let band = BANDS as u8; // a containment band, cap 8
        let key = band_key(band, 5);
        let mut t = RecentBands::new(0);
        let stored: Vec<u64> = (0..MAX_CONTAINMENT_BUCKET as u64 - 1).collect();
        let mut found = BandBucket {
            count: stored.len() as u64,
            entries: stored,
        };
        t.add(key, 100);
        t.add_to(&key, &mut found);
        assert!(!found.crowded());
        assert_eq!(found.entries.last(), Some(&100));
        t.add(key, 101);
        t.add_to(&key, &mut found);
        assert!(found.crowded());
        assert_eq!(found.count, MAX_CONTAINMENT_BUCKET as u64 + 1);
    }
}
