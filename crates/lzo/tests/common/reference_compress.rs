//! The compressor as it was before the speed work (commit 7f31ff8), kept
//! verbatim (bar its imports) as a baseline: the benchmark reports the
//! current one's speed and ratio against it.

#![allow(dead_code)]

use wring_lzo::Error;

/// log2 of the number of dictionary slots (the kernel's `D_BITS`).
const D_BITS: u32 = 13;
const D_SIZE: usize = 1 << D_BITS;

const M2_MAX_LEN: usize = 8;
const M3_MAX_LEN: usize = 33;
const M4_MAX_LEN: usize = 9;
const M2_MAX_OFFSET: usize = 0x0800;
const M3_MAX_OFFSET: usize = 0x4000;
const M4_MAX_OFFSET: usize = 0xbfff;
const M3_MARKER: u8 = 32;
const M4_MARKER: u8 = 16;

/// Inputs this short are written as one literal run (the kernel uses
/// `M2_MAX_LEN + 5`; a little more leaves room for the search margin).
const MIN_SEARCH_INPUT: usize = 20;
/// The match search stops this many bytes before the end of the input, so
/// the 4-byte probe never needs a length check.
const SEARCH_MARGIN: usize = 12;
/// The dictionary holds 16-bit offsets into a block of at most this many
/// bytes (48 KiB, as in the kernel), so every match found is within reach.
const BLOCK: usize = M4_MAX_OFFSET + 1;

/// The compressor's dictionary: a hash of 4 input bytes -> the last offset
/// (within the current block) seen with that hash. Owned by a workspace and
/// reused, so a call allocates nothing; it is cleared at the start of every
/// block, so the output depends only on the input.
pub struct CompressState {
    table: Box<[u16; D_SIZE]>,
}

impl CompressState {
    /// Memory held by one state (the dictionary), in bytes: 16 KiB, the
    /// kernel's `LZO1X_1_MEM_COMPRESS`.
    pub const BYTES: usize = D_SIZE * std::mem::size_of::<u16>();

    /// A fresh dictionary.
    pub fn new() -> Self {
        CompressState {
            table: Box::new([0; D_SIZE]),
        }
    }
}

impl Default for CompressState {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for CompressState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompressState").finish_non_exhaustive()
    }
}

/// Compresses `src` into `dst` as one LZO1X stream and returns its length.
///
/// Mirrors the kernel's `lzo1x_1_compress` (same format, same kind of
/// search, not byte-identical output). Fails with [`Error::OutputOverrun`]
/// (never panics) when `dst` is too small; a `dst` of
/// [`crate::worst_compress`]`(src.len())` bytes always suffices. Up to 15
/// bytes of `dst` past the returned length may be overwritten (short literal
/// runs are copied as 16-byte blocks when there is room).
pub fn compress(src: &[u8], dst: &mut [u8], state: &mut CompressState) -> Result<usize, Error> {
    let mut out = Out { buf: dst, pos: 0 };
    let tail = if src.len() > MIN_SEARCH_INPUT {
        find_matches(src, &mut out, state)?
    } else {
        0
    };
    out.literals(src, tail, src.len())?;
    out.end_marker()?;
    Ok(out.pos)
}

/// Finds and writes matches block by block; returns where the trailing, not
/// yet written literals start.
fn find_matches(src: &[u8], out: &mut Out, state: &mut CompressState) -> Result<usize, Error> {
    let limit = src.len() - SEARCH_MARGIN;
    let mut cursor = Cursor { lit: 0, ip: 1 };
    let mut start = 0;
    while cursor.ip < limit {
        state.table.fill(0);
        let end = limit.min(start + BLOCK);
        search_block(src, start, end, &mut cursor, &mut state.table, out)?;
        // The next block starts where this search stopped; its first byte
        // is not probed, since a cleared slot points there.
        start = cursor.ip;
        cursor.ip += 1;
    }
    Ok(cursor.lit)
}

/// Where the search stands: the pending literals start at `lit`, the next
/// probe is at `ip`.
struct Cursor {
    lit: usize,
    ip: usize,
}

/// The hot loop: probes positions `start < ip < end` and writes each match
/// found with the literals before it. Dictionary entries are offsets from
/// `start`, so every candidate lies in `start..ip` and within reach.
#[inline(always)]
fn search_block(
    src: &[u8],
    start: usize,
    end: usize,
    cursor: &mut Cursor,
    table: &mut [u16; D_SIZE],
    out: &mut Out,
) -> Result<(), Error> {
    let Cursor { mut lit, mut ip } = *cursor;
    while ip < end {
        let cur = read_u32(src, ip);
        let slot = hash(cur);
        let cand = start + usize::from(table[slot]);
        table[slot] = (ip - start) as u16;
        if read_u32(src, cand) != cur {
            // Skip faster the longer we go without a match, like the kernel.
            ip += 1 + ((ip - lit) >> 5);
            continue;
        }
        let dist = ip - cand;
        let stop = match_end(src, ip + 4, dist);
        out.literals(src, lit, ip)?;
        out.match_(dist, stop - ip)?;
        lit = stop;
        ip = stop;
    }
    *cursor = Cursor { lit, ip };
    Ok(())
}

/// Multiplicative hash of 4 bytes into a dictionary slot.
#[inline(always)]
fn hash(v: u32) -> usize {
    (v.wrapping_mul(0x1824_429d) >> (32 - D_BITS)) as usize
}

#[inline(always)]
fn read_u32(s: &[u8], i: usize) -> u32 {
    let b = &s[i..i + 4];
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

#[inline(always)]
fn read_u64(s: &[u8], i: usize) -> u64 {
    let b = &s[i..i + 8];
    u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
}

/// Extends a match whose bytes before `p` are known to equal those `dist`
/// back; returns the end of the match (at most `src.len()`).
#[inline(always)]
fn match_end(src: &[u8], p: usize, dist: usize) -> usize {
    let n = src.len() - p;
    let (ahead, behind) = (&src[p..], &src[p - dist..p - dist + n]);
    // Whole words first: exact chunks carry no per-word bounds checks.
    let words = ahead.chunks_exact(8).zip(behind.chunks_exact(8));
    for (i, (a, b)) in words.enumerate() {
        let x = read_u64(a, 0) ^ read_u64(b, 0);
        if x != 0 {
            return p + i * 8 + (x.trailing_zeros() / 8) as usize;
        }
    }
    let mut i = n - n % 8;
    while i < n && ahead[i] == behind[i] {
        i += 1;
    }
    p + i
}

/// The output cursor. Every write checks the remaining room first and fails
/// with [`Error::OutputOverrun`] instead of panicking.
struct Out<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl Out<'_> {
    #[inline(always)]
    fn need(&self, n: usize) -> Result<(), Error> {
        if n <= self.buf.len() - self.pos {
            Ok(())
        } else {
            Err(Error::OutputOverrun)
        }
    }

    #[inline(always)]
    fn push(&mut self, b: u8) -> Result<(), Error> {
        self.need(1)?;
        self.buf[self.pos] = b;
        self.pos += 1;
        Ok(())
    }

    /// Writes the literal run `src[from..to]`: its length (in the previous
    /// match's spare bits, the first-byte form, or an instruction of its
    /// own) and its bytes.
    #[inline(always)]
    fn literals(&mut self, src: &[u8], from: usize, to: usize) -> Result<(), Error> {
        let t = to - from;
        if t == 0 {
            return Ok(());
        }
        if self.pos == 0 && t <= 238 {
            self.push(17 + t as u8)?;
        } else if t <= 3 {
            // Anything written before literals ends with a match, whose
            // second-to-last byte has two spare bits for 0..=3 literals.
            self.buf[self.pos - 2] |= t as u8;
        } else if t <= 18 {
            self.push((t - 3) as u8)?;
        } else {
            self.push(0)?;
            self.extended_len(t - 18)?;
        }
        self.copy(src, from, to)
    }

    /// Copies the literals `src[from..to]`; short runs with room to spare go
    /// as one 16-byte block (bytes past the run are scratch, overwritten
    /// later or past the end of the result) instead of a `memcpy` call.
    #[inline(always)]
    fn copy(&mut self, src: &[u8], from: usize, to: usize) -> Result<(), Error> {
        let t = to - from;
        self.need(t)?;
        let pos = self.pos;
        let block = src.get(from..from + 16);
        match (block, self.buf.get_mut(pos..pos + 16)) {
            (Some(block), Some(out)) if t <= 16 => out.copy_from_slice(block),
            _ => self.buf[pos..pos + t].copy_from_slice(&src[from..to]),
        }
        self.pos += t;
        Ok(())
    }

    /// Writes `n >= 1` as zero bytes worth 255 each and a final non-zero byte.
    #[inline(always)]
    fn extended_len(&mut self, n: usize) -> Result<(), Error> {
        let zeros = (n - 1) / 255;
        self.need(zeros + 1)?;
        self.buf[self.pos..self.pos + zeros].fill(0);
        self.pos += zeros;
        self.buf[self.pos] = (n - zeros * 255) as u8;
        self.pos += 1;
        Ok(())
    }

    /// Writes a match of `len >= 4` bytes `dist` back (M2, M3 or M4 form).
    #[inline(always)]
    fn match_(&mut self, dist: usize, len: usize) -> Result<(), Error> {
        if len <= M2_MAX_LEN && dist <= M2_MAX_OFFSET {
            let d = dist - 1;
            self.need(2)?;
            self.buf[self.pos] = (((len - 1) << 5) | ((d & 7) << 2)) as u8;
            self.buf[self.pos + 1] = (d >> 3) as u8;
            self.pos += 2;
            Ok(())
        } else if dist <= M3_MAX_OFFSET {
            self.match_len(M3_MARKER, len, M3_MAX_LEN)?;
            self.distance(dist - 1)
        } else {
            let d = dist - 0x4000;
            let marker = M4_MARKER | ((d & 0x4000) >> 11) as u8;
            self.match_len(marker, len, M4_MAX_LEN)?;
            self.distance(d & 0x3fff)
        }
    }

    /// The instruction byte of an M3/M4 match, with its length in the low
    /// bits or, past `short_max`, in extension bytes.
    #[inline(always)]
    fn match_len(&mut self, marker: u8, len: usize, short_max: usize) -> Result<(), Error> {
        if len <= short_max {
            self.push(marker | (len - 2) as u8)
        } else {
            self.push(marker)?;
            self.extended_len(len - short_max)
        }
    }

    /// The 14-bit distance of an M3/M4 match, as LE16 `d << 2`; the low two
    /// bits are left clear for the next literal count.
    #[inline(always)]
    fn distance(&mut self, d: usize) -> Result<(), Error> {
        self.need(2)?;
        self.buf[self.pos] = ((d & 63) << 2) as u8;
        self.buf[self.pos + 1] = (d >> 6) as u8;
        self.pos += 2;
        Ok(())
    }

    /// The end-of-stream marker: an M4 match of length 3 at distance 16384.
    fn end_marker(&mut self) -> Result<(), Error> {
        self.need(3)?;
        self.buf[self.pos..self.pos + 3].copy_from_slice(&[M4_MARKER | 1, 0, 0]);
        self.pos += 3;
        Ok(())
    }
}
