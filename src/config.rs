//! Configuration: the fingerprint parameters (which define the fingerprint identity) and the
//! service/index settings, loaded from TOML (see config/default.toml for every key).

use crate::sketch::Similarity;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Parameters of feature extraction and weighting. Every field changes fingerprints, so every
/// field is part of the fingerprint identity (see `fingerprint::FingerprintIdentity`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FingerprintConfig {
    /// jieba dictionary (`word freq [tag]` per line). None: the built-in copy of jieba's dict.txt.
    pub dict_path: Option<PathBuf>,
    /// IDF table (`word idf` per line). None: the built-in copy of jieba's idf.txt.
    pub idf_path: Option<PathBuf>,
    /// Stop words, one per line. None: the built-in config/stopwords_zh.txt.
    pub stopwords_path: Option<PathBuf>,
    /// Use jieba's HMM to find words missing from the dictionary (names, new terms).
    pub hmm: bool,
    /// Weight factor for words that occur in the title.
    pub title_weight: f64,
    /// IDF for words missing from the IDF table. None: the table's median (jieba's own convention).
    pub unknown_idf: Option<f64>,
    /// Keep 1-character words (most are function words or fragments).
    pub keep_single_chars: bool,
    /// Keep numbers (dates, amounts): they tell templated reports apart.
    pub keep_numbers: bool,
    /// Keep Latin-script words of 2+ letters.
    pub keep_latin: bool,
    /// Keep only words whose jieba part-of-speech tag starts with one of these (e.g. ["n", "v"]).
    /// Empty: no part-of-speech filter (faster: no tagging).
    pub pos_filter: Vec<String>,
    /// Drop source/editor/disclaimer/call-to-action lines before segmentation.
    pub strip_boilerplate: bool,
    /// Fold Traditional Chinese characters to Simplified (OpenCC's character table,
    /// config/ts_characters.txt) so that a repost converted to 繁體 matches its original.
    pub fold_traditional: bool,
    /// Only the first this many bytes of content are fingerprinted (bounds time per article).
    pub max_content_bytes: usize,
}

impl Default for FingerprintConfig {
    fn default() -> Self {
        FingerprintConfig {
            dict_path: None,
            idf_path: None,
            stopwords_path: None,
            hmm: true,
            title_weight: 2.0,
            unknown_idf: None,
            keep_single_chars: false,
            keep_numbers: true,
            keep_latin: true,
            pos_filter: Vec::new(),
            strip_boilerplate: true,
            fold_traditional: true,
            max_content_bytes: 1 << 20,
        }
    }
}

/// Settings of the persistent index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IndexConfig {
    /// RocksDB block cache shared by all column families, in MiB.
    pub block_cache_mib: usize,
    /// fsync the WAL on every write. Off by default: the service syncs the WAL before each offset
    /// commit instead, which gives the same guarantee at a fraction of the cost.
    pub sync_writes: bool,
}

impl Default for IndexConfig {
    fn default() -> Self {
        IndexConfig {
            block_cache_mib: 256,
            sync_writes: false,
        }
    }
}

/// Settings of the decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DedupConfig {
    /// Largest Hamming distance at which two articles are near-duplicates. Up to 3 is exhaustive
    /// (pigeonhole over four 16-bit blocks); above 3 only candidates sharing a block are seen.
    pub threshold: u32,
    /// Second check of candidates within `threshold`: the estimated 4-gram containment must be at
    /// least this (0 disables). Removes templated reports whose word mix is alike but text is not.
    pub confirm_min_containment: f64,
    /// Candidates beyond `threshold` up to this distance (found because they share a 16-bit block)
    /// are duplicates if the second check is strong: admits reposts whose edits moved the simhash a
    /// little too far. 0 disables.
    pub rescue_distance: u32,
    /// Minimum estimated 4-gram containment for a rescued candidate (beyond `threshold`).
    pub rescue_min_containment: f64,
    /// Minimum estimated 4-gram Jaccard for a rescued candidate. The containment estimate is
    /// derived from the Jaccard estimate and the two lengths; with a small Jaccard it is mostly
    /// noise (a short text "contained" in a long unrelated one), so both must hold.
    pub rescue_min_jaccard: f64,
    /// Also look for candidates through the content sketch's LSH bands (finds reposts whose simhash
    /// moved far, e.g. truncated ones); they are judged by the rescue rule.
    pub sketch_search: bool,
}

impl DedupConfig {
    /// Whether a candidate at simhash `distance` with second-check score `sim` is a duplicate.
    pub fn accepts(&self, distance: u32, sim: Option<Similarity>) -> bool {
        if distance <= self.threshold {
            sim.is_none_or(|s| s.containment >= self.confirm_min_containment)
        } else {
            (self.sketch_search || distance <= self.rescue_distance)
                && sim.is_some_and(|s| {
                    s.containment >= self.rescue_min_containment
                        && s.jaccard >= self.rescue_min_jaccard
                })
        }
    }
}

impl Default for DedupConfig {
    fn default() -> Self {
        DedupConfig {
            threshold: 3,
            confirm_min_containment: 0.0,
            rescue_distance: 0,
            rescue_min_containment: 0.8,
            rescue_min_jaccard: 0.45,
            sketch_search: true,
        }
    }
}

/// The whole configuration file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub fingerprint: FingerprintConfig,
    pub index: IndexConfig,
    pub dedup: DedupConfig,
    /// Service settings (`newsdedup run`, see `kafka::config`).
    pub service: crate::kafka::config::ServiceConfig,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid config file {path}: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: toml::de::Error,
    },
}

impl Config {
    pub fn load(path: &std::path::Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        toml::from_str(&text).map_err(|source| ConfigError::Parse {
            path: path.to_owned(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_default_toml_matches_code_defaults() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/default.toml");
        let cfg = Config::load(&path).unwrap();
        assert_eq!(cfg.fingerprint, FingerprintConfig::default());
        assert_eq!(cfg.index, IndexConfig::default());
        assert_eq!(cfg.dedup, DedupConfig::default());
    }

    #[test]
    fn unknown_keys_are_rejected() {
        assert!(toml::from_str::<Config>("[fingerprint]\ntitle_wieght = 3.0\n").is_err());
    }
}
