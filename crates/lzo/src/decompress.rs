//! LZO1X decompressor with the semantics of the kernel's
//! lib/lzo/lzo1x_decompress_safe.c: the same streams succeed, the same fail.
//!
//! Like the kernel it also accepts the versioned bitstream (first byte 17,
//! then a version byte) and, for version 1 (`lzo-rle`), its zero-run
//! instruction; liblzo2 rejects every such stream, and neither btrfs nor
//! [`crate::compress`] ever writes one. Every read and write is bounds-checked,
//! so hostile input yields an error, never a panic or an out-of-slice access.
//!
//! Speed comes from doing the checks once rather than skipping them, and from
//! not branching on what cannot be predicted. While at least [`FAST_IN`]
//! bytes of input and [`FAST_OUT`] bytes of output room are left,
//! [`fast_loop`] decodes instructions from a fixed-size window of the input,
//! so no instruction there can overrun either buffer, and copies in whole
//! blocks rather than exactly, scribbling over bytes past the run that later
//! instructions overwrite. Whether the next instruction is a literal run or
//! a match, and which kind of match, is close to random in real data, and a
//! mispredicted branch costs more than decoding every kind at once: the
//! common instructions (short literal runs; M2, M3 and M4 with their length
//! in the instruction byte) share one branch-free decoding, a literal run
//! being a match of length 0 followed by its literals. Every match distance
//! is still checked against the output produced. Anything else (the end
//! marker, long lengths, the last few instructions of a stream, `lzo-rle`'s
//! zero runs) goes through [`step`], one fully checked instruction at a time;
//! the fast loop leaves an instruction to it rather than fail where `step`
//! might fail differently, so both give the same result for every input.

use std::hint::select_unpredictable as pick;

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
        // Near the ends of the buffers only `step` can go on.
        if src.len().saturating_sub(ip) >= FAST_IN && dst.len().saturating_sub(op) >= FAST_OUT {
            (ip, op, class) = fast_loop(src, dst, ip, op, class, version)?;
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
/// 1..=3 after that many literals, 4 or more after a longer literal run.
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
                *class = n;
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
        *class = 4;
        return Ok(None);
    } else {
        // 0000DDSS: a 2-byte match within 1 KiB after 1..3 literals,
        // a 3-byte match 2..3 KiB back after a longer literal run.
        let h = byte(src, *ip + 1)?;
        *ip += 2;
        let (base, l) = if *class >= 4 { (2049, 3) } else { (1, 2) };
        dist = base + (t >> 2) + (h << 2);
        len = l;
        next = t & 3;
    }
    copy_match(dst, *op, dist, len)?;
    *op += len;
    short_literals(src, dst, ip, op, next)?;
    *class = next;
    Ok(None)
}

/// Input the fast loop wants left at an instruction: 3 instruction bytes and
/// 16 for the block copy of literals.
const FAST_IN: usize = 3 + 16;
/// Output room the fast loop wants at an instruction: a match of up to 32
/// bytes copied as two 16-byte blocks, then 4 bytes of trailing literals
/// (or up to 16 bytes copied as one block, then a 16-byte block of
/// literals).
const FAST_OUT: usize = 32 + 4;

/// The fast loop's decoding tables, together so that one base address
/// serves them all.
struct Tables {
    /// Whether the shared path decodes instruction byte `t` after an
    /// instruction of class `c` (see [`step`]; at most 16 here), at
    /// `t + 256 * c`: a literal run of 4..=16 bytes (only after a match
    /// without literals), an M2, an M3 or an M4 with its length in the
    /// instruction byte (or the end marker, which decodes as an M4 at a
    /// distance the shared path leaves to [`step`]).
    shared: [bool; 32 * 256],
    /// For those instruction bytes: the distance is `base` plus the byte
    /// after the instruction byte times 8 for an M2, else plus `mask` of
    /// the 14-bit field of the LE16 after the instruction byte. A literal
    /// run is a match of length 0 from 16 bytes back.
    base: [u16; 256],
    mask: [u16; 256],
    /// The match length (0 for a literal run).
    mlen: [u8; 256],
    /// The instruction length.
    ilen: [u8; 256],
}

static TABLES: Tables = {
    let mut tables = Tables {
        shared: [false; 32 * 256],
        base: [0; 256],
        mask: [0; 256],
        mlen: [0; 256],
        ilen: [0; 256],
    };
    let mut k = 0;
    while k < 32 * 256 {
        let t = k & 255;
        tables.shared[k] = t > 32 || (t > 16 && t < 32 && t & 7 != 0) || (k >= 1 && k <= 13);
        k += 1;
    }
    let mut t = 0;
    while t < 256 {
        let (base, mask, mlen, ilen) = if t >= 64 {
            (1 + ((t >> 2) & 7), 0, (t >> 5) + 1, 2)
        } else if t >= 32 {
            (1, 0x3fff, (t & 31) + 2, 3)
        } else if t >= 16 {
            (0x4000 + ((t & 8) << 11), 0x3fff, (t & 7) + 2, 3)
        } else {
            (16, 0, 0, 1)
        };
        tables.base[t] = base as u16;
        tables.mask[t] = mask as u16;
        tables.mlen[t] = mlen as u8;
        tables.ilen[t] = ilen as u8;
        t += 1;
    }
    tables
};

/// Decodes instructions from input position `i`, output position
/// `o` and class `c` (see [`step`]) while there is room for block copies on
/// both sides, and returns where it stopped: at the first instruction it
/// leaves to [`step`] (the end marker, anything that needs more than the
/// room left near the end of `src` or `dst`, the rarer kinds, and in a
/// `version` 1 stream (`lzo-rle`) a zero run, which `far` recognises).
///
/// The fast loop never returns an error [`step`] would not return for the
/// same instruction: it leaves an instruction it cannot finish to `step`,
/// untouched but for scratch bytes past `o`, and fails by itself only on an
/// extended M3 reaching back before the start of the output, which `step`
/// fails the same way.
#[inline(never)]
fn fast_loop(
    src: &[u8],
    dst: &mut [u8],
    mut i: usize,
    mut o: usize,
    mut c: usize,
    version: usize,
) -> Result<(usize, usize, usize), Error> {
    let (Some(i_end), Some(o_end)) = (
        src.len().checked_sub(FAST_IN),
        dst.len().checked_sub(FAST_OUT),
    ) else {
        return Ok((i, o, c));
    };
    while i <= i_end && o <= o_end {
        let Some(inp) = src.get(i..i + FAST_IN) else {
            break;
        };
        let t = usize::from(inp[0]);
        let b1 = usize::from(inp[1]);
        if TABLES.shared[(t | c << 8) % (32 * 256)] {
            // A literal run of 4..=16 bytes (0000LLLL after a match without
            // literals), 1LLDDDSS / 01LDDDSS: 3..8 bytes within 2 KiB,
            // 001LLLLL: 3..33 bytes within 16 KiB, or 0001HLLL: 3..9 bytes
            // 16..48 KiB back. Which of them comes next is hard to predict:
            // all are decoded without branches, a literal run as a match of
            // length 0 from 16 bytes back followed by its literals.
            let lit = t < 16;
            let m2 = t >= 64;
            let v = usize::from(u16::from_le_bytes([inp[1], inp[2]]));
            // lzo-rle's zero run looks like an M4 here: `far`'s test, left to `step`.
            if version != 0 && t & 0xf8 == 0x18 && v & 0xfffc == 0xfffc {
                break;
            }
            let dist = usize::from(TABLES.base[t])
                + pick(m2, b1 << 3, (v >> 2) & usize::from(TABLES.mask[t]));
            let mlen = usize::from(TABLES.mlen[t]);
            let ilen = usize::from(TABLES.ilen[t] & 3);
            let next = pick(lit, t + 3, pick(m2, t, b1) & 3);
            // A distance of exactly 16 KiB is an M4 with a zero distance
            // field, the end marker (or one with a bad length, which `step`
            // fails), or an M3, which `step` decodes as well. A match
            // reaching back too far fails in `step` too, and a literal run
            // near the start of the output is left to it.
            if dist == 0x4000 {
                break;
            }
            let Some(from) = o.checked_sub(dist) else {
                break;
            };
            if dist < 16 {
                // A match overlapping its source by more than a block: the
                // pattern of its first `dist` bytes, repeated, which one
                // block covers if the match is no longer. The bytes at and
                // past `o` that the read takes in are masked off.
                if mlen > 16 {
                    break;
                }
                let Some(&w) = dst.get(from..).and_then(<[u8]>::first_chunk::<16>) else {
                    break;
                };
                let d = dist & 15;
                let block = (u128::from_le_bytes(w) & PATTERN_MASK[d])
                    .wrapping_mul(PATTERN_REPEAT[d])
                    .to_le_bytes();
                let Some(win) = dst
                    .get_mut(o..)
                    .and_then(<[u8]>::first_chunk_mut::<FAST_OUT>)
                else {
                    break;
                };
                win[..16].copy_from_slice(&block);
                if let (Some(to), Some(lits)) =
                    (win.get_mut(mlen..mlen + 4), inp.get(ilen..ilen + 4))
                {
                    to.copy_from_slice(lits);
                }
                i += ilen + next;
                o += mlen + next;
                c = next;
                continue;
            }
            let (done, after) = dst.split_at_mut(o);
            let (Some(block), Some(win)) = (
                done[from..].first_chunk::<16>(),
                after.first_chunk_mut::<FAST_OUT>(),
            ) else {
                break;
            };
            win[..16].copy_from_slice(block);
            if mlen <= 16 {
                // The literals: up to 16 after a literal run, 0..=3 after a
                // match (the rest is scratch).
                if let (Some(to), Some(lits)) =
                    (win.get_mut(mlen..mlen + 16), inp.get(ilen..ilen + 16))
                {
                    to.copy_from_slice(lits);
                }
                i += ilen + next;
                o += mlen + next;
                c = next;
                continue;
            }
            // 17..=32 bytes: two blocks, the second one (at a distance under
            // 32) after the first is written.
            if mlen <= 32 {
                if let Some(block) = done[from..].get(16..32) {
                    win[16..32].copy_from_slice(block);
                } else {
                    let Some(&block) = dst.get(from + 16..).and_then(<[u8]>::first_chunk::<16>)
                    else {
                        break;
                    };
                    let Some(to) = dst
                        .get_mut(o + 16..)
                        .and_then(<[u8]>::first_chunk_mut::<16>)
                    else {
                        break;
                    };
                    *to = block;
                }
                if let (Some(to), Some(lits)) =
                    (dst.get_mut(o + mlen..o + mlen + 4), inp.get(ilen..ilen + 4))
                {
                    to.copy_from_slice(lits);
                }
                i += ilen + next;
                o += mlen + next;
                c = next;
                continue;
            }
        } else if t < 16 && c == 0 {
            // 0000LLLL: a literal run of 17 or 18 bytes, or (L = 0) of
            // 19..=273 bytes with a one-byte length extension: one 64-byte
            // block if it is no longer, else copied exactly.
            let (n, p) = pick(t != 0, (t + 3, 1), (b1 + 18, 2));
            if t == 0 && b1 == 0 {
                break;
            }
            if n <= 64 {
                let (Some(to), Some(lits)) = (
                    dst.get_mut(o..).and_then(<[u8]>::first_chunk_mut::<64>),
                    src.get(i + p..).and_then(<[u8]>::first_chunk::<64>),
                ) else {
                    break;
                };
                *to = *lits;
            } else {
                let (Some(to), Some(lits)) = (
                    dst.get_mut(o..).and_then(|d| d.get_mut(..n)),
                    src.get(i + p..).and_then(|s| s.get(..n)),
                ) else {
                    break;
                };
                to.copy_from_slice(lits);
            }
            i += p + n;
            o += n;
            c = 4;
            continue;
        } else if t == 32 && b1 != 0 {
            // 00100000: an M3 of 34..=64 bytes with a one-byte length
            // extension, at a distance of 64 or more: one 64-byte block.
            let mlen = b1 + 33;
            let v = usize::from(u16::from_le_bytes([inp[2], inp[3]]));
            let dist = 1 + (v >> 2);
            let next = v & 3;
            let Some(from) = o.checked_sub(dist) else {
                return Err(Error::LookbehindOverrun);
            };
            let (done, after) = dst.split_at_mut(o);
            if let (Some(to), Some(block), Some(lits), true) = (
                after.first_chunk_mut::<68>(),
                done[from..].first_chunk::<64>(),
                inp.get(4..8),
                mlen <= 64,
            ) {
                to[..64].copy_from_slice(block);
                if let Some(to) = to.get_mut(mlen..mlen + 4) {
                    to.copy_from_slice(lits);
                }
                i += 4 + next;
                o += mlen + next;
                c = next;
                continue;
            }
        }
        break;
    }
    Ok((i, o, c))
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
/// Returns the class after it (see [`step`]): 0 (none), 1..=3, or 4.
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
    Ok(t.min(4))
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
