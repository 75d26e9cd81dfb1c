//! The read positions of the output topics an index was rebuilt from (`index rebuild` from the
//! topics, `standby`): (topic, partition) -> next offset, kept in `meta` under
//! `position/<topic>/<partition>`. `write_restored`, the one write of a rebuild, stores each
//! position in the same atomic write as the restored article it follows, so such an index always
//! knows exactly which records it holds and resumes after the last one; `clear_positions` forgets
//! them when the index becomes `run`'s (a takeover). An index `run` built has none. Apart from the
//! decision's reads and writes because only a rebuilt index, and the takeover of one, uses them.
//!
//! Also the index's position in the corrections topic ([`CorrectionsPosition`]): `run` reads
//! corrections from where the index it decides with stands, so the position cannot expire like a
//! consumer group's offsets, and an index put back from a copy re-reads exactly the corrections
//! it has not seen.

use super::{rocks_err, RocksIndex, Staged};
use crate::error::IndexError;
use crate::index::layout::{self, META};
use crate::index::{PairChange, StoredArticle};
use rocksdb::{Direction, IteratorMode, DB};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// How far corrections of one topic were read into this index (`layout::META_CORRECTIONS_PREFIX`),
/// kept open beside the single writer: `run`'s corrections reader records each correction once
/// its outcome is acknowledged (the only writer of these keys while `run` holds the index; a
/// rebuild or standby writes them with the articles, `write_restored`). No decision reads them.
#[derive(Clone)]
pub struct CorrectionsPosition {
    db: Arc<DB>,
    dir: PathBuf,
    topic: String,
}

impl CorrectionsPosition {
    /// Partition -> next offset to read; empty if no correction of the topic was ever read into
    /// this index (an index from an earlier release, or rebuilt from topics without a corrected
    /// record).
    pub fn read(&self) -> Result<BTreeMap<i32, i64>, IndexError> {
        let meta = self.meta()?;
        let prefix = layout::corrections_key(&self.topic, 0);
        let prefix = &prefix[..prefix.len() - 1];
        let mut out = BTreeMap::new();
        let iter = self
            .db
            .iterator_cf(meta, IteratorMode::From(prefix, Direction::Forward));
        for item in iter {
            let (k, v) = item.map_err(rocks_err(&self.dir))?;
            if !k.starts_with(prefix) {
                break;
            }
            match (layout::parse_corrections_key(&k), <[u8; 8]>::try_from(&*v)) {
                (Some((topic, partition)), Ok(bytes)) if topic == self.topic => {
                    out.insert(partition, i64::from_be_bytes(bytes));
                }
                // Not a Kafka topic name (they hold no '/'): another topic's, not ours.
                (Some(_), Ok(_)) => {}
                _ => {
                    return Err(IndexError::Corrupt {
                        dir: self.dir.clone(),
                        message: format!(
                            "bad corrections position {:?}",
                            String::from_utf8_lossy(&k)
                        ),
                    })
                }
            }
        }
        Ok(out)
    }

    /// Records that every correction of `partition` before `next` is done (applied and its output
    /// acknowledged, refused, or passed over). Not synced: the next sync of the decisions makes it
    /// durable, and a position lost in a crash only repeats corrections, which changes nothing.
    pub fn record(&self, partition: i32, next: i64) -> Result<(), IndexError> {
        self.db
            .put_cf(
                self.meta()?,
                layout::corrections_key(&self.topic, partition),
                next.to_be_bytes(),
            )
            .map_err(rocks_err(&self.dir))
    }

    fn meta(&self) -> Result<&rocksdb::ColumnFamily, IndexError> {
        self.db.cf_handle(META).ok_or_else(|| IndexError::Corrupt {
            dir: self.dir.clone(),
            message: format!("column family {META} is missing"),
        })
    }
}

impl std::fmt::Debug for CorrectionsPosition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CorrectionsPosition")
            .field("dir", &self.dir)
            .field("topic", &self.topic)
            .finish()
    }
}

impl RocksIndex {
    /// The index's position in the corrections topic `topic`, as a handle the corrections reader
    /// keeps beside the single writer (it keeps the database open while it lives).
    pub fn corrections_position(&self, topic: &str) -> CorrectionsPosition {
        CorrectionsPosition {
            db: self.db.clone(),
            dir: self.dir.clone(),
            topic: topic.to_owned(),
        }
    }

    /// One atomic write of a restored article, when given (`id`, the stored version it replaces
    /// if any, the article, whether it is searchable), of the pair an editor's correction changed
    /// (`id` and the change; skipped if a later change of the pair is stored), of a read
    /// position of the output topics (topic, partition, next offset), so an index built from the
    /// output topics always knows exactly which records it holds, and of the corrections position
    /// past the correction the record is the output of (unless a later one is stored: corrections
    /// are applied one at a time, in order, so every correction before it is done). The
    /// article's `seq` is assigned here.
    pub fn write_restored(
        &mut self,
        article: Option<(&str, Option<&StoredArticle>, &StoredArticle, bool)>,
        pair: Option<(&str, &PairChange)>,
        position: Option<(&str, i32, i64)>,
        correction: Option<(&str, i32, i64)>,
    ) -> Result<(), IndexError> {
        let mut counts = self.counts;
        let mut staged = Staged::default();
        if let Some((id, previous, article, searchable)) = article {
            let article = StoredArticle {
                seq: counts.next_seq,
                ..article.clone()
            };
            self.stage_article(&mut staged, &mut counts, id, previous, &article, searchable)?;
        }
        let paired = match pair {
            Some((id, change)) => self.stage_pair(&mut staged.rocks, id, change)?,
            None => false,
        };
        if let Some((topic, partition, next)) = position {
            staged.rocks.put_cf(
                self.cf(META)?,
                layout::position_key(topic, partition),
                next.to_be_bytes(),
            );
        }
        if let Some((topic, partition, next)) = correction {
            // The unique and duplicate topics are read interleaved: a correction's output may be
            // read after a later one's.
            let stored = self.corrections_position(topic).read()?;
            if stored.get(&partition).is_none_or(|&at| at < next) {
                staged.rocks.put_cf(
                    self.cf(META)?,
                    layout::corrections_key(topic, partition),
                    next.to_be_bytes(),
                );
            }
        }
        self.commit(staged, counts)?;
        if let (true, Some((id, change))) = (paired, pair) {
            self.pair_written(id, change);
        }
        Ok(())
    }

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
        let mut staged = Staged::default();
        for (topic, partition) in positions.keys() {
            staged
                .rocks
                .delete_cf(self.cf(META)?, layout::position_key(topic, *partition));
        }
        self.commit(staged, self.counts)?;
        self.sync()
    }
}

#[cfg(test)]
mod tests {
    use super::super::admin::tests::identity;
    use super::*;
    use crate::index::IndexConfig;

    /// The corrections position survives a reopen, is per topic (one whose name extends another's
    /// is kept apart), and a takeover's `clear_positions` keeps it.
    #[test]
    fn the_corrections_position_follows_the_index_and_survives_a_takeover() {
        let dir = tempfile::tempdir().unwrap();
        let config = IndexConfig::default();
        let mut index = RocksIndex::open(dir.path(), &identity(), &config).unwrap();
        let position = index.corrections_position("articles.corrections");
        assert!(position.read().unwrap().is_empty());
        position.record(0, 13).unwrap();
        position.record(2, 4).unwrap();
        position.record(0, 14).unwrap();
        index
            .corrections_position("articles.corrections2")
            .record(0, 99)
            .unwrap();
        index
            .write_restored(None, None, Some(("articles.unique", 0, 7)), None)
            .unwrap();
        index.clear_positions().unwrap();
        drop(position);
        index.sync().unwrap();
        drop(index);

        let index = RocksIndex::open(dir.path(), &identity(), &config).unwrap();
        assert_eq!(
            index
                .corrections_position("articles.corrections")
                .read()
                .unwrap(),
            BTreeMap::from([(0, 14), (2, 4)])
        );
        assert_eq!(
            index
                .corrections_position("articles.corrections2")
                .read()
                .unwrap(),
            BTreeMap::from([(0, 99)])
        );
        assert!(index.positions().unwrap().is_empty());
    }
}
