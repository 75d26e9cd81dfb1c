//! The start-up image: the tables a `Fingerprinter` builds from its resource texts (jieba's
//! dictionary trie, the IDF table, the per-word feature tables), as bytes in one file that later
//! starts read instead of building them again: building takes ~0.1 s of CPU, reading ~20 ms.
//!
//! A file is named by a key over everything its bytes depend on: the fingerprint identity (the
//! resource texts' digests and the parameters), this program's version and the source of the code
//! that builds the tables, so a changed input or program never reads a stale image. The file ends
//! with a checksum of its bytes, every table is checked as it is read, and a file that fails any
//! check is ignored (and replaced): an image can only make start-up faster, never change a
//! fingerprint. Files are written under a temporary name and renamed, so concurrent starts and a
//! crash mid-write leave either a whole image or none.

use crate::text::image::{ImageError, ImageReader, ImageWriter};
use crate::text::lexicon::Lexicon;
use crate::text::weigh::IdfTable;
use jieba_rs::Jieba;
use std::path::{Path, PathBuf};

const MAGIC: &[u8] = b"newsdedup-start-image-1\n";

/// Images kept in a directory: the newest few, so that alternating configurations on one machine
/// do not rebuild each time, and old versions' images do not pile up.
const KEEP: usize = 3;

/// The source of the code whose output the image holds: a change to any of it changes the key.
const SOURCES: &[&str] = &[
    include_str!("image.rs"),
    include_str!("../text/image.rs"),
    include_str!("../text/lexicon.rs"),
    include_str!("../text/weigh.rs"),
    include_str!("../text/filter.rs"),
    include_str!("../text/clean.rs"),
    include_str!("../simhash.rs"),
    include_str!("../fingerprint.rs"),
    include_str!("identity.rs"),
    include_str!("../../vendor/jieba-rs/src/lib.rs"),
    include_str!("../../vendor/jieba-rs/src/trie.rs"),
    include_str!("../../vendor/jieba-rs/src/snapshot.rs"),
    include_str!("../../vendor/jieba-rs/src/automaton.rs"),
];

/// The `[image]` section of the configuration file.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ImageConfig {
    /// Write and read start-up images.
    pub enabled: bool,
    /// Where. None: `$XDG_CACHE_HOME/newsdedup`, else `$HOME/.cache/newsdedup`.
    pub dir: Option<PathBuf>,
}

impl Default for ImageConfig {
    fn default() -> Self {
        ImageConfig {
            enabled: true,
            dir: None,
        }
    }
}

/// The tables an image holds.
pub(super) struct Tables {
    pub jieba: Jieba,
    pub idf: IdfTable,
    pub lexicon: Lexicon,
}

/// How the tables of a `Fingerprinter` were made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageUse {
    /// Read from this image.
    Read(PathBuf),
    /// Built from the texts, and this image written for the next start.
    Written(PathBuf),
    /// Built from the texts; no image could be written there (why).
    NotWritten { path: PathBuf, error: String },
    /// Built from the texts; images are off.
    Off,
}

/// The image file for `key` in `dir`.
pub(super) fn path(dir: &Path, key: u64) -> PathBuf {
    dir.join(format!("fingerprinter-{key:016x}.img"))
}

/// The key of the tables made from `identity` (the fingerprint identity, serialized) by this
/// build of the program.
pub(super) fn key(identity: &[u8]) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(MAGIC);
    h.update(env!("CARGO_PKG_VERSION").as_bytes());
    for source in SOURCES {
        h.update(&(source.len() as u64).to_le_bytes());
        h.update(source.as_bytes());
    }
    h.update(identity);
    h.digest()
}

/// The tables in the image at `path` for `key`, or None if there is none or it fails a check.
pub(super) fn read(path: &Path, key: u64) -> Option<Tables> {
    let file = std::fs::File::open(path).ok()?;
    // SAFETY: image files are never modified in place (a new image is renamed over the old
    // name), so the mapped bytes stay as they are while they are read (a file truncated in place
    // by another program would stop this one with SIGBUS).
    let map = unsafe { memmap2::MmapOptions::new().populate().map(&file) }.ok()?;
    decode(&map, key).ok()
}

fn decode(bytes: &[u8], key: u64) -> Result<Tables, ImageError> {
    let body_len = bytes.len().checked_sub(8).ok_or(ImageError("truncated"))?;
    let (body, sum) = bytes.split_at(body_len);
    let sum = u64::from_le_bytes(sum.try_into().map_err(|_| ImageError("truncated"))?);
    if xxhash_rust::xxh3::xxh3_64(body) != sum {
        return Err(ImageError("checksum"));
    }
    let body = body
        .strip_prefix(MAGIC)
        .ok_or(ImageError("not a start-up image"))?;
    let mut r = ImageReader(body);
    if r.u64()? != key {
        return Err(ImageError("made from other resources"));
    }
    let jieba = Jieba::from_snapshot(r.bytes()?).map_err(|_| ImageError("dictionary snapshot"))?;
    let idf = IdfTable::read_image(&mut r)?;
    let lexicon = Lexicon::read_image(&mut r)?;
    if !r.is_empty() {
        return Err(ImageError("bytes after the end"));
    }
    Ok(Tables {
        jieba,
        idf,
        lexicon,
    })
}

/// The image bytes of `tables` for `key`; None if jieba cannot image its dictionary.
fn encode(tables: &Tables, key: u64) -> Option<Vec<u8>> {
    let mut snapshot = Vec::new();
    tables.jieba.write_snapshot(&mut snapshot)?;
    let mut out = Vec::with_capacity(snapshot.len() + (16 << 20));
    out.extend_from_slice(MAGIC);
    let mut w = ImageWriter(&mut out);
    w.u64(key);
    w.bytes(&snapshot);
    tables.idf.write_image(&mut w);
    tables.lexicon.write_image(&mut w);
    let sum = xxhash_rust::xxh3::xxh3_64(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    Some(out)
}

/// Writes the image of `tables` to `path` (atomically), then removes all but the newest [`KEEP`]
/// images of its directory.
pub(super) fn write(path: &Path, key: u64, tables: &Tables) -> std::io::Result<()> {
    let bytes = encode(tables, key)
        .ok_or_else(|| std::io::Error::other("the dictionary cannot be imaged"))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = dir.join(format!(
        ".fingerprinter-{key:016x}.{}.{nanos}.tmp",
        std::process::id()
    ));
    let written = std::fs::write(&tmp, &bytes).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    prune(dir);
    Ok(())
}

/// Removes all but the newest [`KEEP`] images of `dir` (best effort: another process may be
/// doing the same).
fn prune(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut images: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with("fingerprinter-") && name.ends_with(".img")
        })
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    images.sort_by_key(|image| std::cmp::Reverse(image.0));
    for (_, old) in images.into_iter().skip(KEEP) {
        let _ = std::fs::remove_file(old);
    }
}

/// Marks the image at `path` as just used, so that pruning keeps the images in use.
pub(super) fn touch(path: &Path) {
    if let Ok(file) = std::fs::File::options().append(true).open(path) {
        let _ = file.set_modified(std::time::SystemTime::now());
    }
}

/// The default image directory: `$XDG_CACHE_HOME/newsdedup`, else `$HOME/.cache/newsdedup`.
pub fn default_dir() -> Option<PathBuf> {
    let non_empty = |v: std::ffi::OsString| (!v.is_empty()).then(|| PathBuf::from(v));
    std::env::var_os("XDG_CACHE_HOME")
        .and_then(non_empty)
        .or_else(|| Some(std::env::var_os("HOME").and_then(non_empty)?.join(".cache")))
        .map(|d| d.join("newsdedup"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::filter::TokenFilter;

    fn tables() -> Tables {
        let dict = "中国 10 ns\n人民 8 n\n银行 5 n\n";
        let jieba = Jieba::with_dict(&mut dict.as_bytes()).unwrap();
        let idf = IdfTable::parse("中国 1.5\n银行 7.25\n").unwrap();
        let filter = TokenFilter::new(Default::default(), false, true, true);
        let lexicon = Lexicon::build(&jieba, dict, &filter, |h| idf.get_hashed(h).unwrap_or(3.0));
        Tables {
            jieba,
            idf,
            lexicon,
        }
    }

    #[test]
    fn an_image_reads_back_for_its_key_only_and_damage_is_refused() {
        let t = tables();
        let bytes = encode(&t, 42).unwrap();
        let back = decode(&bytes, 42).unwrap();
        assert_eq!(
            encode(&back, 42).unwrap(),
            bytes,
            "re-imaging changed the bytes"
        );
        assert_eq!(back.idf.get("银行"), Some(7.25));
        assert_eq!(back.lexicon.feature_count(), t.lexicon.feature_count());
        assert_eq!(
            decode(&bytes, 43).err(),
            Some(ImageError("made from other resources"))
        );
        let mut flipped = bytes.clone();
        flipped[MAGIC.len() + 20] ^= 1;
        assert_eq!(decode(&flipped, 42).err(), Some(ImageError("checksum")));
        assert!(decode(&bytes[..bytes.len() - 1], 42).is_err());
        assert!(decode(b"", 42).is_err());
    }

    #[test]
    fn a_directory_keeps_the_newest_images_and_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let t = tables();
        for key in 0..5u64 {
            write(&path(dir.path(), key), key, &t).unwrap();
            // Distinct modification times.
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            (2..5u64)
                .map(|k| format!("fingerprinter-{k:016x}.img"))
                .collect::<Vec<_>>()
        );
        assert!(read(&path(dir.path(), 4), 4).is_some());
        assert!(read(&path(dir.path(), 0), 0).is_none());
    }
}
