//! The configuration file: one TOML section per concern, each defined next to the code it
//! configures (see config/default.toml for every key).

pub use crate::dedup::DedupConfig;
pub use crate::fingerprint::FingerprintConfig;
pub use crate::index::IndexConfig;
pub use crate::settings::ServiceConfig;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The whole configuration file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub fingerprint: FingerprintConfig,
    pub index: IndexConfig,
    pub dedup: DedupConfig,
    /// Service settings (`newsdedup run`, see `settings`).
    pub service: ServiceConfig,
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
