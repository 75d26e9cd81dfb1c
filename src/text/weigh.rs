//! TF-IDF weights. IDF comes from jieba's table (document frequencies of a large general corpus);
//! term frequency is sublinear (1 + ln tf) so that one word repeated many times cannot dominate
//! the fingerprint; words in the title weigh more.

use super::image::{ImageError, ImageReader, ImageWriter};
use crate::simhash::feature_hash;

/// Word -> IDF, keyed by the word's feature hash.
///
/// A purpose-built open-addressing table rather than a `HashMap`: jieba's table has ~270k words,
/// so lookups miss the CPU caches, and a `HashMap` takes two misses per lookup (control bytes, then
/// the bucket) over ~8 MB. Here a slot is 4 bytes — a 16-bit tag from the hash's top bits and the
/// IDF in thousandths — so the whole table is 2 MB, and `prefetch` lets an article's lookups miss in
/// parallel. Tag (16 bits) + slot index (19 bits) identify a word; an absent word hits a wrong
/// entry with probability ~1e-5 (it then gets that entry's IDF: deterministic, and harmless).
#[derive(Debug, Clone)]
pub struct IdfTable {
    /// Upper 16 bits: tag (never 0; 0 = empty slot). Lower 16 bits: IDF x 1000.
    slots: Vec<u32>,
    mask: usize,
    len: usize,
    median: f64,
}

/// IDF values are stored in thousandths in 16 bits.
const IDF_SCALE: f64 = 1000.0;

#[inline]
fn slot_tag(hash: u64) -> u32 {
    ((hash >> 48) as u32).max(1)
}

impl IdfTable {
    /// Parses `word idf` lines. Words are normalised (NFKC, lowercase) to match cleaned tokens;
    /// when two spellings fold together the first one wins. IDF values must be in 0..=65.
    pub fn parse(text: &str) -> Result<IdfTable, String> {
        let mut entries: Vec<(u64, f64)> = Vec::with_capacity(text.len() / 20);
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut parts = line.split_whitespace();
            let (Some(word), Some(value)) = (parts.next(), parts.next()) else {
                return Err(format!("line {}: expected `word idf`, got {line:?}", n + 1));
            };
            let value: f64 = value
                .parse()
                .map_err(|_| format!("line {}: idf {value:?} is not a number", n + 1))?;
            if !value.is_finite() || !(0.0..=65.0).contains(&value) {
                return Err(format!(
                    "line {}: idf {value} must be between 0 and 65",
                    n + 1
                ));
            }
            entries.push((
                feature_hash(&super::clean::normalize_width_case(word)),
                value,
            ));
        }
        if entries.is_empty() {
            return Err("the IDF table is empty".into());
        }
        // Load factor <= 1/2 keeps probe sequences short.
        let capacity = (entries.len() * 2).next_power_of_two();
        let mut table = IdfTable {
            slots: vec![0; capacity],
            mask: capacity - 1,
            len: 0,
            median: 0.0,
        };
        for &(hash, value) in &entries {
            table.insert(hash, (value * IDF_SCALE).round() as u32);
        }
        let mut values: Vec<f64> = entries.iter().map(|e| e.1).collect();
        let mid = values.len() / 2;
        let (_, median, _) = values.select_nth_unstable_by(mid, f64::total_cmp);
        table.median = *median;
        Ok(table)
    }

    fn insert(&mut self, hash: u64, idf_milli: u32) {
        let tag = slot_tag(hash);
        let mut i = hash as usize & self.mask;
        loop {
            let slot = self.slots[i];
            if slot == 0 {
                self.slots[i] = (tag << 16) | idf_milli.min(0xffff);
                self.len += 1;
                return;
            }
            if slot >> 16 == tag {
                return; // first spelling wins
            }
            i = (i + 1) & self.mask;
        }
    }

    pub fn median(&self) -> f64 {
        self.median
    }

    /// Appends the table's image to `w` (read back by [`IdfTable::read_image`]).
    pub fn write_image(&self, w: &mut ImageWriter<'_>) {
        w.u64(self.slots.len() as u64);
        for &slot in &self.slots {
            w.u32(slot);
        }
        w.u64(self.len as u64);
        w.f64(self.median);
    }

    /// The table `r` holds, as [`IdfTable::write_image`] wrote it.
    pub fn read_image(r: &mut ImageReader<'_>) -> Result<IdfTable, ImageError> {
        let n = r.count(4)?;
        if !n.is_power_of_two() {
            return Err(ImageError("IDF table size"));
        }
        let mut slots = Vec::with_capacity(n);
        let mut occupied = 0;
        for _ in 0..n {
            let slot = r.u32()?;
            occupied += usize::from(slot != 0);
            slots.push(slot);
        }
        let len = usize::try_from(r.u64()?).map_err(|_| ImageError("IDF table length"))?;
        let median = r.f64()?;
        // Lookups stop at an empty slot, so one must exist.
        if len != occupied || len >= n || !median.is_finite() {
            return Err(ImageError("IDF table counts"));
        }
        Ok(IdfTable {
            slots,
            mask: n - 1,
            len,
            median,
        })
    }

    pub fn get(&self, word: &str) -> Option<f64> {
        self.get_hashed(feature_hash(word))
    }

    /// Hints the CPU to start loading the slot of `hash` (call for all terms, then look up).
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        if let Some(slot) = self.slots.get(hash as usize & self.mask) {
            super::prefetch(slot);
        }
    }

    /// IDF of the word whose feature hash is `hash`.
    #[inline]
    pub fn get_hashed(&self, hash: u64) -> Option<f64> {
        let tag = slot_tag(hash);
        let mut i = hash as usize & self.mask;
        loop {
            let slot = self.slots[i];
            if slot == 0 {
                return None;
            }
            if slot >> 16 == tag {
                return Some(f64::from(slot & 0xffff) / IDF_SCALE);
            }
            i = (i + 1) & self.mask;
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Term weight: idf * (1 + ln tf), times `title_weight` if the word occurs in the title.
#[inline]
pub fn tfidf(tf: u32, idf: f64, in_title: bool, title_weight: f64) -> f64 {
    let tf_part = tf_factor(tf);
    let w = idf * tf_part;
    if in_title {
        w * title_weight
    } else {
        w
    }
}

/// `1 + ln(tf)` (tf of 0 counts as 1). Most terms occur a few times: those come from a table
/// filled with the very same expression, so the result is bit-identical, without a `ln` call.
#[inline]
pub fn tf_factor(tf: u32) -> f64 {
    const TABLED: usize = 64;
    static TABLE: std::sync::OnceLock<[f64; TABLED]> = std::sync::OnceLock::new();
    let tf = tf.max(1);
    match TABLE
        .get_or_init(|| std::array::from_fn(|i| 1.0 + (i.max(1) as f64).ln()))
        .get(tf as usize)
    {
        Some(&f) => f,
        None => 1.0 + (tf as f64).ln(),
    }
}

/// Weights are quantised to 1/1000 so that the simhash sums are exact integers (order-independent
/// and identical on every machine). Every kept word counts at least 1.
#[inline]
pub fn quantize(weight: f64) -> i64 {
    ((weight * 1000.0).round() as i64).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tf_factor_table_equals_the_formula() {
        for tf in 0..200u32 {
            let exact = 1.0 + (tf.max(1) as f64).ln();
            assert_eq!(tf_factor(tf).to_bits(), exact.to_bits(), "tf {tf}");
        }
    }

    #[test]
    fn parse_and_median() {
        let t = IdfTable::parse("甲 1.0\n乙 3.0\nＡＢ 2.0\n").unwrap();
        assert_eq!(t.get("甲"), Some(1.0));
        assert_eq!(t.get("ab"), Some(2.0));
        assert_eq!(t.get("丙"), None);
        assert_eq!(t.len(), 3);
        assert_eq!(t.median(), 2.0);
        assert!(IdfTable::parse("甲\n").is_err());
        assert!(IdfTable::parse("甲 x\n").is_err());
        assert!(IdfTable::parse("").is_err());
    }

    #[test]
    fn sublinear_tf_and_title() {
        assert_eq!(tfidf(1, 2.0, false, 3.0), 2.0);
        assert!((tfidf(10, 1.0, false, 1.0) - (1.0 + 10f64.ln())).abs() < 1e-12);
        assert_eq!(tfidf(1, 2.0, true, 3.0), 6.0);
        assert_eq!(quantize(0.0), 1);
        assert_eq!(quantize(1.2345), 1235);
    }
}
