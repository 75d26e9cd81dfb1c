//! The engine's parts (fingerprinter, index, decision rule, worker threads) described once from
//! the configuration file and the command line, and built from that description by every command
//! (`batch`, `compare`, `audit`, `fingerprint`, `index rebuild`, `run`, `standby`, `replay`): the
//! threshold is checked and warned about in one place, the retention override applied in one
//! place, the default thread count chosen in one place.

use crate::article::ReadRules;
use crate::config::{
    Config, CorrectionsConfig, DedupConfig, FingerprintConfig, ImageConfig, IndexConfig,
};
use crate::dedup::Deduper;
use crate::error::IndexError;
use crate::error::ResourceError;
use crate::fingerprint::{FingerprintIdentity, Fingerprinter};
use crate::index::RocksIndex;
use crate::simhash::GUARANTEED_DISTANCE;
use crate::time::{TimeSpan, UtcOffset};
use std::path::{Path, PathBuf};

/// Command-line values that override the configuration file (None: the file's value).
#[derive(Debug, Clone, Copy, Default)]
pub struct Overrides {
    /// `--threshold` over `[dedup] threshold`.
    pub threshold: Option<u32>,
    /// `--retention` over `[index] retention`.
    pub retention: Option<TimeSpan>,
    /// `--threads`; None or 0: one per core.
    pub threads: Option<usize>,
}

/// What the engine's parts are made of, resolved and validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Components {
    pub fingerprint: FingerprintConfig,
    /// Where start-up images of the fingerprint tables are kept.
    pub image: ImageConfig,
    /// `[dedup]` with the threshold resolved.
    pub rule: DedupConfig,
    /// `[index]` with the retention resolved.
    pub index: IndexConfig,
    /// Fingerprinting workers (never 0).
    pub threads: usize,
    /// `[input] published_at_offset`: the zone of times written without an offset.
    pub published_at_offset: UtcOffset,
    /// Warnings for the user (e.g. a threshold above the exhaustive range), logged once.
    pub warnings: Vec<String>,
    /// `[corrections]`: the keys corrections are signed with (read by `signing::SigningKeys`).
    pub corrections: CorrectionsConfig,
}

/// A threshold outside what a 64-bit fingerprint allows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--threshold {0} is out of range 0..=64")]
pub struct ThresholdOutOfRange(pub u32);

/// A part that could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("cannot load the fingerprint resources")]
    Resources(#[from] ResourceError),
    #[error("cannot open the index in {}", dir.display())]
    Index {
        dir: PathBuf,
        #[source]
        source: IndexError,
    },
}

impl Components {
    /// Resolves `overrides` over `config`.
    pub fn resolve(config: &Config, overrides: Overrides) -> Result<Self, ThresholdOutOfRange> {
        let threshold = overrides.threshold.unwrap_or(config.dedup.threshold);
        if threshold > 64 {
            return Err(ThresholdOutOfRange(threshold));
        }
        let warnings = (threshold > GUARANTEED_DISTANCE)
            .then(|| format!(
                "threshold {threshold} > {GUARANTEED_DISTANCE}: only candidates sharing a 16-bit block are seen, so some pairs within {threshold} will be missed"
            ))
            .into_iter()
            .collect();
        let threads = match overrides.threads {
            Some(n) if n > 0 => n,
            _ => std::thread::available_parallelism().map_or(2, |n| n.get()),
        };
        Ok(Components {
            fingerprint: config.fingerprint.clone(),
            image: config.image.clone(),
            rule: DedupConfig {
                threshold,
                ..config.dedup.clone()
            },
            index: IndexConfig {
                retention: overrides.retention.or(config.index.retention),
                ..config.index.clone()
            },
            threads,
            published_at_offset: config.input.published_at_offset,
            warnings,
            corrections: config.corrections.clone(),
        })
    }

    /// Loads the dictionary, IDF table and stop words, through the start-up image when there
    /// is one (`Fingerprinter::image_use` says how it went).
    pub fn fingerprinter(&self) -> Result<Fingerprinter, BuildError> {
        let dir = match (&self.image.enabled, &self.image.dir) {
            (false, _) => None,
            (true, Some(dir)) => Some(dir.clone()),
            (true, None) => crate::fingerprint::image::default_dir(),
        };
        Ok(Fingerprinter::load(&self.fingerprint, dir.as_deref())?
            .with_outlines(self.rule.reads_outlines()))
    }

    /// Opens (and locks) the index in `dir` for fingerprints of `fingerprinter`.
    pub fn open_index(
        &self,
        dir: &Path,
        fingerprinter: &Fingerprinter,
    ) -> Result<RocksIndex, BuildError> {
        RocksIndex::open(dir, fingerprinter.identity(), &self.index).map_err(|source| {
            BuildError::Index {
                dir: dir.to_owned(),
                source,
            }
        })
    }

    /// The fingerprinter and the index in `dir`, loaded and opened side by side (both take tens
    /// of milliseconds at start-up; the index only needs the fingerprint identity, which is known
    /// before the tables are loaded).
    pub fn open(&self, dir: &Path) -> Result<(Fingerprinter, RocksIndex), BuildError> {
        let identity = FingerprintIdentity::for_config(&self.fingerprint)?;
        let (fingerprinter, index) = std::thread::scope(|scope| {
            let index = scope.spawn(|| {
                RocksIndex::open(dir, &identity, &self.index).map_err(|source| BuildError::Index {
                    dir: dir.to_owned(),
                    source,
                })
            });
            let fingerprinter = self.fingerprinter();
            let index = index
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (fingerprinter, index)
        });
        Ok((fingerprinter?, index?))
    }

    /// The decision rule over `index`.
    pub fn deduper(&self, index: RocksIndex) -> Deduper<RocksIndex> {
        Deduper::with_config(index, self.rule.clone())
    }

    /// How input records are read, with values up to `max_bytes`.
    pub fn read_rules(&self, max_bytes: usize) -> ReadRules {
        ReadRules {
            max_bytes,
            published_at_offset: self.published_at_offset,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_win_over_the_file_and_threads_are_never_zero() {
        let mut config = Config::default();
        config.dedup.threshold = 2;
        let c = Components::resolve(
            &config,
            Overrides {
                threshold: Some(5),
                retention: Some("12h".parse().expect("span")),
                threads: Some(0),
            },
        )
        .expect("resolve");
        assert_eq!(c.rule.threshold, 5);
        assert_eq!(c.index.retention, Some("12h".parse().expect("span")));
        assert!(c.threads >= 1);
        assert_eq!(c.warnings.len(), 1, "threshold 5 is past the guarantee");
        let c = Components::resolve(&config, Overrides::default()).expect("resolve");
        assert_eq!(c.rule.threshold, 2);
        assert!(c.warnings.is_empty());
        assert_eq!(
            Components::resolve(
                &config,
                Overrides {
                    threshold: Some(65),
                    ..Overrides::default()
                }
            ),
            Err(ThresholdOutOfRange(65))
        );
    }
}
