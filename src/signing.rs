//! Signed corrections: only an allowed producer's correction applies. A correction is signed
//! with HMAC-SHA256 over its canonical JSON (`correction::Correction::canonical`: the record as
//! this program writes it, without `signature`, so a record re-encoded on the way is still
//! verified) under one of the keys of `[corrections] keys`, and names the key (`key_id`, itself
//! signed). This module knows keys and tags only, not what they sign.
//! Several keys are accepted at once, so a key is rotated by adding the new one, moving the
//! editors' `correct` to it, then removing the old one. With no key configured, nothing is
//! checked (as before signatures existed).

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

type HmacSha256 = Hmac<Sha256>;

/// The `[corrections]` section of the configuration file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CorrectionsConfig {
    /// The keys a correction may be signed with; when any is set, `run` and `batch
    /// --corrections` refuse a correction that is not signed with one of them.
    pub keys: Vec<KeyFile>,
    /// The id (in `keys`) of the key `newsdedup correct` signs with (`--key-id`).
    pub sign_with: Option<String>,
}

/// One key: its id (named by the corrections it signs) and the file holding its secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyFile {
    pub id: String,
    pub file: PathBuf,
}

/// Why the keys cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read the correction key {id:?} from {}", path.display())]
    Read {
        id: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the correction key {id:?} in {} is shorter than {MIN_KEY_BYTES} bytes", path.display())]
    TooShort { id: String, path: PathBuf },
    #[error("the correction key id {0:?} is given twice")]
    Duplicate(String),
    #[error("a correction key id must be 1..=64 printable ASCII characters, not {0:?}")]
    BadId(String),
    #[error("no correction key {0:?} in [corrections] keys (ids there: {1})")]
    Unknown(String, String),
}

/// Shortest secret accepted (HMAC-SHA256's output length).
pub const MIN_KEY_BYTES: usize = 32;

/// One key's secret, read from its file (surrounding whitespace, a final newline say, dropped).
#[derive(Clone)]
pub struct SigningKey {
    pub id: String,
    secret: Vec<u8>,
}

impl std::fmt::Debug for SigningKey {
    // The secret is never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey").field("id", &self.id).finish()
    }
}

impl SigningKey {
    /// The key `id` read from `path`.
    pub fn read(id: &str, path: &Path) -> Result<SigningKey, KeyError> {
        if id.is_empty() || id.len() > 64 || !id.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(KeyError::BadId(id.to_owned()));
        }
        let bytes = std::fs::read(path).map_err(|source| KeyError::Read {
            id: id.to_owned(),
            path: path.to_owned(),
            source,
        })?;
        SigningKey::new(id, bytes.trim_ascii()).ok_or_else(|| KeyError::TooShort {
            id: id.to_owned(),
            path: path.to_owned(),
        })
    }

    /// A key from its secret; None when the secret is shorter than [`MIN_KEY_BYTES`].
    pub fn new(id: &str, secret: &[u8]) -> Option<SigningKey> {
        (secret.len() >= MIN_KEY_BYTES).then(|| SigningKey {
            id: id.to_owned(),
            secret: secret.to_vec(),
        })
    }

    fn mac(&self, canonical: &str) -> HmacSha256 {
        // HMAC takes a key of any length: this cannot fail.
        let mut mac = <HmacSha256 as Mac>::new_from_slice(&self.secret)
            .unwrap_or_else(|_| unreachable!("HMAC accepts keys of any length"));
        mac.update(canonical.as_bytes());
        mac
    }

    /// The signature (hex HMAC-SHA256) of `canonical`.
    pub fn sign(&self, canonical: &str) -> String {
        hex(&self.mac(canonical).finalize().into_bytes())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The keys a correction may be signed with.
#[derive(Debug, Clone, Default)]
pub struct SigningKeys {
    keys: BTreeMap<String, SigningKey>,
}

/// Why a correction's signature is not accepted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SignatureError {
    #[error(
        "it is not signed, and corrections must be signed with one of the keys of [corrections] \
         keys ({0}): make it with `newsdedup correct --key-id ID` (or [corrections] sign_with)"
    )]
    Missing(String),
    #[error(
        "it is signed with key {0:?}, which is not one of [corrections] keys ({1}): an unknown \
         producer, or a key removed from the service"
    )]
    UnknownKey(String, String),
    #[error(
        "its signature does not match its content under key {0:?}: the record was altered, or \
         signed with another secret under that id"
    )]
    Wrong(String),
}

impl SigningKeys {
    /// The keys of `config`, read from their files.
    pub fn load(config: &CorrectionsConfig) -> Result<SigningKeys, KeyError> {
        let mut keys = BTreeMap::new();
        for k in &config.keys {
            let key = SigningKey::read(&k.id, &k.file)?;
            if keys.insert(k.id.clone(), key).is_some() {
                return Err(KeyError::Duplicate(k.id.clone()));
            }
        }
        Ok(SigningKeys { keys })
    }

    pub fn from_keys(keys: impl IntoIterator<Item = SigningKey>) -> SigningKeys {
        SigningKeys {
            keys: keys.into_iter().map(|k| (k.id.clone(), k)).collect(),
        }
    }

    /// No key: corrections are not checked.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The key `id`.
    pub fn get(&self, id: &str) -> Result<&SigningKey, KeyError> {
        self.keys
            .get(id)
            .ok_or_else(|| KeyError::Unknown(id.to_owned(), self.ids()))
    }

    fn ids(&self) -> String {
        self.keys.keys().cloned().collect::<Vec<_>>().join(", ")
    }

    /// Whether a record naming key `key_id`, with `signature` over `canonical`, may apply:
    /// always with no key; otherwise only signed by one of them. Ok(Some(id)): verified with
    /// that key.
    pub fn verify(
        &self,
        key_id: Option<&str>,
        signature: Option<&str>,
        canonical: &str,
    ) -> Result<Option<String>, SignatureError> {
        if self.keys.is_empty() {
            return Ok(None);
        }
        let (Some(id), Some(signature)) = (key_id, signature) else {
            return Err(SignatureError::Missing(self.ids()));
        };
        let key = self
            .keys
            .get(id)
            .ok_or_else(|| SignatureError::UnknownKey(id.to_owned(), self.ids()))?;
        let tag = unhex(signature).ok_or_else(|| SignatureError::Wrong(id.to_owned()))?;
        // Constant-time comparison (hmac's `verify_slice`).
        key.mac(canonical)
            .verify_slice(&tag)
            .map_err(|_| SignatureError::Wrong(id.to_owned()))?;
        Ok(Some(id.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_under_any_configured_key_and_nothing_else_does() {
        let old = SigningKey::new("old", &[1; 32]).unwrap();
        let new = SigningKey::new("new", &[2; 32]).unwrap();
        let keys = SigningKeys::from_keys([old.clone(), new.clone()]);
        let text = r#"{"kind":"release","id":"a"}"#;
        for key in [&old, &new] {
            let tag = key.sign(text);
            assert_eq!(tag.len(), 64);
            assert_eq!(
                keys.verify(Some(&key.id), Some(&tag), text),
                Ok(Some(key.id.clone()))
            );
        }
        let tag = new.sign(text);
        let wrong = |r| matches!(r, Err(SignatureError::Wrong(_)));
        assert!(wrong(keys.verify(Some("new"), Some(&tag), "{}")));
        assert!(wrong(keys.verify(Some("old"), Some(&tag), text)));
        assert!(wrong(keys.verify(Some("new"), Some("zz"), text)));
        let stranger = SigningKey::new("stranger", &[3; 32]).unwrap();
        assert!(matches!(
            keys.verify(Some("stranger"), Some(&stranger.sign(text)), text),
            Err(SignatureError::UnknownKey(..))
        ));
        let same_id_other_secret = SigningKey::new("new", &[9; 32]).unwrap();
        assert!(wrong(keys.verify(
            Some("new"),
            Some(&same_id_other_secret.sign(text)),
            text
        )));
        assert!(matches!(
            keys.verify(None, None, text),
            Err(SignatureError::Missing(_))
        ));
        // No key configured: nothing is checked.
        assert_eq!(SigningKeys::default().verify(None, None, text), Ok(None));
        assert!(SigningKey::new("short", &[1; 31]).is_none());
        assert!(
            !format!("{new:?}").contains("2, 2"),
            "the secret is never printed"
        );
    }
}
