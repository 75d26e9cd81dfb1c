//! Little-endian byte images of the loaded tables (`IdfTable`, `Lexicon`), written once and read
//! back at start-up instead of being rebuilt from the resource texts (see
//! `fingerprint::image`). Every read checks the length left, so a short or foreign image is an
//! error, never a panic.

/// Appends values to a byte buffer.
pub struct ImageWriter<'a>(pub &'a mut Vec<u8>);

impl ImageWriter<'_> {
    pub fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub fn f64(&mut self, v: f64) {
        self.u64(v.to_bits());
    }
    /// A length-prefixed byte string.
    pub fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }
}

/// Reads what [`ImageWriter`] wrote.
pub struct ImageReader<'a>(pub &'a [u8]);

/// Why an image cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("resource image: {0}")]
pub struct ImageError(pub &'static str);

impl<'a> ImageReader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], ImageError> {
        if self.0.len() < n {
            return Err(ImageError("truncated"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], ImageError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }
    pub fn u32(&mut self) -> Result<u32, ImageError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    pub fn u64(&mut self) -> Result<u64, ImageError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    pub fn f64(&mut self) -> Result<f64, ImageError> {
        Ok(f64::from_bits(self.u64()?))
    }
    /// A count of items of `size` bytes each, which must fit in what is left.
    pub fn count(&mut self, size: usize) -> Result<usize, ImageError> {
        let n = usize::try_from(self.u64()?).map_err(|_| ImageError("count out of range"))?;
        if n.checked_mul(size).is_none_or(|bytes| bytes > self.0.len()) {
            return Err(ImageError("count beyond the end"));
        }
        Ok(n)
    }
    /// A length-prefixed byte string.
    pub fn bytes(&mut self) -> Result<&'a [u8], ImageError> {
        let n = self.count(1)?;
        self.take(n)
    }
    /// True when everything was read.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
