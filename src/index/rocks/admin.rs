//! What operators and the commands around the decision ask of an open index besides reading and
//! writing articles: durability (`sync`, a `SyncHandle` that syncs from another thread, `flush`,
//! waiting for background work), the directory, its size and stored identity, `stats` (bucket
//! occupancy of the block and band families, the age distribution), `verify` (the families and
//! the counters agree) and `delete` (a takedown). None of it is part of deciding an article; kept
//! apart so that the read and write files hold only that path.

use super::{rocks_err, RocksIndex, Staged};
use crate::error::IndexError;
use crate::index::block_bucket;
use crate::index::bucket::{self, BandBucket};
use crate::index::layout::{
    self, band_key, block_key, expiry_key, id_key, parse_band_key, parse_block_key,
    parse_expiry_key, parse_id_key, ALL_FAMILIES, ARTICLES, BANDED_BELOW_KEY, BANDS_FAMILY,
    BLOCK_FAMILIES, EXPIRY, IDS, META,
};
use crate::index::recent::BandKey;
use crate::index::{ArticleStore, DiskUsage, DurableStore, StoredArticle, VolumeSpace};
use crate::simhash::Fingerprint;
use crate::simhash::BLOCKS;
use crate::time::{format_rfc3339, Bucket, TimeSpan};
use rocksdb::{ReadOptions, WaitForCompactOptions, DB};
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// See [`RocksIndex::sync_handle`]. Keeps the database open while it lives.
#[derive(Clone)]
pub struct SyncHandle {
    db: Arc<DB>,
    dir: PathBuf,
}

impl SyncHandle {
    /// Makes every write completed before this call durable (fsync of the WAL).
    pub fn sync(&self) -> Result<(), IndexError> {
        self.db.flush_wal(true).map_err(rocks_err(&self.dir))
    }
}

impl DurableStore for RocksIndex {
    fn sync(&self) -> Result<(), IndexError> {
        RocksIndex::sync(self)
    }

    fn sync_handle(&self) -> Option<SyncHandle> {
        Some(RocksIndex::sync_handle(self))
    }

    fn disk_usage(&self) -> DiskUsage {
        disk_usage_of(&self.dir)
    }

    fn withdraw(&mut self, id: &str, fingerprint: Fingerprint) -> Result<bool, IndexError> {
        if self.get(id)?.is_some_and(|a| a.fingerprint == fingerprint) {
            return Ok(!self.delete(&[id.to_owned()])?.is_empty());
        }
        Ok(false)
    }

    fn revert_correction(
        &mut self,
        id: &str,
        fingerprint: Fingerprint,
        at_ms: i64,
    ) -> Result<bool, IndexError> {
        RocksIndex::revert_correction(self, id, fingerprint, at_ms)
    }
}

impl std::fmt::Debug for SyncHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyncHandle")
            .field("dir", &self.dir)
            .finish()
    }
}

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

/// Outcome of a consistency check.
#[derive(Debug, Clone, Default, Serialize)]
pub struct VerifyReport {
    pub articles: u64,
    pub unique: u64,
    /// Entries in the four block families.
    pub block_entries: u64,
    /// Block entries the unique articles should have (4 each).
    pub expected_entries: u64,
    /// Entries in the `bands` family.
    pub band_entries: u64,
    /// Band entries the unique articles should have (their sketch's bands).
    pub expected_band_entries: u64,
    /// Entries in the `expiry` family (one per article).
    pub expiry_entries: u64,
    /// Entries in the `ids` family (one per unique article).
    pub id_entries: u64,
    pub problems: Vec<String>,
}

impl RocksIndex {
    /// The index's own id (`layout::META_INSTANCE`), made and stored durably on first use. A copy
    /// of the directory (a standby taken over) keeps it: what is named by it follows the index.
    pub fn instance_id(&mut self) -> Result<String, IndexError> {
        let meta = self.cf(META)?;
        if let Some(id) = self
            .db
            .get_cf(meta, layout::META_INSTANCE)
            .map_err(rocks_err(&self.dir))?
        {
            return Ok(String::from_utf8_lossy(&id).into_owned());
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let seed = format!("{now}/{}/{}", std::process::id(), self.dir.display());
        let id = format!("{:016x}", xxhash_rust::xxh3::xxh3_64(seed.as_bytes()));
        self.db
            .put_cf(meta, layout::META_INSTANCE, id.as_bytes())
            .map_err(rocks_err(&self.dir))?;
        self.sync()?;
        Ok(id)
    }

    /// The fingerprint identity stored in the index, if any.
    pub fn stored_identity(&self) -> Result<Option<String>, IndexError> {
        let meta = self.cf(META)?;
        Ok(self
            .db
            .get_cf(meta, layout::META_IDENTITY)
            .map_err(rocks_err(&self.dir))?
            .map(|v| String::from_utf8_lossy(&v).into_owned()))
    }

    /// Blocks until the flushes and compactions RocksDB has queued are done (after a bulk load,
    /// say, before measuring or serving latency-sensitive lookups).
    pub fn wait_for_background_work(&self) -> Result<(), IndexError> {
        self.db
            .wait_for_compact(&WaitForCompactOptions::default())
            .map_err(rocks_err(&self.dir))
    }

    /// Writes the band entries held in memory and every family's memtable to SST files, as
    /// happens when they fill (a benchmark measuring disk use calls it to see what is stored
    /// rather than what is buffered).
    pub fn flush(&self) -> Result<(), IndexError> {
        self.write_out_recent()?;
        for name in ALL_FAMILIES {
            self.db
                .flush_cf(self.cf(name)?)
                .map_err(rocks_err(&self.dir))?;
        }
        Ok(())
    }

    /// Makes every write so far durable (fsync of the WAL). Called before committing offsets.
    pub fn sync(&self) -> Result<(), IndexError> {
        self.db.flush_wal(true).map_err(rocks_err(&self.dir))
    }

    /// A handle that makes the writes done so far durable from any thread (RocksDB's `FlushWAL`
    /// is thread-safe), so the thread committing offsets can wait for the fsync while the single
    /// writer goes on deciding.
    pub fn sync_handle(&self) -> SyncHandle {
        SyncHandle {
            db: self.db.clone(),
            dir: self.dir.clone(),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Total size of the files in the index directory.
    pub fn disk_bytes(&self) -> u64 {
        dir_size(&self.dir)
    }

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
    fn band_stats(&self, top: usize) -> Result<BandStats, IndexError> {
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

    /// Checks that the families agree: every searchable article has its `ids` entry, its four
    /// block entries and its sketch band entries; every `ids`, block or band entry points (block
    /// and band entries through `ids`) at a unique article with that sequence number and
    /// fingerprint (or band); and the counters match. Reads everything; meant for tests
    /// and operators after a crash.
    pub fn verify(&self) -> Result<VerifyReport, IndexError> {
        let mut report = VerifyReport::default();
        let articles = self.cf(ARTICLES)?;
        let bands_cf = self.cf(BANDS_FAMILY)?;
        // Crowded block buckets, read once and kept as sets: read for every member, each would
        // cost a read of the whole bucket, which for a flooded one is quadratic.
        let mut crowded: HashMap<(usize, u16), HashSet<(Fingerprint, u64)>> = HashMap::new();
        let mut it = self.db.raw_iterator_cf(articles);
        it.seek_to_first();
        while let (Some(key), Some(value)) = (it.key(), it.value()) {
            let id = String::from_utf8_lossy(key).into_owned();
            report.articles += 1;
            let art = self.decode_article(&id, value)?;
            if art.searchable() {
                report.unique += 1;
                match self.id_of(art.seq)? {
                    Some(found) if found == id => {}
                    Some(_) => report.problems.push(format!(
                        "{IDS}: sequence number {} of {id:?} names another id",
                        art.seq
                    )),
                    None => report
                        .problems
                        .push(format!("{IDS}: entry of {id:?} is missing")),
                }
                for (family, (name, block)) in BLOCK_FAMILIES
                    .iter()
                    .zip(art.fingerprint.blocks())
                    .enumerate()
                {
                    let entry = (art.fingerprint, art.seq);
                    let listed = if let Some(set) = crowded.get(&(family, block)) {
                        set.contains(&entry)
                    } else {
                        let bucket = self
                            .db
                            .get_pinned_cf(self.cf(name)?, block_key(block))
                            .map_err(rocks_err(&self.dir))?;
                        let value = bucket.as_deref().unwrap_or_default();
                        let listed = match block_bucket::entries(value) {
                            Some(entries)
                                if block_bucket::is_crowded(
                                    value.len() / block_bucket::ENTRY_BYTES,
                                ) =>
                            {
                                let set: HashSet<_> = entries.collect();
                                let listed = set.contains(&entry);
                                crowded.insert((family, block), set);
                                listed
                            }
                            Some(mut entries) => entries.any(|e| e == entry),
                            None => false,
                        };
                        listed
                    };
                    if !listed {
                        report
                            .problems
                            .push(format!("{name}: entry of {id:?} is missing"));
                    }
                }
                report.expected_entries += BLOCKS as u64;
                if let Some(sketch) = &art.sketch {
                    for (band, bkey) in sketch.entries() {
                        report.expected_band_entries += 1;
                        let key = band_key(band as u8, bkey);
                        let stored = self
                            .db
                            .get_cf(bands_cf, key)
                            .map_err(rocks_err(&self.dir))?;
                        // A crowded bucket lists no one: its count is checked below. (A
                        // malformed one is reported by the scan of the family.)
                        let listed = self
                            .recent()
                            .bucket(&key, stored.as_deref())
                            .is_ok_and(|b| {
                                b.is_some_and(|b| b.crowded() || b.entries.contains(&art.seq))
                            });
                        if !listed {
                            report.problems.push(format!(
                                "{BANDS_FAMILY}: sketch band {band} of {id:?} is missing"
                            ));
                        }
                    }
                }
            }
            if self
                .db
                .get_cf(self.cf(EXPIRY)?, expiry_key(art.event_ms, art.seq))
                .map_err(rocks_err(&self.dir))?
                .as_deref()
                != Some(key)
            {
                report
                    .problems
                    .push(format!("{EXPIRY}: entry of {id:?} is missing"));
            }
            if art.seq >= self.counts.next_seq {
                report.problems.push(format!(
                    "{id:?} has seq {} >= next_seq {}",
                    art.seq, self.counts.next_seq
                ));
            }
            it.next();
        }
        it.status().map_err(rocks_err(&self.dir))?;
        // Every `ids` entry names a unique article with that sequence number.
        let mut it = self.db.raw_iterator_cf(self.cf(IDS)?);
        it.seek_to_first();
        while let (Some(key), Some(value)) = (it.key(), it.value()) {
            report.id_entries += 1;
            let id = String::from_utf8_lossy(value).into_owned();
            match (parse_id_key(key), self.get(&id)?) {
                (Some(seq), Some(art)) if art.seq == seq && art.searchable() => {}
                (None, _) => report.problems.push(format!("{IDS}: malformed key")),
                (_, None) => report
                    .problems
                    .push(format!("{IDS}: entry points at missing article {id:?}")),
                _ => report
                    .problems
                    .push(format!("{IDS}: entry of {id:?} disagrees with its article")),
            }
            it.next();
        }
        it.status().map_err(rocks_err(&self.dir))?;
        for (family, name) in BLOCK_FAMILIES.iter().enumerate() {
            let cf = self.cf(name)?;
            let mut it = self.db.raw_iterator_cf_opt(cf, total_order());
            it.seek_to_first();
            while let (Some(key), Some(value)) = (it.key(), it.value()) {
                let (Some(block), Some(entries)) =
                    (parse_block_key(key), block_bucket::entries(value))
                else {
                    report
                        .problems
                        .push(format!("{name}: malformed bucket {key:02x?}"));
                    it.next();
                    continue;
                };
                for (fp, seq) in entries {
                    report.block_entries += 1;
                    report.problems.extend(self.check_entry(name, seq, |art| {
                        art.fingerprint == fp && art.fingerprint.blocks()[family] == block
                    })?);
                }
                it.next();
            }
            it.status().map_err(rocks_err(&self.dir))?;
        }
        self.for_each_band_bucket(|key, found| {
            let (Some((band, bkey)), Some(found)) = (parse_band_key(key), found) else {
                report
                    .problems
                    .push(format!("{BANDS_FAMILY}: malformed bucket {key:02x?}"));
                return Ok(());
            };
            report.band_entries += found.count;
            // (A crowded bucket may have fewer than its cap left: it stays crowded until empty.)
            if !found.crowded() && found.count as usize > bucket::cap(band) {
                report.problems.push(format!(
                    "{BANDS_FAMILY}: bucket {band}:{bkey:016x} lists {} articles, over its cap",
                    found.count
                ));
            }
            for &seq in &found.entries {
                report
                    .problems
                    .extend(self.check_entry(BANDS_FAMILY, seq, |art| {
                        art.sketch.is_some_and(|s| {
                            s.entries()
                                .any(|(b, k)| b == usize::from(band) && k == bkey)
                        })
                    })?);
            }
            Ok(())
        })?;
        let mut it = self.db.raw_iterator_cf(self.cf(EXPIRY)?);
        it.seek_to_first();
        while let (Some(key), Some(value)) = (it.key(), it.value()) {
            report.expiry_entries += 1;
            let id = String::from_utf8_lossy(value).into_owned();
            match (parse_expiry_key(key), self.get(&id)?) {
                (Some(parsed), Some(art))
                    if parse_expiry_key(&expiry_key(art.event_ms, art.seq)) == Some(parsed) => {}
                (None, _) => report.problems.push(format!("{EXPIRY}: malformed key")),
                (_, None) => report
                    .problems
                    .push(format!("{EXPIRY}: entry points at missing article {id:?}")),
                _ => report.problems.push(format!(
                    "{EXPIRY}: entry of {id:?} disagrees with its article"
                )),
            }
            it.next();
        }
        it.status().map_err(rocks_err(&self.dir))?;
        if report.expiry_entries != report.articles {
            report.problems.push(format!(
                "{} expiry entries for {} articles",
                report.expiry_entries, report.articles
            ));
        }
        if report.articles != self.counts.articles || report.unique != self.counts.unique {
            report.problems.push(format!(
                "counters say {} articles / {} unique, found {} / {}",
                self.counts.articles, self.counts.unique, report.articles, report.unique
            ));
        }
        if report.block_entries != report.expected_entries {
            report.problems.push(format!(
                "{} block entries for {} unique articles (expected {})",
                report.block_entries, report.unique, report.expected_entries
            ));
        }
        if report.id_entries != report.unique {
            report.problems.push(format!(
                "{} {IDS} entries for {} unique articles",
                report.id_entries, report.unique
            ));
        }
        if report.band_entries != report.expected_band_entries {
            report.problems.push(format!(
                "{} band entries for {} unique articles (expected {})",
                report.band_entries, report.unique, report.expected_band_entries
            ));
        }
        Ok(report)
    }

    /// What a block or band entry naming `seq` points at, for `verify`: a problem (`family`:
    /// ...) when `ids` has no id for it, the id names no article, or the article is not that
    /// unique article or `agrees` says the entry is not its own.
    fn check_entry(
        &self,
        family: &str,
        seq: u64,
        agrees: impl Fn(&StoredArticle) -> bool,
    ) -> Result<Option<String>, IndexError> {
        let Some(id) = self.id_of(seq)? else {
            return Ok(Some(format!(
                "{family}: entry points at missing article (sequence number {seq})"
            )));
        };
        Ok(match self.get(&id)? {
            Some(art) if art.seq == seq && art.searchable() && agrees(&art) => None,
            Some(_) => Some(format!(
                "{family}: entry of {id:?} disagrees with its article"
            )),
            None => Some(format!("{family}: entry points at missing article {id:?}")),
        })
    }

    /// The id stored in `ids` under `seq`, if any.
    fn id_of(&self, seq: u64) -> Result<Option<String>, IndexError> {
        Ok(self
            .db
            .get_pinned_cf(self.cf(IDS)?, id_key(seq))
            .map_err(rocks_err(&self.dir))?
            .map(|v| String::from_utf8_lossy(&v).into_owned()))
    }

    /// Removes the articles `ids` (a publisher's takedown, a retraction) from every family in one
    /// atomic write: later copies are judged against what remains. Returns the ids that were
    /// indexed; the others are ignored. Duplicates that matched a removed article keep their
    /// stored decision.
    pub fn delete(&mut self, ids: &[String]) -> Result<Vec<String>, IndexError> {
        let mut staged = Staged::default();
        let mut counts = self.counts;
        let mut deleted = Vec::new();
        for id in ids {
            if deleted.contains(id) {
                continue;
            }
            let Some(old) = self.get(id)? else {
                continue;
            };
            self.stage_removal(&mut staged, &mut counts, id, &old)?;
            deleted.push(id.clone());
        }
        if deleted.is_empty() {
            return Ok(deleted);
        }
        self.commit(staged, counts)?;
        self.db.flush_wal(true).map_err(rocks_err(&self.dir))?;
        Ok(deleted)
    }
}

impl RocksIndex {
    /// Calls `f` with every band bucket in key order, as lookups see it: the family's value with
    /// the entries held in memory added (`index::recent`), and the buckets only memory holds. None
    /// for a malformed value. Skips the bound of the entries in memory.
    fn for_each_band_bucket(
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

/// The disk use of the index directory `dir` and the space on its volume, measured without the
/// index (a thread that does not own it can watch it).
pub fn disk_usage_of(dir: &Path) -> DiskUsage {
    DiskUsage {
        index_bytes: dir_size(dir),
        volume: volume_space(dir),
    }
}

/// Space on the volume holding `path` (`statvfs`), or `None` if the system call fails.
// The block counts and sizes are 32-bit on 32-bit targets: the conversions are not useless there.
#[allow(clippy::useless_conversion)]
fn volume_space(path: &Path) -> Option<VolumeSpace> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `path` is a NUL-terminated string and `stat` a buffer of the type the call fills;
    // it is read only after the call reported success.
    let stat = unsafe {
        if libc::statvfs(path.as_ptr(), stat.as_mut_ptr()) != 0 {
            return None;
        }
        stat.assume_init()
    };
    let fragment = u64::from(stat.f_frsize);
    Some(VolumeSpace {
        available_bytes: u64::from(stat.f_bavail).saturating_mul(fragment),
        total_bytes: u64::from(stat.f_blocks).saturating_mul(fragment),
    })
}

fn dir_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_size(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint::FingerprintIdentity;
    use crate::index::recent::RecentBands;
    use crate::index::{IndexConfig, StoredDecision};
    use crate::segments::Segments;
    use crate::simhash::Fingerprint;
    use crate::sketch::{Sketch, ALL_BANDS as ALL_BANDS_N, BINS};
    use crate::time::TimeSpan;

    fn identity() -> FingerprintIdentity {
        FingerprintIdentity {
            algorithm: "test".into(),
            ..FingerprintIdentity::default()
        }
    }

    fn article(seq: u64, event_ms: i64, bin: u32) -> StoredArticle {
        let mut bins = [0u32; BINS];
        for (i, b) in bins.iter_mut().enumerate() {
            *b = bin.wrapping_mul(7919).wrapping_add(i as u32 * 31);
        }
        StoredArticle {
            indexed_extension: false,
            event_ms,
            published_ms: None,
            event_time_clamped: false,
            earlier: Vec::new(),
            seq,
            fingerprint: Fingerprint(u64::from(bin) * 0x9e37_79b9),
            url: None,
            title: None,
            first_seen_ms: event_ms.max(0) as u64,
            decision: StoredDecision::Unique,
            matched: None,
            sketch: Some(Sketch {
                bins,
                shingles: 1000,
                segments: Segments::default(),
            }),
            revision: None,
            correction: None,
        }
    }

    /// Buckets stored in the `bands` family (not counting the bound of those held in memory).
    fn band_keys(index: &RocksIndex) -> usize {
        let mut it = index
            .db
            .raw_iterator_cf_opt(index.cf(BANDS_FAMILY).unwrap(), total_order());
        it.seek_to_first();
        let mut n = 0;
        while let Some(key) = it.key() {
            n += usize::from(key != BANDED_BELOW_KEY);
            it.next();
        }
        n
    }

    /// An index of the previous layout (no segment signatures) is refused at open, with an error
    /// that names the way over (`index rebuild`), and the directory is left as it was.
    #[test]
    fn an_index_of_the_previous_layout_is_refused_naming_index_rebuild() {
        let dir = tempfile::tempdir().unwrap();
        let config = IndexConfig::default();
        let index = RocksIndex::open(dir.path(), &identity(), &config).unwrap();
        index
            .db
            .put_cf(
                index.cf(META).unwrap(),
                layout::META_FORMAT,
                "newsdedup-index/8",
            )
            .unwrap();
        drop(index);
        let Err(e) = RocksIndex::open(dir.path(), &identity(), &config) else {
            panic!("an index of layout 8 was opened");
        };
        let message = e.to_string();
        assert!(matches!(e, IndexError::FormatMismatch { .. }), "{message}");
        assert!(message.contains("newsdedup-index/8"), "{message}");
        assert!(message.contains("newsdedup index rebuild"), "{message}");
        let Err(again) = RocksIndex::open(dir.path(), &identity(), &config) else {
            panic!("refused once, opened the second time");
        };
        assert!(matches!(again, IndexError::FormatMismatch { .. }));
    }

    /// A unique article's segment entries find it from a later text that holds it whole however
    /// small a part of it it is (no band in common), and a segment many unique articles hold is
    /// template: it names no candidate and the lookup says so.
    #[test]
    fn segment_entries_find_a_small_earlier_part_and_count_template_segments() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = RocksIndex::open(dir.path(), &identity(), &IndexConfig::default()).unwrap();
        let statement = "外交部发言人今天表示中方坚决反对任何形式的单边制裁措施。\
            中方敦促有关方面立即停止干涉别国内政的错误做法。";
        let background: String = (0..30)
            .map(|i| {
                format!("背景资料第{i}部分介绍了相关国家近年来在贸易领域的多次摩擦和谈判进程。")
            })
            .collect();
        let mut earlier = article(0, 0, 1);
        earlier.sketch = Some(Sketch::of(statement));
        index.insert("statement", &earlier, true).unwrap();
        let later = Sketch::of(&format!("{statement}\n{background}"));
        assert!(later
            .bands()
            .all(|b| !earlier.sketch.unwrap().bands().any(|x| x == b)));
        let mut found = Vec::new();
        let crowded = index.sketch_lookup(&later, &mut found).unwrap();
        assert_eq!(found, [(0, "statement".to_owned())]);
        assert_eq!(crowded.segments, 0);

        // The same court form in three more rulings: template, no longer a way to a candidate.
        let form = "本判决为终审判决，自宣告之日起发生法律效力。如不服本判决可在判决书送达之日起十日内向本院递交上诉状。";
        for (i, who) in ["张某", "李某", "王某"].into_iter().enumerate() {
            let mut ruling = article(i as u64 + 1, 0, i as u32 + 2);
            let facts = format!(
                "被告人{who}于{}年犯盗窃罪一案经审理查明事实清楚。",
                2001 + i
            );
            ruling.sketch = Some(Sketch::of(&format!("{facts}{form}")));
            index.insert(&format!("ruling-{i}"), &ruling, true).unwrap();
        }
        let fourth = Sketch::of(&format!(
            "被告人赵某于2009年犯诈骗罪一案经审理查明证据确实。{form}"
        ));
        let form_segments: u64 = fourth
            .segments
            .iter()
            .enumerate()
            .filter(|(_, (h, len))| {
                *len >= crate::segments::SEARCHABLE_SEGMENT_CHARS
                    && Sketch::of(form).segments.iter().any(|(g, _)| g == *h)
            })
            .map(|(i, _)| 1 << i)
            .sum();
        assert_eq!(form_segments.count_ones(), 2);
        let mut found = Vec::new();
        let crowded = index.sketch_lookup(&fourth, &mut found).unwrap();
        assert_eq!(crowded.segments, form_segments);
    }

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

    /// Block and band entries name articles by sequence number; lookups find the ids in `ids`,
    /// and `verify` reports an `ids` entry that is missing or names the wrong article, and a block
    /// or band entry of an article that is not there. A lookup that meets a missing id fails
    /// (corruption) instead of matching nothing.
    #[test]
    fn entries_name_articles_through_ids_and_verify_checks_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = RocksIndex::open(dir.path(), &identity(), &IndexConfig::default()).unwrap();
        let a = article(0, 0, 1);
        let b = article(1, 0, 2);
        index.insert("a", &a, true).unwrap();
        index.insert("b", &b, true).unwrap();
        let dup = StoredArticle {
            indexed_extension: false,
            decision: StoredDecision::Duplicate,
            ..article(2, 0, 1)
        };
        index.insert("c", &dup, false).unwrap();
        let report = index.verify().unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert_eq!(report.id_entries, 2, "one per unique article");

        let mut found = Vec::new();
        index.candidates(a.fingerprint, 3, &mut found).unwrap();
        assert_eq!(
            found
                .iter()
                .map(|c| (c.seq, c.id.as_str()))
                .collect::<Vec<_>>(),
            [(0, "a")]
        );
        let mut banded = Vec::new();
        index
            .sketch_lookup(b.sketch.as_ref().unwrap(), &mut banded)
            .unwrap();
        assert_eq!(banded, [(1, "b".to_owned())]);

        // `ids` names the wrong article for one sequence number and has none for another.
        let ids = index.cf(IDS).unwrap();
        index.db.put_cf(ids, id_key(0), b"b").unwrap();
        index.db.delete_cf(ids, id_key(1)).unwrap();
        let problems = index.verify().unwrap().problems;
        for expected in [
            "ids: sequence number 0 of \"a\" names another id",
            "ids: entry of \"b\" is missing",
            "ids: entry of \"b\" disagrees with its article",
            "block0: entry of \"b\" disagrees with its article",
            "block0: entry points at missing article (sequence number 1)",
            "bands: entry points at missing article (sequence number 1)",
        ] {
            assert!(
                problems.iter().any(|p| p == expected),
                "{expected} not in {problems:?}"
            );
        }
        let err = index
            .sketch_lookup(b.sketch.as_ref().unwrap(), &mut banded)
            .unwrap_err();
        assert!(
            matches!(err, IndexError::Corrupt { .. })
                && err.to_string().contains("sequence number 1"),
            "{err}"
        );
    }

    /// After `lower_background_priority`, the thread that runs flushes works at nice 19 (it
    /// takes the priority when it picks up its next job; the process's other threads keep
    /// theirs), and so does the thread writing out band entries.
    #[cfg(target_os = "linux")]
    #[test]
    fn background_threads_run_at_the_lowest_priority() {
        fn nice_of_threads(name: &str) -> Vec<i64> {
            let mut found = Vec::new();
            for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
                let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
                if comm.trim() != name {
                    continue;
                }
                let stat = std::fs::read_to_string(task.path().join("stat")).unwrap();
                // Fields after the parenthesised name: state is field 3, nice field 19.
                let rest = &stat[stat.rfind(')').unwrap() + 2..];
                found.push(rest.split(' ').nth(16).unwrap().parse().unwrap());
            }
            found
        }
        RocksIndex::lower_background_priority().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut index = RocksIndex::open(dir.path(), &identity(), &IndexConfig::default()).unwrap();
        index.insert("a", &article(0, 0, 1), true).unwrap();
        index.flush().unwrap();
        let flush_threads = nice_of_threads("rocksdb:high");
        // The thread that ran this flush took the priority (a pool thread that has not run a job
        // since has not yet).
        assert!(flush_threads.contains(&19), "{flush_threads:?}");
        let test_thread = std::fs::read_to_string("/proc/thread-self/comm").unwrap();
        let own = nice_of_threads(test_thread.trim());
        assert!(own.iter().all(|&n| n == 0), "{own:?}");
        // The index's own background thread (writing out band entries) lowers itself too.
        let writer = std::thread::Builder::new()
            .name("nice-check".to_owned())
            .spawn(|| {
                super::super::background_thread_priority();
                nice_of_threads("nice-check")
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(writer, [19]);
    }

    /// A paced background thread (the process lowered its background work) sleeps once it has
    /// worked a slice; an unpaced one (`batch`) never does.
    #[test]
    fn a_paced_background_thread_rests_after_each_slice_of_work() {
        use super::super::{BackgroundPace, BACKGROUND_SLICE};
        use std::time::Instant;
        let worked = Instant::now().checked_sub(BACKGROUND_SLICE).unwrap();
        let mut paced = BackgroundPace {
            paced: true,
            since: worked,
            calls: 0,
        };
        let start = Instant::now();
        for _ in 0..64 {
            paced.rest_if_due();
        }
        assert!(start.elapsed() >= BACKGROUND_SLICE);
        assert!(
            paced.since > worked,
            "the slice starts again after the rest"
        );
        let mut unpaced = BackgroundPace {
            paced: false,
            since: worked,
            calls: 0,
        };
        for _ in 0..64 {
            unpaced.rest_if_due();
        }
        assert_eq!(unpaced.since, worked, "no rest taken");
    }

    /// `[index] mmap_reads` reaches RocksDB (its OPTIONS file records it), and lookups served
    /// from table files (after a flush and a reopen) find the same candidates either way.
    #[test]
    fn mmap_reads_setting_reaches_rocksdb_and_reads_agree() {
        let found_with = |mmap_reads: bool| {
            let dir = tempfile::tempdir().unwrap();
            let config = IndexConfig {
                mmap_reads,
                ..IndexConfig::default()
            };
            let mut index = RocksIndex::open(dir.path(), &identity(), &config).unwrap();
            for seq in 0..50u64 {
                let a = article(seq, 0, seq as u32 + 1);
                index.insert(&format!("a{seq}"), &a, true).unwrap();
            }
            index.flush().unwrap();
            drop(index);
            let index = RocksIndex::open(dir.path(), &identity(), &config).unwrap();
            let options = std::fs::read_dir(dir.path())
                .unwrap()
                .filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with("OPTIONS-"))
                .max_by_key(|e| e.file_name())
                .map(|e| std::fs::read_to_string(e.path()).unwrap())
                .unwrap();
            assert!(
                options.contains(&format!("allow_mmap_reads={mmap_reads}")),
                "OPTIONS file lacks allow_mmap_reads={mmap_reads}"
            );
            let query = article(7, 0, 8);
            let mut blocks = Vec::new();
            index.candidates(query.fingerprint, 3, &mut blocks).unwrap();
            let mut banded = Vec::new();
            index
                .sketch_lookup(query.sketch.as_ref().unwrap(), &mut banded)
                .unwrap();
            assert!(blocks.iter().any(|c| c.id == "a7"), "{blocks:?}");
            (blocks, banded)
        };
        assert_eq!(found_with(true), found_with(false));
    }

    /// Articles removed by the retention window leave empty band buckets, which the next
    /// compaction drops (the compaction filter), while the buckets still in use stay. A crowded
    /// bucket of the family that loses members stays crowded (and `verify` accepts it).
    #[test]
    fn emptied_band_buckets_are_dropped_and_crowded_ones_stay_crowded() {
        use crate::sketch::{ALL_BANDS, BANDS, BAND_BINS};
        let dir = tempfile::tempdir().unwrap();
        let config = IndexConfig {
            retention: Some(TimeSpan::from_days(1)),
            ..IndexConfig::default()
        };
        let mut index = RocksIndex::open(dir.path(), &identity(), &config).unwrap();
        let day = 86_400_000;
        // Ten articles share the first containment band's bin (cap 8: crowded); five of them are
        // old enough to expire when the last article arrives.
        let shared = BANDS * BAND_BINS;
        let mut query = None;
        for seq in 0..10u64 {
            let mut a = article(seq, if seq < 5 { 0 } else { 3 * day / 4 }, seq as u32 + 1);
            if let Some(s) = a.sketch.as_mut() {
                s.bins[shared] = 4242;
                query.get_or_insert(*s);
            }
            index.insert(&format!("old{seq}"), &a, true).unwrap();
        }
        // Their band entries go from memory to the family, where the removals then meet them.
        index.flush().unwrap();
        let kept = article(10, 3 * day / 2, 100);
        index.insert("new", &kept, true).unwrap();
        assert_eq!(index.counts().unique, 6, "five old articles expired");
        assert!(index.verify().unwrap().problems.is_empty());
        let stats = index.band_stats(3).unwrap();
        assert_eq!((stats.crowded_buckets, stats.crowded_entries), (1, 5));
        // A query sharing only the crowded bucket finds nothing there.
        let mut q = query.unwrap();
        for (i, b) in q.bins.iter_mut().enumerate() {
            if i != shared {
                *b = b.wrapping_add(1);
            }
        }
        let mut found = Vec::new();
        index.sketch_lookup(&q, &mut found).unwrap();
        assert!(found.is_empty(), "{found:?}");

        index.flush().unwrap();
        assert_eq!(band_keys(&index), 10 * ALL_BANDS - 9 + ALL_BANDS);
        // The first compaction merges the operands into empty values (RocksDB does not filter a
        // merge's result in the same pass); the next one drops them.
        let bands = index.cf(BANDS_FAMILY).unwrap();
        index
            .db
            .compact_range_cf(bands, None::<&[u8]>, None::<&[u8]>);
        index
            .db
            .compact_range_cf(bands, None::<&[u8]>, None::<&[u8]>);
        assert_eq!(band_keys(&index), 5 * ALL_BANDS - 4 + ALL_BANDS);
        index
            .sketch_lookup(kept.sketch.as_ref().unwrap(), &mut found)
            .unwrap();
        assert_eq!(found, vec![(10, "new".to_owned())]);
        assert!(index.verify().unwrap().problems.is_empty());
    }

    /// The band entries held in memory (`index::recent`) after a crash: an open puts back those
    /// of every unique article from the bound on, from the stored sketches, and no others (those
    /// already written out stay once), so lookups and `verify` agree with an index that never
    /// stopped.
    #[test]
    fn band_entries_held_in_memory_come_back_after_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        let config = IndexConfig::default();
        let articles: Vec<StoredArticle> = (0..30u32)
            .map(|seq| article(u64::from(seq), 0, seq + 1))
            .collect();
        let mut index = RocksIndex::open(dir.path(), &identity(), &config).unwrap();
        for (seq, a) in articles.iter().enumerate().take(20) {
            index.insert(&format!("a{seq}"), a, true).unwrap();
        }
        index.flush().unwrap();
        for (seq, a) in articles.iter().enumerate().skip(20) {
            index.insert(&format!("a{seq}"), a, true).unwrap();
        }
        // One more, a duplicate: no band entries.
        let dup = StoredArticle {
            decision: StoredDecision::Duplicate,
            ..article(30, 0, 1)
        };
        index.insert("dup", &dup, false).unwrap();
        assert_eq!(index.recent().entries(), 10 * ALL_BANDS_N);
        assert_eq!(index.recent().banded_below(), 20);
        // A crash: memory is lost before it is written out.
        *index.recent() = RecentBands::new(20);
        drop(index);

        let index = RocksIndex::open(dir.path(), &identity(), &config).unwrap();
        assert_eq!(index.recent().entries(), 10 * ALL_BANDS_N);
        let report = index.verify().unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert_eq!(report.band_entries, 30 * ALL_BANDS_N as u64);
        for (seq, a) in articles.iter().enumerate() {
            let mut found = Vec::new();
            index
                .sketch_lookup(a.sketch.as_ref().unwrap(), &mut found)
                .unwrap();
            assert_eq!(found, [(seq as u64, format!("a{seq}"))]);
        }
        // A clean close writes them out: the next open has none to put back.
        drop(index);
        let index = RocksIndex::open(dir.path(), &identity(), &config).unwrap();
        assert!(index.recent().is_empty());
        assert_eq!(index.recent().banded_below(), 31);
        assert_eq!(band_keys(&index), 30 * ALL_BANDS_N);
        let report = index.verify().unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert_eq!(report.band_entries, 30 * ALL_BANDS_N as u64);
    }

    #[test]
    fn removing_an_article_held_in_memory_drops_its_entries() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = RocksIndex::open(dir.path(), &identity(), &IndexConfig::default()).unwrap();
        let a = article(0, 0, 1);
        let b = article(1, 0, 2);
        index.insert("a", &a, true).unwrap();
        index.insert("b", &b, true).unwrap();
        assert_eq!(index.delete(&["a".to_owned()]).unwrap(), ["a"]);
        assert_eq!(index.recent().entries(), ALL_BANDS_N);
        let mut found = Vec::new();
        index
            .sketch_lookup(a.sketch.as_ref().unwrap(), &mut found)
            .unwrap();
        assert!(found.is_empty(), "{found:?}");
        index.flush().unwrap();
        assert_eq!(band_keys(&index), ALL_BANDS_N);
        let report = index.verify().unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert_eq!(report.band_entries, ALL_BANDS_N as u64);
    }

    /// A full table is frozen and written out on its own thread while the next articles fill a
    /// new one; a change to an article of the frozen table (here its removal) first lets the
    /// table reach the family, then removes the article there. Lookups and `verify` see every
    /// article exactly once throughout, and the file's bound is the one frozen.
    #[test]
    fn a_full_table_is_written_out_while_the_next_one_fills() {
        use crate::index::recent::RECENT_BAND_ENTRIES;
        let dir = tempfile::tempdir().unwrap();
        let mut index = RocksIndex::open(dir.path(), &identity(), &IndexConfig::default()).unwrap();
        let full = RECENT_BAND_ENTRIES.div_ceil(ALL_BANDS_N) as u64;
        let articles: Vec<StoredArticle> = (0..full + 10)
            .map(|seq| article(seq, 0, seq as u32 + 1))
            .collect();
        let found = |index: &RocksIndex, a: &StoredArticle| {
            let mut found = Vec::new();
            index
                .sketch_lookup(a.sketch.as_ref().unwrap(), &mut found)
                .unwrap();
            found
        };
        for (seq, a) in articles.iter().enumerate().take(full as usize) {
            index.insert(&format!("a{seq}"), a, true).unwrap();
        }
        assert!(index.recent().frozen().is_some(), "frozen once full");
        assert_eq!(index.recent().entries(), 0);
        assert_eq!(found(&index, &articles[5]), [(5, "a5".to_owned())]);
        index.delete(&["a5".to_owned()]).unwrap();
        assert!(index.recent().frozen().is_none());
        assert_eq!(index.recent().banded_below(), full);
        for (seq, a) in articles.iter().enumerate().skip(full as usize) {
            index.insert(&format!("a{seq}"), a, true).unwrap();
        }
        assert_eq!(index.recent().entries(), 10 * ALL_BANDS_N);
        assert!(found(&index, &articles[5]).is_empty());
        assert_eq!(found(&index, &articles[6]), [(6, "a6".to_owned())]);
        let last = full as usize + 9;
        assert_eq!(
            found(&index, &articles[last]),
            [(last as u64, format!("a{last}"))]
        );
        let report = index.verify().unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert_eq!(report.band_entries, (full + 9) * ALL_BANDS_N as u64);
    }

    /// A crowded block bucket (more than `CROWDED_BUCKET` articles) is put back merged as it
    /// grows, so a read of it meets a few hundred operands instead of one per article; and it
    /// still holds exactly its articles, with removals among the adds.
    #[test]
    fn a_crowded_block_bucket_is_put_back_and_stays_exact() {
        use rocksdb::perf::{set_perf_stats, PerfContext, PerfMetric, PerfStatsLevel};
        const SHARED: u64 = 0x5a5a << 48;
        const N: u64 = 6_000;
        let dir = tempfile::tempdir().unwrap();
        let mut index = RocksIndex::open(dir.path(), &identity(), &IndexConfig::default()).unwrap();
        let crowded = |seq: u64| StoredArticle {
            fingerprint: Fingerprint(SHARED | (seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 16)),
            sketch: None,
            ..article(seq, 0, seq as u32)
        };
        for seq in 0..N {
            index
                .insert(&format!("a{seq}"), &crowded(seq), true)
                .unwrap();
        }
        // Every tenth article moves out of the bucket: a removal operand each.
        for seq in (0..N).step_by(10) {
            let moved = StoredArticle {
                seq: N + seq,
                fingerprint: Fingerprint(!SHARED & crowded(seq).fingerprint.0 | 1 << 63),
                ..crowded(seq)
            };
            index
                .replace(&format!("a{seq}"), &crowded(seq), &moved, true)
                .unwrap();
        }

        let mut found = Vec::new();
        index
            .candidates(Fingerprint(SHARED), 64, &mut found)
            .unwrap();
        let mut in_bucket: Vec<u64> = found
            .iter()
            .filter(|c| c.fingerprint.0 >> 48 == SHARED >> 48)
            .map(|c| c.seq)
            .collect();
        in_bucket.sort_unstable();
        let expected: Vec<u64> = (0..N).filter(|s| s % 10 != 0).collect();
        assert_eq!(in_bucket, expected);

        // The operands a read of the four buckets merges (all still in the memtable).
        set_perf_stats(PerfStatsLevel::EnableCount);
        let mut perf = PerfContext::default();
        perf.reset();
        for (name, block) in BLOCK_FAMILIES.iter().zip(Fingerprint(SHARED).blocks()) {
            let mut it = index.db.raw_iterator_cf(index.cf(name).unwrap());
            it.seek(block_key(block));
            assert!(it.value().is_some() || block != (SHARED >> 48) as u16);
        }
        let merged = perf.metric(PerfMetric::InternalMergeCount);
        set_perf_stats(PerfStatsLevel::Disable);
        assert!(merged > 0, "the reads merged no operand: nothing measured");
        assert!(
            merged < 1_000,
            "{merged} operands merged by a read of a bucket of {} articles",
            expected.len()
        );

        // `verify` reads the crowded bucket once, and still sees an entry go missing from it.
        let report = index.verify().unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        let (name, block) = BLOCK_FAMILIES
            .iter()
            .zip(Fingerprint(SHARED).blocks())
            .find(|(_, block)| u64::from(*block) == SHARED >> 48)
            .unwrap();
        let cf = index.cf(name).unwrap();
        index
            .db
            .merge_cf(
                cf,
                block_key(block),
                block_bucket::remove(crowded(1).fingerprint, 1),
            )
            .unwrap();
        let report = index.verify().unwrap();
        assert_eq!(
            report.problems,
            [
                format!("{name}: entry of \"a1\" is missing"),
                format!("23999 block entries for {N} unique articles (expected 24000)"),
            ]
        );
    }

    /// Puts `BANDS_L0_BUSY` files in the `bands` family's L0 that the compactions have not merged
    /// (each the bound as it is: 0), with its auto compactions off.
    fn fill_bands_l0(index: &RocksIndex) {
        use super::super::write::BANDS_L0_BUSY;
        use crate::index::layout::{BANDED_BELOW_KEY, BANDS_FAMILY};
        let bands = index.cf(BANDS_FAMILY).unwrap();
        index
            .db
            .set_options_cf(bands, &[("disable_auto_compactions", "true")])
            .unwrap();
        for _ in 0..BANDS_L0_BUSY {
            index
                .db
                .put_cf(bands, BANDED_BELOW_KEY, 0u64.to_be_bytes())
                .unwrap();
            index.db.flush_cf(bands).unwrap();
        }
    }

    /// While a written band file is held back (L0 busy), the next table goes on filling past its
    /// size instead of making the decision wait, up to `RECENT_BAND_ENTRIES_MAX`; the entries of
    /// both tables are found meanwhile, and everything reaches the family once L0 is merged.
    #[test]
    fn a_full_table_goes_on_filling_while_the_last_file_is_held_back() {
        use crate::index::layout::BANDS_FAMILY;
        use crate::index::recent::{RECENT_BAND_ENTRIES, RECENT_BAND_ENTRIES_MAX};
        let dir = tempfile::tempdir().unwrap();
        let mut index = RocksIndex::open(dir.path(), &identity(), &IndexConfig::default()).unwrap();
        fill_bands_l0(&index);
        let full = RECENT_BAND_ENTRIES.div_ceil(ALL_BANDS_N) as u64;
        let past = (RECENT_BAND_ENTRIES_MAX / ALL_BANDS_N) as u64 - 1;
        let articles: Vec<StoredArticle> = (0..full + past + 1)
            .map(|seq| article(seq, 0, seq as u32 + 1))
            .collect();
        for (seq, a) in articles.iter().enumerate().take((full + past) as usize) {
            index.insert(&format!("a{seq}"), a, true).unwrap();
        }
        // Without the overflow the second table's fill would wait (10 s at most) for L0, then
        // ingest the first file and freeze the second.
        assert_eq!(
            index.recent().frozen_below(),
            full,
            "the first file held back"
        );
        assert!(index.recent().entries() > RECENT_BAND_ENTRIES);
        for probe in [3, full + 5, full + past - 1] {
            let mut found = Vec::new();
            let a = &articles[probe as usize];
            index
                .sketch_lookup(a.sketch.as_ref().unwrap(), &mut found)
                .unwrap();
            assert_eq!(found, [(probe, format!("a{probe}"))]);
        }
        let bands = index.cf(BANDS_FAMILY).unwrap();
        index
            .db
            .set_options_cf(bands, &[("disable_auto_compactions", "false")])
            .unwrap();
        index
            .db
            .compact_range_cf(bands, None::<&[u8]>, None::<&[u8]>);
        let last = (full + past) as usize;
        index
            .insert(&format!("a{last}"), &articles[last], true)
            .unwrap();
        index.write_out_recent().unwrap();
        assert_eq!(index.recent().banded_below(), full + past + 1);
        let report = index.verify().unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
    }

    /// A written band file stays out of the family while the family's L0 holds too many files
    /// (compactions behind), lookups seeing its entries meanwhile, and goes in once they have
    /// caught up.
    #[test]
    fn a_band_file_waits_while_the_family_has_too_many_l0_files() {
        use crate::index::layout::BANDS_FAMILY;
        use crate::index::recent::RECENT_BAND_ENTRIES;
        let dir = tempfile::tempdir().unwrap();
        let mut index = RocksIndex::open(dir.path(), &identity(), &IndexConfig::default()).unwrap();
        let auto_compactions = |index: &RocksIndex, on: &str| {
            let bands = index.cf(BANDS_FAMILY).unwrap();
            index
                .db
                .set_options_cf(bands, &[("disable_auto_compactions", on)])
                .unwrap();
        };
        auto_compactions(&index, "true");
        fill_bands_l0(&index);
        let full = RECENT_BAND_ENTRIES.div_ceil(ALL_BANDS_N) as u64;
        let articles: Vec<StoredArticle> = (0..full + 2)
            .map(|seq| article(seq, 0, seq as u32 + 1))
            .collect();
        for (seq, a) in articles.iter().enumerate().take(full as usize) {
            index.insert(&format!("a{seq}"), a, true).unwrap();
        }
        assert!(index.recent().frozen().is_some(), "frozen once full");
        while !index
            .write_out
            .lock()
            .unwrap()
            .as_ref()
            .is_some_and(|thread| thread.is_finished())
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        index
            .insert(&format!("a{full}"), &articles[full as usize], true)
            .unwrap();
        assert!(
            index.recent().frozen().is_some(),
            "held back while L0 is busy"
        );
        let mut found = Vec::new();
        index
            .sketch_lookup(articles[3].sketch.as_ref().unwrap(), &mut found)
            .unwrap();
        assert_eq!(found, [(3, "a3".to_owned())]);
        auto_compactions(&index, "false");
        let bands = index.cf(BANDS_FAMILY).unwrap();
        index
            .db
            .compact_range_cf(bands, None::<&[u8]>, None::<&[u8]>);
        let last = full as usize + 1;
        index
            .insert(&format!("a{last}"), &articles[last], true)
            .unwrap();
        assert!(index.recent().frozen().is_none(), "in once L0 is merged");
        assert_eq!(index.recent().banded_below(), full);
        let report = index.verify().unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
    }
}
