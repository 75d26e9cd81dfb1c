//! Text to features: `clean` (markup, width, boilerplate), `segment` (jieba words through the
//! token `filter`: token classes and stop words; `lexicon`: the filter's verdict per dictionary
//! word), `weigh` (TF-IDF with title weighting); `image`: byte images of the loaded tables.

pub mod clean;
pub mod filter;
pub mod image;
pub mod lexicon;
pub mod segment;
pub mod weigh;

/// The code point of a three-byte UTF-8 sequence (lead byte `E0..EF`, then two continuation
/// bytes). The hot loops decode CJK text by hand: `chars()` costs a branchy decode per character.
#[inline(always)]
pub(crate) fn decode_three_byte(b0: u8, b1: u8, b2: u8) -> u32 {
    (u32::from(b0 & 0x0f) << 12) | (u32::from(b1 & 0x3f) << 6) | u32::from(b2 & 0x3f)
}

/// True if a three-byte UTF-8 sequence starting `b0 b1` is a CJK unified ideograph of
/// U+4E00..U+9FFF (`E4 B8 80` to `E9 BF BF`): decided from two bytes, without decoding.
#[inline(always)]
pub(crate) fn is_common_cjk(b0: u8, b1: u8) -> bool {
    matches!(b0, 0xe5..=0xe9) || (b0 == 0xe4 && b1 >= 0xb8)
}

/// Hints the CPU to start loading `item` into cache (a table slot read a little later).
#[inline(always)]
pub(crate) fn prefetch<T>(item: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch has no observable effect, and the pointer is to a live value.
    unsafe {
        core::arch::x86_64::_mm_prefetch(
            (item as *const T).cast::<i8>(),
            core::arch::x86_64::_MM_HINT_T0,
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = item;
}
