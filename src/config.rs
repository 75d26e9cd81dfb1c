//! Configuration: the fingerprint parameters (which define the fingerprint identity) and the
//! service/index settings, loaded from TOML (see config/default.toml for every key).

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
}

impl Default for DedupConfig {
    fn default() -> Self {
        DedupConfig { threshold: 3 }
    }
}

/// The whole configuration file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub fingerprint: FingerprintConfig,
    pub index: IndexConfig,
    pub dedup: DedupConfig,
    /// Service settings (`newsdedup run`); kept as a TOML table and interpreted by the service.
    pub service: Option<toml::Table>,
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
