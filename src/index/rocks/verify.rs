//! The index's consistency check (`verify`, for tests and operators after a crash): every family
//! agrees with the articles (the `ids` entries, the block and band entries through `ids`) and the
//! counters match what is stored. Reads everything; none of it is part of deciding an article.

use super::stats::total_order;
use super::{rocks_err, RocksIndex};
use crate::error::IndexError;
use crate::index::block_bucket;
use crate::index::bucket;
use crate::index::layout::{
    band_key, block_key, expiry_key, id_key, parse_band_key, parse_block_key, parse_expiry_key,
    parse_id_key, ARTICLES, BANDS_FAMILY, BLOCK_FAMILIES, EXPIRY, IDS,
};
use crate::index::{ArticleStore, StoredArticle};
use crate::simhash::Fingerprint;
use crate::simhash::BLOCKS;
use serde::Serialize;
use std::collections::{HashMap, HashSet};

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

impl RocksIndex {
    /// Checks that the families agree: every searchable article has its `ids` entry, its four
    /// block entries and its sketch band entries; every `ids`, block or band entry points (block
    /// and band entries through `ids`) at a unique article with that sequence number and
    /// fingerprint (or band); and the counters match. Reads everything; meant for tests
    /// and operators after a crash.
    pub fn verify(&self) -> Result<VerifyReport, IndexError> {
        let mut report = VerifyReport::default();
        let articles = self.cf(ARTICLES)?;
        let bands_cf = self.cf(BANDS_FAMILY)?;
        // Crowded block buckets, read once and kept as sets: read for every member, each would
        // cost a read of the whole bucket, which for a flooded one is quadratic.
        let mut crowded: HashMap<(usize, u16), HashSet<(Fingerprint, u64)>> = HashMap::new();
        let mut it = self.db.raw_iterator_cf(articles);
        it.seek_to_first();
        while let (Some(key), Some(value)) = (it.key(), it.value()) {
            let id = String::from_utf8_lossy(key).into_owned();
            report.articles += 1;
            let art = self.decode_article(&id, value)?;
            if art.searchable() {
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
                for (family, (name, block)) in BLOCK_FAMILIES
                    .iter()
                    .zip(art.fingerprint.blocks())
                    .enumerate()
                {
                    let entry = (art.fingerprint, art.seq);
                    let listed = if let Some(set) = crowded.get(&(family, block)) {
                        set.contains(&entry)
                    } else {
                        let bucket = self
                            .db
                            .get_pinned_cf(self.cf(name)?, block_key(block))
                            .map_err(rocks_err(&self.dir))?;
                        let value = bucket.as_deref().unwrap_or_default();
                        let listed = match block_bucket::entries(value) {
                            Some(entries)
                                if block_bucket::is_crowded(
                                    value.len() / block_bucket::ENTRY_BYTES,
                                ) =>
                            {
                                let set: HashSet<_> = entries.collect();
                                let listed = set.contains(&entry);
                                crowded.insert((family, block), set);
                                listed
                            }
                            Some(mut entries) => entries.any(|e| e == entry),
                            None => false,
                        };
                        listed
                    };
                    if !listed {
                        report
                            .problems
                            .push(format!("{name}: entry of {id:?} is missing"));
                    }
                }
                report.expected_entries += BLOCKS as u64;
                if let Some(sketch) = &art.sketch {
                    for (band, bkey) in sketch.entries() {
                        report.expected_band_entries += 1;
                        let key = band_key(band as u8, bkey);
                        let stored = self
                            .db
                            .get_cf(bands_cf, key)
                            .map_err(rocks_err(&self.dir))?;
                        // A crowded bucket lists no one: its count is checked below. (A
                        // malformed one is reported by the scan of the family.)
                        let listed = self
                            .recent()
                            .bucket(&key, stored.as_deref())
                            .is_ok_and(|b| {
                                b.is_some_and(|b| b.crowded() || b.entries.contains(&art.seq))
                            });
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
                (Some(seq), Some(art)) if art.seq == seq && art.searchable() => {}
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
        for (family, name) in BLOCK_FAMILIES.iter().enumerate() {
            let cf = self.cf(name)?;
            let mut it = self.db.raw_iterator_cf_opt(cf, total_order());
            it.seek_to_first();
            while let (Some(key), Some(value)) = (it.key(), it.value()) {
                let (Some(block), Some(entries)) =
                    (parse_block_key(key), block_bucket::entries(value))
                else {
                    report
                        .problems
                        .push(format!("{name}: malformed bucket {key:02x?}"));
                    it.next();
                    continue;
                };
                for (fp, seq) in entries {
                    report.block_entries += 1;
                    report.problems.extend(self.check_entry(name, seq, |art| {
                        art.fingerprint == fp && art.fingerprint.blocks()[family] == block
                    })?);
                }
                it.next();
            }
            it.status().map_err(rocks_err(&self.dir))?;
        }
        self.for_each_band_bucket(|key, found| {
            let (Some((band, bkey)), Some(found)) = (parse_band_key(key), found) else {
                report
                    .problems
                    .push(format!("{BANDS_FAMILY}: malformed bucket {key:02x?}"));
                return Ok(());
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
                            s.entries()
                                .any(|(b, k)| b == usize::from(band) && k == bkey)
                        })
                    })?);
            }
            Ok(())
        })?;
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
            Some(art) if art.seq == seq && art.searchable() && agrees(&art) => None,
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
}

#[cfg(test)]
mod tests {
    use super::super::admin::tests::{article, index_of_a_and_b};
    use super::*;
    use crate::index::StoredDecision;

    /// Block and band entries name articles by sequence number; lookups find the ids in `ids`,
    /// and `verify` reports an `ids` entry that is missing or names the wrong article, and a block
    /// or band entry of an article that is not there. A lookup that meets a missing id fails
    /// (corruption) instead of matching nothing.
    #[test]
    fn entries_name_articles_through_ids_and_verify_checks_them() {
        let dir = tempfile::tempdir().unwrap();
        let (mut index, a, b) = index_of_a_and_b(dir.path());
        let dup = StoredArticle {
            indexed_extension: false,
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
            .sketch_lookup(b.sketch.as_ref().unwrap(), &mut banded)
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
            .sketch_lookup(b.sketch.as_ref().unwrap(), &mut banded)
            .unwrap_err();
        assert!(
            matches!(err, IndexError::Corrupt { .. })
                && err.to_string().contains("sequence number 1"),
            "{err}"
        );
    }
}
