//! The pairs editors keep apart: a release (`newsdedup correct release`) separates an article from
//! the one it was wrongly linked to, and the two never link again in either direction; a later
//! merge of the two joins them again. Kept in `meta` under `pair/<id>\0<other>` (both orders),
//! each with the time of the correction that set it, so that changes applied out of order (a
//! rebuild reads the unique and the duplicate topic side by side) end in the state of the latest
//! one; loaded into memory at open, since the decision asks for every accepted candidate.

use super::{rocks_err, RocksIndex, Staged};
use crate::error::IndexError;
use crate::index::layout::{self, META};
use crate::index::{IndexCounts, PairChange, StoredArticle};
use rocksdb::{Direction, IteratorMode, WriteBatch};
use std::collections::HashMap;

impl RocksIndex {
    /// The separated pairs on disk, both ways.
    pub(super) fn read_separated(&self) -> Result<HashMap<String, Vec<String>>, IndexError> {
        let mut out: HashMap<String, Vec<String>> = HashMap::new();
        let iter = self.db.iterator_cf(
            self.cf(META)?,
            IteratorMode::From(layout::META_PAIR_PREFIX, Direction::Forward),
        );
        for item in iter {
            let (k, v) = item.map_err(rocks_err(&self.dir))?;
            if !k.starts_with(layout::META_PAIR_PREFIX) {
                break;
            }
            let Some((id, other)) = layout::parse_pair_key(&k) else {
                return Err(self.bad_pair(&k));
            };
            match decode_pair(&v) {
                Some((_, true)) => out.entry(id).or_default().push(other),
                Some((_, false)) => {}
                None => return Err(self.bad_pair(&k)),
            }
        }
        Ok(out)
    }

    fn bad_pair(&self, key: &[u8]) -> IndexError {
        IndexError::Corrupt {
            dir: self.dir.clone(),
            message: format!("bad pair entry {:?}", String::from_utf8_lossy(key)),
        }
    }

    /// Adds `change` of the pair (`id`, `change.other`) to `batch`, unless a correction of the
    /// pair at least as recent is stored. True if it was added (then [`Self::pair_written`]
    /// must follow the write).
    pub(super) fn stage_pair(
        &self,
        batch: &mut WriteBatch,
        id: &str,
        change: &PairChange,
    ) -> Result<bool, IndexError> {
        let meta = self.cf(META)?;
        let key = layout::pair_key(id, &change.other);
        if let Some(stored) = self.db.get_cf(meta, &key).map_err(rocks_err(&self.dir))? {
            match decode_pair(&stored) {
                Some((at, _)) if at >= change.at_ms => return Ok(false),
                Some(_) => {}
                None => return Err(self.bad_pair(&key)),
            }
        }
        let mut value = change.at_ms.to_be_bytes().to_vec();
        value.push(u8::from(change.separated));
        batch.put_cf(meta, key, &value);
        batch.put_cf(meta, layout::pair_key(&change.other, id), &value);
        Ok(true)
    }

    /// When the latest correction of the pair (`id`, `other`) was applied, if one was.
    pub(super) fn read_pair_time(&self, id: &str, other: &str) -> Result<Option<i64>, IndexError> {
        let key = layout::pair_key(id, other);
        match self
            .db
            .get_cf(self.cf(META)?, &key)
            .map_err(rocks_err(&self.dir))?
        {
            None => Ok(None),
            Some(value) => match decode_pair(&value) {
                Some((at, _)) => Ok(Some(at)),
                None => Err(self.bad_pair(&key)),
            },
        }
    }

    /// Brings the in-memory pairs up to a written `change` of (`id`, `change.other`).
    pub(super) fn pair_written(&mut self, id: &str, change: &PairChange) {
        for (a, b) in [(id, change.other.as_str()), (change.other.as_str(), id)] {
            let others = self.separated.entry(a.to_owned()).or_default();
            others.retain(|o| o != b);
            if change.separated {
                others.push(b.to_owned());
            }
            if others.is_empty() {
                self.separated.remove(a);
            }
        }
    }

    /// An editor's correction: the corrected article replacing `previous`, and the pair change,
    /// in one atomic write.
    pub(super) fn write_corrected(
        &mut self,
        id: &str,
        previous: &StoredArticle,
        article: &StoredArticle,
        pair: &PairChange,
    ) -> Result<(), IndexError> {
        let mut counts: IndexCounts = self.counts;
        let mut staged = Staged::default();
        self.stage_article(
            &mut staged,
            &mut counts,
            id,
            Some(previous),
            article,
            article.searchable(),
        )?;
        let paired = self.stage_pair(&mut staged.rocks, id, pair)?;
        self.commit(staged, counts)?;
        if paired {
            self.pair_written(id, pair);
        }
        Ok(())
    }
}

/// (time of the correction, separated) of a pair value.
fn decode_pair(value: &[u8]) -> Option<(i64, bool)> {
    let at = i64::from_be_bytes(value.get(..8)?.try_into().ok()?);
    match value.get(8..)? {
        [1] => Some((at, true)),
        [0] => Some((at, false)),
        _ => None,
    }
}
