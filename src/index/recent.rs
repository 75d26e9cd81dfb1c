//! The band entries of the most recently indexed articles, held in memory until they are written
//! to the `bands` family as one sorted file.
//!
//! Why: a band entry is a random 9-byte key, twelve per unique article. Through RocksDB's
//! memtable, each flush re-sorted every one of them into a skiplist in hash-bucket order, a cache
//! miss per level (a fifth of the CPU of a bulk load, and the core a live instance lost for
//! ~0.4 s at every flush). Here an entry is one hash-map insert; `rocks::write` sorts the whole
//! table once and ingests it as an SST file when it reaches [`RECENT_BAND_ENTRIES`] entries, when
//! the index is flushed and when it is closed.
//!
//! What it holds, exactly: the band entries of every unique article whose sequence number is at
//! or above [`RecentBands::banded_below`], and nothing else; every article below has its entries
//! in the family. The ingested file carries the new bound itself (`layout::BANDED_BELOW_KEY`), so
//! the bound and the entries change in one atomic step, and a process that dies with entries in
//! memory loses nothing: on open, `rocks` reads the bound and puts the entries of every unique
//! article from there on back, from their stored sketches. An article below the bound that is
//! written again (a restore out of order, an editor's release) has its entries written to the
//! family directly, as does the removal of an article below it; the removal of one above only
//! drops its entries from memory.
//!
//! A lookup sees a bucket as the family's value with the entries held here added in sequence
//! order, which is exactly what the family holds once they are ingested.

use crate::index::bucket::{self, BandBucket};
use crate::index::layout::BAND_KEY_LEN;
use rustc_hash::FxHashMap;

/// A `bands` key (see `layout::band_key`).
pub type BandKey = [u8; BAND_KEY_LEN];

/// Band entries held in memory before they are written out as one file: about 22,000 unique
/// articles, 12 MB. Larger files mean fewer of them for the compactions to merge; the size also
/// bounds what a restart after a crash reads back (one stored sketch per article).
pub const RECENT_BAND_ENTRIES: usize = 1 << 18;

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

/// See the module comment.
#[derive(Debug, Default)]
pub struct RecentBands {
    buckets: FxHashMap<BandKey, Members>,
    entries: usize,
    banded_below: u64,
}

impl RecentBands {
    /// An empty table: every article below `banded_below` has its entries in the family.
    pub fn new(banded_below: u64) -> RecentBands {
        RecentBands {
            banded_below,
            ..RecentBands::default()
        }
    }

    /// Articles at or above this sequence number have their band entries here.
    pub fn banded_below(&self) -> u64 {
        self.banded_below
    }

    /// True if the band entries of the article `seq` belong here rather than in the family.
    pub fn holds(&self, seq: u64) -> bool {
        seq >= self.banded_below
    }

    /// Band entries held.
    pub fn entries(&self) -> usize {
        self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    pub fn apply(&mut self, change: RecentChange) {
        match change {
            RecentChange::Add(seq, key) => self.add(key, seq),
            RecentChange::Drop(seq, key) => self.drop_entry(key, seq),
        }
    }

    pub fn add(&mut self, key: BandKey, seq: u64) {
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

    /// The articles of bucket `key` held here, ascending (empty if none).
    pub fn members(&self, key: &BandKey) -> &[u64] {
        self.buckets.get(key).map_or(&[], Members::as_slice)
    }

    /// Adds the articles of bucket `key` held here to `found`, the family's value of the bucket.
    pub fn add_to(&self, key: &BandKey, found: &mut BandBucket) {
        let cap = bucket::cap(key[0]);
        for &seq in self.members(key) {
            found.add(seq, cap);
        }
    }

    /// Every bucket held, by key (the order of an SST file).
    pub fn sorted(&self) -> Vec<(&BandKey, &[u64])> {
        let mut all: Vec<(&BandKey, &[u64])> = self
            .buckets
            .iter()
            .map(|(k, m)| (k, m.as_slice()))
            .collect();
        all.sort_unstable_by_key(|(k, _)| *k);
        all
    }

    /// Empties the table once its entries are in the family, with every article below
    /// `banded_below` now there.
    pub fn written_out(&mut self, banded_below: u64) {
        self.buckets.clear();
        self.entries = 0;
        self.banded_below = banded_below;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::bucket::MAX_CONTAINMENT_BUCKET;
    use crate::index::layout::band_key;
    use crate::sketch::BANDS;

    #[test]
    fn adds_and_drops_keep_each_bucket_sorted_and_the_count_exact() {
        let mut t = RecentBands::new(10);
        let k = band_key(0, 7);
        t.add(k, 12);
        t.add(k, 11);
        t.add(k, 12);
        t.add(band_key(3, 1), 11);
        assert_eq!(t.members(&k), [11, 12]);
        assert_eq!(t.entries(), 3);
        t.apply(RecentChange::Drop(11, k));
        t.apply(RecentChange::Drop(99, k));
        assert_eq!(t.members(&k), [12]);
        t.apply(RecentChange::Drop(12, k));
        assert!(t.members(&k).is_empty());
        assert_eq!(t.entries(), 1);
        assert_eq!(t.sorted(), vec![(&band_key(3, 1), &[11u64][..])]);
        assert!(t.holds(10) && !t.holds(9));
        t.written_out(13);
        assert!(t.is_empty() && !t.holds(12));
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
