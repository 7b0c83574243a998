//! The decoder as it was before the fast paths (commit 8d87fa5), kept verbatim as an
//! oracle: the tests check that the current one returns the same result and bytes on
//! every input, damaged or not.

use wring_lzo::Error;

/// Shortest zero run the `lzo-rle` extension encodes (`MIN_ZERO_RUN_LENGTH`).
const MIN_ZERO_RUN: usize = 4;

/// Decompresses one raw LZO1X stream from `src` into `dst` and returns the
/// number of bytes produced.
///
/// Never reads past `src`, never writes past `dst`, never panics. Bytes of
/// `dst` after the returned length may have been overwritten (fast copies
/// write whole words), as in the kernel. Errors mirror the kernel's return
/// codes: [`Error::OutputOverrun`], [`Error::InputOverrun`],
/// [`Error::LookbehindOverrun`], [`Error::InputNotConsumed`], and
/// [`Error::Corrupt`] for `LZO_E_ERROR`.
pub fn decompress(src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
    Decoder {
        src,
        dst,
        ip: 0,
        op: 0,
    }
    .run()
}

/// What a `0001HLLL` instruction turned out to be.
enum Far {
    /// A match: distance, length, literals to copy after it.
    Copy(usize, usize, usize),
    /// `lzo-rle` zero run: length, literals after it.
    Zeros(usize, usize),
    /// The end-of-stream marker.
    End,
}

struct Decoder<'a> {
    src: &'a [u8],
    dst: &'a mut [u8],
    ip: usize,
    op: usize,
}

impl Decoder<'_> {
    fn run(mut self) -> Result<usize, Error> {
        let version = self.header()?;
        let mut state = self.first_literals()?;
        loop {
            let t = self.byte()?;
            let (dist, len, next) = if t >= 64 {
                // 1LLDDDSS / 01LDDDSS: 3..8 bytes within 2 KiB.
                let h = self.byte()?;
                (1 + ((t >> 2) & 7) + (h << 3), (t >> 5) + 1, t & 3)
            } else if t >= 32 {
                // 001LLLLL: within 16 KiB.
                let len = self.length(t & 31, 31)? + 2;
                let v = self.le16()?;
                (1 + (v >> 2), len, v & 3)
            } else if t >= 16 {
                match self.far(t, version)? {
                    Far::Copy(dist, len, next) => (dist, len, next),
                    Far::Zeros(len, next) => {
                        self.zeros(len)?;
                        self.literals(next)?;
                        state = next;
                        continue;
                    }
                    Far::End => return self.finish(),
                }
            } else if state == 0 {
                // 0000LLLL after a match without trailing literals: a literal run.
                let len = self.length(t, 15)? + 3;
                self.literals(len)?;
                state = 4;
                continue;
            } else {
                // 0000DDSS: a 2-byte match within 1 KiB after 1..3 literals,
                // a 3-byte match 2..3 KiB back after a longer literal run.
                let h = self.byte()?;
                let (base, len) = if state == 4 { (2049, 3) } else { (1, 2) };
                (base + (t >> 2) + (h << 2), len, t & 3)
            };
            self.copy_match(dist, len)?;
            self.literals(next)?;
            state = next;
        }
    }

    /// Reads the optional bitstream version (first byte 17 in a stream of at
    /// least 5 bytes) and returns it, 0 when absent.
    fn header(&mut self) -> Result<usize, Error> {
        match self.src {
            [] | [_] | [_, _] => Err(Error::InputOverrun),
            [17, v, _, _, _, ..] => {
                self.ip = 2;
                Ok(usize::from(*v))
            }
            _ => Ok(0),
        }
    }

    /// The first instruction may be a bare literal run (bytes 18..=255).
    /// Returns the decoder state after it: 0 (none), 1..=3, or 4.
    fn first_literals(&mut self) -> Result<usize, Error> {
        let t = usize::from(self.src[self.ip]);
        if t <= 17 {
            return Ok(0);
        }
        self.ip += 1;
        let t = t - 17;
        self.literals(t)?;
        Ok(t.min(4))
    }

    /// A `0001HLLL` instruction: far match, zero run, or end of stream.
    fn far(&mut self, t: usize, version: usize) -> Result<Far, Error> {
        let v = self.peek_le16()?;
        if version != 0 && (t & 0xf8) == 0x18 && (v & 0xfffc) == 0xfffc {
            let x = *self.src.get(self.ip + 2).ok_or(Error::InputOverrun)?;
            self.ip += 3;
            let len = (usize::from(x) << 3 | (t & 7)) + MIN_ZERO_RUN;
            return Ok(Far::Zeros(len, v & 3));
        }
        let len = self.length(t & 7, 7)? + 2;
        let v = self.le16()?;
        let dist = ((t & 8) << 11) + (v >> 2);
        if dist == 0 {
            return if len == 3 {
                Ok(Far::End)
            } else {
                Err(Error::Corrupt("end marker with a bad length"))
            };
        }
        Ok(Far::Copy(dist + 0x4000, len, v & 3))
    }

    /// After the end marker: all input must have been used.
    fn finish(self) -> Result<usize, Error> {
        if self.ip == self.src.len() {
            Ok(self.op)
        } else {
            Err(Error::InputNotConsumed)
        }
    }

    #[inline(always)]
    fn byte(&mut self) -> Result<usize, Error> {
        let b = *self.src.get(self.ip).ok_or(Error::InputOverrun)?;
        self.ip += 1;
        Ok(usize::from(b))
    }

    #[inline(always)]
    fn peek_le16(&self) -> Result<usize, Error> {
        match self.src.get(self.ip..self.ip + 2) {
            Some(&[a, b]) => Ok(usize::from(u16::from_le_bytes([a, b]))),
            _ => Err(Error::InputOverrun),
        }
    }

    #[inline(always)]
    fn le16(&mut self) -> Result<usize, Error> {
        let v = self.peek_le16()?;
        self.ip += 2;
        Ok(v)
    }

    /// A length field: `bits` if non-zero, else `max` plus 255 per zero byte
    /// plus the first non-zero byte.
    #[inline(always)]
    fn length(&mut self, bits: usize, max: usize) -> Result<usize, Error> {
        if bits != 0 {
            return Ok(bits);
        }
        let rest = self.src.get(self.ip..).unwrap_or_default();
        let zeros = rest
            .iter()
            .position(|&b| b != 0)
            .ok_or(Error::InputOverrun)?;
        let last = usize::from(rest[zeros]);
        self.ip += zeros + 1;
        zeros
            .checked_mul(255)
            .and_then(|z| z.checked_add(max + last))
            .ok_or(Error::Corrupt("length field overflows"))
    }

    /// Copies `n` literal bytes from the input to the output.
    #[inline(always)]
    fn literals(&mut self, n: usize) -> Result<(), Error> {
        let (ip, op) = (self.ip, self.op);
        if ip + 16 <= self.src.len() && op + 16 <= self.dst.len() && n <= 16 {
            // Short run with room on both sides: one fixed-size copy.
            let mut w = [0u8; 16];
            w.copy_from_slice(&self.src[ip..ip + 16]);
            self.dst[op..op + 16].copy_from_slice(&w);
        } else {
            let from = self.src.get(ip..ip + n).ok_or(Error::InputOverrun)?;
            let to = self.dst.get_mut(op..op + n).ok_or(Error::OutputOverrun)?;
            to.copy_from_slice(from);
        }
        self.ip += n;
        self.op += n;
        Ok(())
    }

    /// Writes an `lzo-rle` run of `n` zero bytes.
    fn zeros(&mut self, n: usize) -> Result<(), Error> {
        let to = self
            .dst
            .get_mut(self.op..self.op + n)
            .ok_or(Error::OutputOverrun)?;
        to.fill(0);
        self.op += n;
        Ok(())
    }

    /// Copies `len` bytes from `dist` bytes back in the output; the ranges
    /// may overlap (a repeating pattern).
    #[inline(always)]
    fn copy_match(&mut self, dist: usize, len: usize) -> Result<(), Error> {
        let op = self.op;
        if dist > op {
            return Err(Error::LookbehindOverrun);
        }
        if len > self.dst.len() - op {
            return Err(Error::OutputOverrun);
        }
        let from = op - dist;
        if dist >= 8 && op + len + 8 <= self.dst.len() {
            copy_words(self.dst, from, op, len);
        } else if dist >= len {
            self.dst.copy_within(from..from + len, op);
        } else if dist == 1 {
            let b = self.dst[from];
            self.dst[op..op + len].fill(b);
        } else {
            for i in op..op + len {
                self.dst[i] = self.dst[i - dist];
            }
        }
        self.op += len;
        Ok(())
    }
}

/// Copies `len` bytes from `from` to `to > from + 7` in 8-byte words, writing
/// up to 7 bytes past `to + len` (the caller guarantees the room). Each word
/// is read after the one before it is written, so overlap repeats correctly.
#[inline(always)]
fn copy_words(buf: &mut [u8], mut from: usize, mut to: usize, len: usize) {
    let end = to + len;
    while to < end {
        let mut w = [0u8; 8];
        w.copy_from_slice(&buf[from..from + 8]);
        buf[to..to + 8].copy_from_slice(&w);
        from += 8;
        to += 8;
    }
}
