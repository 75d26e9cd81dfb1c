//! RocksDB implementation of the index: four block column families, sketch bands, ids, articles,
//! expiry and meta, one directory, every insert one atomic `WriteBatch` (so a process killed
//! mid-write reopens with the families in agreement: RocksDB replays whole batches from the WAL or
//! none of them; the band entries of recent articles, held in memory (`index::recent`), are put
//! back from the stored sketches). This file holds the `RocksIndex` handle, its opening (the
//! identity and format checks (an index of another layout is refused: no in-place upgrade), the
//! per-family options) and the `ArticleStore` implementation, which hands each call to the file of
//! its concern: `read` (an article by id, the candidate searches), `write` (every atomic write, the
//! retention window's removals, the writing out of the recent band entries), `admin` (durability,
//! the directory, identity, delete), `stats` (the operators' statistics), `verify` (the
//! consistency check), `pairs` (the pairs editors separated) and `positions` (the read
//! positions of an index rebuilt from the output topics). Split so that each concern reads on its
//! own; each file builds only on this one and the files named before it, never on a later one.

mod admin;
mod pairs;
mod positions;
mod read;
mod stats;
mod verify;
mod write;

pub use admin::{disk_usage_of, SyncHandle};
pub use positions::CorrectionsPosition;
pub use read::CROWDED_LOOKUPS;
pub use stats::{AgeStats, BandStats, FamilyStats, IndexStats};
pub use verify::VerifyReport;
pub use write::{BUCKET_WRITE_BACKS, EXPIRED_ARTICLES, EXPIRE_BATCH};

use super::layout::{
    self, id_key, parse_id_key, ARTICLES, BANDED_BELOW_KEY, BANDS_FAMILY, BAND_KEY_LEN,
    BLOCK_FAMILIES, BLOCK_KEY_LEN, EXPIRY, IDS, META,
};
use super::recent::{RecentBands, RecentChange};
use super::IndexConfig;
use super::{block_bucket, bucket};
use super::{ArticleStore, Candidate, Crowded, IndexCounts, PairChange, StoredArticle};
use crate::error::IndexError;
use crate::fingerprint::FingerprintIdentity;
use crate::simhash::{Fingerprint, BLOCKS};
use crate::sketch::Sketch;
use crate::time::TimeSpan;
use rocksdb::{
    compaction_filter::Decision as CompactionDecision, BlockBasedOptions, Cache, ColumnFamily,
    ColumnFamilyDescriptor, DBCompressionType, Env, MemtableFactory, MergeOperands, Options,
    SliceTransform, WriteBatch, WriteOptions, DB,
};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Merge operands a band bucket collects in the memtable before a write folds them into one value
/// (when that needs no disk read), so reading a busy bucket stays short.
const MAX_SUCCESSIVE_MERGES: usize = 16;

/// Largest height of the per-prefix memtable skiplists (see the block families' options).
const MEMTABLE_SKIPLIST_HEIGHT: i32 = 12;

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
    /// The pairs editors separated, both ways (`pairs`): read for every accepted candidate, so
    /// kept in memory (a handful of ids per correction).
    separated: HashMap<String, Vec<String>>,
    /// Band entries of the latest articles, not yet in the family (`index::recent`). Behind a
    /// lock only so that `&self` paths (a flush, the close) can write them out; the single
    /// writer never waits on it.
    recent: Mutex<RecentBands>,
    /// The thread writing `recent`'s frozen table to a file, if one is (see `write`).
    write_out: Mutex<Option<JoinHandle<Result<(), rocksdb::Error>>>>,
    /// The `bands` family's options, which the files of `recent` are written with.
    bands_opts: Options,
    /// Which block buckets the writer puts back merged (`block_bucket::WriteBack`).
    write_back: block_bucket::WriteBack,
}

/// One atomic write being staged: the RocksDB batch, and the changes of the in-memory band
/// entries that take effect once it is written.
#[derive(Default)]
pub(super) struct Staged {
    pub rocks: WriteBatch,
    pub recent: Vec<RecentChange>,
    /// The block buckets the batch merges into: (family, block value).
    pub blocks: Vec<(usize, u16)>,
}

/// Set by [`RocksIndex::lower_background_priority`].
static LOWER_BACKGROUND: AtomicBool = AtomicBool::new(false);

/// Called by a background thread of the index as it starts: lowers its own priority to nice 19
/// if the process asked for it. Best effort: at worst the thread keeps normal priority.
fn background_thread_priority() {
    #[cfg(target_os = "linux")]
    if LOWER_BACKGROUND.load(Ordering::Relaxed) {
        // SAFETY: plain system calls on this thread's own id; no memory is passed.
        unsafe {
            let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
            libc::setpriority(libc::PRIO_PROCESS, tid, 19);
        }
    }
}

/// Paces the CPU work of a background thread of the index when the process lowered its
/// background work: after every [`BACKGROUND_SLICE`] of work (wall time) it sleeps as long.
/// Nice 19 alone does not keep such a thread off a busy core: the scheduler ranks it only
/// against the threads of its own session (autogroup, or cgroup), and kernel threads and other
/// sessions share the core with it as equals. On two cores the band write-outs of `run` and
/// `standby` at once left the broker ~5% of a core for 0.2 s and delayed the kernel's softirq
/// threads by up to 35 ms, so no record moved; paced, the broker kept ~85%. A write-out has
/// seconds before the next table fills; taking 0.5 s instead of 0.15 s costs nothing.
struct BackgroundPace {
    paced: bool,
    since: Instant,
    calls: u32,
}

/// See [`BackgroundPace`].
const BACKGROUND_SLICE: Duration = Duration::from_millis(2);

impl BackgroundPace {
    fn new() -> Self {
        BackgroundPace {
            paced: LOWER_BACKGROUND.load(Ordering::Relaxed),
            since: Instant::now(),
            calls: 0,
        }
    }

    /// Called between small units of work (the clock is read every 64th call).
    fn rest_if_due(&mut self) {
        self.calls = self.calls.wrapping_add(1);
        if !self.paced || !self.calls.is_multiple_of(64) || self.since.elapsed() < BACKGROUND_SLICE
        {
            return;
        }
        std::thread::sleep(BACKGROUND_SLICE);
        self.since = Instant::now();
    }
}

fn rocks_err(dir: &Path) -> impl Fn(rocksdb::Error) -> IndexError + '_ {
    move |source| IndexError::storage(dir, source.into_string())
}

impl RocksIndex {
    /// Runs RocksDB's flushes and compactions, and the writing out of the recent band entries
    /// (`write`), at the lowest CPU priority (nice 19), for every index this process opens, from
    /// their next job on. For the long-running commands, whose outputs someone waits for: such a
    /// job takes a core for up to a few tenths of a second, and at normal priority it took that
    /// core from the prepare and decision threads, so every output of that moment was late. The
    /// debt stays bounded: once every memtable of a family is full, or the next table of band
    /// entries, writes wait for the job, which then has the CPU. Not for `batch`: there the
    /// deferred work ends as a stall with one core idle (~4% slower on two cores).
    pub fn lower_background_priority() -> Result<(), IndexError> {
        let mut env = Env::new().map_err(|e| IndexError::Environment(e.into_string()))?;
        env.lower_thread_pool_cpu_priority();
        env.lower_high_priority_thread_pool_cpu_priority();
        LOWER_BACKGROUND.store(true, Ordering::Relaxed);
        Ok(())
    }

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
        std::fs::create_dir_all(dir).map_err(|source| IndexError::io(dir, source))?;
        Self::refuse_older_layout(dir)?;
        let cache = Cache::new_lru_cache(config.block_cache_mib.max(8) << 20);

        let mut db_opts = Options::default();
        db_opts.create_if_missing(true);
        db_opts.create_missing_column_families(true);
        db_opts.increase_parallelism(2);
        db_opts.set_max_background_jobs(2);
        db_opts.set_allow_mmap_reads(config.mmap_reads);
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
            // The prefix extractor is the whole 2-byte key (the hash memtable needs one): the
            // prefix bloom is the key's bloom. In a small index it skips the files that lack a
            // bucket; from a few hundred thousand articles on every file holds every bucket.
            table.set_bloom_filter(10.0, false);
            table.set_whole_key_filtering(false);
            let mut opts = Options::default();
            opts.set_prefix_extractor(SliceTransform::create_fixed_prefix(BLOCK_KEY_LEN));
            opts.set_merge_operator(
                "newsdedup.block_bucket.v1",
                |_: &[u8], existing: Option<&[u8]>, ops: &MergeOperands| {
                    block_bucket::merge(existing, ops)
                },
                // Operands combine (concatenated records): the levels above the last hold one
                // operand per bucket instead of one per article.
                |_: &[u8], _: Option<&[u8]>, ops: &MergeOperands| block_bucket::combine(ops),
            );
            // A bucket whose articles have all been removed leaves an empty value, dropped when a
            // compaction next rewrites it.
            opts.set_compaction_filter(
                "newsdedup.empty_block_bucket",
                |_, key: &[u8], v: &[u8]| {
                    if key.len() == BLOCK_KEY_LEN && block_bucket::is_empty(v) {
                        CompactionDecision::Remove
                    } else {
                        CompactionDecision::Keep
                    }
                },
            );
            // No memtable prefix bloom: the hash buckets below already find a key (or its
            // absence) with one probe, and the bloom's own probe was a cache miss on every read
            // and every insert (~2% of a `batch` run).
            // Memtable: one small skiplist per bucket (its operands) instead of one big one. An
            // insert into a big skiplist walks a dozen cache-missing levels (it was ~1/3 of the
            // decision thread's time in `batch`). A node's height is drawn with P(h > k) = 4^-k,
            // so a bucket of a few operands stays one or two levels high; the maximum of 12 only
            // matters for a crowded bucket (templated reports, crafted input).
            opts.set_memtable_factory(MemtableFactory::HashSkipList {
                bucket_count: 1 << 16,
                height: MEMTABLE_SKIPLIST_HEIGHT,
                branching_factor: 4,
            });
            // Fingerprints are random bits and sequence numbers a few bytes of each entry: compression
            // would cost CPU on every read for little.
            opts.set_compression_type(DBCompressionType::None);
            opts.set_block_based_table_factory(&table);
            families.push(ColumnFamilyDescriptor::new(name, opts));
        }
        let bands_opts = bands_options(&cache);
        families.push(ColumnFamilyDescriptor::new(
            BANDS_FAMILY,
            bands_opts.clone(),
        ));
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
                IndexError::storage(dir, msg)
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
            separated: HashMap::new(),
            recent: Mutex::new(RecentBands::default()),
            write_out: Mutex::new(None),
            bands_opts,
            write_back: block_bucket::WriteBack::new(BLOCK_FAMILIES.len()),
        };
        let stored = index
            .db
            .get_cf(index.cf(META)?, layout::META_FORMAT)
            .map_err(rocks_err(dir))?;
        if let Some(f) = stored.as_deref() {
            if f != layout::FORMAT_VERSION.as_bytes() {
                return Err(IndexError::FormatMismatch {
                    dir: dir.to_owned(),
                    stored: String::from_utf8_lossy(f).into_owned(),
                    current: layout::FORMAT_VERSION.to_owned(),
                });
            }
        }
        index.counts = index.read_counts()?;
        index.separated = index.read_separated()?;
        index.recover_recent()?;
        Ok(index)
    }

    /// Puts back the band entries of the unique articles not yet in the family (all of them
    /// after a crash, none after a clean close), from their stored sketches.
    fn recover_recent(&mut self) -> Result<(), IndexError> {
        let banded_below = match self
            .db
            .get_cf(self.cf(BANDS_FAMILY)?, BANDED_BELOW_KEY)
            .map_err(rocks_err(&self.dir))?
        {
            None => 0,
            Some(v) => {
                u64::from_be_bytes(v.as_slice().try_into().map_err(|_| IndexError::Corrupt {
                    dir: self.dir.clone(),
                    message: format!(
                        "{BANDS_FAMILY}: the recent-entries bound has {} bytes, expected 8",
                        v.len()
                    ),
                })?)
            }
        };
        let mut recent = RecentBands::new(banded_below);
        let mut it = self.db.raw_iterator_cf(self.cf(IDS)?);
        it.seek(id_key(banded_below));
        while let (Some(key), Some(value)) = (it.key(), it.value()) {
            let id = String::from_utf8_lossy(value).into_owned();
            let Some(seq) = parse_id_key(key) else {
                return Err(IndexError::Corrupt {
                    dir: self.dir.clone(),
                    message: format!("{IDS}: malformed key {key:02x?}"),
                });
            };
            if let Some(sketch) = self.read_sketch(&id)? {
                for (band, bkey) in sketch.entries() {
                    recent.add(layout::band_key(band as u8, bkey), seq);
                }
            }
            it.next();
        }
        it.status().map_err(rocks_err(&self.dir))?;
        drop(it);
        *self
            .recent
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner) = recent;
        Ok(())
    }

    /// The in-memory band entries (see the field).
    fn recent(&self) -> MutexGuard<'_, RecentBands> {
        self.recent.lock().unwrap_or_else(PoisonError::into_inner)
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
}

/// Options of the `bands` family, also those its ingested files are written with (the same
/// filters and prefix extractor, so lookups treat them alike).
fn bands_options(cache: &Cache) -> Options {
    let mut table = BlockBasedOptions::default();
    table.set_block_cache(cache);
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
    // No memtable prefix bloom, as for the block families. The band entries of new articles
    // bypass the memtable (`recent`), so it holds only removals and the bound: as many hash
    // buckets as the block families' (each bucket is 8 bytes of every memtable, used or not).
    opts.set_memtable_factory(MemtableFactory::HashSkipList {
        bucket_count: 1 << 16,
        height: MEMTABLE_SKIPLIST_HEIGHT,
        branching_factor: 4,
    });
    // Band keys are hashes: incompressible.
    opts.set_compression_type(DBCompressionType::None);
    opts.set_block_based_table_factory(&table);
    opts
}

/// A clean close writes the band entries held in memory to the family, so the next open has none
/// to read back. A failure here loses nothing: that open puts them back from the sketches.
impl Drop for RocksIndex {
    fn drop(&mut self) {
        let _ = self.write_out_recent();
    }
}

// Here rather than in `read`: `insert` and `replace` write, and the writes read (the stored
// version whose entries a replacement or a removal deletes), so only the parent can hold both.
impl ArticleStore for RocksIndex {
    fn get_sketch(&self, id: &str) -> Result<Option<Sketch>, IndexError> {
        self.read_sketch(id)
    }

    fn get(&self, id: &str) -> Result<Option<StoredArticle>, IndexError> {
        self.read_article(id)
    }

    fn candidates(
        &self,
        fp: Fingerprint,
        max_distance: u32,
        out: &mut Vec<Candidate>,
    ) -> Result<(), IndexError> {
        self.scan_blocks(fp, max_distance, out)
    }

    fn sketch_lookup(
        &self,
        sketch: &Sketch,
        out: &mut Vec<(u64, String)>,
    ) -> Result<Crowded, IndexError> {
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

    fn separated(&self, id: &str) -> Vec<String> {
        self.separated.get(id).cloned().unwrap_or_default()
    }

    fn pair_changed_at(&self, id: &str, other: &str) -> Result<Option<i64>, IndexError> {
        self.read_pair_time(id, other)
    }

    fn write_correction(
        &mut self,
        id: &str,
        previous: &StoredArticle,
        article: &StoredArticle,
        pair: &PairChange,
    ) -> Result<(), IndexError> {
        self.write_corrected(id, previous, article, pair)
    }

    fn retention(&self) -> Option<TimeSpan> {
        self.retention
    }
}
