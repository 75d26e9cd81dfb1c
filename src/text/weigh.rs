//! TF-IDF weights. IDF comes from jieba's table (document frequencies of a large general corpus);
//! term frequency is sublinear (1 + ln tf) so that one word repeated many times cannot dominate
//! the fingerprint; words in the title weigh more.

use rustc_hash::FxHashMap;

/// Word -> IDF, with the value used for words the table does not know.
#[derive(Debug, Clone)]
pub struct IdfTable {
    idf: FxHashMap<String, f64>,
    median: f64,
}

impl IdfTable {
    /// Parses `word idf` lines. Words are normalised (NFKC, lowercase) to match cleaned tokens;
    /// when two spellings fold together the first one wins.
    pub fn parse(text: &str) -> Result<IdfTable, String> {
        let mut idf = FxHashMap::default();
        idf.reserve(text.len() / 20);
        let mut values = Vec::new();
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
            if !value.is_finite() || value < 0.0 {
                return Err(format!(
                    "line {}: idf {value} must be finite and >= 0",
                    n + 1
                ));
            }
            let word = super::clean::normalize_width_case(word);
            idf.entry(word).or_insert(value);
            values.push(value);
        }
        if values.is_empty() {
            return Err("the IDF table is empty".into());
        }
        let mid = values.len() / 2;
        let (_, median, _) = values.select_nth_unstable_by(mid, f64::total_cmp);
        let median = *median;
        Ok(IdfTable { idf, median })
    }

    pub fn median(&self) -> f64 {
        self.median
    }

    pub fn get(&self, word: &str) -> Option<f64> {
        self.idf.get(word).copied()
    }

    pub fn len(&self) -> usize {
        self.idf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.idf.is_empty()
    }
}

/// Term weight: idf * (1 + ln tf), times `title_weight` if the word occurs in the title.
#[inline]
pub fn tfidf(tf: u32, idf: f64, in_title: bool, title_weight: f64) -> f64 {
    let tf_part = 1.0 + (tf.max(1) as f64).ln();
    let w = idf * tf_part;
    if in_title {
        w * title_weight
    } else {
        w
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
    fn parse_and_median() {
        let t = IdfTable::parse("甲 1.0\n乙 3.0\nＡＢ 2.0\n").unwrap();
        assert_eq!(t.get("甲"), Some(1.0));
        assert_eq!(t.get("ab"), Some(2.0));
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
