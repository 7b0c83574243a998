//! `lzo-rle`: LZO1X-1 with the kernel's run-length encoding of zeros, the default algorithm of
//! zram (lib/lzo/lzo1x_compress.c, `lzorle1x_1_compress`, bitstream version 1).
//!
//! A port of the kernel's compressor, line for line where it matters for the output, so that
//! the stream is the one the kernel writes on a little-endian 64-bit machine (x86-64, arm64:
//! `CONFIG_HAVE_EFFICIENT_UNALIGNED_ACCESS` with `LZO_USE_CTZ64`, whose match extension
//! compares 8 bytes at a time and may run a few bytes past the search limit):
//!
//! * The stream starts with the version header `17, 1` (LZO v0 never starts with 17).
//! * The input is cut into blocks of at most `M4_MAX_OFFSET_V1 + 1` = 0xbfff bytes, each with a
//!   fresh 8192-entry dictionary of 16-bit offsets; literals left at the end of a block carry
//!   into the next.
//! * At each probe, four zero bytes start a zero run instead of a dictionary lookup: it is
//!   measured (up to `MAX_ZERO_RUN_LENGTH` = 2051 bytes, not past the search limit) and written
//!   as a 4-byte M4 instruction at the reserved distance 0xbfff
//!   (`(run - 4) << 21 | 0xfffc18 | (run - 4) & 7`, little-endian), after which the next
//!   literal count goes in that instruction's second byte.
//! * An M4 match of 261 to 264 bytes whose distance has the bits `0x403f` set would read as a
//!   zero run; it is shortened to 260 bytes, as the kernel does.
//!
//! Only safe code: every write is bounds-checked and fails with [`Error::OutputOverrun`]
//! rather than writing past `dst` (the kernel's 8- and 16-byte block copies are exact copies
//! here, which changes nothing in the stream).

use crate::compress::CompressState;
use crate::Error;

const D_BITS: u32 = 13;
const M2_MAX_LEN: usize = 8;
const M3_MAX_LEN: usize = 33;
const M4_MAX_LEN: usize = 9;
const M2_MAX_OFFSET: usize = 0x0800;
const M3_MAX_OFFSET: usize = 0x4000;
const M4_MAX_OFFSET_V1: usize = 0xbffe;
const M3_MARKER: u8 = 32;
const M4_MARKER: u8 = 16;
const MIN_ZERO_RUN_LENGTH: usize = 4;
const MAX_ZERO_RUN_LENGTH: usize = 2047 + MIN_ZERO_RUN_LENGTH;
/// The bitstream version `lzo-rle` writes.
pub const RLE_VERSION: u8 = 1;

struct Out<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl Out<'_> {
    fn push(&mut self, b: u8) -> Result<(), Error> {
        let slot = self.buf.get_mut(self.pos).ok_or(Error::OutputOverrun)?;
        *slot = b;
        self.pos += 1;
        Ok(())
    }

    fn extend(&mut self, bytes: &[u8]) -> Result<(), Error> {
        let end = self.pos + bytes.len();
        self.buf
            .get_mut(self.pos..end)
            .ok_or(Error::OutputOverrun)?
            .copy_from_slice(bytes);
        self.pos = end;
        Ok(())
    }

    /// `op[state_offset] |= t`: a literal count of 1..=3 in the previous instruction's spare
    /// bits.
    fn or_back(&mut self, back: usize, t: u8) -> Result<(), Error> {
        let at = self.pos.checked_sub(back).ok_or(Error::Corrupt(
            "a short literal run with no instruction before it",
        ))?;
        self.buf[at] |= t;
        Ok(())
    }

    /// A long length: zero bytes worth 255 each, then the rest.
    fn long_len(&mut self, mut n: usize) -> Result<(), Error> {
        while n > 255 {
            n -= 255;
            self.push(0)?;
        }
        self.push(n as u8)
    }
}

fn read_u32(s: &[u8], i: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&s[i..i + 4]);
    u32::from_le_bytes(b)
}

fn read_u64(s: &[u8], i: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&s[i..i + 8]);
    u64::from_le_bytes(b)
}

/// One block's compression state that lives across blocks: the literal count carried in and
/// where the last instruction's spare bits are (`state_offset`, as a distance back).
struct Carry {
    ti: usize,
    back: usize,
}

/// Compresses `src` into `dst` as an `lzo-rle` stream (the kernel's `lzorle1x_1_compress`)
/// and returns its length. Fails with [`Error::OutputOverrun`] when `dst` is too small; a
/// `dst` of [`crate::worst_compress`]`(src.len()) + 2` bytes always suffices.
pub fn compress_rle(src: &[u8], dst: &mut [u8], state: &mut CompressState) -> Result<usize, Error> {
    let mut out = Out { buf: dst, pos: 0 };
    out.extend(&[17, RLE_VERSION])?;
    let data_start = out.pos;
    let mut carry = Carry { ti: 0, back: 2 };
    let mut ip = 0;
    let mut l = src.len();
    while l > 20 {
        let ll = l.min(M4_MAX_OFFSET_V1 + 1);
        state.table.fill(0);
        carry.ti = do_compress(src, ip, ll, &mut out, &mut carry, &mut state.table)?;
        ip += ll;
        l -= ll;
    }
    let mut t = carry.ti + l;
    if t > 0 {
        let ii = src.len() - t;
        if out.pos == data_start && t <= 238 {
            out.push((17 + t) as u8)?;
        } else if t <= 3 {
            out.or_back(carry.back, t as u8)?;
        } else if t <= 18 {
            out.push((t - 3) as u8)?;
        } else {
            out.push(0)?;
            out.long_len(t - 18)?;
        }
        out.extend(&src[ii..ii + t])?;
        t = 0;
    }
    debug_assert_eq!(t, 0);
    out.extend(&[M4_MARKER | 1, 0, 0])?;
    Ok(out.pos)
}

/// `lzo1x_1_do_compress` on the block `src[base..base + len]`; returns the literals left at
/// its end (to carry into the next block or the tail).
fn do_compress(
    src: &[u8],
    base: usize,
    len: usize,
    out: &mut Out,
    carry: &mut Carry,
    dict: &mut [u16; 1 << D_BITS],
) -> Result<usize, Error> {
    let in_end = base + len;
    let ip_end = in_end - 20;
    let mut ti = carry.ti;
    let mut ii = base;
    // ti < 4 ? 4 - ti : 0
    let mut ip = base + 4usize.saturating_sub(ti);
    // `literal:` advances before probing; a written instruction goes straight to `next:`.
    let mut advance = true;
    loop {
        if advance {
            ip += 1 + ((ip - ii) >> 5);
        }
        advance = true;
        if ip >= ip_end {
            break;
        }
        let dv = read_u32(src, ip);
        let mut run_length = 0;
        let mut m_pos = 0;
        if dv == 0 {
            let limit = ip_end.min(ip + MAX_ZERO_RUN_LENGTH + 1);
            let mut ir = ip + 4;
            while ir < limit && src[ir] == 0 {
                ir += 1;
            }
            run_length = (ir - ip).min(MAX_ZERO_RUN_LENGTH);
        } else {
            let t = ((dv.wrapping_mul(0x1824_429d)) >> (32 - D_BITS)) as usize;
            m_pos = base + usize::from(dict[t]);
            dict[t] = (ip - base) as u16;
            if dv != read_u32(src, m_pos) {
                continue;
            }
        }

        // The literals before this instruction, with those carried in.
        ii -= ti;
        ti = 0;
        let t = ip - ii;
        if t != 0 {
            if t <= 3 {
                out.or_back(carry.back, t as u8)?;
            } else if t <= 18 {
                out.push((t - 3) as u8)?;
            } else {
                out.push(0)?;
                out.long_len(t - 18)?;
            }
            out.extend(&src[ii..ii + t])?;
        }

        if run_length != 0 {
            ip += run_length;
            let r = (run_length - MIN_ZERO_RUN_LENGTH) as u32;
            out.extend(&((r << 21) | 0x00ff_fc18 | (r & 7)).to_le_bytes())?;
            carry.back = 3;
            ii = ip;
            advance = false;
            continue;
        }

        // The match's length: 8 bytes at a time past the first 4 (LZO_USE_CTZ64).
        let mut m_len = 4;
        let mut v = read_u64(src, ip + m_len) ^ read_u64(src, m_pos + m_len);
        let mut capped = false;
        while v == 0 {
            m_len += 8;
            v = read_u64(src, ip + m_len) ^ read_u64(src, m_pos + m_len);
            if ip + m_len >= ip_end {
                capped = true;
                break;
            }
        }
        if !capped {
            m_len += (v.trailing_zeros() / 8) as usize;
        }

        let mut m_off = ip - m_pos;
        ip += m_len;
        if m_len <= M2_MAX_LEN && m_off <= M2_MAX_OFFSET {
            m_off -= 1;
            out.push((((m_len - 1) << 5) | ((m_off & 7) << 2)) as u8)?;
            out.push((m_off >> 3) as u8)?;
        } else if m_off <= M3_MAX_OFFSET {
            m_off -= 1;
            if m_len <= M3_MAX_LEN {
                out.push(M3_MARKER | (m_len - 2) as u8)?;
            } else {
                out.push(M3_MARKER)?;
                out.long_len(m_len - M3_MAX_LEN)?;
            }
            out.push((m_off << 2) as u8)?;
            out.push((m_off >> 6) as u8)?;
        } else {
            m_off -= 0x4000;
            let high = ((m_off >> 11) & 8) as u8;
            if m_len <= M4_MAX_LEN {
                out.push(M4_MARKER | high | (m_len - 2) as u8)?;
            } else {
                if m_off & 0x403f == 0x403f && (261..=264).contains(&m_len) {
                    // Would read as a zero run: shorten to 260, as the kernel does.
                    ip -= m_len - 260;
                    m_len = 260;
                }
                out.push(M4_MARKER | high)?;
                out.long_len(m_len - M4_MAX_LEN)?;
            }
            out.push((m_off << 2) as u8)?;
            out.push((m_off >> 6) as u8)?;
        }
        carry.back = 2;
        ii = ip;
        advance = false;
    }
    Ok(in_end - (ii - ti))
}
