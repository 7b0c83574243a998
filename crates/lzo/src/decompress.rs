//! LZO1X decompressor with the semantics of the kernel's
//! lib/lzo/lzo1x_decompress_safe.c: the same streams succeed, the same fail.
//!
//! Like the kernel it also accepts the versioned bitstream (first byte 17,
//! then a version byte) and, for version 1 (`lzo-rle`), its zero-run
//! instruction; liblzo2 rejects every such stream, and neither btrfs nor
//! [`crate::compress`] ever writes one. Every read and write is bounds-checked,
//! so hostile input yields an error, never a panic or an out-of-slice access.
//!
//! Speed comes from doing the checks once rather than skipping them. While at
//! least [`FAST_IN`] bytes of input and [`FAST_OUT`] bytes of output room
//! are left, [`fast_loop`] decodes instructions from a fixed-size window of
//! the input, so no instruction there can overrun either buffer, and copies
//! in whole blocks rather than exactly: a literal run as 32 bytes, a match
//! as 16-byte blocks (a repeated pattern for distances under 16), trailing
//! literals as 4 bytes, scribbling over bytes past the run that later
//! instructions overwrite. Every match distance is still checked against
//! the output produced. Anything else (the end marker, the last few
//! instructions of a stream, `lzo-rle` streams) goes through [`step`], one
//! fully checked instruction at a time; the fast loop leaves an instruction
//! to it rather than fail where `step` might fail differently, so both give
//! the same result for every input.

use crate::Error;

/// Shortest zero run the `lzo-rle` extension encodes (`MIN_ZERO_RUN_LENGTH`).
const MIN_ZERO_RUN: usize = 4;

/// Room the block copies need in `dst` past the end of a run: a 16-byte
/// block may start at the run's last byte.
const SLACK: usize = 16;

/// Decompresses one raw LZO1X stream from `src` into `dst` and returns the
/// number of bytes produced.
///
/// Never reads past `src`, never writes past `dst`, never panics. Bytes of
/// `dst` after the returned length may have been overwritten (fast copies
/// write whole blocks), as in the kernel. Errors mirror the kernel's return
/// codes: [`Error::OutputOverrun`], [`Error::InputOverrun`],
/// [`Error::LookbehindOverrun`], [`Error::InputNotConsumed`], and
/// [`Error::Corrupt`] for `LZO_E_ERROR`.
pub fn decompress(src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
    let (version, mut ip) = header(src)?;
    let mut op = 0;
    let mut class = first_literals(src, dst, &mut ip, &mut op)?;
    loop {
        if version == 0 {
            fast_loop(src, dst, &mut ip, &mut op, &mut class)?;
        }
        if let Some(n) = step(src, dst, &mut ip, &mut op, &mut class, version)? {
            return Ok(n);
        }
    }
}

/// Decodes one instruction of any kind, checking everything, and returns the
/// output length when it was the end marker.
///
/// `class` says what the previous instruction left behind, which decides
/// what a `0000xxxx` byte means: 0 after a match without trailing literals,
/// 1 after 1..=3 literals, 2 after a longer literal run.
#[inline(never)]
fn step(
    src: &[u8],
    dst: &mut [u8],
    ip: &mut usize,
    op: &mut usize,
    class: &mut usize,
    version: usize,
) -> Result<Option<usize>, Error> {
    let t = byte(src, *ip)?;
    let (dist, len, next);
    if t >= 64 {
        // 1LLDDDSS / 01LDDDSS: 3..8 bytes within 2 KiB.
        let h = byte(src, *ip + 1)?;
        *ip += 2;
        dist = 1 + ((t >> 2) & 7) + (h << 3);
        len = (t >> 5) + 1;
        next = t & 3;
    } else if t >= 32 {
        // 001LLLLL: within 16 KiB.
        *ip += 1;
        len = length(src, ip, t & 31, 31)? + 2;
        let v = le16(src, *ip)?;
        *ip += 2;
        dist = 1 + (v >> 2);
        next = v & 3;
    } else if t >= 16 {
        *ip += 1;
        match far(src, ip, t, version)? {
            Far::Copy(d, l, n) => (dist, len, next) = (d, l, n),
            Far::Zeros(l, n) => {
                zeros(dst, op, l)?;
                literals(src, dst, ip, op, n)?;
                *class = usize::from(n != 0);
                return Ok(None);
            }
            Far::End => {
                // After the end marker all input must have been used.
                return if *ip == src.len() {
                    Ok(Some(*op))
                } else {
                    Err(Error::InputNotConsumed)
                };
            }
        }
    } else if *class == 0 {
        // 0000LLLL after a match without trailing literals: a literal run.
        *ip += 1;
        let n = length(src, ip, t, 15)? + 3;
        literals(src, dst, ip, op, n)?;
        *class = 2;
        return Ok(None);
    } else {
        // 0000DDSS: a 2-byte match within 1 KiB after 1..3 literals,
        // a 3-byte match 2..3 KiB back after a longer literal run.
        let h = byte(src, *ip + 1)?;
        *ip += 2;
        let (base, l) = if *class == 2 { (2049, 3) } else { (1, 2) };
        dist = base + (t >> 2) + (h << 2);
        len = l;
        next = t & 3;
    }
    copy_match(dst, *op, dist, len)?;
    *op += len;
    short_literals(src, dst, ip, op, next)?;
    *class = usize::from(next != 0);
    Ok(None)
}

/// Input the fast loop wants left at an instruction: 3 instruction bytes and
/// 32 for the block copy of a literal run.
const FAST_IN: usize = 3 + 32;
/// Output room the fast loop wants at an instruction: 32 for the block copy
/// of a literal run, which also covers a match of up to 16 bytes copied as
/// one block followed by 4 bytes of trailing literals.
const FAST_OUT: usize = 32;

/// Decodes version-0 instructions while there is room for block copies on
/// both sides, and returns at the first one it leaves to [`step`]: the end
/// marker, anything that needs more than the room left near the end of `src`
/// or `dst`.
///
/// The fast loop never returns an error [`step`] would not return for the
/// same instruction: within the room it demands, the only error left is a
/// match reaching back before the start of the output, which `step` checks
/// first too. An instruction it cannot finish without another check failing
/// it leaves, untouched but for scratch bytes past `op`, to `step`.
#[inline(always)]
fn fast_loop(
    src: &[u8],
    dst: &mut [u8],
    ip: &mut usize,
    op: &mut usize,
    class: &mut usize,
) -> Result<(), Error> {
    // The input from the next instruction on, the output length, the class.
    let Some(mut input) = src.get(*ip..) else {
        return Ok(());
    };
    let (mut o, mut c) = (*op, *class);
    let Some(o_end) = dst.len().checked_sub(FAST_OUT) else {
        return Ok(());
    };
    while o <= o_end {
        let Some(inp) = input.first_chunk::<FAST_IN>() else {
            break;
        };
        let Some((done, after)) = dst.split_at_mut_checked(o) else {
            break;
        };
        let Some(win) = after.first_chunk_mut::<FAST_OUT>() else {
            break;
        };
        let t = usize::from(inp[0]);
        let b1 = usize::from(inp[1]);
        let (dist, mlen, next, ilen);
        if t < 16 {
            if c == 0 {
                // 0000LLLL: literal run of 3 + L.
                if t != 0 {
                    if let (Some(to), Some(from)) =
                        (win.first_chunk_mut::<32>(), inp[1..].first_chunk::<32>())
                    {
                        *to = *from;
                    }
                    input = &input[t + 4..];
                    o += t + 3;
                } else {
                    // L = 0: extended; copied in 32-byte blocks too.
                    let Some((n, p)) = ext_length(input, 1, 15) else {
                        break;
                    };
                    let n = n.saturating_add(3);
                    if input.len() - p < n.saturating_add(32) || o_end - o < n {
                        break;
                    }
                    let mut k = 0;
                    while k < n {
                        let mut b = [0u8; 32];
                        b.copy_from_slice(&input[p + k..p + k + 32]);
                        dst[o + k..o + k + 32].copy_from_slice(&b);
                        k += 32;
                    }
                    input = &input[p + n..];
                    o += n;
                }
                c = 2;
                continue;
            }
            // 0000DDSS: 2 bytes within 1 KiB after 1..3 literals, 3 bytes
            // 2..3 KiB back after a longer literal run.
            let long = c == 2;
            dist = 1 + (t >> 2) + (b1 << 2) + if long { 2048 } else { 0 };
            mlen = 2 + usize::from(long);
            next = t & 3;
            ilen = 2;
        } else if t >= 64 {
            // 1LLDDDSS / 01LDDDSS: 3..8 bytes within 2 KiB.
            dist = 1 + ((t >> 2) & 7) + (b1 << 3);
            mlen = (t >> 5) + 1;
            next = t & 3;
            ilen = 2;
        } else {
            // 001LLLLL within 16 KiB, 0001HLLL 16..48 KiB back; length 0
            // is extended.
            let (bits, max) = if t >= 32 { (t & 31, 31) } else { (t & 7, 7) };
            if bits == 0 {
                let Some((n, p)) = ext_length(input, 1, max) else {
                    break;
                };
                let Some(&[v0, v1, l0, l1, l2, l3]) =
                    input.get(p..).and_then(<[u8]>::first_chunk::<6>)
                else {
                    break;
                };
                let Some(dist) = far_distance(t, usize::from(u16::from_le_bytes([v0, v1]))) else {
                    break;
                };
                let Some(from) = o.checked_sub(dist) else {
                    return Err(Error::LookbehindOverrun);
                };
                let mlen = n.saturating_add(2);
                if o_end - o < mlen {
                    break;
                }
                copy_blocks(dst, from, o, dist, mlen);
                dst[o + mlen..o + mlen + 4].copy_from_slice(&[l0, l1, l2, l3]);
                let next = usize::from(v0 & 3);
                input = &input[p + 2 + next..];
                o += mlen + next;
                c = usize::from(next != 0);
                continue;
            }
            let v = usize::from(u16::from_le_bytes([inp[1], inp[2]]));
            let Some(d) = far_distance(t, v) else {
                // The end marker (or a corrupt one).
                break;
            };
            dist = d;
            mlen = bits + 2;
            next = v & 3;
            ilen = 3;
        }
        let Some(from) = o.checked_sub(dist) else {
            return Err(Error::LookbehindOverrun);
        };
        let lits = inp[ilen..].first_chunk::<4>();
        if dist >= 16 && mlen <= 16 {
            // The common case: one block, then the trailing literals.
            if let (Some(block), Some(lits)) = (done[from..].first_chunk::<16>(), lits) {
                win[..16].copy_from_slice(block);
                win[mlen..mlen + 4].copy_from_slice(lits);
            }
        } else {
            // Longer, or overlapping its source by more than a block.
            if o_end - o < mlen {
                break;
            }
            copy_blocks(dst, from, o, dist, mlen);
            if let Some(lits) = lits {
                dst[o + mlen..o + mlen + 4].copy_from_slice(lits);
            }
        }
        input = &input[ilen + next..];
        o += mlen + next;
        c = usize::from(next != 0);
    }
    (*ip, *op, *class) = (src.len() - input.len(), o, c);
    Ok(())
}

/// The distance of an M3 (`t` in 32..64) or M4 (`t` in 16..32) match with
/// LE16 `v`; `None` for an M4 at distance 0, the end marker.
#[inline(always)]
fn far_distance(t: usize, v: usize) -> Option<usize> {
    if t >= 32 {
        Some(1 + (v >> 2))
    } else {
        let d = ((t & 8) << 11) + (v >> 2);
        (d != 0).then_some(d + 0x4000)
    }
}

/// Reads an extended length field at `at` in `src` (zero bytes, then a
/// non-zero one) and returns `max` plus 255 per zero byte plus the last
/// byte, with the position after the field; `None` where [`length`] fails.
#[inline(always)]
fn ext_length(src: &[u8], at: usize, max: usize) -> Option<(usize, usize)> {
    let rest = src.get(at..)?;
    let zeros = rest.iter().position(|&b| b != 0)?;
    let len = zeros
        .checked_mul(255)?
        .checked_add(max + usize::from(rest[zeros]))?;
    Some((len, at + zeros + 1))
}

/// Copies `len` bytes from `dist` (in 1..) bytes back to `to` in 16-byte
/// blocks, writing up to 15 bytes past the end (the caller guarantees the
/// room). A distance under 16 repeats the pattern it covers.
#[inline(always)]
fn copy_blocks(buf: &mut [u8], from: usize, to: usize, dist: usize, len: usize) {
    if dist >= 16 {
        let mut k = 0;
        while k < len {
            copy16(buf, from + k, to + k);
            k += 16;
        }
    } else {
        let d = dist & 15;
        let mut w = [0u8; 16];
        w.copy_from_slice(&buf[from..from + 16]);
        // The first `d` bytes, repeated: masked and multiplied by
        // 1 + 2^(8 d) + 2^(16 d) + ...
        let block = (u128::from_le_bytes(w) & PATTERN_MASK[d])
            .wrapping_mul(PATTERN_REPEAT[d])
            .to_le_bytes();
        // Advance by whole periods so that every block starts in phase.
        let step = PATTERN_STEP[d];
        let mut k = 0;
        while k < len {
            buf[to + k..to + k + 16].copy_from_slice(&block);
            k += step;
        }
    }
}

/// For a distance `d` in 1..16: the mask of the first `d` bytes of a block.
const PATTERN_MASK: [u128; 16] = {
    let mut t = [0; 16];
    let mut d = 1;
    while d < 16 {
        t[d] = (1 << (8 * d)) - 1;
        d += 1;
    }
    t
};

/// For a distance `d` in 1..16: a 1 in the low bit of every `d`-th byte.
const PATTERN_REPEAT: [u128; 16] = {
    let mut t = [0; 16];
    let mut d = 1;
    while d < 16 {
        let mut bit = 0;
        while bit < 128 {
            t[d] |= 1 << bit;
            bit += 8 * d;
        }
        d += 1;
    }
    t
};

/// For a distance `d` in 1..16: the most whole periods that fit in a block.
const PATTERN_STEP: [usize; 16] = {
    let mut t = [16; 16];
    let mut d = 1;
    while d < 16 {
        t[d] = 16 - 16 % d;
        d += 1;
    }
    t
};

/// What a `0001HLLL` instruction turned out to be.
enum Far {
    /// A match: distance, length, literals to copy after it.
    Copy(usize, usize, usize),
    /// `lzo-rle` zero run: length, literals after it.
    Zeros(usize, usize),
    /// The end-of-stream marker.
    End,
}

/// Reads the optional bitstream version (first byte 17 in a stream of at
/// least 5 bytes) and returns it, 0 when absent, with the position of the
/// first instruction.
fn header(src: &[u8]) -> Result<(usize, usize), Error> {
    match src {
        [] | [_] | [_, _] => Err(Error::InputOverrun),
        [17, v, _, _, _, ..] => Ok((usize::from(*v), 2)),
        _ => Ok((0, 0)),
    }
}

/// The first instruction may be a bare literal run (bytes 18..=255).
/// Returns the class after it (see [`step`]): 0 (none), 1 (1..=3), or 2.
fn first_literals(
    src: &[u8],
    dst: &mut [u8],
    ip: &mut usize,
    op: &mut usize,
) -> Result<usize, Error> {
    let t = byte(src, *ip)?;
    if t <= 17 {
        return Ok(0);
    }
    *ip += 1;
    let t = t - 17;
    literals(src, dst, ip, op, t)?;
    Ok(if t >= 4 { 2 } else { 1 })
}

/// A `0001HLLL` instruction (`t`, already consumed): far match, zero run, or
/// end of stream.
fn far(src: &[u8], ip: &mut usize, t: usize, version: usize) -> Result<Far, Error> {
    let v = le16(src, *ip)?;
    if version != 0 && (t & 0xf8) == 0x18 && (v & 0xfffc) == 0xfffc {
        let x = byte(src, *ip + 2)?;
        *ip += 3;
        let len = (x << 3 | (t & 7)) + MIN_ZERO_RUN;
        return Ok(Far::Zeros(len, v & 3));
    }
    let len = length(src, ip, t & 7, 7)? + 2;
    let v = le16(src, *ip)?;
    *ip += 2;
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

#[inline(always)]
fn byte(src: &[u8], at: usize) -> Result<usize, Error> {
    src.get(at)
        .map(|&b| usize::from(b))
        .ok_or(Error::InputOverrun)
}

#[inline(always)]
fn le16(src: &[u8], at: usize) -> Result<usize, Error> {
    match src.get(at..at + 2) {
        Some(&[a, b]) => Ok(usize::from(u16::from_le_bytes([a, b]))),
        _ => Err(Error::InputOverrun),
    }
}

/// A length field: `bits` if non-zero, else `max` plus 255 per zero byte
/// plus the first non-zero byte.
#[inline(always)]
fn length(src: &[u8], ip: &mut usize, bits: usize, max: usize) -> Result<usize, Error> {
    if bits != 0 {
        return Ok(bits);
    }
    long_length(src, ip, max)
}

/// The extended form of [`length`], kept out of line.
#[inline(never)]
fn long_length(src: &[u8], ip: &mut usize, max: usize) -> Result<usize, Error> {
    let rest = src.get(*ip..).unwrap_or_default();
    let zeros = rest
        .iter()
        .position(|&b| b != 0)
        .ok_or(Error::InputOverrun)?;
    let last = usize::from(rest[zeros]);
    *ip += zeros + 1;
    zeros
        .checked_mul(255)
        .and_then(|z| z.checked_add(max + last))
        .ok_or(Error::Corrupt("length field overflows"))
}

/// Copies the 16 bytes at `from` to `to`; both ranges lie in `buf`, and
/// `to >= from + 16` or `to <= from`, or the bytes read are don't-cares.
#[inline(always)]
fn copy16(buf: &mut [u8], from: usize, to: usize) {
    let mut w = [0u8; 16];
    w.copy_from_slice(&buf[from..from + 16]);
    buf[to..to + 16].copy_from_slice(&w);
}

/// Copies `n` literal bytes from the input to the output.
#[inline(always)]
fn literals(
    src: &[u8],
    dst: &mut [u8],
    ip: &mut usize,
    op: &mut usize,
    n: usize,
) -> Result<(), Error> {
    let (i, o) = (*ip, *op);
    match (src.get(i..i + 32), dst.get_mut(o..o + 32)) {
        // Short run with room on both sides: two fixed-size copies.
        (Some(from), Some(to)) if n <= 32 => to.copy_from_slice(from),
        _ => {
            let from = src.get(i..i + n).ok_or(Error::InputOverrun)?;
            let to = dst.get_mut(o..o + n).ok_or(Error::OutputOverrun)?;
            to.copy_from_slice(from);
        }
    }
    *ip += n;
    *op += n;
    Ok(())
}

/// Copies the 0..=3 literals that may follow a match.
#[inline(always)]
fn short_literals(
    src: &[u8],
    dst: &mut [u8],
    ip: &mut usize,
    op: &mut usize,
    n: usize,
) -> Result<(), Error> {
    let (i, o) = (*ip, *op);
    match (src.get(i..i + 4), dst.get_mut(o..o + 4)) {
        (Some(from), Some(to)) => to.copy_from_slice(from),
        _ => return literals(src, dst, ip, op, n),
    }
    *ip += n;
    *op += n;
    Ok(())
}

/// Writes an `lzo-rle` run of `n` zero bytes.
fn zeros(dst: &mut [u8], op: &mut usize, n: usize) -> Result<(), Error> {
    let to = dst.get_mut(*op..*op + n).ok_or(Error::OutputOverrun)?;
    to.fill(0);
    *op += n;
    Ok(())
}

/// Copies `len` bytes from `dist` bytes back in the output to `op`; the
/// ranges may overlap (a repeating pattern).
#[inline(always)]
fn copy_match(dst: &mut [u8], op: usize, dist: usize, len: usize) -> Result<(), Error> {
    if dist > op {
        return Err(Error::LookbehindOverrun);
    }
    let room = dst.len() - op;
    if len > room {
        return Err(Error::OutputOverrun);
    }
    let from = op - dist;
    if room - len < SLACK {
        copy_exact(dst, from, op, len);
    } else {
        copy_match_fast(dst, from, op, dist, len);
    }
    Ok(())
}

/// Copies a match of any length at any distance (`dist` in 1..) with block
/// copies, which may write up to 15 bytes past it (the caller guarantees
/// the room); long runs without overlap, or of one byte, in one go.
#[inline(never)]
fn copy_match_fast(buf: &mut [u8], from: usize, to: usize, dist: usize, len: usize) {
    if len > 64 && dist >= len {
        buf.copy_within(from..from + len, to);
    } else if len > 64 && dist == 1 {
        let b = buf[from];
        buf[to..to + len].fill(b);
    } else {
        copy_blocks(buf, from, to, dist, len);
    }
}

/// Copies `len` bytes from `from` to `to` exactly, writing nothing past
/// `to + len`.
#[cold]
fn copy_exact(buf: &mut [u8], from: usize, to: usize, len: usize) {
    let dist = to - from;
    if dist >= len {
        buf.copy_within(from..from + len, to);
    } else if dist == 1 {
        let b = buf[from];
        buf[to..to + len].fill(b);
    } else {
        for i in to..to + len {
            buf[i] = buf[i - dist];
        }
    }
}
