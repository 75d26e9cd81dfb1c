//! The configuration file: one TOML section per concern, each defined next to the code it
//! configures (see config/default.toml for every key).

pub use crate::article::InputConfig;
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
    pub input: InputConfig,
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
    /// Says where and what, never the offending text (a line may hold a password).
    #[error("invalid config file {path}{}: {message}", line.map(|l| format!(", line {l}")).unwrap_or_default())]
    Parse {
        path: PathBuf,
        line: Option<usize>,
        message: String,
    },
}

impl Config {
    pub fn load(path: &std::path::Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            line: e
                .span()
                .map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1),
            message: e.message().to_owned(),
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
        assert_eq!(cfg.input, InputConfig::default());
        assert_eq!(cfg.fingerprint, FingerprintConfig::default());
        assert_eq!(cfg.index, IndexConfig::default());
        assert_eq!(cfg.dedup, DedupConfig::default());
    }

    #[test]
    fn a_syntax_error_names_the_line_but_never_prints_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.toml");
        std::fs::write(
            &path,
            "[service.kafka]\n\"sasl.username\" = \"svc\"\n\"sasl.password\" = \"hunter2-secret\n",
        )
        .unwrap();
        let message = Config::load(&path).unwrap_err().to_string();
        assert!(message.contains("line 3"), "{message}");
        assert!(!message.contains("hunter2"), "{message}");
    }

    #[test]
    fn unknown_keys_are_rejected() {
        assert!(toml::from_str::<Config>("[fingerprint]\ntitle_wieght = 3.0\n").is_err());
    }
}
