//! The read positions of the output topics an index was rebuilt from (`index rebuild` from the
//! topics, `standby`): (topic, partition) -> next offset, kept in `meta` under
//! `position/<topic>/<partition>`. `write_restored`, the one write of a rebuild, stores each
//! position in the same atomic write as the restored article it follows, so such an index always
//! knows exactly which records it holds and resumes after the last one; `clear_positions` forgets
//! them when the index becomes `run`'s (a takeover). An index `run` built has none. Apart from the
//! decision's reads and writes because only a rebuilt index, and the takeover of one, uses them.

use super::{rocks_err, RocksIndex, Staged};
use crate::error::IndexError;
use crate::index::layout::{self, META};
use crate::index::{PairChange, StoredArticle};
use rocksdb::{Direction, IteratorMode};
use std::collections::BTreeMap;

impl RocksIndex {
    /// One atomic write of a restored article, when given (`id`, the stored version it replaces
    /// if any, the article, whether it is searchable), of the pair an editor's correction changed
    /// (`id` and the change; skipped if a later change of the pair is stored), and of a read
    /// position of the output topics (topic, partition, next offset), so an index built from the
    /// output topics always knows exactly which records it holds. The article's `seq` is assigned
    /// here.
    pub fn write_restored(
        &mut self,
        article: Option<(&str, Option<&StoredArticle>, &StoredArticle, bool)>,
        pair: Option<(&str, &PairChange)>,
        position: Option<(&str, i32, i64)>,
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
