//! btrfs's framing of LZO extents, byte-compatible with fs/btrfs/lzo.c.
//!
//! An extent (regular or inline) is:
//! - a 4-byte little-endian total length, counting itself, every segment and
//!   all padding;
//! - one segment per sector of uncompressed input, each a 4-byte
//!   little-endian payload length followed by that many bytes of raw LZO1X
//!   data that decode to at most one sector;
//! - a segment header never straddles a sector boundary: when fewer than 4
//!   bytes remain in the current sector after a payload, 1..=3 zero bytes pad
//!   it out (after the last payload too, and the total length counts them).
//!
//! Payloads themselves may cross sector boundaries. On disk a regular extent
//! is then zero-padded to a whole sector; [`decompress_extent`] accepts that.

use crate::{compress, decompress, worst_compress, CompressState, Error};

/// Size of the extent header and of each segment header (`LZO_LEN`).
pub const LZO_LEN: usize = 4;
/// Largest uncompressed extent btrfs compresses, and the largest compressed
/// one it reads (`BTRFS_MAX_UNCOMPRESSED`, `BTRFS_MAX_COMPRESSED`).
pub const BTRFS_MAX_EXTENT: usize = 128 * 1024;
/// Largest extent accepted here: wring's own stores use the same framing for
/// extents of up to 4 MiB (its `max_extent`); btrfs itself never goes past
/// [`BTRFS_MAX_EXTENT`], so anything the kernel can read stays within it.
pub const MAX_EXTENT: usize = 4 * 1024 * 1024;
/// Smallest sector size accepted here.
pub const MIN_SECTOR: usize = 512;
/// Largest sector size btrfs supports.
pub const MAX_SECTOR: usize = 64 * 1024;

/// Compresses one extent (`src.len() <= 128 KiB`) into btrfs's LZO framing
/// for the given sector size (4096 on most filesystems) and returns the
/// framed length, header and padding included.
///
/// Mirrors `lzo_compress_folios` / `copy_compressed_data_to_page` (called
/// `lzo_compress_bio` / `copy_compressed_data_to_bio` in newer kernels): input
/// is cut into sectors counted from its start, each compressed on its own with
/// `lzo1x_1_compress`. Returns `Ok(None)`, which the caller treats as
/// incompressible, when the result would not fit in `dst`, or, as the kernel
/// gives up with `-E2BIG`, when after more than two sectors of input the
/// output is already larger than the input consumed. The kernel's own output
/// limit (no more compressed pages than input pages; in `lzo_compress_bio`,
/// every payload byte before offset `round_down(src.len(), sector)`) is left
/// to the caller, who sets it through `dst.len()`. An empty `src` yields the 4-byte header alone (the
/// kernel never compresses an empty range). Bytes of `dst` past the returned
/// length are scratch.
pub fn compress_extent(
    src: &[u8],
    dst: &mut [u8],
    sector: usize,
    state: &mut CompressState,
) -> Result<Option<usize>, Error> {
    check_sector(sector)?;
    if src.len() > MAX_EXTENT {
        return Err(Error::BadParameter("extent larger than 4 MiB"));
    }
    if dst.len() < LZO_LEN {
        return Ok(None);
    }
    let mut pos = LZO_LEN;
    let mut consumed = 0;
    for chunk in src.chunks(sector) {
        match put_segment(chunk, dst, pos, sector, state)? {
            Some(end) => pos = end,
            None => return Ok(None),
        }
        consumed += chunk.len();
        if consumed > 2 * sector && consumed < pos {
            return Ok(None);
        }
    }
    write_len(dst, 0, pos);
    Ok(Some(pos))
}

/// Writes one segment (header, payload, padding) at `pos` and returns where
/// the next one starts, or `None` when `dst` is too small.
fn put_segment(
    chunk: &[u8],
    dst: &mut [u8],
    pos: usize,
    sector: usize,
    state: &mut CompressState,
) -> Result<Option<usize>, Error> {
    let Some(payload) = dst.get_mut(pos + LZO_LEN..) else {
        return Ok(None);
    };
    let n = match compress(chunk, payload, state) {
        Ok(n) => n,
        Err(Error::OutputOverrun) => return Ok(None),
        Err(e) => return Err(e),
    };
    write_len(dst, pos, n);
    let end = pos + LZO_LEN + n;
    let left = end.next_multiple_of(sector) - end;
    if left == 0 || left >= LZO_LEN {
        return Ok(Some(end));
    }
    match dst.get_mut(end..end + left) {
        Some(pad) => {
            pad.fill(0);
            Ok(Some(end + left))
        }
        None => Ok(None),
    }
}

/// Decodes a btrfs LZO extent into `dst` and returns the number of bytes
/// produced, at most `dst.len()` (decoding stops once `dst` is full, like the
/// kernel once the read range is satisfied). `src` is the compressed extent
/// as stored, possibly with zero padding up to a whole sector.
///
/// Mirrors `lzo_decompress_bio` and its checks: the total length must not
/// exceed `src.len()` or [`MAX_EXTENT`] (the kernel's limit is 128 KiB,
/// [`BTRFS_MAX_EXTENT`]; wring-fs writes larger extents) and must reach into
/// `src`'s last sector;
/// each segment's length must not exceed `lzo1x_worst_compress(sector)`; each
/// payload must decode cleanly (`lzo1x_decompress_safe`). Differences: a
/// segment or segment header running past the end of `src` is an error
/// (where the kernel would read past its buffers), and a segment decoding to
/// more than one sector is an error (the kernel allows up to
/// `lzo1x_worst_compress(sector)` bytes, but never writes such a segment).
/// When `dst` fills while segments remain, the extent holds more than the
/// caller declared: [`Error::OutputOverrun`]. Never allocates.
pub fn decompress_extent(src: &[u8], dst: &mut [u8], sector: usize) -> Result<usize, Error> {
    check_sector(sector)?;
    let total = read_len(src, 0).ok_or(Error::Corrupt("extent shorter than its header"))?;
    if total > src.len().min(MAX_EXTENT) || total.next_multiple_of(sector) < src.len() {
        return Err(Error::Corrupt(
            "extent header length does not match the extent size",
        ));
    }
    let mut cur = LZO_LEN;
    let mut out = 0;
    while cur < total && out < dst.len() {
        let seg_len = read_len(src, cur).ok_or(Error::Corrupt("segment header past the end"))?;
        cur += LZO_LEN;
        if seg_len > worst_compress(sector) {
            return Err(Error::Corrupt(
                "segment longer than lzo1x_worst_compress(sector)",
            ));
        }
        let seg = src
            .get(cur..cur + seg_len)
            .ok_or(Error::Corrupt("segment runs past the end of the extent"))?;
        out += decode_segment(seg, &mut dst[out..], sector)?;
        cur += seg_len;
        let left = sector - cur % sector;
        if left < LZO_LEN {
            cur += left;
        }
    }
    if out == dst.len() && more_segments(src, cur, total) {
        return Err(Error::OutputOverrun);
    }
    Ok(out)
}

/// Whether a segment with data starts at `cur` before the extent's end (what follows the
/// last segment can only be padding shorter than a header).
fn more_segments(src: &[u8], cur: usize, total: usize) -> bool {
    total.saturating_sub(cur) >= LZO_LEN && read_len(src, cur).is_some_and(|len| len > 0)
}

/// Decodes one segment into the front of `window`: at most one sector, and at most
/// `window.len()` bytes — a segment that holds more than a short final window is output past
/// the caller's buffer ([`Error::OutputOverrun`]); one that holds more than a sector is corrupt.
fn decode_segment(seg: &[u8], window: &mut [u8], sector: usize) -> Result<usize, Error> {
    let room = window.len().min(sector);
    match decompress(seg, &mut window[..room]) {
        Err(Error::OutputOverrun) if room < sector => Err(Error::OutputOverrun),
        r => r.map_err(segment_error),
    }
}

/// Like [`decode_segment`], but output beyond `window` is dropped, as the kernel's inline
/// path does (through one sector of scratch when the window is shorter).
fn decode_segment_dropping_excess(
    seg: &[u8],
    window: &mut [u8],
    sector: usize,
) -> Result<usize, Error> {
    if window.len() >= sector {
        return decode_segment(seg, window, sector);
    }
    let mut scratch = vec![0u8; sector];
    let n = decompress(seg, &mut scratch)
        .map_err(segment_error)?
        .min(window.len());
    window[..n].copy_from_slice(&scratch[..n]);
    Ok(n)
}

fn segment_error(e: Error) -> Error {
    match e {
        Error::OutputOverrun => Error::Corrupt("segment decodes to more than one sector"),
        e => e,
    }
}

/// Decodes an inline LZO extent (the data of an inline file extent item)
/// into `dst`, which must be exactly the extent's uncompressed length
/// (`ram_bytes`, at most one sector).
///
/// Mirrors `lzo_decompress`: `src` must be at least 4 and at most
/// `lzo1x_worst_compress(sector) + 8` bytes, its header must equal
/// `src.len()`, it must hold exactly one segment of `src.len() - 8` bytes,
/// which decodes to at most one sector; decoding to fewer than `dst.len()`
/// bytes is an error, as in the kernel. Bytes decoded beyond `dst.len()` are
/// dropped. Allocates one sector of scratch when `dst` is shorter than one.
pub fn decompress_inline(src: &[u8], dst: &mut [u8], sector: usize) -> Result<usize, Error> {
    check_sector(sector)?;
    if src.len() < LZO_LEN || src.len() > worst_compress(sector) + 2 * LZO_LEN {
        return Err(Error::Corrupt("inline extent size out of range"));
    }
    if read_len(src, 0) != Some(src.len()) {
        return Err(Error::Corrupt(
            "inline extent header length does not match its size",
        ));
    }
    let segment = src.len().checked_sub(2 * LZO_LEN);
    if segment.is_none() || read_len(src, LZO_LEN) != segment {
        return Err(Error::Corrupt(
            "inline extent segment length does not match its size",
        ));
    }
    let n = decode_segment_dropping_excess(&src[2 * LZO_LEN..], dst, sector)?;
    if n < dst.len() {
        return Err(Error::Corrupt(
            "inline extent decodes to less than its length",
        ));
    }
    Ok(n)
}

fn check_sector(sector: usize) -> Result<(), Error> {
    if sector.is_power_of_two() && (MIN_SECTOR..=MAX_SECTOR).contains(&sector) {
        Ok(())
    } else {
        Err(Error::BadParameter(
            "sector size must be a power of two from 512 to 65536",
        ))
    }
}

fn read_len(buf: &[u8], at: usize) -> Option<usize> {
    match buf.get(at..at + LZO_LEN)? {
        &[a, b, c, d] => usize::try_from(u32::from_le_bytes([a, b, c, d])).ok(),
        _ => None,
    }
}

/// Writes `len` as LE32 at `at`; the caller has checked the room.
fn write_len(buf: &mut [u8], at: usize, len: usize) {
    buf[at..at + LZO_LEN].copy_from_slice(&(len as u32).to_le_bytes());
}

#[cfg(test)]
mod tests;
