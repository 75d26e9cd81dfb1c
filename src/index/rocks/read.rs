//! Reads of the index: an article by id (its whole record, or only the binary sketch that leads
//! its value) and the decision's two candidate searches, the block families' prefix scans (a
//! crowded bucket finished by seeks) and the band buckets' batched point read (plus the entries
//! held in memory, `index::recent`). Both searches name
//! articles by sequence number and resolve them to ids in one batched read of `ids`. This is the
//! path every decision waits on, kept in one file apart from the writes and the operators' scans.

use super::{rocks_err, RocksIndex};
use crate::error::IndexError;
use crate::index::layout::{
    self, band_key, id_key, parse_block_key, ARTICLES, BANDS_FAMILY, BAND_KEY_LEN, BLOCK_FAMILIES,
    IDS,
};
use crate::index::{Candidate, StoredArticle};
use crate::simhash::Fingerprint;
use crate::sketch::{Sketch, SKETCH_BYTES};
use rocksdb::ReadOptions;

/// Keys of a block bucket read one by one before the rest of the bucket is searched by seeks.
pub const SCAN_BEFORE_SEEK: usize = 4096;
/// Largest search distance the seek path serves (C(16,<=4) = 2,517 seeks at most per family);
/// beyond it a crowded bucket is read whole.
const MAX_SEEK_DISTANCE: u32 = 4;
/// Counter: lookups that met a crowded bucket and finished it by seeks.
pub const CROWDED_LOOKUPS: &str = "newsdedup_index_crowded_lookups_total";

/// Every 16-bit value within `max_distance` bits of `block`, ascending: the only values the next
/// block of a candidate can take, since a candidate within the distance differs from the query
/// in at most that many bits anywhere.
fn next_block_variants(block: u16, max_distance: u32) -> Vec<u16> {
    (0..=u16::MAX)
        .filter(|v| (v ^ block).count_ones() <= max_distance)
        .collect()
}

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
            Some([layout::ARTICLE_VALUE_FORMAT, 1, rest @ ..]) if rest.len() >= SKETCH_BYTES => {
                Sketch::from_bytes(&rest[..SKETCH_BYTES])
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

    /// The simhash candidates: one prefix scan of each block family (one iterator each). A
    /// bucket read past [`SCAN_BEFORE_SEEK`] keys (a crowded block value: templated reports,
    /// crafted input) is finished by seeks instead, see [`next_block_variants`], so a lookup costs
    /// at most that many keys plus a bounded number of seeks, whatever the bucket's size.
    pub(super) fn scan_blocks(
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

    /// The sketch-band candidates: the sketch's band buckets in one batched point read. Returns
    /// the crowded bands (bit `b`: band `b`).
    pub(super) fn scan_bands(
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
        let recent = self.recent();
        for ((key, value), band) in keys.iter().zip(values).zip(band_numbers) {
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
        drop(recent);
        if !seqs.is_empty() {
            let ids = self.ids_of(&seqs)?;
            banded.extend(seqs.into_iter().zip(ids));
        }
        Ok(crowded)
    }
}
