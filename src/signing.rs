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
    #[error(
        "the correction key {id:?} in {} can be read or written by other users (mode {mode:o}): \
         whoever reads it can sign corrections; make it the service's own: chmod 600 (or 640 \
         with a group of the service's), or defaultMode 0400 for a Kubernetes Secret",
        path.display()
    )]
    OpenToOthers {
        id: String,
        path: PathBuf,
        mode: u32,
    },
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
        let read_error = |source| KeyError::Read {
            id: id.to_owned(),
            path: path.to_owned(),
            source,
        };
        let mut file = std::fs::File::open(path).map_err(read_error)?;
        // The mode of the file read (a symbolic link, as a Kubernetes Secret's files are, is
        // followed), not of a path that could be swapped after the check.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = file.metadata().map_err(read_error)?.permissions().mode();
            if mode & 0o007 != 0 {
                return Err(KeyError::OpenToOthers {
                    id: id.to_owned(),
                    path: path.to_owned(),
                    mode: mode & 0o7777,
                });
            }
        }
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut file, &mut bytes).map_err(read_error)?;
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

/// The bytes of a tag in its one written form, `hex`'s: two lowercase hex digits a byte (no
/// capitals, no sign), so one correction has one signature text.
fn unhex(s: &str) -> Option<Vec<u8>> {
    let digit = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    };
    s.as_bytes()
        .chunks(2)
        .map(|pair| match pair {
            [high, low] => Some(digit(*high)? << 4 | digit(*low)?),
            _ => None,
        })
        .collect()
}

/// The keys a correction may be signed with.
#[derive(Debug, Clone, Default)]
pub struct SigningKeys {
    keys: BTreeMap<String, SigningKey>,
}

/// Why a correction's signature is not accepted. The texts go to the DLQ, which whoever
/// writes to the corrections topic may read: they name no key id (the configured ones are in
/// the service's configuration, the record's own in the record).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SignatureError {
    #[error(
        "it is not signed, and corrections must be signed with one of the keys of [corrections] \
         keys: make it with `newsdedup correct --key-id ID` (or [corrections] sign_with)"
    )]
    Missing,
    #[error(
        "its key_id is not one of [corrections] keys: an unknown producer, or a key removed \
         from the service"
    )]
    UnknownKey,
    #[error(
        "its signature does not match its content under its key_id: the record was altered, or \
         signed with another secret under that id"
    )]
    Wrong,
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
            return Err(SignatureError::Missing);
        };
        let key = self.keys.get(id).ok_or(SignatureError::UnknownKey)?;
        let tag = unhex(signature).ok_or(SignatureError::Wrong)?;
        // Constant-time comparison (hmac's `verify_slice`, which also refuses a tag of another
        // length).
        key.mac(canonical)
            .verify_slice(&tag)
            .map_err(|_| SignatureError::Wrong)?;
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
        let wrong = |r| matches!(r, Err(SignatureError::Wrong));
        assert!(wrong(keys.verify(Some("new"), Some(&tag), "{}")));
        assert!(wrong(keys.verify(Some("old"), Some(&tag), text)));
        assert!(wrong(keys.verify(Some("new"), Some("zz"), text)));
        // One text per signature: capitals, a sign or a cut tag are not it.
        assert!(wrong(keys.verify(
            Some("new"),
            Some(&tag.to_uppercase()),
            text
        )));
        assert!(wrong(keys.verify(
            Some("new"),
            Some(&format!("+{}", &tag[1..])),
            text
        )));
        assert!(wrong(keys.verify(Some("new"), Some(&tag[..62]), text)));
        assert!(wrong(keys.verify(
            Some("new"),
            Some(&format!("{tag}00")),
            text
        )));
        let stranger = SigningKey::new("stranger", &[3; 32]).unwrap();
        assert!(matches!(
            keys.verify(Some("stranger"), Some(&stranger.sign(text)), text),
            Err(SignatureError::UnknownKey)
        ));
        let same_id_other_secret = SigningKey::new("new", &[9; 32]).unwrap();
        assert!(wrong(keys.verify(
            Some("new"),
            Some(&same_id_other_secret.sign(text)),
            text
        )));
        assert!(matches!(
            keys.verify(None, None, text),
            Err(SignatureError::Missing)
        ));
        // No key configured: nothing is checked.
        assert_eq!(SigningKeys::default().verify(None, None, text), Ok(None));
        assert!(SigningKey::new("short", &[1; 31]).is_none());
        assert!(
            !format!("{new:?}").contains("2, 2"),
            "the secret is never printed"
        );
    }

    /// A key file other users can read or write is refused (whoever reads it can sign), one
    /// only the owner (or its group) can read is accepted.
    #[cfg(unix)]
    #[test]
    fn a_key_file_open_to_other_users_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, [b'k'; 40]).unwrap();
        for (mode, accepted) in [
            (0o600, true),
            (0o640, true),
            (0o400, true),
            (0o644, false),
            (0o602, false),
        ] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let read = SigningKey::read("k", &path);
            assert_eq!(read.is_ok(), accepted, "mode {mode:o}: {read:?}");
            if !accepted {
                let message = read.unwrap_err().to_string();
                assert!(message.contains("chmod 600"), "{message}");
            }
        }
    }

    /// What goes to the DLQ names no key id, configured or the record's.
    #[test]
    fn a_refusal_names_no_key() {
        let keys = SigningKeys::from_keys([SigningKey::new("secret-id", &[1; 32]).unwrap()]);
        for e in [
            keys.verify(None, None, "{}"),
            keys.verify(Some("other-id"), Some("00"), "{}"),
            keys.verify(Some("secret-id"), Some("00"), "{}"),
        ] {
            let message = e.unwrap_err().to_string();
            assert!(
                !message.contains("secret-id") && !message.contains("other-id"),
                "{message}"
            );
        }
    }
}
