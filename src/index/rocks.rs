//! RocksDB implementation of the index: four block column families + sketch bands + ids +
//! articles + expiry + meta, one directory, every insert one atomic `WriteBatch` (so a process killed mid-write reopens with the
//! families in agreement: RocksDB replays whole batches from the WAL or none of them).
//!
//! Retention window (`[index] retention`). Every article has an event time (see
//! [`super::event_time`]). Two rules, both by event time:
//! - Matching: the decision skips an indexed article more than the window older than the article
//!   being decided (`dedup`, a query-time check: it holds at once, whatever is still on disk).
//! - Removal: an article is removed once it is more than the window older than the stream time,
//!   the newest event time the index has seen (kept in `meta` with the counters, in the same atomic
//!   write). The stream time only moves forward, so replaying an old archive removes nothing
//!   recent; only the archive's own articles that are already out of the window go.
//!
//! Removal has no stop-the-world pass. `stage_article` adds an `expiry` entry (event time ||
//! sequence number -> id) to the article's own write batch, so the queue of removals sorts oldest
//! first and always agrees with the articles. After each write, the single writer removes what is
//! due in one more atomic write of at most [`EXPIRE_BATCH`] articles, from every family, with the
//! counters (so they stay exact and `verify` passes at every moment); a backlog (a window just
//! made shorter) is worked off [`EXPIRE_BATCH`] articles per write. The writer keeps in memory a
//! floor below which the queue is known to be empty: when nothing is due (nearly every write) the
//! check costs a comparison, and when something is, the scan starts at the floor, past the
//! tombstones of earlier removals, and ends at the cutoff. A compaction filter was not used: it
//! cannot remove an article's block and band entries in the same atomic step as the article, and
//! the counters would drift.

use super::bucket::{self, BandBucket};
use super::layout::{
    self, band_key, block_key, expiry_key, id_key, parse_band_key, parse_block_key,
    parse_expiry_key, parse_id_key, ARTICLES, BANDS_FAMILY, BAND_KEY_LEN, BLOCK_FAMILIES, EXPIRY,
    IDS, META,
};
use super::IndexConfig;
use super::{ArticleStore, Candidate, IndexCounts, StoredArticle, StoredDecision};
use crate::error::IndexError;
use crate::fingerprint::FingerprintIdentity;
use crate::simhash::{Fingerprint, BLOCKS};
use crate::sketch::{Sketch, SKETCH_BYTES};
use crate::time::{format_rfc3339, Bucket, TimeSpan};
use rocksdb::{
    compaction_filter::Decision as CompactionDecision, BlockBasedOptions, Cache, ColumnFamily,
    ColumnFamilyDescriptor, DBCompressionType, Direction, IteratorMode, MemtableFactory,
    MergeOperands, Options, ReadOptions, SliceTransform, WaitForCompactOptions, WriteBatch,
    WriteOptions, DB,
};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// Merge operands a band bucket collects in the memtable before a write folds them into one value
/// (when that needs no disk read), so reading a busy bucket stays short.
const MAX_SUCCESSIVE_MERGES: usize = 16;

/// Largest height of the per-prefix memtable skiplists (see the block families' options).
const MEMTABLE_SKIPLIST_HEIGHT: i32 = 12;

/// Keys of a block bucket read one by one before the rest of the bucket is searched by seeks.
pub const SCAN_BEFORE_SEEK: usize = 4096;
/// Largest search distance the seek path serves (C(16,<=4) = 2,517 seeks at most per family);
/// beyond it a crowded bucket is read whole.
const MAX_SEEK_DISTANCE: u32 = 4;
/// Counter: lookups that met a crowded bucket and finished it by seeks.
pub const CROWDED_LOOKUPS: &str = "newsdedup_index_crowded_lookups_total";
/// Counter: articles removed by the retention window.
pub const EXPIRED_ARTICLES: &str = "newsdedup_index_expired_total";
/// Most articles removed by the retention window in one write (see the module comment).
pub const EXPIRE_BATCH: usize = 1_000;

/// Every 16-bit value within `max_distance` bits of `block`, ascending: the only values the next
/// block of a candidate can take, since a candidate within the distance differs from the query
/// in at most that many bits anywhere.
fn next_block_variants(block: u16, max_distance: u32) -> Vec<u16> {
    (0..=u16::MAX)
        .filter(|v| (v ^ block).count_ones() <= max_distance)
        .collect()
}

pub struct RocksIndex {
    /// Shared with `SyncHandle`s, which fsync the WAL from other threads.
    db: Arc<DB>,
    dir: PathBuf,
    counts: IndexCounts,
    write_opts: WriteOptions,
    retention: Option<TimeSpan>,
    /// No `expiry` entry has an event time below this (i64::MIN: not known yet). Lowered by
    /// `stage_article`, raised by `remove_expired`.
    expiry_floor: AtomicI64,
}

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
    /// Buckets of more than `SCAN_BEFORE_SEEK` fingerprints (templated reports, crafted input):
    /// lookups finish them by seeks.
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
    pub identity_digest: String,
    /// The four block families.
    pub families: Vec<FamilyStats>,
    /// The sketch band family.
    pub bands: BandStats,
    /// Articles by event time, and what the retention window removes.
    pub age: AgeStats,
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

fn rocks_err(dir: &Path) -> impl Fn(rocksdb::Error) -> IndexError + '_ {
    move |source| IndexError::Storage {
        dir: dir.to_owned(),
        message: source.into_string(),
    }
}

impl RocksIndex {
    /// Opens (creating if needed) the index in `dir` for fingerprints of `identity`.
    /// Fails with `IdentityMismatch` if the index was built with another fingerprint identity,
    /// and with `Locked` if another process has it open.
    pub fn open(
        dir: &Path,
        identity: &FingerprintIdentity,
        config: &IndexConfig,
    ) -> Result<RocksIndex, IndexError> {
        let index = Self::open_raw(dir, config)?;
        let expected = identity.to_json();
        let meta = index.cf(META)?;
        match index
            .db
            .get_cf(meta, layout::META_IDENTITY)
            .map_err(rocks_err(dir))?
        {
            Some(stored) => {
                let stored = String::from_utf8_lossy(&stored).into_owned();
                if stored != expected {
                    return Err(IndexError::IdentityMismatch {
                        dir: dir.to_owned(),
                        stored,
                        current: expected,
                    });
                }
            }
            None => {
                let mut batch = WriteBatch::default();
                batch.put_cf(meta, layout::META_IDENTITY, expected.as_bytes());
                batch.put_cf(meta, layout::META_FORMAT, layout::FORMAT_VERSION.as_bytes());
                index.db.write(batch).map_err(rocks_err(dir))?;
            }
        }
        Ok(index)
    }

    /// Opens without checking the fingerprint identity (for `index stats` / `index verify`).
    /// Fails with `FormatMismatch` if the index was written in another layout version.
    pub fn open_raw(dir: &Path, config: &IndexConfig) -> Result<RocksIndex, IndexError> {
        std::fs::create_dir_all(dir).map_err(|source| IndexError::Io {
            dir: dir.to_owned(),
            source,
        })?;
        Self::refuse_older_layout(dir)?;
        let cache = Cache::new_lru_cache(config.block_cache_mib.max(8) << 20);

        let mut db_opts = Options::default();
        db_opts.create_if_missing(true);
        db_opts.create_missing_column_families(true);
        db_opts.increase_parallelism(2);
        db_opts.set_max_background_jobs(2);
        db_opts.set_keep_log_file_num(4);
        // RocksDB's info log grows with every flush and compaction message (~45 KB a day at 10,000
        // articles a day); rolled at this size, the 4 kept stay bounded under a years-long run.
        db_opts.set_max_log_file_size(8 << 20);
        // The prefix-scanned families keep their memtable in hash buckets (below), which take one
        // writer at a time; there is only one writer anyway.
        db_opts.set_allow_concurrent_memtable_write(false);

        let mut families = Vec::with_capacity(BLOCKS + 5);
        for name in BLOCK_FAMILIES {
            let mut table = BlockBasedOptions::default();
            table.set_block_cache(&cache);
            // Prefix bloom only: lookups are range scans over one 2-byte prefix, never point gets.
            table.set_bloom_filter(10.0, false);
            table.set_whole_key_filtering(false);
            let mut opts = Options::default();
            opts.set_prefix_extractor(SliceTransform::create_fixed_prefix(2));
            // No memtable prefix bloom: the hash buckets below already find a prefix (or its
            // absence) with one probe, and the bloom's own probe was a cache miss on every seek
            // and every insert (~2% of a `batch` run).
            // Memtable: one small skiplist per 2-byte prefix instead of one big one. An insert
            // into a big skiplist walks a dozen cache-missing levels (it was ~1/3 of the decision
            // thread's time in `batch`); lookups only ever scan one prefix. A node's height is
            // drawn with P(h > k) = 4^-k, so an ordinary bucket of a few entries stays one or two
            // levels high; the maximum of 12 only matters for a crowded bucket (templated reports,
            // crafted input), whose seeks stay logarithmic instead of walking a 4-level list.
            opts.set_memtable_factory(MemtableFactory::HashSkipList {
                bucket_count: 1 << 16,
                height: MEMTABLE_SKIPLIST_HEIGHT,
                branching_factor: 4,
            });
            // Fingerprints are random bits: compression would cost CPU for nothing.
            opts.set_compression_type(DBCompressionType::None);
            opts.set_block_based_table_factory(&table);
            families.push(ColumnFamilyDescriptor::new(name, opts));
        }
        {
            let mut table = BlockBasedOptions::default();
            table.set_block_cache(&cache);
            // Band lookups are point reads of 9-byte keys, nearly all of which no other article
            // shares: the SST files' bloom filters answer those without reading data. (The prefix
            // extractor is the whole key: the filter is the same, and the hash memtable needs it.)
            table.set_bloom_filter(10.0, false);
            table.set_whole_key_filtering(false);
            let mut opts = Options::default();
            opts.set_prefix_extractor(SliceTransform::create_fixed_prefix(BAND_KEY_LEN));
            opts.set_merge_operator(
                "newsdedup.band_bucket.v2",
                |key: &[u8], existing: Option<&[u8]>, ops: &MergeOperands| {
                    bucket::merge(key, existing, ops)
                },
                // Operands are not combined without the value they apply to.
                |_: &[u8], _: Option<&[u8]>, _: &MergeOperands| None,
            );
            opts.set_max_successive_merges(MAX_SUCCESSIVE_MERGES);
            // A bucket whose articles have all been removed (retention) leaves an empty value,
            // dropped when a compaction next rewrites it (not by the one that merges it: RocksDB
            // filters values, not a merge's result).
            opts.set_compaction_filter("newsdedup.empty_band_bucket", |_, _: &[u8], v: &[u8]| {
                if bucket::is_empty(v) {
                    CompactionDecision::Remove
                } else {
                    CompactionDecision::Keep
                }
            });
            // No memtable prefix bloom, as for the block families; one hash bucket per key.
            opts.set_memtable_factory(MemtableFactory::HashSkipList {
                bucket_count: 1 << 20,
                height: MEMTABLE_SKIPLIST_HEIGHT,
                branching_factor: 4,
            });
            // Band keys are hashes: incompressible.
            opts.set_compression_type(DBCompressionType::None);
            opts.set_block_based_table_factory(&table);
            families.push(ColumnFamilyDescriptor::new(BANDS_FAMILY, opts));
        }
        // Point reads by key: `ids` (the candidates' sequence numbers, written in ascending order)
        // and `articles` (by id).
        for name in [IDS, ARTICLES] {
            let mut table = BlockBasedOptions::default();
            table.set_block_cache(&cache);
            table.set_bloom_filter(10.0, false);
            let mut opts = Options::default();
            opts.set_compression_type(DBCompressionType::Lz4);
            opts.set_block_based_table_factory(&table);
            families.push(ColumnFamilyDescriptor::new(name, opts));
        }
        // Small sequential keys, written in event-time order under a steady stream.
        let mut expiry_opts = Options::default();
        expiry_opts.set_compression_type(DBCompressionType::Lz4);
        families.push(ColumnFamilyDescriptor::new(EXPIRY, expiry_opts));
        families.push(ColumnFamilyDescriptor::new(META, Options::default()));

        let db = DB::open_cf_descriptors(&db_opts, dir, families).map_err(|source| {
            let msg = source.to_string();
            if msg.contains("LOCK") || msg.contains("lock") {
                IndexError::Locked {
                    dir: dir.to_owned(),
                }
            } else {
                IndexError::Storage {
                    dir: dir.to_owned(),
                    message: msg,
                }
            }
        })?;
        let mut write_opts = WriteOptions::default();
        write_opts.set_sync(config.sync_writes);
        let mut index = RocksIndex {
            db: Arc::new(db),
            dir: dir.to_owned(),
            counts: IndexCounts::default(),
            write_opts,
            retention: config.retention,
            expiry_floor: AtomicI64::new(i64::MIN),
        };
        match index
            .db
            .get_cf(index.cf(META)?, layout::META_FORMAT)
            .map_err(rocks_err(dir))?
        {
            Some(stored) if stored != layout::FORMAT_VERSION.as_bytes() => {
                return Err(IndexError::FormatMismatch {
                    dir: dir.to_owned(),
                    stored: String::from_utf8_lossy(&stored).into_owned(),
                    current: layout::FORMAT_VERSION.to_owned(),
                });
            }
            _ => {}
        }
        index.counts = index.read_counts()?;
        Ok(index)
    }

    /// An existing index without the `bands` family predates format 2, without `expiry` format 3,
    /// without `ids` format 6. Detected before the normal
    /// open, which would add the missing family and leave a directory the previous version can no
    /// longer open; the stored format is read from a read-only open for the error message.
    fn refuse_older_layout(dir: &Path) -> Result<(), IndexError> {
        let Ok(existing) = DB::list_cf(&Options::default(), dir) else {
            return Ok(()); // no database yet
        };
        let has = |name: &str| existing.iter().any(|f| f == name);
        if !has(META) || (has(BANDS_FAMILY) && has(EXPIRY) && has(IDS)) {
            return Ok(());
        }
        let db = DB::open_cf_for_read_only(&Options::default(), dir, &existing, false)
            .map_err(rocks_err(dir))?;
        let stored = match db.cf_handle(META) {
            Some(meta) => db
                .get_cf(meta, layout::META_FORMAT)
                .map_err(rocks_err(dir))?
                .map(|v| String::from_utf8_lossy(&v).into_owned()),
            None => None,
        };
        Err(IndexError::FormatMismatch {
            dir: dir.to_owned(),
            stored: stored.unwrap_or_else(|| "(none recorded)".to_owned()),
            current: layout::FORMAT_VERSION.to_owned(),
        })
    }

    fn cf(&self, name: &str) -> Result<&ColumnFamily, IndexError> {
        self.db.cf_handle(name).ok_or_else(|| IndexError::Corrupt {
            dir: self.dir.clone(),
            message: format!("column family {name} is missing"),
        })
    }

    fn read_counts(&self) -> Result<IndexCounts, IndexError> {
        let meta = self.cf(META)?;
        match self
            .db
            .get_cf(meta, layout::META_COUNTS)
            .map_err(rocks_err(&self.dir))?
        {
            None => Ok(IndexCounts::default()),
            Some(v) if v.len() == 32 => {
                let word =
                    |i: usize| u64::from_be_bytes(v[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
                Ok(IndexCounts {
                    articles: word(0),
                    unique: word(1),
                    next_seq: word(2),
                    stream_time_ms: word(3) as i64,
                })
            }
            Some(v) => Err(IndexError::Corrupt {
                dir: self.dir.clone(),
                message: format!("meta counters have {} bytes, expected 32", v.len()),
            }),
        }
    }

    fn encode_counts(c: &IndexCounts) -> [u8; 32] {
        let mut v = [0u8; 32];
        v[0..8].copy_from_slice(&c.articles.to_be_bytes());
        v[8..16].copy_from_slice(&c.unique.to_be_bytes());
        v[16..24].copy_from_slice(&c.next_seq.to_be_bytes());
        v[24..32].copy_from_slice(&c.stream_time_ms.to_be_bytes());
        v
    }

    fn decode_article(&self, id: &str, raw: &[u8]) -> Result<StoredArticle, IndexError> {
        let corrupt = |message: String| IndexError::Corrupt {
            dir: self.dir.clone(),
            message,
        };
        match raw.split_first() {
            Some((&layout::ARTICLE_VALUE_FORMAT, rest)) => {
                let (sketch, json) = match rest.split_first() {
                    Some((0, json)) => (None, json),
                    Some((1, tail)) if tail.len() >= SKETCH_BYTES => (
                        Sketch::from_bytes(&tail[..SKETCH_BYTES]),
                        &tail[SKETCH_BYTES..],
                    ),
                    _ => return Err(corrupt(format!("article {id:?}: truncated value"))),
                };
                let mut article: StoredArticle = serde_json::from_slice(json)
                    .map_err(|e| corrupt(format!("article {id:?}: {e}")))?;
                article.sketch = sketch;
                Ok(article)
            }
            _ => Err(corrupt(format!("article {id:?}: unknown value format"))),
        }
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

    /// Writes every family's memtable to SST files, as RocksDB does when one fills (a benchmark
    /// measuring disk use calls it to see what is stored rather than what is buffered).
    pub fn flush(&self) -> Result<(), IndexError> {
        for name in BLOCK_FAMILIES
            .iter()
            .chain(&[BANDS_FAMILY, IDS, ARTICLES, EXPIRY, META])
        {
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
            while let Some(key) = it.key() {
                if key.len() >= 2 {
                    buckets[u16::from_be_bytes([key[0], key[1]]) as usize] += 1;
                }
                entries += 1;
                it.next();
            }
            it.status().map_err(rocks_err(&self.dir))?;
            let used = buckets.iter().filter(|&&b| b > 0).count() as u32;
            let crowded = buckets
                .iter()
                .filter(|&&b| b as usize > SCAN_BEFORE_SEEK)
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
        let disk_bytes = self.disk_bytes();
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
        let mut it = self
            .db
            .raw_iterator_cf_opt(self.cf(BANDS_FAMILY)?, total_order());
        it.seek_to_first();
        while let (Some(key), Some(value)) = (it.key(), it.value()) {
            let (Some((band, key)), Some(found)) = (parse_band_key(key), BandBucket::decode(value))
            else {
                return Err(IndexError::Corrupt {
                    dir: self.dir.clone(),
                    message: format!("{BANDS_FAMILY}: malformed bucket {key:02x?}"),
                });
            };
            let n = u32::try_from(found.count).unwrap_or(u32::MAX);
            it.next();
            if n == 0 {
                continue; // emptied, not yet compacted away
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
        }
        it.status().map_err(rocks_err(&self.dir))?;
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
        let mut it = self.db.raw_iterator_cf(articles);
        it.seek_to_first();
        while let (Some(key), Some(value)) = (it.key(), it.value()) {
            let id = String::from_utf8_lossy(key).into_owned();
            report.articles += 1;
            let art = self.decode_article(&id, value)?;
            if art.decision == StoredDecision::Unique {
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
                for (name, block) in BLOCK_FAMILIES.iter().zip(art.fingerprint.blocks()) {
                    let cf = self.cf(name)?;
                    let k = block_key(block, art.fingerprint, art.seq);
                    if self
                        .db
                        .get_pinned_cf(cf, k)
                        .map_err(rocks_err(&self.dir))?
                        .is_none()
                    {
                        report
                            .problems
                            .push(format!("{name}: entry of {id:?} is missing"));
                    }
                }
                report.expected_entries += BLOCKS as u64;
                if let Some(sketch) = &art.sketch {
                    for (band, bkey) in sketch.bands() {
                        report.expected_band_entries += 1;
                        let found = self
                            .db
                            .get_cf(bands_cf, band_key(band as u8, bkey))
                            .map_err(rocks_err(&self.dir))?;
                        // A crowded bucket lists no one: its count is checked below.
                        let listed = found
                            .as_deref()
                            .and_then(BandBucket::decode)
                            .is_some_and(|b| b.crowded() || b.entries.contains(&art.seq));
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
                (Some(seq), Some(art))
                    if art.seq == seq && art.decision == StoredDecision::Unique => {}
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
        for name in BLOCK_FAMILIES {
            let cf = self.cf(name)?;
            let mut it = self.db.raw_iterator_cf_opt(cf, total_order());
            it.seek_to_first();
            while let Some(key) = it.key() {
                report.block_entries += 1;
                let Some((_, fp, seq)) = parse_block_key(key) else {
                    report.problems.push(format!("{name}: malformed key"));
                    it.next();
                    continue;
                };
                report
                    .problems
                    .extend(self.check_entry(name, seq, |art| art.fingerprint == fp)?);
                it.next();
            }
            it.status().map_err(rocks_err(&self.dir))?;
        }
        let mut it = self.db.raw_iterator_cf_opt(bands_cf, total_order());
        it.seek_to_first();
        while let (Some(key), Some(value)) = (it.key(), it.value()) {
            let (Some((band, bkey)), Some(found)) =
                (parse_band_key(key), BandBucket::decode(value))
            else {
                report
                    .problems
                    .push(format!("{BANDS_FAMILY}: malformed bucket {key:02x?}"));
                it.next();
                continue;
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
                            s.bands().any(|(b, k)| b == usize::from(band) && k == bkey)
                        })
                    })?);
            }
            it.next();
        }
        it.status().map_err(rocks_err(&self.dir))?;
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

    /// The simhash candidates: one prefix scan of each block family (one iterator each). A
    /// bucket read past [`SCAN_BEFORE_SEEK`] keys (a crowded block value: templated reports,
    /// crafted input) is finished by seeks instead, see [`next_block_variants`], so a lookup costs
    /// at most that many keys plus a bounded number of seeks, whatever the bucket's size.
    fn scan_blocks(
        &self,
        fp: Fingerprint,
        max_distance: u32,
        candidates: &mut Vec<Candidate>,
    ) -> Result<(), IndexError> {
        let first = candidates.len();
        let blocks = fp.blocks();
        for (family, (name, block)) in BLOCK_FAMILIES.iter().zip(blocks).enumerate() {
            let mut opts = ReadOptions::default();
            opts.set_prefix_same_as_start(true);
            let mut it = self.db.raw_iterator_cf_opt(self.cf(name)?, opts);
            it.seek(block.to_be_bytes());
            let mut read = 0usize;
            // Keys of one bucket sort by fingerprint; the first of its blocks that varies within
            // the bucket is block 0, or block 1 in the family of block 0.
            let next = usize::from(family == 0);
            let mut variants: Option<Vec<u16>> = None;
            let mut variant = 0usize;
            while let Some((b, other, seq)) = it.key().and_then(parse_block_key) {
                if b != block {
                    break;
                }
                read += 1;
                if read > SCAN_BEFORE_SEEK
                    && variants.is_none()
                    && max_distance <= MAX_SEEK_DISTANCE
                {
                    metrics::counter!(CROWDED_LOOKUPS).increment(1);
                    variants = Some(next_block_variants(blocks[next], max_distance));
                }
                if let Some(vs) = &variants {
                    // Skip to the next block value within the distance, if this one is not.
                    let here = other.blocks()[next];
                    while variant < vs.len() && vs[variant] < here {
                        variant += 1;
                    }
                    let Some(&want) = vs.get(variant) else {
                        break;
                    };
                    if want != here {
                        let mut target = Vec::with_capacity(6);
                        target.extend_from_slice(&block.to_be_bytes());
                        if family == 0 {
                            target.extend_from_slice(&block.to_be_bytes());
                        }
                        target.extend_from_slice(&want.to_be_bytes());
                        it.seek(&target);
                        continue;
                    }
                }
                let distance = fp.distance(other);
                // An article sharing several blocks appears in several families: keep it once.
                if distance <= max_distance && !candidates[first..].iter().any(|c| c.seq == seq) {
                    candidates.push(Candidate {
                        seq,
                        fingerprint: other,
                        distance,
                        id: String::new(),
                    });
                }
                it.next();
            }
            it.status().map_err(rocks_err(&self.dir))?;
        }
        let found = &mut candidates[first..];
        if !found.is_empty() {
            let seqs: Vec<u64> = found.iter().map(|c| c.seq).collect();
            for (c, id) in found.iter_mut().zip(self.ids_of(&seqs)?) {
                c.id = id;
            }
        }
        Ok(())
    }

    /// The ids of the unique articles `seqs` (named by block or band entries), in order, by one
    /// batched read of the `ids` family. An entry whose id is missing is corruption.
    fn ids_of(&self, seqs: &[u64]) -> Result<Vec<String>, IndexError> {
        let keys: Vec<[u8; layout::ID_KEY_LEN]> = seqs.iter().map(|&s| id_key(s)).collect();
        let values = self.db.batched_multi_get_cf(self.cf(IDS)?, &keys, false);
        seqs.iter()
            .zip(values)
            .map(|(seq, value)| match value.map_err(rocks_err(&self.dir))? {
                Some(id) => Ok(String::from_utf8_lossy(&id).into_owned()),
                None => Err(IndexError::Corrupt {
                    dir: self.dir.clone(),
                    message: format!(
                        "{IDS}: no id for sequence number {seq}, which a block or band entry names"
                    ),
                }),
            })
            .collect()
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
            Some(art)
                if art.seq == seq && art.decision == StoredDecision::Unique && agrees(&art) =>
            {
                None
            }
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

    /// The sketch-band candidates: the sketch's band buckets in one batched point read. Returns
    /// the crowded bands (bit `b`: band `b`).
    fn scan_bands(
        &self,
        sketch: &Sketch,
        banded: &mut Vec<(u64, String)>,
    ) -> Result<u16, IndexError> {
        let mut crowded = 0u16;
        let mut seqs: Vec<u64> = Vec::new();
        // Sorted, as the batched read is told: `bands()` goes by band number, the key's first byte.
        let keys: Vec<[u8; BAND_KEY_LEN]> = sketch
            .bands()
            .map(|(band, key)| band_key(band as u8, key))
            .collect();
        let band_numbers: Vec<usize> = sketch.bands().map(|(band, _)| band).collect();
        let values = self
            .db
            .batched_multi_get_cf(self.cf(BANDS_FAMILY)?, &keys, true);
        for ((key, value), band) in keys.iter().zip(values).zip(band_numbers) {
            let Some(value) = value.map_err(rocks_err(&self.dir))? else {
                continue;
            };
            let found = BandBucket::decode(&value).ok_or_else(|| IndexError::Corrupt {
                dir: self.dir.clone(),
                message: format!("{BANDS_FAMILY}: malformed bucket {key:02x?}"),
            })?;
            if found.crowded() {
                crowded |= 1 << band;
            }
            // A crowded bucket lists no one: it says nothing about a pair.
            for seq in found.entries {
                if !seqs.contains(&seq) {
                    seqs.push(seq);
                }
            }
        }
        if !seqs.is_empty() {
            let ids = self.ids_of(&seqs)?;
            banded.extend(seqs.into_iter().zip(ids));
        }
        Ok(crowded)
    }
}

impl ArticleStore for RocksIndex {
    fn get_sketch(&self, id: &str) -> Result<Option<Sketch>, IndexError> {
        let cf = self.cf(ARTICLES)?;
        let raw = self
            .db
            .get_pinned_cf(cf, id.as_bytes())
            .map_err(rocks_err(&self.dir))?;
        // The binary sketch leads the value: no JSON to decode.
        Ok(match raw.as_deref() {
            Some([layout::ARTICLE_VALUE_FORMAT, 1, rest @ ..]) if rest.len() >= SKETCH_BYTES => {
                Sketch::from_bytes(&rest[..SKETCH_BYTES])
            }
            _ => None,
        })
    }

    fn get(&self, id: &str) -> Result<Option<StoredArticle>, IndexError> {
        let cf = self.cf(ARTICLES)?;
        match self
            .db
            .get_pinned_cf(cf, id.as_bytes())
            .map_err(rocks_err(&self.dir))?
        {
            None => Ok(None),
            Some(raw) => self.decode_article(id, &raw).map(Some),
        }
    }

    fn candidates(
        &self,
        fp: Fingerprint,
        max_distance: u32,
        out: &mut Vec<Candidate>,
    ) -> Result<(), IndexError> {
        self.scan_blocks(fp, max_distance, out)
    }

    fn sketch_candidates(
        &self,
        sketch: &Sketch,
        out: &mut Vec<(u64, String)>,
    ) -> Result<(), IndexError> {
        self.scan_bands(sketch, out).map(drop)
    }

    fn sketch_lookup(
        &self,
        sketch: &Sketch,
        out: &mut Vec<(u64, String)>,
    ) -> Result<u16, IndexError> {
        self.scan_bands(sketch, out)
    }

    fn insert(
        &mut self,
        id: &str,
        article: &StoredArticle,
        searchable: bool,
    ) -> Result<(), IndexError> {
        self.write_article(id, None, article, searchable)
    }

    fn replace(
        &mut self,
        id: &str,
        previous: &StoredArticle,
        article: &StoredArticle,
        searchable: bool,
    ) -> Result<(), IndexError> {
        self.write_article(id, Some(previous), article, searchable)
    }

    fn counts(&self) -> IndexCounts {
        self.counts
    }

    fn retention(&self) -> Option<TimeSpan> {
        self.retention
    }
}

impl RocksIndex {
    /// Removes the articles `ids` (a publisher's takedown, a retraction) from every family in one
    /// atomic write: later copies are judged against what remains. Returns the ids that were
    /// indexed; the others are ignored. Duplicates that matched a removed article keep their
    /// stored decision.
    pub fn delete(&mut self, ids: &[String]) -> Result<Vec<String>, IndexError> {
        let mut batch = WriteBatch::default();
        let mut counts = self.counts;
        let mut deleted = Vec::new();
        for id in ids {
            if deleted.contains(id) {
                continue;
            }
            let Some(old) = self.get(id)? else {
                continue;
            };
            self.stage_removal(&mut batch, &mut counts, id, &old)?;
            deleted.push(id.clone());
        }
        if deleted.is_empty() {
            return Ok(deleted);
        }
        self.commit(batch, counts)?;
        self.db.flush_wal(true).map_err(rocks_err(&self.dir))?;
        Ok(deleted)
    }
}

impl RocksIndex {
    /// One atomic write of a restored article, when given (`id`, the stored version it replaces
    /// if any, the article, whether it is searchable), and of a read position of the output
    /// topics (topic, partition, next offset), so an index built from the output topics always
    /// knows exactly which records it holds. The article's `seq` is assigned here.
    pub fn write_restored(
        &mut self,
        article: Option<(&str, Option<&StoredArticle>, &StoredArticle, bool)>,
        position: Option<(&str, i32, i64)>,
    ) -> Result<(), IndexError> {
        let mut counts = self.counts;
        let mut batch = WriteBatch::default();
        if let Some((id, previous, article, searchable)) = article {
            let article = StoredArticle {
                seq: counts.next_seq,
                ..article.clone()
            };
            self.stage_article(&mut batch, &mut counts, id, previous, &article, searchable)?;
        }
        if let Some((topic, partition, next)) = position {
            batch.put_cf(
                self.cf(META)?,
                layout::position_key(topic, partition),
                next.to_be_bytes(),
            );
        }
        self.commit(batch, counts)
    }
}

impl RocksIndex {
    /// The read positions of the output topics this index was built from (see
    /// `apply_restored`): (topic, partition) -> next offset. Empty for an index `run` built.
    pub fn positions(&self) -> Result<BTreeMap<(String, i32), i64>, IndexError> {
        let meta = self.cf(META)?;
        let mut out = BTreeMap::new();
        let iter = self.db.iterator_cf(
            meta,
            IteratorMode::From(layout::META_POSITION_PREFIX, Direction::Forward),
        );
        for item in iter {
            let (k, v) = item.map_err(rocks_err(&self.dir))?;
            if !k.starts_with(layout::META_POSITION_PREFIX) {
                break;
            }
            let (Some(tp), Ok(bytes)) = (layout::parse_position_key(&k), <[u8; 8]>::try_from(&*v))
            else {
                return Err(IndexError::Corrupt {
                    dir: self.dir.clone(),
                    message: format!("bad read position {:?}", String::from_utf8_lossy(&k)),
                });
            };
            out.insert(tp, i64::from_be_bytes(bytes));
        }
        Ok(out)
    }

    /// Forgets the read positions (after a takeover: the index is `run`'s from then on).
    pub fn clear_positions(&mut self) -> Result<(), IndexError> {
        let positions = self.positions()?;
        if positions.is_empty() {
            return Ok(());
        }
        let mut batch = WriteBatch::default();
        for (topic, partition) in positions.keys() {
            batch.delete_cf(self.cf(META)?, layout::position_key(topic, *partition));
        }
        self.commit(batch, self.counts)?;
        self.sync()
    }

    /// Writes `batch` with the new `counts` in the same atomic write, then removes what the
    /// retention window makes due (see the module comment).
    fn commit(&mut self, batch: WriteBatch, counts: IndexCounts) -> Result<(), IndexError> {
        self.write_with_counts(batch, counts)?;
        self.remove_expired()?;
        Ok(())
    }

    fn write_with_counts(
        &mut self,
        mut batch: WriteBatch,
        counts: IndexCounts,
    ) -> Result<(), IndexError> {
        batch.put_cf(
            self.cf(META)?,
            layout::META_COUNTS,
            Self::encode_counts(&counts),
        );
        self.db
            .write_opt(batch, &self.write_opts)
            .map_err(rocks_err(&self.dir))?;
        self.counts = counts;
        Ok(())
    }

    /// Removes up to [`EXPIRE_BATCH`] articles that are more than the retention window older
    /// than the stream time, from every family, in one atomic write with the counters. Returns
    /// how many. Called by every write; a no-op without a window or when nothing is due.
    pub fn remove_expired(&mut self) -> Result<u64, IndexError> {
        let Some(retention) = self.retention else {
            return Ok(0);
        };
        let cutoff = self.counts.stream_time_ms.saturating_sub(retention.as_ms());
        let floor = self.expiry_floor.load(Ordering::Relaxed);
        if floor >= cutoff {
            return Ok(0);
        }
        let mut opts = ReadOptions::default();
        opts.set_iterate_lower_bound(expiry_key(floor.max(0), 0).to_vec());
        opts.set_iterate_upper_bound(expiry_key(cutoff, 0).to_vec());
        let expiry = self.cf(EXPIRY)?;
        let mut due: Vec<(Vec<u8>, String)> = Vec::new();
        let mut it = self.db.raw_iterator_cf_opt(expiry, opts);
        it.seek_to_first();
        while let (Some(key), Some(value)) = (it.key(), it.value()) {
            if due.len() == EXPIRE_BATCH {
                break;
            }
            due.push((key.to_vec(), String::from_utf8_lossy(value).into_owned()));
            it.next();
        }
        it.status().map_err(rocks_err(&self.dir))?;
        drop(it);
        // Everything below the cutoff is gone after this write, or (a full batch) everything
        // below the last key removed.
        let new_floor = match due.last() {
            Some((key, _)) if due.len() == EXPIRE_BATCH => {
                parse_expiry_key(key).map_or(floor, |(event, _)| event)
            }
            _ => cutoff,
        };
        let mut batch = WriteBatch::default();
        let mut counts = self.counts;
        let mut removed = 0u64;
        for (key, id) in &due {
            match self.get(id)? {
                Some(art) if expiry_key(art.event_ms, art.seq).as_slice() == key.as_slice() => {
                    self.stage_removal(&mut batch, &mut counts, id, &art)?;
                    removed += 1;
                }
                // Not the article's current entry: nothing else refers to it.
                _ => batch.delete_cf(expiry, key),
            }
        }
        if !due.is_empty() {
            self.write_with_counts(batch, counts)?;
        }
        if removed > 0 {
            metrics::counter!(EXPIRED_ARTICLES).increment(removed);
        }
        // `&mut self`: nothing was staged since `floor` was read, so `new_floor` (>= `floor`) is
        // what the queue now guarantees.
        self.expiry_floor.fetch_max(new_floor, Ordering::Relaxed);
        Ok(removed)
    }

    /// Adds to `batch` (and `counts`) the removal of the stored article `old` under `id` from
    /// every family: the article, its expiry entry, its block and band entries.
    fn stage_removal(
        &self,
        batch: &mut WriteBatch,
        counts: &mut IndexCounts,
        id: &str,
        old: &StoredArticle,
    ) -> Result<(), IndexError> {
        batch.delete_cf(self.cf(ARTICLES)?, id.as_bytes());
        counts.articles = counts.articles.saturating_sub(1);
        self.delete_entries(batch, counts, old)
    }

    /// Adds to `batch` the removal of an article's expiry entry and, when it is searchable
    /// (unique), its block and band entries (and the unique count).
    fn delete_entries(
        &self,
        batch: &mut WriteBatch,
        counts: &mut IndexCounts,
        old: &StoredArticle,
    ) -> Result<(), IndexError> {
        batch.delete_cf(self.cf(EXPIRY)?, expiry_key(old.event_ms, old.seq));
        if old.decision != StoredDecision::Unique {
            return Ok(());
        }
        counts.unique = counts.unique.saturating_sub(1);
        batch.delete_cf(self.cf(IDS)?, id_key(old.seq));
        for (name, block) in BLOCK_FAMILIES.iter().zip(old.fingerprint.blocks()) {
            batch.delete_cf(self.cf(name)?, block_key(block, old.fingerprint, old.seq));
        }
        if let Some(sketch) = &old.sketch {
            let bands = self.cf(BANDS_FAMILY)?;
            let op = bucket::remove(old.seq);
            for (band, key) in sketch.bands() {
                batch.merge_cf(bands, band_key(band as u8, key), &op);
            }
        }
        Ok(())
    }

    /// One atomic write: the article, its block and band entries when searchable, the removal of
    /// `previous`'s entries when it replaces a stored version, and the counters.
    fn write_article(
        &mut self,
        id: &str,
        previous: Option<&StoredArticle>,
        article: &StoredArticle,
        searchable: bool,
    ) -> Result<(), IndexError> {
        let mut counts = self.counts;
        let mut batch = WriteBatch::default();
        self.stage_article(&mut batch, &mut counts, id, previous, article, searchable)?;
        self.commit(batch, counts)
    }

    /// Adds to `batch` (and `counts`) what `write_article` writes for one article: the article,
    /// its expiry entry, its block and band entries when searchable, the removal of `previous`'s
    /// entries, and the stream time. Every writer of articles goes through it; a bulk writer
    /// stages several and writes them at once with `commit` (which also removes what is due).
    fn stage_article(
        &self,
        batch: &mut WriteBatch,
        counts: &mut IndexCounts,
        id: &str,
        previous: Option<&StoredArticle>,
        article: &StoredArticle,
        searchable: bool,
    ) -> Result<(), IndexError> {
        let mut value = Vec::with_capacity(256);
        value.push(layout::ARTICLE_VALUE_FORMAT);
        match &article.sketch {
            Some(s) => {
                value.push(1);
                value.extend_from_slice(&s.to_bytes());
            }
            None => value.push(0),
        }
        let json_part = StoredArticle {
            sketch: None,
            ..article.clone()
        };
        serde_json::to_writer(&mut value, &json_part).map_err(|e| IndexError::Corrupt {
            dir: self.dir.clone(),
            message: format!("cannot encode article {id:?}: {e}"),
        })?;
        counts.next_seq = counts.next_seq.max(article.seq + 1);
        match previous {
            None => counts.articles += 1,
            Some(old) => self.delete_entries(batch, counts, old)?,
        }
        batch.put_cf(self.cf(ARTICLES)?, id.as_bytes(), &value);
        // The retention window's bookkeeping: the article's place in the removal queue, and the
        // stream time.
        batch.put_cf(
            self.cf(EXPIRY)?,
            expiry_key(article.event_ms, article.seq),
            id.as_bytes(),
        );
        counts.stream_time_ms = counts.stream_time_ms.max(article.stream_time_ms());
        self.expiry_floor
            .fetch_min(article.event_ms, Ordering::Relaxed);
        if searchable {
            counts.unique += 1;
            batch.put_cf(self.cf(IDS)?, id_key(article.seq), id.as_bytes());
            for (name, block) in BLOCK_FAMILIES.iter().zip(article.fingerprint.blocks()) {
                batch.put_cf(
                    self.cf(name)?,
                    block_key(block, article.fingerprint, article.seq),
                    [],
                );
            }
            if let Some(sketch) = &article.sketch {
                let bands = self.cf(BANDS_FAMILY)?;
                let op = bucket::append(article.seq);
                for (band, key) in sketch.bands() {
                    batch.merge_cf(bands, band_key(band as u8, key), &op);
                }
            }
        }
        Ok(())
    }
}

/// Read options for a scan of a whole family: the prefix-scanned families' memtables (hash
/// buckets) iterate in key order only when asked to.
fn total_order() -> ReadOptions {
    let mut opts = ReadOptions::default();
    opts.set_total_order_seek(true);
    opts
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
    use crate::sketch::BINS;
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
            }),
            revision: None,
        }
    }

    fn band_keys(index: &RocksIndex) -> usize {
        let mut it = index
            .db
            .raw_iterator_cf_opt(index.cf(BANDS_FAMILY).unwrap(), total_order());
        it.seek_to_first();
        let mut n = 0;
        while it.valid() {
            n += 1;
            it.next();
        }
        n
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
            .sketch_candidates(b.sketch.as_ref().unwrap(), &mut banded)
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
            .sketch_candidates(b.sketch.as_ref().unwrap(), &mut banded)
            .unwrap_err();
        assert!(
            matches!(err, IndexError::Corrupt { .. })
                && err.to_string().contains("sequence number 1"),
            "{err}"
        );
    }

    /// Articles removed by the retention window leave empty band buckets, which the next
    /// compaction drops (the compaction filter), while the buckets still in use stay. A crowded
    /// bucket that loses members stays crowded (and `verify` accepts it).
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
        index.sketch_candidates(&q, &mut found).unwrap();
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
            .sketch_candidates(kept.sketch.as_ref().unwrap(), &mut found)
            .unwrap();
        assert_eq!(found, vec![(10, "new".to_owned())]);
        assert!(index.verify().unwrap().problems.is_empty());
    }
}
