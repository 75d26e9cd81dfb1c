//! [newsdedup addition] A byte image of a loaded dictionary, so that a process can start without
//! parsing the dictionary text and building the trie again (most of newsdedup's start-up).
//!
//! The image holds the records, tags, totals and the trie's two tables exactly as they are in
//! memory, little-endian, behind a magic string; [`Jieba::from_snapshot`] checks every length and
//! every structural invariant it relies on (table sizes, ids in range), so a truncated or foreign
//! image is an error, never a panic or a wrong segmenter. A custom HMM model is not part of it.

use crate::automaton::Automaton;
use crate::errors::Error;
use crate::trie::CharTrie;
use crate::{Jieba, Record};
use rustc_hash::FxHashMap;

const MAGIC: &[u8; 12] = b"jieba-snap-2";

/// Appends little-endian values to a byte buffer.
pub(crate) struct Writer<'a>(pub(crate) &'a mut Vec<u8>);

impl Writer<'_> {
    pub(crate) fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn f64(&mut self, v: f64) {
        self.u64(v.to_bits());
    }
    pub(crate) fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }
}

/// Reads what [`Writer`] wrote; every read checks the length left.
pub(crate) struct Reader<'a>(pub(crate) &'a [u8]);

fn corrupt(what: &str) -> Error {
    Error::InvalidDictEntry(format!("dictionary snapshot: {what}"))
}

impl<'a> Reader<'a> {
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        if self.0.len() < n {
            return Err(corrupt("truncated"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }
    pub(crate) fn u32(&mut self) -> Result<u32, Error> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    pub(crate) fn i32(&mut self) -> Result<i32, Error> {
        Ok(i32::from_le_bytes(self.array()?))
    }
    pub(crate) fn u64(&mut self) -> Result<u64, Error> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    pub(crate) fn f64(&mut self) -> Result<f64, Error> {
        Ok(f64::from_bits(self.u64()?))
    }
    /// A count of items of `size` bytes each that must fit in what is left.
    pub(crate) fn count(&mut self, size: usize) -> Result<usize, Error> {
        let n = usize::try_from(self.u64()?).map_err(|_| corrupt("count out of range"))?;
        if n.checked_mul(size).is_none_or(|bytes| bytes > self.0.len()) {
            return Err(corrupt("count beyond the end"));
        }
        Ok(n)
    }
    pub(crate) fn bytes(&mut self) -> Result<&'a [u8], Error> {
        let n = self.count(1)?;
        self.take(n)
    }
}

impl Jieba {
    /// [newsdedup addition] Appends this dictionary's image to `out` (see the module
    /// documentation). `None` when it cannot be imaged: a custom HMM model is set.
    pub fn write_snapshot(&self, out: &mut Vec<u8>) -> Option<()> {
        if self.hmm_model.is_some() {
            return None;
        }
        out.extend_from_slice(MAGIC);
        let mut w = Writer(out);
        w.u64(self.records.len() as u64);
        for (record, log_freq) in self.records.iter().zip(&self.log_freqs) {
            w.u64(record.freq as u64);
            w.u32(record.tag);
            w.f64(*log_freq);
        }
        w.u64(self.tags.len() as u64);
        for tag in &self.tags {
            w.bytes(tag.as_bytes());
        }
        w.u64(self.total as u64);
        w.f64(self.log_total);
        self.trie.write_snapshot(&mut w);
        match &self.automaton {
            Some(ac) => {
                w.u32(1);
                ac.write_snapshot(&mut w);
            }
            None => w.u32(0),
        }
        Some(())
    }

    /// [newsdedup addition] The dictionary `bytes` holds (written by
    /// [`write_snapshot`](Self::write_snapshot)), segmenting exactly as the one imaged.
    pub fn from_snapshot(bytes: &[u8]) -> Result<Jieba, Error> {
        let Some(rest) = bytes.strip_prefix(MAGIC) else {
            return Err(corrupt("not a dictionary snapshot"));
        };
        let mut r = Reader(rest);
        let n = r.count(20)?;
        let mut records = Vec::with_capacity(n);
        let mut log_freqs = Vec::with_capacity(n);
        for _ in 0..n {
            let freq = usize::try_from(r.u64()?).map_err(|_| corrupt("frequency out of range"))?;
            let tag = r.u32()?;
            records.push(Record { freq, tag });
            log_freqs.push(r.f64()?);
        }
        let n = r.count(8)?;
        let mut tags: Vec<Box<str>> = Vec::with_capacity(n);
        let mut tag_ids = FxHashMap::default();
        for id in 0..n {
            let tag = std::str::from_utf8(r.bytes()?).map_err(|_| corrupt("tag is not UTF-8"))?;
            tag_ids.insert(Box::from(tag), id as u32);
            tags.push(Box::from(tag));
        }
        if records.iter().any(|r| r.tag as usize >= tags.len()) {
            return Err(corrupt("record names an unknown tag"));
        }
        let total = usize::try_from(r.u64()?).map_err(|_| corrupt("total out of range"))?;
        let log_total = r.f64()?;
        let trie = CharTrie::read_snapshot(&mut r, records.len())?;
        let automaton = match r.u32()? {
            0 => None,
            1 => Some(Box::new(Automaton::read_snapshot(&mut r, &log_freqs)?)),
            _ => return Err(corrupt("automaton flag")),
        };
        if !r.0.is_empty() {
            return Err(corrupt("bytes after the end"));
        }
        Ok(Jieba {
            records,
            log_freqs,
            tags,
            tag_ids,
            trie,
            want_automaton: automaton.is_some(),
            automaton,
            total,
            log_total,
            hmm_model: None,
        })
    }
}
