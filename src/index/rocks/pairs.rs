//! The pairs editors keep apart: a release (`newsdedup correct release`) separates an article from
//! the one it was wrongly linked to, and the two never link again in either direction; a later
//! merge of the two joins them again. Kept in `meta` under `pair/<id>\0<other>` (both orders),
//! each with the time of the correction that set it, so that changes applied out of order (a
//! rebuild reads the unique and the duplicate topic side by side) end in the state of the latest
//! one; loaded into memory at open, since the decision asks for every accepted candidate.

use super::{rocks_err, RocksIndex, Staged};
use crate::error::IndexError;
use crate::index::layout::{self, META};
use crate::index::{ArticleStore, IndexCounts, PairChange, StoredArticle};
use crate::simhash::Fingerprint;
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
        let meta = self.cf(META)?;
        let pair_before = self
            .db
            .get_cf(meta, layout::pair_key(id, &pair.other))
            .map_err(rocks_err(&self.dir))?;
        let paired = self.stage_pair(&mut staged.rocks, id, pair)?;
        let undo = CorrectionUndo {
            at_ms: article.correction.as_ref().map_or(i64::MIN, |n| n.at_ms),
            other: pair.other.clone(),
            pair_before: paired.then_some(pair_before),
            previous: self.encode_article(id, previous)?,
        };
        staged
            .rocks
            .put_cf(self.cf(META)?, layout::undo_key(id), undo.encode());
        self.commit(staged, counts)?;
        if paired {
            self.pair_written(id, pair);
        }
        Ok(())
    }
}

impl RocksIndex {
    /// Undoes the correction of `id` made at `at_ms`, whose output can never be published: the
    /// article as it was before it and the pair it changed, durably, so that the index agrees
    /// with the output topics (what a standby or a rebuild reads), which never saw it. Nothing
    /// happens (false) unless the stored version of `id` is `fingerprint` corrected at `at_ms`:
    /// a later write of the article stands.
    pub fn revert_correction(
        &mut self,
        id: &str,
        fingerprint: Fingerprint,
        at_ms: i64,
    ) -> Result<bool, IndexError> {
        let Some(current) = self.get(id)? else {
            return Ok(false);
        };
        if current.fingerprint != fingerprint
            || current.correction.as_ref().map(|n| n.at_ms) != Some(at_ms)
        {
            return Ok(false);
        }
        let key = layout::undo_key(id);
        let Some(raw) = self
            .db
            .get_cf(self.cf(META)?, &key)
            .map_err(rocks_err(&self.dir))?
        else {
            return Ok(false);
        };
        let Some(undo) = CorrectionUndo::decode(&raw) else {
            return Err(IndexError::Corrupt {
                dir: self.dir.clone(),
                message: format!("bad undo entry of article {id:?}"),
            });
        };
        if undo.at_ms != at_ms {
            return Ok(false);
        }
        let previous = self.decode_article(id, &undo.previous)?;
        let (mut staged, counts) = self.stage_replacement(id, &current, &previous)?;
        let meta = self.cf(META)?;
        if let Some(before) = &undo.pair_before {
            for k in [
                layout::pair_key(id, &undo.other),
                layout::pair_key(&undo.other, id),
            ] {
                match before {
                    Some(value) => staged.rocks.put_cf(meta, k, value),
                    None => staged.rocks.delete_cf(meta, k),
                }
            }
        }
        staged.rocks.delete_cf(meta, &key);
        self.commit(staged, counts)?;
        if let Some(before) = &undo.pair_before {
            let separated = before
                .as_deref()
                .and_then(decode_pair)
                .is_some_and(|(_, separated)| separated);
            self.pair_written(
                id,
                &PairChange {
                    other: undo.other.clone(),
                    separated,
                    at_ms,
                },
            );
        }
        self.sync()?;
        Ok(true)
    }
}

/// What a correction replaced (`layout::META_UNDO_PREFIX`).
struct CorrectionUndo {
    at_ms: i64,
    other: String,
    /// The pair's value before the correction (None: it had none); None when the correction left
    /// the pair alone (a later correction of the pair was stored).
    pair_before: Option<Option<Vec<u8>>>,
    /// The article's `articles` value before the correction.
    previous: Vec<u8>,
}

impl CorrectionUndo {
    /// Marks a correction that left the pair alone.
    const PAIR_UNCHANGED: u32 = u32::MAX;

    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(64 + self.other.len() + self.previous.len());
        v.extend_from_slice(&self.at_ms.to_be_bytes());
        v.extend_from_slice(&(self.other.len() as u32).to_be_bytes());
        v.extend_from_slice(self.other.as_bytes());
        match &self.pair_before {
            None => v.extend_from_slice(&Self::PAIR_UNCHANGED.to_be_bytes()),
            Some(None) => v.extend_from_slice(&0u32.to_be_bytes()),
            Some(Some(value)) => {
                v.extend_from_slice(&(value.len() as u32).to_be_bytes());
                v.extend_from_slice(value);
            }
        }
        v.extend_from_slice(&self.previous);
        v
    }

    fn decode(raw: &[u8]) -> Option<CorrectionUndo> {
        let at_ms = i64::from_be_bytes(raw.get(..8)?.try_into().ok()?);
        let length = |at: usize| -> Option<usize> {
            Some(u32::from_be_bytes(raw.get(at..at + 4)?.try_into().ok()?) as usize)
        };
        let other_len = length(8)?;
        let other = std::str::from_utf8(raw.get(12..12 + other_len)?)
            .ok()?
            .to_owned();
        let mut at = 12 + other_len;
        let marker = u32::from_be_bytes(raw.get(at..at + 4)?.try_into().ok()?);
        at += 4;
        let pair_before = match marker {
            Self::PAIR_UNCHANGED => None,
            0 => Some(None),
            n => {
                let value = raw.get(at..at + n as usize)?.to_vec();
                at += n as usize;
                Some(Some(value))
            }
        };
        Some(CorrectionUndo {
            at_ms,
            other,
            pair_before,
            previous: raw.get(at..)?.to_vec(),
        })
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
