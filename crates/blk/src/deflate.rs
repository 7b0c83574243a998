//! `deflate`, zram's name for raw deflate: drivers/block/zram/backend_deflate.c (and the
//! crypto API's "deflate" before it) compresses each page with `zlib_deflateInit2(level,
//! Z_DEFLATED, -DEFLATE_DEF_WINBITS, MAX_MEM_LEVEL, Z_DEFAULT_STRATEGY)` — no zlib header or
//! checksum, an 11-bit (2 KiB) window, level `Z_DEFAULT_COMPRESSION` (6) unless
//! `algorithm_params level=` says otherwise — and inflates with `-DEFLATE_DEF_WINBITS`.
//!
//! Here flate2 on zlib-rs does the same on the calling thread, one context per stream in use
//! (zram's per-CPU `zcomp_strm`), reset between pages. Differs from the kernel: zlib-rs's
//! output is not byte-identical to the kernel's zlib (a valid raw deflate stream all the
//! same), its memory level is 8, not 9, and the window is 15 bits (32 KiB), not 11, the window
//! btrfs's zlib uses through the same library, tested and fuzzed here: a larger window only
//! finds more matches (a 4 KiB page never reaches past 4 KiB; larger `slot_size`s use all of
//! it), and any inflater reads the result.
//!
//! A page that does not fit its limit leaves zlib-rs's stream unfinished, and `reset()` then
//! does not clear it: the next page panicked in zlib-rs 0.6.8 ("buf.len() must fit in
//! remaining()" in its block flush; seen on the corpus through nbdkit). As the engine's zlib
//! codec does, an abandoned stream is run to its end into a scratch buffer before the context
//! is reused. A panic in the library all the same is caught and becomes the page's error
//! (EIO), not an abort of the server.
//!
//! The engine has no raw deflate (btrfs's zlib carries a zlib header and Adler-32, and its
//! `Algorithm` codes are the filesystem's on-disk compression types), so, as `lzo-rle`, these
//! streams sit beside the offload's: the block device's algorithms are its own enumeration,
//! kept in RAM only, never written to the filesystem's records.

use std::panic::{catch_unwind, AssertUnwindSafe};

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

use crate::error::BlkError;
use crate::streams::{PageCodec, PerPage, Streams, Workspaces};

/// zram's default deflate level (`Z_DEFAULT_COMPRESSION`).
pub const DEFAULT_LEVEL: i32 = 6;
/// The window, for deflating and inflating (the kernel deflates with 11 bits).
const WINDOW_BITS: u8 = 15;

/// Raw deflate streams.
pub struct DeflateStreams {
    compressors: Workspaces<Compress>,
    decompressors: Workspaces<Decompress>,
    level: u32,
    name: String,
    per_page: PerPage,
}

impl std::fmt::Debug for DeflateStreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeflateStreams")
            .field("name", &self.name)
            .finish()
    }
}

impl DeflateStreams {
    /// Raw deflate at `level` (1 to 9) on `streams` streams.
    pub fn new(level: i32, streams: usize) -> Result<DeflateStreams, BlkError> {
        let level = u32::try_from(level)
            .ok()
            .filter(|l| (1..=9).contains(l))
            .ok_or_else(|| {
                BlkError::Option(format!(
                    "comp_algorithm=deflate:{level}: deflate's levels are 1 to 9"
                ))
            })?;
        Ok(DeflateStreams {
            compressors: Workspaces::default(),
            decompressors: Workspaces::default(),
            level,
            name: format!("deflate:{level}"),
            per_page: PerPage::new(streams),
        })
    }

    fn failed(&self, message: impl std::fmt::Display) -> BlkError {
        BlkError::Compress {
            algorithm: self.name.clone(),
            message: message.to_string(),
        }
    }

    /// One slot into `out`: `Some(n)` bytes, `None` when the stream does not fit.
    fn deflate(&self, input: &[u8], out: &mut [u8]) -> Result<Option<usize>, BlkError> {
        let mut c = self.compressors.take().unwrap_or_else(|| {
            Compress::new_with_window_bits(Compression::new(self.level), false, WINDOW_BITS)
        });
        // A context that panicked is dropped, not given back.
        let r = catch_unwind(AssertUnwindSafe(|| {
            c.reset();
            c.compress(input, out, FlushCompress::Finish)
        }))
        .map_err(|_| self.failed("the deflate library panicked on this page"))?;
        let n = usize::try_from(c.total_out()).unwrap_or(usize::MAX);
        let fits = match r {
            Ok(Status::StreamEnd) => true,
            // The output filled before the stream ended: it does not fit.
            Ok(Status::Ok | Status::BufError) => false,
            Err(e) => return Err(self.failed(e)),
        };
        if fits || finish(&mut c, input) {
            self.compressors.give(c, self.streams());
        }
        Ok(fits.then_some(n))
    }

    /// One object into a whole slot, `out`; anything else is corrupt.
    fn inflate(&self, input: &[u8], out: &mut [u8]) -> Result<Option<usize>, BlkError> {
        let mut d = self
            .decompressors
            .take()
            .unwrap_or_else(|| Decompress::new_with_window_bits(false, WINDOW_BITS));
        let corrupt = |message: String| BlkError::Corrupt { page: 0, message };
        let r = catch_unwind(AssertUnwindSafe(|| {
            d.reset(false);
            d.decompress(input, out, FlushDecompress::Finish)
        }))
        .map_err(|_| corrupt("deflate: the library panicked on this object".into()))?;
        let (read, written) = (d.total_in(), d.total_out());
        self.decompressors.give(d, self.streams());
        match r {
            Ok(Status::StreamEnd) if written == out.len() as u64 && read == input.len() as u64 => {
                Ok(Some(out.len()))
            }
            Ok(_) => Err(corrupt(format!(
                "deflate: {read} of {} bytes gave {written} bytes, not a whole slot of {}",
                input.len(),
                out.len()
            ))),
            Err(e) => Err(corrupt(format!("deflate: {e}"))),
        }
    }
}

/// Run an abandoned stream to its end, discarding its output, so that `reset()` leaves the
/// context clean; false (drop the context) if that fails.
fn finish(c: &mut Compress, input: &[u8]) -> bool {
    let mut scratch = [0u8; 4096];
    catch_unwind(AssertUnwindSafe(|| loop {
        let used = usize::try_from(c.total_in()).map_or(input.len(), |n| n.min(input.len()));
        match c.compress(&input[used..], &mut scratch, FlushCompress::Finish) {
            Ok(Status::StreamEnd) => return true,
            Ok(_) => {}
            Err(_) => return false,
        }
    }))
    .unwrap_or(false)
}

impl PageCodec for DeflateStreams {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn per_page(&self) -> &PerPage {
        &self.per_page
    }

    fn compress_one(&self, input: &[u8], out: &mut [u8]) -> Result<Option<usize>, BlkError> {
        self.deflate(input, out)
    }

    fn decompress_one(&self, input: &[u8], out: &mut [u8]) -> Result<Option<usize>, BlkError> {
        self.inflate(input, out)
    }

    fn workspaces(&self) -> usize {
        self.compressors.len()
    }

    fn keep(&self, n: usize) {
        self.compressors.truncate(n);
        self.decompressors.truncate(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arena::PAGE_SIZE;
    use crate::streams::PageJob;

    fn text(len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| {
                b"raw deflate, as zram's deflate backend writes it. "[i % 50] ^ (i / 997) as u8
            })
            .collect()
    }

    fn round_trip(s: &DeflateStreams, page: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; page.len()];
        let mut jobs = [PageJob::new(page, &mut out)];
        s.compress(&mut jobs);
        let n = match jobs[0].result.take() {
            Some(Ok(Some(n))) => n,
            other => panic!("compress: {other:?}"),
        };
        let mut back = vec![0u8; page.len()];
        let mut jobs = [PageJob::new(&out[..n], &mut back)];
        s.decompress(&mut jobs);
        assert!(
            matches!(jobs[0].result, Some(Ok(Some(_)))),
            "{:?}",
            jobs[0].result
        );
        out.truncate(n);
        assert_eq!(back, page);
        out
    }

    #[test]
    fn raw_deflate_that_any_inflater_reads() {
        let s = DeflateStreams::new(DEFAULT_LEVEL, 1).unwrap();
        for len in [PAGE_SIZE, 16 << 10, 32 << 10] {
            let page = text(len);
            let out = round_trip(&s, &page);
            assert!(out.len() < len / 4, "{} of {len}", out.len());
            // No zlib header or checksum: a plain raw inflater reads it back.
            let mut back = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::DeflateDecoder::new(&out[..]), &mut back)
                .unwrap();
            assert_eq!(back, page);
        }
    }

    /// Real data page by page under zram's limit (the huge class size), as the store
    /// compresses it: every page that fits decodes back, none fails. Without running the
    /// streams that did not fit to their end, zlib-rs panicked here.
    #[test]
    fn pages_of_real_data_under_the_huge_limit_all_decode() {
        let limit = crate::arena::Arena::new().huge_class_size() - 1;
        let s = DeflateStreams::new(DEFAULT_LEVEL, 1).unwrap();
        let mut data = Vec::new();
        for sample in wring_testing::samples(4 << 20) {
            data.extend_from_slice(&sample.data);
        }
        let (mut fit, mut not) = (0, 0);
        let mut out = vec![0u8; limit];
        let mut back = vec![0u8; PAGE_SIZE];
        for page in data.chunks_exact(PAGE_SIZE) {
            let mut jobs = [PageJob::new(page, &mut out)];
            s.compress(&mut jobs);
            match jobs[0].result.take() {
                Some(Ok(Some(n))) => {
                    fit += 1;
                    let mut jobs = [PageJob::new(&out[..n], &mut back)];
                    s.decompress(&mut jobs);
                    assert!(matches!(jobs[0].result, Some(Ok(Some(_)))));
                    assert!(back == page, "page {fit} decoded to other bytes");
                }
                Some(Ok(None)) => not += 1,
                other => panic!("page {}: {other:?}", fit + not),
            }
        }
        assert!(fit > 0 && not > 0, "{fit} fit, {not} did not");
    }

    #[test]
    fn levels_are_one_to_nine_and_higher_levels_do_not_grow_text() {
        for bad in [0, 10, -1] {
            let e = DeflateStreams::new(bad, 1).unwrap_err().to_string();
            assert!(e.contains("1 to 9"), "{e}");
        }
        let page = text(PAGE_SIZE);
        let one = round_trip(&DeflateStreams::new(1, 1).unwrap(), &page).len();
        let nine = round_trip(&DeflateStreams::new(9, 1).unwrap(), &page).len();
        assert!(nine <= one, "level 9 {nine} > level 1 {one}");
    }

    #[test]
    fn noise_does_not_fit_and_garbage_is_corrupt_not_a_panic() {
        let s = DeflateStreams::new(DEFAULT_LEVEL, 2).unwrap();
        let noise = wring_testing::random_bytes(7, PAGE_SIZE);
        let mut out = vec![0u8; PAGE_SIZE - 1];
        let mut jobs = [PageJob::new(&noise, &mut out)];
        s.compress(&mut jobs);
        assert!(
            matches!(jobs[0].result, Some(Ok(None))),
            "{:?}",
            jobs[0].result
        );
        // The context that gave up on the noise compresses the next pages right (zlib-rs
        // keeps an unfinished stream's state across reset(); without running it to its end
        // this panicked or wrote a broken stream).
        for _ in 0..3 {
            s.compress(&mut [PageJob::new(&noise, &mut out)]);
            round_trip(&s, &text(PAGE_SIZE));
        }
        let good = round_trip(&s, &text(PAGE_SIZE));
        let mut back = vec![0u8; PAGE_SIZE];
        for bad in [&[0xffu8; 40][..], &good[..good.len() / 2], &[][..]] {
            let mut jobs = [PageJob::new(bad, &mut back)];
            s.decompress(&mut jobs);
            assert!(
                matches!(jobs[0].result, Some(Err(BlkError::Corrupt { .. }))),
                "{:?}",
                jobs[0].result
            );
        }
        // A stream for a shorter page is not a whole slot.
        let short = round_trip(&s, &text(1000));
        let mut jobs = [PageJob::new(&short, &mut back)];
        s.decompress(&mut jobs);
        assert!(matches!(
            jobs[0].result,
            Some(Err(BlkError::Corrupt { .. }))
        ));
        let f = s.figures();
        assert_eq!((f.algorithm.as_str(), f.did_not_fit), ("deflate:6", 4));
        assert!(f.failures >= 4, "{f:?}");
    }
}
