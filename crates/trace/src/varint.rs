//! LEB128 varints and zigzag, the integer coding of every column.

#[inline]
pub fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[inline]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline]
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// A cursor over one column; every read is bounds-checked (input may be hostile).
pub struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Cursor { bytes, pos: 0 }
    }

    /// Most values of a column fit in one byte: that case is a load and a compare.
    #[inline(always)]
    pub fn varint(&mut self) -> Option<u64> {
        let b = *self.bytes.get(self.pos)?;
        if b < 0x80 {
            self.pos += 1;
            return Some(u64::from(b));
        }
        self.varint_long()
    }

    /// A varint of two bytes or more. Away from the column's end, one bounds check covers the
    /// longest varint (10 bytes).
    #[inline]
    fn varint_long(&mut self) -> Option<u64> {
        if let Some(window) = self.bytes.get(self.pos..self.pos + 10) {
            let mut v: u64 = 0;
            for (i, &b) in window.iter().enumerate() {
                if i == 9 && b > 1 {
                    return None;
                }
                v |= u64::from(b & 0x7f) << (7 * i);
                if b < 0x80 {
                    self.pos += i + 1;
                    return Some(v);
                }
            }
            return None;
        }
        self.varint_checked()
    }

    fn varint_checked(&mut self) -> Option<u64> {
        let mut v: u64 = 0;
        let mut shift = 0u32;
        loop {
            let b = *self.bytes.get(self.pos)?;
            self.pos += 1;
            if shift == 63 && b > 1 {
                return None;
            }
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Some(v);
            }
            shift += 7;
            if shift > 63 {
                return None;
            }
        }
    }

    #[inline]
    pub fn byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.bytes.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.pos >= self.bytes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_edges() {
        let values = [
            0,
            1,
            127,
            128,
            16383,
            16384,
            u32::MAX as u64,
            u64::MAX - 1,
            u64::MAX,
        ];
        let mut buf = Vec::new();
        for v in values {
            put(&mut buf, v);
        }
        let mut c = Cursor::new(&buf);
        for v in values {
            assert_eq!(c.varint(), Some(v));
        }
        assert!(c.is_empty());
        assert_eq!(c.varint(), None);
        for v in [0i64, 1, -1, i64::MAX, i64::MIN, 12345, -12345] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
    }

    #[test]
    fn overlong_varint_is_refused() {
        let buf = [0xffu8; 11];
        assert_eq!(Cursor::new(&buf).varint(), None);
    }
}
