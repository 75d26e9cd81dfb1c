//! What operators and the commands around the decision ask of an open index besides reading and
//! writing articles, and besides its statistics (`stats`) and consistency check (`verify`):
//! durability (`sync`, a `SyncHandle` that syncs from another thread, `flush`, waiting for
//! background work), the directory, its size and the space on its volume, the stored identity
//! and instance id, and `delete` (a takedown). None of it is part of deciding an article; kept
//! apart so that the read and write files hold only that path.

use super::{rocks_err, RocksIndex, Staged};
use crate::error::IndexError;
use crate::index::layout::{self, ALL_FAMILIES, META};
use crate::index::{ArticleStore, DiskUsage, DurableStore, IndexWrite, Undoing, VolumeSpace};
use rocksdb::{WaitForCompactOptions, DB};
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

    fn undo(&mut self, id: &str, write: &IndexWrite) -> Result<bool, IndexError> {
        let Some(current) = self.get(id)? else {
            return Ok(false);
        };
        match write.undoing(&current) {
            None => Ok(false),
            Some(Undoing::Remove) => Ok(!self.delete(&[id.to_owned()])?.is_empty()),
            Some(Undoing::Put(article)) => {
                let (staged, counts) = self.stage_replacement(id, &current, &article)?;
                self.commit(staged, counts)?;
                self.sync()?;
                Ok(true)
            }
            Some(Undoing::RevertCorrection { at_ms }) => {
                self.revert_correction(id, current.fingerprint, at_ms)
            }
        }
    }
}

impl std::fmt::Debug for SyncHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyncHandle")
            .field("dir", &self.dir)
            .finish()
    }
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
pub(super) mod tests {
    use super::super::stats::total_order;
    use super::*;
    use crate::fingerprint::FingerprintIdentity;
    use crate::index::block_bucket;
    use crate::index::layout::{block_key, BANDED_BELOW_KEY, BANDS_FAMILY, BLOCK_FAMILIES};
    use crate::index::recent::RecentBands;
    use crate::index::StoredArticle;
    use crate::index::{IndexConfig, StoredDecision};
    use crate::segments::Segments;
    use crate::simhash::Fingerprint;
    use crate::sketch::{Sketch, ALL_BANDS as ALL_BANDS_N, BINS};
    use crate::time::TimeSpan;

    pub(in crate::index::rocks) fn identity() -> FingerprintIdentity {
        FingerprintIdentity {
            algorithm: "test".into(),
            ..FingerprintIdentity::default()
        }
    }

    pub(in crate::index::rocks) fn article(seq: u64, event_ms: i64, bin: u32) -> StoredArticle {
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
                slots: Default::default(),
            }),
            revision: None,
            correction: None,
        }
    }

    /// A new index in `dir` holding "a" and "b" (`article` 1 and 2, both searchable).
    pub(in crate::index::rocks) fn index_of_a_and_b(
        dir: &Path,
    ) -> (RocksIndex, StoredArticle, StoredArticle) {
        let mut index = RocksIndex::open(dir, &identity(), &IndexConfig::default()).unwrap();
        let a = article(0, 0, 1);
        let b = article(1, 0, 2);
        index.insert("a", &a, true).unwrap();
        index.insert("b", &b, true).unwrap();
        (index, a, b)
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
        let (mut index, a, _) = index_of_a_and_b(dir.path());
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
