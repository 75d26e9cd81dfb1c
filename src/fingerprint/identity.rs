//! What determines a fingerprint: the `[fingerprint]` settings (`FingerprintConfig`), the
//! resource texts (the built-in dictionary, IDF table and stop words, or the files that replace
//! them), and the `FingerprintIdentity` over both that an index records and checks, so that no
//! index mixes fingerprints made by different computations.

use crate::error::ResourceError;
use crate::simhash;
use crate::sketch as sketch_mod;
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

// Statics, not consts: a const's text is copied into each crate that uses it (11 MB twice).
pub(super) static BUILTIN_DICT: &str = include_str!("../../config/jieba_dict.txt");
pub(super) static BUILTIN_IDF: &str = include_str!("../../config/jieba_idf.txt");
pub(super) static BUILTIN_STOPWORDS: &str = include_str!("../../config/stopwords_zh.txt");

/// Everything that determines a fingerprint: algorithm version, parameters, and the content
/// digests (XXH3-64) of the dictionary, IDF and stop-word files. An index records it and refuses
/// to be used with a different one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FingerprintIdentity {
    pub algorithm: String,
    pub cleaning: String,
    pub sketch: String,
    pub dict_xxh3: String,
    pub idf_xxh3: String,
    pub stopwords_xxh3: String,
    pub hmm: bool,
    pub title_weight: f64,
    pub unknown_idf: Option<f64>,
    pub keep_single_chars: bool,
    pub keep_numbers: bool,
    pub keep_latin: bool,
    pub pos_filter: Vec<String>,
    pub strip_boilerplate: bool,
    pub fold_traditional: bool,
    pub max_content_bytes: usize,
}

impl FingerprintIdentity {
    /// The identity of the fingerprints a `Fingerprinter` loaded with `config` makes, without
    /// loading it (reads and hashes the resource files): lets an index be opened meanwhile.
    pub fn for_config(config: &FingerprintConfig) -> Result<Self, ResourceError> {
        let (dict, _) = read_resource(&config.dict_path, BUILTIN_DICT, "dictionary")?;
        let (idf, _) = read_resource(&config.idf_path, BUILTIN_IDF, "IDF table")?;
        let (stopwords, _) =
            read_resource(&config.stopwords_path, BUILTIN_STOPWORDS, "stop-word list")?;
        Ok(Self::of(config, &dict, &idf, &stopwords))
    }

    /// The identity of fingerprints made with `config` and these resource texts.
    pub(super) fn of(config: &FingerprintConfig, dict: &str, idf: &str, stopwords: &str) -> Self {
        // Destructured, so that a new parameter does not compile until its place in the identity
        // is decided: a forgotten one would let an index mix incompatible fingerprints.
        let FingerprintConfig {
            // The files are identified by their content digests, not their paths.
            dict_path: _,
            idf_path: _,
            stopwords_path: _,
            hmm,
            title_weight,
            unknown_idf,
            keep_single_chars,
            keep_numbers,
            keep_latin,
            pos_filter,
            strip_boilerplate,
            fold_traditional,
            max_content_bytes,
        } = config;
        FingerprintIdentity {
            algorithm: simhash::ALGORITHM.into(),
            cleaning: if *fold_traditional {
                format!(
                    "{CLEANING_VERSION}+ts:{}",
                    digest(crate::text::clean::TS_CHARACTERS)
                )
            } else {
                CLEANING_VERSION.into()
            },
            sketch: sketch_mod::SKETCH_VERSION.into(),
            dict_xxh3: digest(dict),
            idf_xxh3: digest(idf),
            stopwords_xxh3: digest(stopwords),
            hmm: *hmm,
            title_weight: *title_weight,
            unknown_idf: *unknown_idf,
            keep_single_chars: *keep_single_chars,
            keep_numbers: *keep_numbers,
            keep_latin: *keep_latin,
            pos_filter: pos_filter.clone(),
            strip_boilerplate: *strip_boilerplate,
            fold_traditional: *fold_traditional,
            max_content_bytes: *max_content_bytes,
        }
    }

    /// Canonical JSON form (stable field order), as stored in the index.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Short digest of the canonical form, for logs and `index stats`.
    pub fn digest(&self) -> String {
        format!(
            "{:016x}",
            xxhash_rust::xxh3::xxh3_64(self.to_json().as_bytes())
        )
    }
}

/// Version of the cleaning rules; bump when `text::clean` changes behaviour.
pub const CLEANING_VERSION: &str = "clean/v2";

/// The text of a resource: the file at `path`, or the built-in copy; and where it came from.
pub(super) fn read_resource(
    path: &Option<std::path::PathBuf>,
    builtin: &'static str,
    what: &'static str,
) -> Result<(std::borrow::Cow<'static, str>, String), ResourceError> {
    match path {
        None => Ok((builtin.into(), format!("built-in {what}"))),
        Some(p) => std::fs::read_to_string(p)
            .map(|s| (s.into(), p.display().to_string()))
            .map_err(|source| ResourceError::Read {
                what,
                path: p.clone(),
                error: source,
            }),
    }
}

/// The XXH3-64 digest of a resource text, as the identity names it.
fn digest(text: &str) -> String {
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(text.as_bytes()))
}
