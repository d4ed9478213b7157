//! Explicit little-endian binary writer and bounds-checked reader.
//! Every binary structure of the repository format is built from these primitives.

use crate::FormatError;

/// Appends little-endian primitives to a byte vector.
#[derive(Debug, Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// A writer with `cap` bytes preallocated.
    pub fn with_capacity(cap: usize) -> Self {
        Self {
            buf: Vec::with_capacity(cap),
        }
    }
    /// Raw bytes, no length prefix.
    pub fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }
    /// One byte.
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    /// u16, little-endian.
    pub fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// u32, little-endian.
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// i32, little-endian.
    pub fn i32(&mut self, v: i32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// u64, little-endian.
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// i64, little-endian.
    pub fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// A u32 length followed by the bytes; lengths over 4 GiB are an error.
    pub fn var_bytes(&mut self, b: &[u8]) -> Result<(), FormatError> {
        self.u32(len_u32(b.len())?);
        self.bytes(b);
        Ok(())
    }
    /// Structure magic (4 bytes) and version (u16).
    pub fn magic(&mut self, magic: &[u8; 4], version: u16) {
        self.bytes(magic);
        self.u16(version);
    }
    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }
    /// True when nothing has been written.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
    /// The finished buffer.
    pub fn finish(self) -> Vec<u8> {
        self.buf
    }
}

/// Converts a length to the u32 used on disk, refusing lengths that do not fit.
pub fn len_u32(len: usize) -> Result<u32, FormatError> {
    u32::try_from(len).map_err(|_| FormatError::TooLarge {
        what: "length",
        value: len as u64,
    })
}

/// Reads little-endian primitives from a byte slice; every read is bounds-checked.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    /// A reader over `buf`; `what` names the structure in error messages.
    pub fn new(buf: &'a [u8], what: &'static str) -> Self {
        Self { buf, pos: 0, what }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], FormatError> {
        // Not `ok_or(FormatError::…)`: that builds (and drops) the error on every read, 2-4%
        // of the processor time of loading and planning 100,000 entries.
        let Some(end) = self.pos.checked_add(n).filter(|&e| e <= self.buf.len()) else {
            return Err(FormatError::Truncated {
                what: self.what,
                offset: self.pos as u64,
                wanted: n as u64,
            });
        };
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    /// `N` raw bytes.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], FormatError> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    /// `n` raw bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], FormatError> {
        self.take(n)
    }
    /// One byte.
    pub fn u8(&mut self) -> Result<u8, FormatError> {
        Ok(self.array::<1>()?[0])
    }
    /// u16, little-endian.
    pub fn u16(&mut self) -> Result<u16, FormatError> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    /// u32, little-endian.
    pub fn u32(&mut self) -> Result<u32, FormatError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    /// i32, little-endian.
    pub fn i32(&mut self) -> Result<i32, FormatError> {
        Ok(i32::from_le_bytes(self.array()?))
    }
    /// u64, little-endian.
    pub fn u64(&mut self) -> Result<u64, FormatError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    /// i64, little-endian.
    pub fn i64(&mut self) -> Result<i64, FormatError> {
        Ok(i64::from_le_bytes(self.array()?))
    }
    /// A u32 length followed by that many bytes.
    pub fn var_bytes(&mut self) -> Result<&'a [u8], FormatError> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    /// A u32 element count, checked against the bytes left so that a corrupt count cannot
    /// make the caller allocate more than the input could possibly describe.
    pub fn count(&mut self, min_elem_size: usize) -> Result<usize, FormatError> {
        let n = self.u32()? as usize;
        let need = n.saturating_mul(min_elem_size.max(1));
        if need > self.remaining() {
            return Err(FormatError::Corrupt {
                what: self.what,
                detail: format!("count {n} exceeds the {} bytes left", self.remaining()),
            });
        }
        Ok(n)
    }
    /// Checks the structure magic and returns the version, refusing unknown versions.
    pub fn magic(&mut self, magic: &[u8; 4], max_version: u16) -> Result<u16, FormatError> {
        let m = self.array::<4>()?;
        if &m != magic {
            return Err(FormatError::BadMagic {
                what: self.what,
                expected: *magic,
                found: m,
            });
        }
        let v = self.u16()?;
        if v == 0 {
            return Err(FormatError::Corrupt {
                what: self.what,
                detail: "format version 0".into(),
            });
        }
        if v > max_version {
            return Err(FormatError::UnsupportedVersion {
                what: self.what,
                version: v,
            });
        }
        Ok(v)
    }
    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    /// Current offset.
    pub fn position(&self) -> usize {
        self.pos
    }
    /// Fails unless every byte was consumed.
    pub fn finish(self) -> Result<(), FormatError> {
        if self.pos != self.buf.len() {
            return Err(FormatError::Corrupt {
                what: self.what,
                detail: format!("{} trailing bytes", self.buf.len() - self.pos),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primitives_round_trip_little_endian() {
        let mut w = Writer::default();
        w.u8(7);
        w.u16(0x0102);
        w.u32(0x0304_0506);
        w.u64(u64::MAX - 1);
        w.i64(-5);
        w.i32(-3);
        w.var_bytes(b"abc").unwrap();
        let b = w.finish();
        assert_eq!(&b[1..3], &[0x02, 0x01]);
        let mut r = Reader::new(&b, "test");
        assert_eq!(r.u8().unwrap(), 7);
        assert_eq!(r.u16().unwrap(), 0x0102);
        assert_eq!(r.u32().unwrap(), 0x0304_0506);
        assert_eq!(r.u64().unwrap(), u64::MAX - 1);
        assert_eq!(r.i64().unwrap(), -5);
        assert_eq!(r.i32().unwrap(), -3);
        assert_eq!(r.var_bytes().unwrap(), b"abc");
        r.finish().unwrap();
    }

    #[test]
    fn truncation_and_huge_counts_are_errors() {
        let mut r = Reader::new(&[1, 2], "test");
        assert!(matches!(r.u32(), Err(FormatError::Truncated { .. })));
        let b = u32::MAX.to_le_bytes();
        let mut r = Reader::new(&b, "test");
        assert!(matches!(r.count(8), Err(FormatError::Corrupt { .. })));
    }
}
