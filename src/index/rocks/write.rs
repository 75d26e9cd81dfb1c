//! Writes, the retention window, and the writing out of the band entries held in memory. Every
//! change of the index's articles is one atomic `WriteBatch` that carries the counters: an
//! article with all its bookkeeping (`stage_article`, which every writer of articles uses: the
//! decision's insert, a rebuild), the removal of one (`stage_removal`, for `delete` and expiry),
//! and after each write the removals the retention window makes due (`remove_expired`). Kept in
//! one file so that what a write touches, and what undoes it, can be checked against each other
//! in one place.
//!
//! Retention window (`[index] retention`). Every article has an event time (see
//! [`crate::index::event_time`]). Two rules, both by event time:
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
//!
//! Band entries of recent articles (`index::recent`) are staged with the write and take effect in
//! memory once it succeeded. When they reach `RECENT_BAND_ENTRIES`, `commit` freezes the table and
//! a thread of its own writes it as one sorted SST file, with the new bound; a later `commit` (the
//! single writer, so no lookup runs meanwhile) has RocksDB ingest the file into `bands`, which
//! makes the entries and the bound the family's in one atomic step, and drops the frozen table.

use super::{background_thread_priority, rocks_err, BackgroundPace, RocksIndex, Staged};
use crate::error::IndexError;
use crate::index::block_bucket;
use crate::index::bucket;
use crate::index::layout::{
    self, band_key, block_key, expiry_key, id_key, parse_expiry_key, ARTICLES, BANDED_BELOW_KEY,
    BANDS_FAMILY, BLOCK_FAMILIES, EXPIRY, IDS, META,
};
use crate::index::recent::{
    Home, RecentChange, Table, RECENT_BAND_ENTRIES, RECENT_BAND_ENTRIES_MAX,
};
use crate::index::{ArticleStore, IndexCounts, StoredArticle};
use rocksdb::{IngestExternalFileOptions, Options, ReadOptions, SstFileWriter};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::PoisonError;
use std::time::{Duration, Instant};

/// The file in the index directory that the band entries held in memory are written to before
/// RocksDB ingests it (moves it in under its own name).
const RECENT_FILE: &str = "recent-bands.sst";

/// L0 files of the `bands` family from which a written band file waits to be ingested: twice
/// the count at which RocksDB starts an L0 compaction. RocksDB slows the writes that make L0
/// files when they pile up, but not an ingestion, which at full speed would leave every lookup
/// probing a pile of files until the compactions caught up. So a finished file stays out while
/// L0 is busy, and a table that fills meanwhile goes on to `RECENT_BAND_ENTRIES_MAX`, then waits
/// for the compactions: a bulk load goes at their pace. A live instance, whose next table takes
/// seconds to fill, does not wait.
pub(super) const BANDS_L0_BUSY: u64 = 8;
/// The longest the writer waits for the compactions before ingesting anyway (a compaction that
/// cannot run, a full disk say, must not stop the decisions; RocksDB reports that itself).
const BANDS_L0_MAX_WAIT: Duration = Duration::from_secs(10);

/// Counter: crowded block buckets put back merged (`block_bucket::WriteBack`).
pub const BUCKET_WRITE_BACKS: &str = "newsdedup_index_bucket_write_backs_total";
/// Counter: articles removed by the retention window.
pub const EXPIRED_ARTICLES: &str = "newsdedup_index_expired_total";
/// Most articles removed by the retention window in one write (see the module comment).
pub const EXPIRE_BATCH: usize = 1_000;

impl RocksIndex {
    /// Writes `batch` with the new `counts` in the same atomic write, then removes what the
    /// retention window makes due (see the module comment).
    pub(super) fn commit(&mut self, staged: Staged, counts: IndexCounts) -> Result<(), IndexError> {
        self.write_with_counts(staged, counts)?;
        self.remove_expired()?;
        self.ingest_written(false)?;
        let entries = self.recent().entries();
        if entries >= RECENT_BAND_ENTRIES {
            // One file at a time. While the last one is still being written or held back for a
            // busy L0, a full table goes on filling, up to `RECENT_BAND_ENTRIES_MAX`: only there
            // does the writer wait (for the compactions), so the wait of a bulk load falls on
            // the load, not on the first decisions after it.
            let pending = self
                .write_out
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_some();
            if pending {
                if entries < RECENT_BAND_ENTRIES_MAX {
                    return Ok(());
                }
                self.wait_while_bands_l0_busy()?;
            }
            self.ingest_written(true)?;
            self.start_write_out()?;
        }
        Ok(())
    }

    fn write_with_counts(
        &mut self,
        mut staged: Staged,
        counts: IndexCounts,
    ) -> Result<(), IndexError> {
        staged.rocks.put_cf(
            self.cf(META)?,
            layout::META_COUNTS,
            Self::encode_counts(&counts),
        );
        self.db
            .write_opt(staged.rocks, &self.write_opts)
            .map_err(rocks_err(&self.dir))?;
        self.counts = counts;
        let recent = self
            .recent
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        for change in staged.recent {
            recent.apply(change);
        }
        for (family, block) in staged.blocks {
            if self.write_back.merged(family, block) {
                self.check_block_bucket(family, block)?;
            }
        }
        Ok(())
    }

    /// Reads a block bucket due for a check and, if it is crowded, puts its merged value back
    /// (see `block_bucket::WriteBack`): the bucket as it stands, in a write of its own.
    fn check_block_bucket(&mut self, family: usize, block: u16) -> Result<(), IndexError> {
        let Some(name) = BLOCK_FAMILIES.get(family) else {
            return Ok(());
        };
        let key = block_key(block);
        let value = self
            .db
            .get_cf(self.cf(name)?, key)
            .map_err(rocks_err(&self.dir))?;
        let entries = value.as_deref().and_then(block_bucket::len).unwrap_or(0);
        let crowded = self.write_back.checked(family, block, entries);
        if let Some(value) = value.filter(|_| crowded) {
            self.db
                .put_cf_opt(self.cf(name)?, key, value, &self.write_opts)
                .map_err(rocks_err(&self.dir))?;
            metrics::counter!(BUCKET_WRITE_BACKS).increment(1);
        }
        Ok(())
    }

    /// Starts writing the frozen table to its file on a thread of its own, freezing the active
    /// table first if none is frozen. Does nothing while a write is under way or if nothing is
    /// held. (A frozen table already there is one whose write failed: it is written again.)
    fn start_write_out(&self) -> Result<(), IndexError> {
        let mut slot = self
            .write_out
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if slot.is_some() {
            return Ok(());
        }
        let (table, banded_below) = {
            let mut recent = self.recent();
            let table = match recent.frozen() {
                Some(table) => table,
                None if recent.entries() == 0 => return Ok(()),
                None => recent.freeze(self.counts.next_seq),
            };
            (table, recent.frozen_below())
        };
        let opts = self.bands_opts.clone();
        let path = self.dir.join(RECENT_FILE);
        let thread = std::thread::Builder::new()
            .name("newsdedup-bands".to_owned())
            .spawn(move || {
                background_thread_priority();
                write_table(&opts, &path, &table, banded_below)
            })
            .map_err(|source| IndexError::io(&self.dir, source))?;
        *slot = Some(thread);
        Ok(())
    }

    /// Has RocksDB ingest the frozen table's file once it is written (`wait`: waiting for it),
    /// then drops the table. Does nothing if no write is under way, or (without `wait`) it has
    /// not finished. Without `wait`, a file also waits while the `bands` family's L0 is busy (see
    /// [`BANDS_L0_BUSY`]); the frozen table answers lookups meanwhile.
    fn ingest_written(&self, wait: bool) -> Result<(), IndexError> {
        let thread = {
            let mut slot = self
                .write_out
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let ready = match slot.as_ref() {
                Some(thread) => wait || (thread.is_finished() && !self.bands_l0_busy()?),
                None => false,
            };
            match slot.take() {
                Some(thread) if ready => thread,
                other => {
                    *slot = other;
                    return Ok(());
                }
            }
        };
        let err = rocks_err(&self.dir);
        thread
            .join()
            .map_err(|_| IndexError::Storage {
                dir: self.dir.clone(),
                message: "the thread writing the recent band entries to a file panicked".to_owned(),
            })?
            .map_err(&err)?;
        // The file names articles by sequence number: each of them must be durable before the
        // file is, or a power loss that takes the WAL's unsynced tail would leave band entries
        // naming articles that are gone (and lookups refuse such an index as corrupt). Once per
        // file, every ~22,000 articles.
        self.sync()?;
        let path = self.dir.join(RECENT_FILE);
        let mut opts = IngestExternalFileOptions::default();
        opts.set_move_files(true);
        self.db
            .ingest_external_file_cf_opts(self.cf(BANDS_FAMILY)?, &opts, vec![&path])
            .map_err(&err)?;
        self.recent().frozen_written();
        // A move links the file in; the name it was written under may remain.
        let _ = std::fs::remove_file(&path);
        Ok(())
    }

    /// Waits (at most [`BANDS_L0_MAX_WAIT`]) while the `bands` family's L0 is busy.
    fn wait_while_bands_l0_busy(&self) -> Result<(), IndexError> {
        let start = Instant::now();
        while self.bands_l0_busy()? && start.elapsed() < BANDS_L0_MAX_WAIT {
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }

    /// Whether the `bands` family's L0 holds [`BANDS_L0_BUSY`] files or more.
    fn bands_l0_busy(&self) -> Result<bool, IndexError> {
        let files = self
            .db
            .property_int_value_cf(self.cf(BANDS_FAMILY)?, "rocksdb.num-files-at-level0")
            .map_err(rocks_err(&self.dir))?;
        Ok(files.is_some_and(|files| files >= BANDS_L0_BUSY))
    }

    /// Writes every band entry held in memory to the `bands` family and waits for it (a flush,
    /// the close).
    pub(super) fn write_out_recent(&self) -> Result<(), IndexError> {
        self.ingest_written(true)?;
        while !self.recent().is_empty() {
            self.start_write_out()?;
            self.ingest_written(true)?;
        }
        Ok(())
    }

    /// Where the band entries of the article `seq` are, for a write being staged: `Active` (in
    /// memory) or `Family`. An article of the frozen table is first let reach the family.
    fn band_home(&self, seq: u64) -> Result<Home, IndexError> {
        let home = self.recent().home(seq);
        if home != Home::Frozen {
            return Ok(home);
        }
        self.ingest_written(true)?;
        if self.recent().frozen().is_some() {
            // Its write failed before: again.
            self.start_write_out()?;
            self.ingest_written(true)?;
        }
        Ok(self.recent().home(seq))
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
        let mut staged = Staged::default();
        let mut counts = self.counts;
        let mut removed = 0u64;
        for (key, id) in &due {
            match self.get(id)? {
                Some(art) if expiry_key(art.event_ms, art.seq).as_slice() == key.as_slice() => {
                    self.stage_removal(&mut staged, &mut counts, id, &art)?;
                    removed += 1;
                }
                // Not the article's current entry: nothing else refers to it.
                _ => staged.rocks.delete_cf(expiry, key),
            }
        }
        if !due.is_empty() {
            self.write_with_counts(staged, counts)?;
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
    pub(super) fn stage_removal(
        &self,
        staged: &mut Staged,
        counts: &mut IndexCounts,
        id: &str,
        old: &StoredArticle,
    ) -> Result<(), IndexError> {
        staged.rocks.delete_cf(self.cf(ARTICLES)?, id.as_bytes());
        counts.articles = counts.articles.saturating_sub(1);
        self.delete_entries(staged, counts, old)
    }

    /// Adds to `staged` the removal of an article's expiry entry and, when it is searchable
    /// (unique), its block and band entries (and the unique count).
    fn delete_entries(
        &self,
        staged: &mut Staged,
        counts: &mut IndexCounts,
        old: &StoredArticle,
    ) -> Result<(), IndexError> {
        let batch = &mut staged.rocks;
        batch.delete_cf(self.cf(EXPIRY)?, expiry_key(old.event_ms, old.seq));
        if !old.searchable() {
            return Ok(());
        }
        counts.unique = counts.unique.saturating_sub(1);
        batch.delete_cf(self.cf(IDS)?, id_key(old.seq));
        for (family, (name, block)) in BLOCK_FAMILIES
            .iter()
            .zip(old.fingerprint.blocks())
            .enumerate()
        {
            batch.merge_cf(
                self.cf(name)?,
                block_key(block),
                block_bucket::remove(old.fingerprint, old.seq),
            );
            staged.blocks.push((family, block));
        }
        if let Some(sketch) = &old.sketch {
            if self.band_home(old.seq)? == Home::Active {
                staged.recent.extend(
                    sketch
                        .entries()
                        .map(|(band, key)| RecentChange::Drop(old.seq, band_key(band as u8, key))),
                );
            } else {
                let bands = self.cf(BANDS_FAMILY)?;
                let op = bucket::remove(old.seq);
                for (band, key) in sketch.entries() {
                    batch.merge_cf(bands, band_key(band as u8, key), &op);
                }
            }
        }
        Ok(())
    }

    /// One atomic write: the article, its block and band entries when searchable, the removal of
    /// `previous`'s entries when it replaces a stored version, and the counters.
    pub(super) fn write_article(
        &mut self,
        id: &str,
        previous: Option<&StoredArticle>,
        article: &StoredArticle,
        searchable: bool,
    ) -> Result<(), IndexError> {
        let mut counts = self.counts;
        let mut staged = Staged::default();
        self.stage_article(&mut staged, &mut counts, id, previous, article, searchable)?;
        self.commit(staged, counts)
    }

    /// The `articles` value of `article` (see `layout::ARTICLE_VALUE_FORMAT`).
    pub(super) fn encode_article(
        &self,
        id: &str,
        article: &StoredArticle,
    ) -> Result<Vec<u8>, IndexError> {
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
        Ok(value)
    }

    /// Adds to `staged` (and `counts`) what `write_article` writes for one article: the article,
    /// its expiry entry, its block and band entries when searchable, the removal of `previous`'s
    /// entries, and the stream time. Every writer of articles goes through it; a bulk writer
    /// stages several and writes them at once with `commit` (which also removes what is due).
    /// The write that stores `article` under `id` in place of `current` (searchable as it says),
    /// with the counts after it: undoing a revision or a correction.
    pub(super) fn stage_replacement(
        &self,
        id: &str,
        current: &StoredArticle,
        article: &StoredArticle,
    ) -> Result<(Staged, IndexCounts), IndexError> {
        let mut counts = self.counts;
        let mut staged = Staged::default();
        self.stage_article(
            &mut staged,
            &mut counts,
            id,
            Some(current),
            article,
            article.searchable(),
        )?;
        Ok((staged, counts))
    }

    pub(super) fn stage_article(
        &self,
        staged: &mut Staged,
        counts: &mut IndexCounts,
        id: &str,
        previous: Option<&StoredArticle>,
        article: &StoredArticle,
        searchable: bool,
    ) -> Result<(), IndexError> {
        let value = self.encode_article(id, article)?;
        counts.next_seq = counts.next_seq.max(article.seq + 1);
        match previous {
            None => counts.articles += 1,
            Some(old) => self.delete_entries(staged, counts, old)?,
        }
        let batch = &mut staged.rocks;
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
            for (family, (name, block)) in BLOCK_FAMILIES
                .iter()
                .zip(article.fingerprint.blocks())
                .enumerate()
            {
                batch.merge_cf(
                    self.cf(name)?,
                    block_key(block),
                    block_bucket::add(article.fingerprint, article.seq),
                );
                staged.blocks.push((family, block));
            }
            if let Some(sketch) = &article.sketch {
                if self.band_home(article.seq)? == Home::Active {
                    staged.recent.extend(sketch.entries().map(|(band, key)| {
                        RecentChange::Add(article.seq, band_key(band as u8, key))
                    }));
                } else {
                    let bands = self.cf(BANDS_FAMILY)?;
                    let op = bucket::append(article.seq);
                    for (band, key) in sketch.entries() {
                        batch.merge_cf(bands, band_key(band as u8, key), &op);
                    }
                }
            }
        }
        Ok(())
    }
}

/// Writes `table` to an SST file at `path` for the `bands` family (`opts`: its options), one
/// operand per bucket adding its articles, and last the bound `banded_below`. Paced (see
/// [`BackgroundPace`]).
fn write_table(
    opts: &Options,
    path: &Path,
    table: &Table,
    banded_below: u64,
) -> Result<(), rocksdb::Error> {
    let mut writer = SstFileWriter::create(opts);
    writer.open(path)?;
    let mut pace = BackgroundPace::new();
    table.for_each_sorted(|key, seqs| {
        writer.merge(key, bucket::append_all(seqs))?;
        pace.rest_if_due();
        Ok(())
    })?;
    // The bound's key sorts after every bucket.
    writer.put(BANDED_BELOW_KEY, banded_below.to_be_bytes())?;
    writer.finish()
}
