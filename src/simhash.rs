//! 64-bit simhash (Charikar): each feature's 64-bit hash votes +weight for the bits where it has a 1
//! and -weight where it has a 0; bit i of the fingerprint is 1 where the vote is positive.
//!
//! Feature hash: XXH3-64 with seed 0 over the feature's UTF-8 bytes (`xxhash-rust` 0.8, the
//! XXH3 specification is frozen). Changing it changes every fingerprint, so it is part of the
//! fingerprint identity (`ALGORITHM`), and `feature_hash_is_stable` pins known values.

use std::fmt;
use std::str::FromStr;

/// Name and version of the fingerprint algorithm, recorded in every index.
pub const ALGORITHM: &str = "simhash64/xxh3-64-seed0/v1";

/// Number of 16-bit blocks a fingerprint is split into for the pigeonhole index.
pub const BLOCKS: usize = 4;

/// The largest Hamming distance the 4-block index is guaranteed to find (pigeonhole: 4 blocks,
/// at most 3 differing bits leave one block untouched).
pub const GUARANTEED_DISTANCE: u32 = BLOCKS as u32 - 1;

/// A 64-bit simhash fingerprint.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Fingerprint(pub u64);

impl Fingerprint {
    /// Hamming distance (popcount of the XOR).
    #[inline]
    pub fn distance(self, other: Fingerprint) -> u32 {
        (self.0 ^ other.0).count_ones()
    }

    /// The four 16-bit blocks, most significant first.
    #[inline]
    pub fn blocks(self) -> [u16; BLOCKS] {
        [
            (self.0 >> 48) as u16,
            (self.0 >> 32) as u16,
            (self.0 >> 16) as u16,
            self.0 as u16,
        ]
    }

    /// 16 lowercase hex digits.
    pub fn to_hex(self) -> String {
        format!("{:016x}", self.0)
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({:016x})", self.0)
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a fingerprint is 16 hex digits, got {0:?}")]
pub struct ParseFingerprintError(String);

impl FromStr for Fingerprint {
    type Err = ParseFingerprintError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.len() != 16 {
            return Err(ParseFingerprintError(s.to_owned()));
        }
        u64::from_str_radix(s, 16)
            .map(Fingerprint)
            .map_err(|_| ParseFingerprintError(s.to_owned()))
    }
}

/// The hash of one feature (a word).
#[inline]
pub fn feature_hash(feature: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(feature.as_bytes())
}

/// Accumulates weighted feature hashes into a fingerprint.
///
/// Weights are integers so that the sums — and therefore the fingerprint — do not depend on the
/// order features are added in (floating-point addition is not associative).
#[derive(Debug, Clone)]
pub struct SimhashAccumulator {
    /// Sum of the weights of the features whose hash has bit i set.
    set: [i64; 64],
    /// Sum of all weights. The vote for bit i is `set[i] - (total - set[i])`.
    total: i64,
}

impl Default for SimhashAccumulator {
    fn default() -> Self {
        SimhashAccumulator {
            set: [0; 64],
            total: 0,
        }
    }
}

#[inline(always)]
fn add_one(set: &mut [i64; 64], hash: u64, weight: i64) {
    // Branch- and multiply-free (a mask per lane) so the compiler vectorises the 64 lanes.
    for (i, slot) in set.iter_mut().enumerate() {
        *slot += weight & (((hash >> i) & 1) as i64).wrapping_neg();
    }
}

fn add_all_portable(set: &mut [i64; 64], features: &[(u64, i64)]) {
    for &(hash, weight) in features {
        add_one(set, hash, weight);
    }
}

/// The same loop compiled for AVX2 (4 lanes of i64 per instruction), chosen at run time.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn add_all_avx2(set: &mut [i64; 64], features: &[(u64, i64)]) {
    for &(hash, weight) in features {
        add_one(set, hash, weight);
    }
}

/// With AVX-512 a feature is 8 masked adds: the mask of lanes 8k..8k+7 is byte k of the hash
/// (bit j of byte k is bit 8k+j), so no bit has to be spread into a lane mask first.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn add_all_avx512(set: &mut [i64; 64], features: &[(u64, i64)]) {
    use core::arch::x86_64::{
        __m512i, _mm512_loadu_si512, _mm512_mask_add_epi64, _mm512_set1_epi64, _mm512_storeu_si512,
    };
    let mut acc = [_mm512_set1_epi64(0); 8];
    for (k, lanes) in acc.iter_mut().enumerate() {
        // SAFETY: `set` holds 64 i64 = 8 x 512 bits; unaligned loads are allowed.
        *lanes = unsafe { _mm512_loadu_si512(set.as_ptr().add(8 * k).cast::<__m512i>()) };
    }
    for &(hash, weight) in features {
        let w = _mm512_set1_epi64(weight);
        for (k, lanes) in acc.iter_mut().enumerate() {
            *lanes = _mm512_mask_add_epi64(*lanes, (hash >> (8 * k)) as u8, *lanes, w);
        }
    }
    for (k, lanes) in acc.iter().enumerate() {
        // SAFETY: as for the loads.
        unsafe { _mm512_storeu_si512(set.as_mut_ptr().add(8 * k).cast::<__m512i>(), *lanes) };
    }
}

impl SimhashAccumulator {
    #[inline]
    pub fn add(&mut self, hash: u64, weight: i64) {
        add_one(&mut self.set, hash, weight);
        self.total += weight;
    }

    /// Adds many features at once (uses AVX2 where the CPU has it; same result either way).
    pub fn add_all(&mut self, features: &[(u64, i64)]) {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                // SAFETY: the CPU supports AVX-512F (checked just above).
                unsafe { add_all_avx512(&mut self.set, features) };
                self.total += features.iter().map(|f| f.1).sum::<i64>();
                return;
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU supports AVX2 (checked just above).
                unsafe { add_all_avx2(&mut self.set, features) };
                self.total += features.iter().map(|f| f.1).sum::<i64>();
                return;
            }
        }
        add_all_portable(&mut self.set, features);
        self.total += features.iter().map(|f| f.1).sum::<i64>();
    }

    /// Bit i is 1 where the weighted vote is strictly positive.
    pub fn finish(&self) -> Fingerprint {
        let mut bits = 0u64;
        for (i, &set) in self.set.iter().enumerate() {
            if 2 * set - self.total > 0 {
                bits |= 1 << i;
            }
        }
        Fingerprint(bits)
    }

    /// The signed vote per bit (for explanations and tests).
    pub fn votes(&self) -> [i64; 64] {
        let mut v = [0; 64];
        for (slot, &set) in v.iter_mut().zip(self.set.iter()) {
            *slot = 2 * set - self.total;
        }
        v
    }
}

/// Fingerprint of a set of (hash, weight) features.
pub fn combine(features: impl IntoIterator<Item = (u64, i64)>) -> Fingerprint {
    let mut acc = SimhashAccumulator::default();
    for (hash, weight) in features {
        acc.add(hash, weight);
    }
    acc.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worked_example_two_words_six_bits() {
        // Word hashes 100101 (weight 4) and 101011 (weight 5): per-bit sums, most significant first,
        // are 9 -9 1 -1 1 9, so the fingerprint is 101011.
        let mut acc = SimhashAccumulator::default();
        acc.add(0b100101, 4);
        acc.add(0b101011, 5);
        let votes = acc.votes();
        let low6: Vec<i64> = (0..6).rev().map(|i| votes[i]).collect();
        assert_eq!(low6, [9, -9, 1, -1, 1, 9]);
        // The upper 58 bits are 0 in both hashes: their votes are -9, so they are 0.
        assert_eq!(acc.finish(), Fingerprint(0b101011));
    }

    #[test]
    fn worked_example_five_words_three_bits() {
        // Five words, 3-bit hashes, weights: each bit is a hyperplane vote.
        //   w1 110 x1, w2 011 x2, w3 001 x3, w4 100 x1, w5 011 x1
        //   bit2: +1 -2 -3 +1 -1 = -4 -> 0
        //   bit1: +1 +2 -3 -1 +1 =  0 -> 0 (not positive)
        //   bit0: -1 +2 +3 -1 +1 = +4 -> 1
        let fp = combine([(0b110, 1), (0b011, 2), (0b001, 3), (0b100, 1), (0b011, 1)]);
        assert_eq!(fp.0 & 0b111, 0b001);
    }

    #[test]
    fn add_all_equals_one_by_one() {
        let feats: Vec<(u64, i64)> = (0..300u64)
            .map(|i| (feature_hash(&i.to_string()), (i as i64 * 37) % 1000 + 1))
            .collect();
        let mut a = SimhashAccumulator::default();
        a.add_all(&feats);
        let mut b = SimhashAccumulator::default();
        let mut portable = [0i64; 64];
        add_all_portable(&mut portable, &feats);
        for &(h, w) in &feats {
            b.add(h, w);
        }
        assert_eq!(a.votes(), b.votes());
        assert_eq!(a.set, portable);
        // Each vector variant the CPU has, on its own (add_all picks only the widest).
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                let mut v = [0i64; 64];
                // SAFETY: AVX2 is present.
                unsafe { add_all_avx2(&mut v, &feats) };
                assert_eq!(v, portable);
            }
            if std::arch::is_x86_feature_detected!("avx512f") {
                let mut v = [0i64; 64];
                // SAFETY: AVX-512F is present.
                unsafe { add_all_avx512(&mut v, &feats) };
                assert_eq!(v, portable);
            }
        }
    }

    #[test]
    fn order_does_not_matter() {
        let feats: Vec<(u64, i64)> = (0..100u64)
            .map(|i| (feature_hash(&i.to_string()), (i as i64 % 7) + 1))
            .collect();
        let mut rev = feats.clone();
        rev.reverse();
        assert_eq!(combine(feats), combine(rev));
    }

    #[test]
    fn feature_hash_is_stable() {
        // Pinned: a change of hash function or seed must be a deliberate ALGORITHM bump.
        assert_eq!(feature_hash(""), 0x2d06800538d394c2);
        assert_eq!(feature_hash("新闻"), feature_hash("新闻"));
        assert_ne!(feature_hash("新闻"), feature_hash("新聞"));
    }

    #[test]
    fn distance_blocks_and_hex() {
        let a = Fingerprint(0x0123_4567_89ab_cdef);
        assert_eq!(a.blocks(), [0x0123, 0x4567, 0x89ab, 0xcdef]);
        assert_eq!(a.to_hex(), "0123456789abcdef");
        assert_eq!("0123456789abcdef".parse::<Fingerprint>().unwrap(), a);
        assert!("0123".parse::<Fingerprint>().is_err());
        assert!("0123456789abcdeg".parse::<Fingerprint>().is_err());
        assert_eq!(a.distance(Fingerprint(a.0 ^ 0b1011)), 3);
        assert_eq!(a.distance(a), 0);
    }

    #[test]
    fn empty_input_is_zero() {
        assert_eq!(combine(std::iter::empty()), Fingerprint(0));
    }
}
