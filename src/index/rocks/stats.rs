//! The index's statistics for operators (`index stats`): the articles, the disk use of the
//! directory and of each column family, the bucket occupancy of the block and band families
//! (the band buckets read as lookups see them, with the entries held in memory), and the age
//! distribution with what is due for removal. Reads only; none of it is part of deciding an
//! article.

use super::admin::disk_usage_of;
use super::{rocks_err, RocksIndex};
use crate::error::IndexError;
use crate::index::block_bucket;
use crate::index::bucket::BandBucket;
use crate::index::layout::{
    parse_band_key, parse_block_key, parse_expiry_key, ALL_FAMILIES, BANDED_BELOW_KEY,
    BANDS_FAMILY, BLOCK_FAMILIES, EXPIRY,
};
use crate::index::recent::BandKey;
use crate::index::DiskUsage;
use crate::time::{format_rfc3339, Bucket, TimeSpan};
use rocksdb::ReadOptions;
use serde::Serialize;

/// Occupancy of one block family: how many fingerprints share a 16-bit block value.
#[derive(Debug, Clone, Serialize)]
pub struct FamilyStats {
    pub family: String,
    /// Simhash block entries (one per unique article).
    pub entries: u64,
    pub buckets_used: u32,
    pub mean_bucket: f64,
    pub max_bucket: u32,
    /// Buckets of more than `block_bucket::CROWDED_BUCKET` fingerprints (templated reports,
    /// crafted input): every lookup of one reads it whole.
    pub crowded_buckets: u32,
    /// The largest buckets: (block value as 4 hex digits, entries).
    pub largest: Vec<(String, u32)>,
}

/// Occupancy of the `bands` family: how many unique articles share each (band, band key) bucket.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BandStats {
    pub family: String,
    /// Band entries (up to 12 per unique article with a sketch).
    pub entries: u64,
    /// Distinct (band, band key) buckets.
    pub buckets_used: u64,
    pub mean_bucket: f64,
    pub max_bucket: u32,
    /// Buckets shared by two or more articles (the candidate path's hits).
    pub shared_buckets: u64,
    /// Crowded buckets: shared by more articles than their band's cap (`bucket::cap`), ignored
    /// by lookups.
    pub crowded_buckets: u64,
    /// Entries in crowded buckets.
    pub crowded_entries: u64,
    /// The largest buckets (2+ articles): ("band:band key as 16 hex digits", entries).
    pub largest: Vec<(String, u32)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct IndexStats {
    pub dir: String,
    pub articles: u64,
    pub unique: u64,
    pub duplicate: u64,
    pub disk_bytes: u64,
    pub bytes_per_article: f64,
    /// The SST files of each column family (every family, in `ALL_FAMILIES` order).
    pub disk_by_family: Vec<FamilyDisk>,
    /// The rest of `disk_bytes`: the write-ahead log (writes not yet flushed to SST files), the
    /// manifest, options and RocksDB's info logs.
    pub disk_other_bytes: u64,
    /// Space left on the volume holding the index directory, and its size (absent where the
    /// system does not say): when none is left, writing stops.
    pub volume_available_bytes: Option<u64>,
    pub volume_size_bytes: Option<u64>,
    pub identity_digest: String,
    /// The four block families.
    pub families: Vec<FamilyStats>,
    /// The sketch band family.
    pub bands: BandStats,
    /// Articles by event time, and what the retention window removes.
    pub age: AgeStats,
}

/// Disk use of one column family: its live SST files.
#[derive(Debug, Clone, Serialize)]
pub struct FamilyDisk {
    pub family: String,
    pub bytes: u64,
    pub files: u32,
    /// Entries in those files (RocksDB's count; merge operands and deletions included).
    pub entries: u64,
}

/// The age distribution of the articles (by event time) and what is due for removal.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AgeStats {
    /// Event time of the oldest and newest article (RFC 3339, UTC).
    pub oldest: Option<String>,
    pub newest: Option<String>,
    /// The newest event time the index has seen (removals are measured from it).
    pub stream_time: Option<String>,
    /// The retention window the due count is for (`--retention`, else the configured one).
    pub retention: Option<String>,
    /// Articles whose event time is before this are due for removal.
    pub expiry_cutoff: Option<String>,
    /// Articles due for removal: more than the window older than the stream time (removed by the
    /// next writes).
    pub due_for_expiry: u64,
    /// Articles per UTC day of event time, oldest first (days without articles omitted).
    pub per_day: Vec<(String, u64)>,
    /// Articles per week (from Monday), when they span more than 60 days.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub per_week: Vec<(String, u64)>,
}

impl RocksIndex {
    /// The live SST files of every family: bytes, files and entries (zero for a family whose
    /// data is all still in the memtable and the WAL).
    pub fn disk_by_family(&self) -> Result<Vec<FamilyDisk>, IndexError> {
        let mut out: Vec<FamilyDisk> = ALL_FAMILIES
            .iter()
            .map(|f| FamilyDisk {
                family: (*f).to_owned(),
                bytes: 0,
                files: 0,
                entries: 0,
            })
            .collect();
        for file in self.db.live_files().map_err(rocks_err(&self.dir))? {
            if let Some(f) = out.iter_mut().find(|f| f.family == file.column_family_name) {
                f.bytes += file.size as u64;
                f.files += 1;
                f.entries += file.num_entries;
            }
        }
        Ok(out)
    }

    /// Articles, disk size, bucket occupancy of each block family and the age distribution
    /// (scans the block, band and expiry families). The due count is for `retention`, else the
    /// index's own window.
    pub fn stats(&self, top: usize, retention: Option<TimeSpan>) -> Result<IndexStats, IndexError> {
        let mut families = Vec::new();
        for name in BLOCK_FAMILIES {
            let cf = self.cf(name)?;
            let mut buckets = vec![0u32; 1 << 16];
            let mut entries = 0u64;
            let mut it = self.db.raw_iterator_cf_opt(cf, total_order());
            it.seek_to_first();
            while let (Some(key), Some(value)) = (it.key(), it.value()) {
                let (Some(block), Some(n)) = (parse_block_key(key), block_bucket::len(value))
                else {
                    return Err(IndexError::Corrupt {
                        dir: self.dir.clone(),
                        message: format!("{name}: malformed bucket {key:02x?}"),
                    });
                };
                buckets[usize::from(block)] = u32::try_from(n).unwrap_or(u32::MAX);
                entries += n as u64;
                it.next();
            }
            it.status().map_err(rocks_err(&self.dir))?;
            let used = buckets.iter().filter(|&&b| b > 0).count() as u32;
            let crowded = buckets
                .iter()
                .filter(|&&b| block_bucket::is_crowded(b as usize))
                .count() as u32;
            let mut largest: Vec<(usize, u32)> = buckets
                .iter()
                .copied()
                .enumerate()
                .filter(|&(_, n)| n > 0)
                .collect();
            largest.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            largest.truncate(top);
            families.push(FamilyStats {
                family: name.to_owned(),
                entries,
                buckets_used: used,
                mean_bucket: if used > 0 {
                    entries as f64 / used as f64
                } else {
                    0.0
                },
                max_bucket: largest.first().map_or(0, |l| l.1),
                crowded_buckets: crowded,
                largest: largest
                    .into_iter()
                    .map(|(b, n)| (format!("{b:04x}"), n))
                    .collect(),
            });
        }
        let bands = self.band_stats(top)?;
        let age = self.age_stats(retention.or(self.retention))?;
        let DiskUsage {
            index_bytes: disk_bytes,
            volume,
        } = disk_usage_of(&self.dir);
        let disk_by_family = self.disk_by_family()?;
        let in_families: u64 = disk_by_family.iter().map(|f| f.bytes).sum();
        let identity_digest = self
            .stored_identity()?
            .map(|s| format!("{:016x}", xxhash_rust::xxh3::xxh3_64(s.as_bytes())))
            .unwrap_or_default();
        Ok(IndexStats {
            dir: self.dir.display().to_string(),
            articles: self.counts.articles,
            unique: self.counts.unique,
            duplicate: self.counts.articles - self.counts.unique,
            disk_bytes,
            bytes_per_article: if self.counts.articles > 0 {
                disk_bytes as f64 / self.counts.articles as f64
            } else {
                0.0
            },
            disk_other_bytes: disk_bytes.saturating_sub(in_families),
            volume_available_bytes: volume.map(|v| v.available_bytes),
            volume_size_bytes: volume.map(|v| v.total_bytes),
            disk_by_family,
            identity_digest,
            families,
            bands,
            age,
        })
    }

    /// The age distribution, from the `expiry` family (keys only, oldest first).
    fn age_stats(&self, retention: Option<TimeSpan>) -> Result<AgeStats, IndexError> {
        let stream = self.counts.stream_time_ms;
        let cutoff = retention.map(|r| stream.saturating_sub(r.as_ms()));
        let mut age = AgeStats {
            stream_time: (self.counts.articles > 0).then(|| format_rfc3339(stream)),
            retention: retention.map(|r| r.to_string()),
            expiry_cutoff: cutoff.map(format_rfc3339),
            ..AgeStats::default()
        };
        let mut days: Vec<(i64, u64)> = Vec::new();
        let mut weeks: Vec<(i64, u64)> = Vec::new();
        let (mut oldest, mut newest) = (None, None);
        let mut it = self.db.raw_iterator_cf(self.cf(EXPIRY)?);
        it.seek_to_first();
        while let Some(key) = it.key() {
            if let Some((event, _)) = parse_expiry_key(key) {
                oldest.get_or_insert(event);
                newest = Some(event);
                if cutoff.is_some_and(|c| event < c) {
                    age.due_for_expiry += 1;
                }
                for (bucket, counts) in [(Bucket::Day, &mut days), (Bucket::Week, &mut weeks)] {
                    let start = bucket.start(event);
                    match counts.last_mut() {
                        Some((s, n)) if *s == start => *n += 1,
                        _ => counts.push((start, 1)),
                    }
                }
            }
            it.next();
        }
        it.status().map_err(rocks_err(&self.dir))?;
        age.oldest = oldest.map(format_rfc3339);
        age.newest = newest.map(format_rfc3339);
        age.per_day = days
            .into_iter()
            .map(|(s, n)| (Bucket::Day.label(s), n))
            .collect();
        if let (Some(o), Some(n)) = (oldest, newest) {
            if n - o > 60 * crate::time::MS_PER_DAY {
                age.per_week = weeks
                    .into_iter()
                    .map(|(s, n)| (Bucket::Week.label(s), n))
                    .collect();
            }
        }
        Ok(age)
    }

    /// Bucket occupancy of the `bands` family (one pass over its buckets).
    pub(super) fn band_stats(&self, top: usize) -> Result<BandStats, IndexError> {
        let mut stats = BandStats {
            family: BANDS_FAMILY.to_owned(),
            ..BandStats::default()
        };
        // (entries, band, band key) of the largest buckets so far, pruned now and then.
        let mut largest: Vec<(u32, u8, u64)> = Vec::new();
        self.for_each_band_bucket(|key, found| {
            let (Some((band, key)), Some(found)) = (parse_band_key(key), found) else {
                return Err(IndexError::Corrupt {
                    dir: self.dir.clone(),
                    message: format!("{BANDS_FAMILY}: malformed bucket {key:02x?}"),
                });
            };
            let n = u32::try_from(found.count).unwrap_or(u32::MAX);
            if n == 0 {
                return Ok(()); // emptied, not yet compacted away
            }
            stats.entries += found.count;
            stats.buckets_used += 1;
            stats.max_bucket = stats.max_bucket.max(n);
            if n >= 2 {
                stats.shared_buckets += 1;
                largest.push((n, band, key));
                if largest.len() > 2 * top + 64 {
                    largest.sort_by(|a, b| b.0.cmp(&a.0).then((a.1, a.2).cmp(&(b.1, b.2))));
                    largest.truncate(top);
                }
            }
            if found.crowded() {
                stats.crowded_buckets += 1;
                stats.crowded_entries += u64::from(n);
            }
            Ok(())
        })?;
        largest.sort_by(|a, b| b.0.cmp(&a.0).then((a.1, a.2).cmp(&(b.1, b.2))));
        largest.truncate(top);
        stats.largest = largest
            .into_iter()
            .map(|(n, band, key)| (format!("{band}:{key:016x}"), n))
            .collect();
        if stats.buckets_used > 0 {
            stats.mean_bucket = stats.entries as f64 / stats.buckets_used as f64;
        }
        Ok(stats)
    }
}

impl RocksIndex {
    /// Calls `f` with every band bucket in key order, as lookups see it: the family's value with
    /// the entries held in memory added (`index::recent`), and the buckets only memory holds. None
    /// for a malformed value. Skips the bound of the entries in memory.
    pub(super) fn for_each_band_bucket(
        &self,
        mut f: impl FnMut(&[u8], Option<BandBucket>) -> Result<(), IndexError>,
    ) -> Result<(), IndexError> {
        let recent = self.recent();
        let held = recent.keys();
        let mut next = 0;
        // A bucket only memory holds.
        let only_held = |key: &BandKey| recent.bucket(key, None).ok().flatten();
        let mut it = self
            .db
            .raw_iterator_cf_opt(self.cf(BANDS_FAMILY)?, total_order());
        it.seek_to_first();
        while let (Some(key), Some(value)) = (it.key(), it.value()) {
            while let Some(held_key) = held.get(next).filter(|k| k.as_slice() < key) {
                f(held_key, only_held(held_key))?;
                next += 1;
            }
            if key != BANDED_BELOW_KEY {
                if held.get(next).is_some_and(|k| k.as_slice() == key) {
                    next += 1;
                }
                let found = match <&BandKey>::try_from(key) {
                    Ok(band_key) => recent.bucket(band_key, Some(value)).ok().flatten(),
                    Err(_) => None,
                };
                f(key, found)?;
            }
            it.next();
        }
        it.status().map_err(rocks_err(&self.dir))?;
        for held_key in &held[next..] {
            f(held_key, only_held(held_key))?;
        }
        Ok(())
    }
}

/// Read options for a scan of a whole family: the prefix-scanned families' memtables (hash
/// buckets) iterate in key order only when asked to.
pub(super) fn total_order() -> ReadOptions {
    let mut opts = ReadOptions::default();
    opts.set_total_order_seek(true);
    opts
}

#[cfg(test)]
mod tests {
    use super::super::admin::tests::{article, identity};
    use super::*;
    use crate::index::layout::{ARTICLES, IDS};
    use crate::index::{ArticleStore, DurableStore, IndexConfig};

    /// `stats` splits the disk use by family: nothing in SST files before a flush (all of it is
    /// in the WAL), afterwards every family with data has files whose entries are its writes, and
    /// the families plus the rest add up to the directory's size.
    #[test]
    fn stats_split_the_disk_by_family() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = RocksIndex::open(dir.path(), &identity(), &IndexConfig::default()).unwrap();
        for seq in 0..20u32 {
            let a = article(u64::from(seq), i64::from(seq), seq + 1);
            index.insert(&format!("a{seq}"), &a, true).unwrap();
        }
        let before = index.stats(1, None).unwrap();
        let names: Vec<&str> = before
            .disk_by_family
            .iter()
            .map(|f| f.family.as_str())
            .collect();
        assert_eq!(names, ALL_FAMILIES);
        assert!(before
            .disk_by_family
            .iter()
            .all(|f| f.bytes == 0 && f.files == 0));
        assert_eq!(before.disk_other_bytes, before.disk_bytes);

        index.flush().unwrap();
        let after = index.stats(1, None).unwrap();
        let family = |name: &str| {
            after
                .disk_by_family
                .iter()
                .find(|f| f.family == name)
                .unwrap()
                .clone()
        };
        for name in [ARTICLES, IDS, EXPIRY, BLOCK_FAMILIES[0]] {
            let f = family(name);
            assert!(f.bytes > 0 && f.files == 1, "{name}: {f:?}");
        }
        for name in [ARTICLES, IDS, EXPIRY] {
            assert_eq!(family(name).entries, 20, "{name}");
        }
        // The 20 fingerprints share their first block: one bucket, its operands combined by the
        // flush.
        assert_eq!(family(BLOCK_FAMILIES[0]).entries, 1);
        assert_eq!(after.families[0].entries, 20);
        let bands = family(BANDS_FAMILY);
        assert_eq!(
            bands.entries,
            20 * 12 + 1,
            "12 band operands per article and the bound of those held in memory"
        );
        let in_families: u64 = after.disk_by_family.iter().map(|f| f.bytes).sum();
        assert_eq!(in_families + after.disk_other_bytes, after.disk_bytes);

        // What the metrics read: the same directory size, and the volume it is on.
        let usage = index.disk_usage();
        assert_eq!(usage.index_bytes, index.disk_bytes());
        let volume = usage.volume.expect("statvfs of the index directory");
        assert!(
            volume.total_bytes > 0 && volume.available_bytes <= volume.total_bytes,
            "{volume:?}"
        );
    }
}
