//! Beyond zram: `train_dict`, a zstd dictionary trained from the device's own pages,
//! installed as a recompression algorithm at the lowest free priority (zram's
//! `recomp_algorithm` with `algorithm_params dict=`, without the offline training step), and
//! every page recompressed with it.

use wring_engine::dict::Dictionary;
use wring_engine::{Algorithm, CompressSpec};

use super::recompress::{recompress, RecompressRequest};
use crate::device::slot::Slot;
use crate::device::streams::OffloadStreams;
use crate::device::Store;
use crate::error::BlkError;
use crate::options::parse_size;
use crate::report::TrainReport;
use crate::sync::lock;

/// A `train_dict` request: `size=BYTES level=L samples=PAGES save=FILE`, all optional.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrainRequest {
    /// Dictionary capacity in bytes.
    pub size: usize,
    /// zstd level to compress with.
    pub level: i32,
    /// Pages to train on, at most (taken evenly over the device).
    pub samples: usize,
    /// Where to save the dictionary (for `algorithm_params=priority=N dict=FILE` later).
    pub save: Option<std::path::PathBuf>,
}

impl Default for TrainRequest {
    fn default() -> Self {
        TrainRequest {
            size: 64 << 10,
            level: 3,
            samples: 4096,
            save: None,
        }
    }
}

impl TrainRequest {
    /// Parse the words.
    pub fn parse(text: &str) -> Result<TrainRequest, BlkError> {
        let mut r = TrainRequest::default();
        let bad = |word: &str| {
            BlkError::Option(format!(
                "train_dict: '{word}' is not understood; accepted: size=BYTES (1K to 1M) \
                 level=1..22 samples=PAGES save=FILE"
            ))
        };
        for word in text.split_whitespace() {
            match word.split_once('=') {
                Some(("size", v)) => {
                    r.size = parse_size("train_dict size", v)? as usize;
                    if !(1024..=1 << 20).contains(&r.size) {
                        return Err(bad(word));
                    }
                }
                Some(("level", v)) => match v.parse::<i32>() {
                    Ok(l) if (1..=22).contains(&l) => r.level = l,
                    _ => return Err(bad(word)),
                },
                Some(("samples", v)) => match v.parse::<usize>() {
                    Ok(n) if n >= 8 => r.samples = n,
                    _ => return Err(bad(word)),
                },
                Some(("save", v)) if !v.is_empty() => r.save = Some(v.into()),
                _ => return Err(bad(word)),
            }
        }
        Ok(r)
    }

    /// The words [`TrainRequest::parse`] reads back.
    pub fn text(&self) -> String {
        let mut s = format!(
            "size={} level={} samples={}",
            self.size, self.level, self.samples
        );
        if let Some(p) = &self.save {
            s += &format!(" save={}", p.display());
        }
        s
    }
}

/// Beyond zram: train a zstd dictionary from the device's own pages, install zstd with it
/// as a recompression algorithm at the lowest free priority, and recompress every page
/// with it (each kept only if it saves memory).
pub fn train_dict(store: &Store, req: &TrainRequest) -> Result<TrainReport, BlkError> {
    let samples = sample_pages(store, req.samples)?;
    if samples.len() < 8 {
        return Err(BlkError::Option(format!(
            "train_dict: {} pages are too few samples; write more data first (at least 8 \
             pages that are neither empty nor one repeated word)",
            samples.len()
        )));
    }
    let views: Vec<&[u8]> = samples.iter().map(|p| &p[..]).collect();
    let dict = Dictionary::train(&views, req.size).map_err(|source| BlkError::Dictionary {
        what: "train_dict".into(),
        source,
    })?;
    if let Some(path) = &req.save {
        std::fs::write(path, dict.bytes()).map_err(|source| BlkError::Io {
            what: format!("train_dict: saving the dictionary to {}", path.display()),
            source,
        })?;
    }
    let name = format!("zstd:{}+dict", req.level);
    let dict_bytes = dict.bytes().len() as u64;
    let spec = CompressSpec::new(Algorithm::Zstd, req.level);
    let streams =
        OffloadStreams::for_slots(spec, &name, 1, store.slot_size())?.with_dictionary(dict)?;
    let priority = store.install_recomp(Box::new(streams))?;
    let recompress = recompress(
        store,
        &RecompressRequest {
            priority: Some(priority),
            ..RecompressRequest::default()
        },
    )?;
    Ok(TrainReport {
        samples: samples.len() as u64,
        dict_bytes,
        priority,
        recompress,
    })
}

/// Up to `max` stored pages, decompressed, taken evenly over the device.
fn sample_pages(store: &Store, max: usize) -> Result<Vec<Vec<u8>>, BlkError> {
    let stored = store
        .entries()
        .iter()
        .filter(|s| matches!(lock(s).slot, Slot::Stored { .. }))
        .count();
    let stride = stored.div_ceil(max.max(1)).max(1);
    let mut out = Vec::new();
    let mut seen = 0usize;
    for (page, slot) in store.entries().iter().enumerate() {
        let e = lock(slot);
        // Huge pages are noise to a dictionary; compressed ones are what it is for.
        if !matches!(e.slot, Slot::Stored { .. }) || e.slot.is_huge(store.slot_size()) {
            continue;
        }
        seen += 1;
        if !seen.is_multiple_of(stride) || out.len() >= max {
            continue;
        }
        let mut buf = vec![0u8; store.slot_size()];
        store.load(&e, page, &mut buf)?;
        out.push(buf);
    }
    Ok(out)
}
