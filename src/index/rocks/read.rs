//! Reads of the index: an article by id (its whole record, or only the binary sketch that leads
//! its value) and the decision's two candidate searches, the block buckets' and the band buckets'
//! batched point reads (the band buckets plus the entries held in memory, `index::recent`). Both searches name
//! articles by sequence number and resolve them to ids in one batched read of `ids`. This is the
//! path every decision waits on, kept in one file apart from the writes and the operators' scans.

use super::{rocks_err, RocksIndex};
use crate::error::IndexError;
use crate::index::block_bucket;
use crate::index::layout::{
    self, band_key, block_key, id_key, ARTICLES, BANDS_FAMILY, BAND_KEY_LEN, BLOCK_FAMILIES, IDS,
};
use crate::index::{Candidate, Crowded, StoredArticle, TEMPLATE_SEGMENT_ARTICLES};
use crate::simhash::Fingerprint;
use crate::sketch::{Sketch, SEGMENT_BAND};

/// Counter: lookups that read a crowded block bucket (more than `block_bucket::CROWDED_BUCKET`
/// entries).
pub const CROWDED_LOOKUPS: &str = "newsdedup_index_crowded_lookups_total";

impl RocksIndex {
    /// The stored record of `id` (`ArticleStore::get`).
    pub(super) fn read_article(&self, id: &str) -> Result<Option<StoredArticle>, IndexError> {
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

    /// Only the stored content sketch of `id` (`ArticleStore::get_sketch`).
    pub(super) fn read_sketch(&self, id: &str) -> Result<Option<Sketch>, IndexError> {
        let cf = self.cf(ARTICLES)?;
        let raw = self
            .db
            .get_pinned_cf(cf, id.as_bytes())
            .map_err(rocks_err(&self.dir))?;
        // The binary sketch leads the value: no JSON to decode.
        Ok(match raw.as_deref() {
            Some([layout::ARTICLE_VALUE_FORMAT, 1, rest @ ..]) => {
                Sketch::read(rest).map(|(sketch, _)| sketch)
            }
            _ => None,
        })
    }

    /// An `articles` value back into the record (`verify` decodes the family whole with it).
    pub(super) fn decode_article(&self, id: &str, raw: &[u8]) -> Result<StoredArticle, IndexError> {
        let corrupt = |message: String| IndexError::Corrupt {
            dir: self.dir.clone(),
            message,
        };
        match raw.split_first() {
            Some((&layout::ARTICLE_VALUE_FORMAT, rest)) => {
                let (sketch, json) = match rest.split_first() {
                    Some((0, json)) => (None, json),
                    Some((1, tail)) => match Sketch::read(tail) {
                        Some((sketch, used)) => (Some(sketch), &tail[used..]),
                        None => return Err(corrupt(format!("article {id:?}: malformed sketch"))),
                    },
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

    /// The simhash candidates: the fingerprint's four block buckets in one batched point read,
    /// each scanned as a packed array. Candidates come family by family, each family's by
    /// fingerprint, then sequence number; an article sharing several blocks is kept once, where
    /// first found.
    pub(super) fn scan_blocks(
        &self,
        fp: Fingerprint,
        max_distance: u32,
        candidates: &mut Vec<Candidate>,
    ) -> Result<(), IndexError> {
        let first = candidates.len();
        let mut keys = Vec::with_capacity(BLOCK_FAMILIES.len());
        for (name, block) in BLOCK_FAMILIES.iter().zip(fp.blocks()) {
            keys.push((self.cf(name)?, block_key(block)));
        }
        let values = self.db.multi_get_cf(keys);
        for (name, value) in BLOCK_FAMILIES.iter().zip(values) {
            let Some(value) = value.map_err(rocks_err(&self.dir))? else {
                continue;
            };
            let entries = block_bucket::entries(&value).ok_or_else(|| IndexError::Corrupt {
                dir: self.dir.clone(),
                message: format!("{name}: malformed bucket of {} bytes", value.len()),
            })?;
            if block_bucket::is_crowded(value.len() / block_bucket::ENTRY_BYTES) {
                metrics::counter!(CROWDED_LOOKUPS).increment(1);
            }
            let family_first = candidates.len();
            for (other, seq) in entries {
                let distance = fp.distance(other);
                if distance <= max_distance && !candidates[first..].iter().any(|c| c.seq == seq) {
                    candidates.push(Candidate {
                        seq,
                        fingerprint: other,
                        distance,
                        id: String::new(),
                    });
                }
            }
            // A bucket keeps its entries in the order they were added.
            candidates[family_first..].sort_unstable_by_key(|c| (c.fingerprint.0, c.seq));
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

    /// The sketch-band and segment candidates: the sketch's band buckets and its searchable
    /// segments' buckets in one batched point read. Returns what is crowded: the bands (bit `b`:
    /// band `b`) and the template segments (bit `i`: the `i`-th kept segment, held by
    /// [`TEMPLATE_SEGMENT_ARTICLES`] or more unique articles), which name no candidates.
    pub(super) fn scan_bands(
        &self,
        sketch: &Sketch,
        banded: &mut Vec<(u64, String)>,
    ) -> Result<Crowded, IndexError> {
        let mut crowded = Crowded::default();
        let mut seqs: Vec<u64> = Vec::new();
        // Sorted, as the batched read is told: the bands go by band number (the key's first
        // byte), then the segments, whose band number is above every band's, by hash.
        let mut keys: Vec<[u8; BAND_KEY_LEN]> = sketch
            .bands()
            .map(|(band, key)| band_key(band as u8, key))
            .collect();
        let mut what: Vec<Found> = sketch.bands().map(|(band, _)| Found::Band(band)).collect();
        for (i, h) in sketch.segments.searchable() {
            keys.push(band_key(SEGMENT_BAND, u64::from(h)));
            what.push(Found::Segment(i));
        }
        let values = self
            .db
            .batched_multi_get_cf(self.cf(BANDS_FAMILY)?, &keys, true);
        let recent = self.recent();
        for ((key, value), what) in keys.iter().zip(values).zip(what) {
            let stored = value.map_err(rocks_err(&self.dir))?;
            let found = recent
                .bucket(key, stored.as_deref())
                .map_err(|_| IndexError::Corrupt {
                    dir: self.dir.clone(),
                    message: format!("{BANDS_FAMILY}: malformed bucket {key:02x?}"),
                })?;
            let Some(found) = found else {
                continue;
            };
            match what {
                Found::Band(band) if found.crowded() => {
                    crowded.bands |= 1 << band;
                    continue;
                }
                Found::Segment(i) if found.count >= TEMPLATE_SEGMENT_ARTICLES => {
                    crowded.segments |= 1 << i;
                    continue;
                }
                _ => {}
            }
            // A crowded bucket lists no one: it says nothing about a pair.
            for seq in found.entries {
                if !seqs.contains(&seq) {
                    seqs.push(seq);
                }
            }
        }
        drop(recent);
        if !seqs.is_empty() {
            let ids = self.ids_of(&seqs)?;
            banded.extend(seqs.into_iter().zip(ids));
        }
        Ok(crowded)
    }
}

/// What a key of the batched read of [`RocksIndex::scan_bands`] is.
#[derive(Clone, Copy)]
enum Found {
    Band(usize),
    /// The segment's position among the sketch's kept segments.
    Segment(usize),
}
