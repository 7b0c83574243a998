//! LZO1X-1 compressor: a single-probe hash-table match finder writing the
//! standard LZO1X bitstream (the format of the kernel's `lzo1x_1_compress`).
//!
//! Structured like the kernel's lib/lzo/lzo1x_compress.c (a 16-bit
//! dictionary cleared per 48 KiB block, 4-byte matches, a skip that grows
//! with the literal run) but written from the format description; it never
//! writes zero-run (`lzo-rle`) instructions.
//!
//! Where the time goes, on 4 KiB sectors of real data: the probe loop is a
//! dozen instructions, but every match costs a mispredicted branch (whether
//! a probe matches is close to a coin toss) and then a chain of dependent
//! loads (input, dictionary, candidate) before the next probe's branch can
//! resolve. So the words that measure a match are loaded before that
//! branch, the match path is kept short and mostly branch-free
//! ([`fast_literals_and_match`]), the output position stays in a register,
//! and the bytes for the probe after a short match come from the word
//! already loaded to measure it rather than from a fresh load. The stream
//! written is the same, byte for byte, as before these changes (see the
//! `same_stream_as_the_previous_compressor` property test).

use crate::Error;

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
/// the 4-byte probe and the 8-byte word after a match's first 4 bytes need
/// no length check.
const SEARCH_MARGIN: usize = 12;
/// The dictionary holds 16-bit offsets into a block of at most this many
/// bytes (48 KiB, as in the kernel), so every match found is within reach.
const BLOCK: usize = M4_MAX_OFFSET + 1;

/// The compressor's dictionary: a hash of 4 input bytes -> the last offset
/// (within the current block) seen with that hash. Owned by a workspace and
/// reused, so a call allocates nothing; it is cleared at the start of every
/// block, so the output depends only on the input.
pub struct CompressState {
    pub(crate) table: Box<[u16; D_SIZE]>,
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

    /// A fresh dictionary, or `None` when its 16 KiB cannot be allocated (where
    /// [`CompressState::new`] would abort the process).
    pub fn try_new() -> Option<Self> {
        let mut table: Vec<u16> = Vec::new();
        table.try_reserve_exact(D_SIZE).ok()?;
        table.resize(D_SIZE, 0);
        let table: Box<[u16; D_SIZE]> = table.into_boxed_slice().try_into().ok()?;
        Some(CompressState { table })
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
/// bytes of `dst` past the returned length may be overwritten (literal runs
/// are copied in 16-byte blocks, and short matches written as 4-byte words,
/// when there is room); the stream itself does not depend on `dst.len()`.
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
    let table = &mut *state.table;
    table.fill(0);
    if limit <= BLOCK {
        // One block starting at 0 (every 4 KiB sector): the same loop,
        // inlined with `start` a constant, which spares an add per probe and
        // lets the compiler see that candidates are below 64 Ki.
        let cursor = search_block(src, 0, limit, Cursor { lit: 0, ip: 1 }, table, out)?;
        return Ok(cursor.lit);
    }
    let mut cursor = Cursor { lit: 0, ip: 1 };
    let mut start = 0;
    while cursor.ip < limit {
        if start > 0 {
            table.fill(0);
        }
        let end = limit.min(start + BLOCK);
        cursor = search_block(src, start, end, cursor, table, out)?;
        // The next block starts where this search stopped; its first byte
        // is not probed, since a cleared slot points there.
        start = cursor.ip;
        cursor.ip += 1;
    }
    Ok(cursor.lit)
}

/// Where the search stands: the pending literals start at `lit`, the next
/// probe is at `ip`.
#[derive(Clone, Copy)]
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
    cursor: Cursor,
    table: &mut [u16; D_SIZE],
    out: &mut Out,
) -> Result<Cursor, Error> {
    let Cursor { mut lit, mut ip } = cursor;
    // Restated, for the compiler's sake: `ip + SEARCH_MARGIN <= src.len()`
    // in the loop.
    let end = end.min(src.len().saturating_sub(SEARCH_MARGIN));
    // The output position lives in a register here; `out.pos` is synced
    // around the general writers.
    let mut op = out.pos;
    if ip < end {
        // `cur` is always the 4 bytes at `ip`.
        let mut cur = read_u32(src, ip);
        loop {
            let slot = hash(cur);
            let cand = start + usize::from(table[slot]);
            table[slot] = (ip - start) as u16;
            // The words that measure a match, loaded before the branch: they
            // are in flight while it resolves, and when it was mispredicted
            // (on most matches) the length is ready sooner after.
            let a = read_u64(src, ip + 4);
            let x = a ^ read_u64(src, cand + 4);
            if read_u32(src, cand) != cur {
                // Skip faster the longer we go without a match, like the kernel.
                ip += 1 + ((ip - lit) >> 5);
                if ip >= end {
                    break;
                }
                cur = read_u32(src, ip);
                continue;
            }
            let dist = ip - cand;
            // The match's length: the 8 bytes after the first 4, as one
            // word, settle most matches (4..=11 bytes); longer ones go on
            // word by word. For one that ends within `a`, `next` is the 4
            // bytes after it.
            let (len, next) = if x != 0 {
                let m = (x.trailing_zeros() / 8) as usize;
                (4 + m, (m <= 4).then(|| (a >> (8 * m)) as u32))
            } else {
                (match_end(src, ip + 12, dist) - ip, None)
            };
            match fast_literals_and_match(src, out.buf, op, lit, ip, dist, len) {
                Some(o) => op = o,
                None => {
                    out.pos = op;
                    out.literals(src, lit, ip)?;
                    out.match_(dist, len)?;
                    op = out.pos;
                }
            }
            lit = ip + len;
            ip = lit;
            if ip >= end {
                break;
            }
            // The next probe's bytes: from a register when the match was
            // short, which takes a load off the path to the next branch.
            cur = match next {
                Some(c) => c,
                None => read_u32(src, ip),
            };
        }
    }
    out.pos = op;
    Ok(Cursor { lit, ip })
}

/// The common case of [`Out::literals`] then [`Out::match_`] at `op`, with
/// few branches: at most 16 literals after an earlier match, then an M2 or
/// M3 match with its length in the instruction byte. Writes the same bytes
/// as those two, plus scratch bytes past them, and returns the new output
/// position; returns `None`, having written nothing, when the case does not
/// apply or `dst` lacks room for the scratch.
#[inline(always)]
fn fast_literals_and_match(
    src: &[u8],
    dst: &mut [u8],
    op: usize,
    lit: usize,
    ip: usize,
    dist: usize,
    len: usize,
) -> Option<usize> {
    let t = ip - lit;
    // `op >= 2`: not the first instruction, so the last thing written is a
    // match (literals are only written just before one), whose byte at
    // `op - 2` has the spare bits for 0..=3 literals.
    if t > 16 || len > M3_MAX_LEN || dist > M3_MAX_OFFSET || op < 2 {
        return None;
    }
    let lits: &[u8; 16] = src.get(lit..)?.first_chunk()?;
    let w: &mut [u8; 24] = dst.get_mut(op - 2..)?.first_chunk_mut()?;
    // The literal count: in the spare bits (0..=3, where 0 changes nothing)
    // or as an instruction byte `t - 3` of its own.
    let small = t <= 3;
    w[0] |= if small { t as u8 } else { 0 };
    w[2] = (t as u8).wrapping_sub(3);
    let k = 2 + usize::from(!small);
    w[k..k + 16].copy_from_slice(lits);
    let k = k + t;
    // The match: M2 (2 bytes) or M3 (3 bytes), chosen without a branch (on
    // most data it is a coin toss) and written as one 4-byte word.
    let d = dist - 1;
    let m2 = (len <= M2_MAX_LEN) & (dist <= M2_MAX_OFFSET);
    let w2 = ((len - 1) << 5) | ((d & 7) << 2) | ((d >> 3) << 8);
    let w3 = usize::from(M3_MARKER) | (len - 2) | ((d & 63) << 10) | ((d >> 6) << 16);
    let word = std::hint::select_unpredictable(m2, w2, w3);
    w[k..k + 4].copy_from_slice(&(word as u32).to_le_bytes());
    Some(op - 2 + k + 3 - usize::from(m2))
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

    /// Copies the literals `src[from..to]`; runs up to 256 bytes with room
    /// to spare go as 16-byte blocks (up to 15 bytes past the run are
    /// scratch, overwritten later or past the end of the result) instead of
    /// a `memcpy` call.
    #[inline(always)]
    fn copy(&mut self, src: &[u8], from: usize, to: usize) -> Result<(), Error> {
        let t = to - from;
        self.need(t)?;
        let pos = self.pos;
        let n = t.next_multiple_of(16);
        match (src.get(from..from + n), self.buf.get_mut(pos..pos + n)) {
            (Some(block), Some(out)) if t <= 256 => {
                for (o, b) in out.chunks_exact_mut(16).zip(block.chunks_exact(16)) {
                    o.copy_from_slice(b);
                }
            }
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
