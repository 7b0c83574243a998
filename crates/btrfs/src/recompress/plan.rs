//! Which ranges of a file are rewritten, and as which extents: the file's `EXTENT_DATA` items
//! grouped by the data extent they reference (fs/btrfs/file-item.c's view of a file, as
//! compsize reads it), cut into 128 KiB pieces (`BTRFS_MAX_UNCOMPRESSED`, the largest extent
//! btrfs compresses), and the gain rule that decides whether a group is rewritten.

use std::collections::HashMap;

use crate::fsinfo::overlaps;
use crate::ioctl::MAX_UNCOMPRESSED;
use crate::search::{DiskCompression, FileExtentItem, ItemKind};

/// A file range to compress as one extent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Piece {
    pub(super) start: u64,
    pub(super) len: u64,
}

/// The ranges referencing one data extent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Group {
    /// Judged as a whole (a compressed extent) or per piece (an uncompressed one).
    pub(super) joint: bool,
    /// Disk bytes of the extent.
    pub(super) old_disk: u64,
    pub(super) pieces: Vec<Piece>,
}

/// What the items of a file say to do. Also returns the bytes in shared extents.
pub(super) fn plan(
    items: &[FileExtentItem],
    size: u64,
    shared: &[(u64, u64)],
) -> (Vec<Group>, u64) {
    let mut order: Vec<u64> = Vec::new();
    let mut by_extent: HashMap<u64, Vec<&FileExtentItem>> = HashMap::new();
    for item in items {
        if item.kind != ItemKind::Regular || item.disk_bytenr == 0 || item.file_offset >= size {
            continue; // holes, prealloc, inline, past EOF
        }
        by_extent
            .entry(item.disk_bytenr)
            .or_insert_with(|| {
                order.push(item.disk_bytenr);
                Vec::new()
            })
            .push(item);
    }
    let mut groups = Vec::new();
    let mut shared_bytes = 0;
    for bytenr in order {
        let refs = &by_extent[&bytenr];
        let range = |i: &FileExtentItem| (i.file_offset, i.end().min(size));
        let is_shared = refs.iter().any(|i| {
            let (s, e) = range(i);
            overlaps(shared, s, e)
        });
        let encrypted = refs.iter().any(|i| i.encryption != 0);
        if is_shared || encrypted {
            shared_bytes += refs.iter().map(|i| range(i).1 - range(i).0).sum::<u64>();
            continue;
        }
        let compressed = refs[0].compression != DiskCompression::None;
        let mut pieces = Vec::new();
        for i in refs {
            let (mut s, e) = range(i);
            while s < e {
                let len = (e - s).min(MAX_UNCOMPRESSED as u64);
                pieces.push(Piece { start: s, len });
                s += len;
            }
        }
        groups.push(Group {
            joint: compressed,
            old_disk: refs[0].disk_num_bytes,
            pieces,
        });
    }
    (groups, shared_bytes)
}

pub(super) fn round_up(v: u64, to: u64) -> u64 {
    v.div_ceil(to) * to
}

/// Whether going from `old` to `new` disk bytes gains enough.
pub(super) fn gains(old: u64, new: u64, sector: u64, min_gain: f64) -> bool {
    old >= new + sector && (old - new) as f64 * 100.0 >= min_gain * old as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(
        off: u64,
        bytenr: u64,
        disk: u64,
        ram: u64,
        num: u64,
        c: u8,
        kind: ItemKind,
    ) -> FileExtentItem {
        FileExtentItem {
            file_offset: off,
            generation: 1,
            ram_bytes: ram,
            compression: DiskCompression::from_raw(c),
            encryption: 0,
            kind,
            disk_bytenr: bytenr,
            disk_num_bytes: disk,
            offset: 0,
            num_bytes: num,
        }
    }

    #[test]
    fn plan_splits_uncompressed_extents_and_keeps_holes_prealloc_and_shared() {
        let k = 1024u64;
        let items = [
            item(0, 1 << 20, 300 * k, 300 * k, 300 * k, 0, ItemKind::Regular),
            item(300 * k, 0, 0, 100 * k, 100 * k, 0, ItemKind::Regular), // hole
            item(
                400 * k,
                2 << 20,
                64 * k,
                64 * k,
                64 * k,
                0,
                ItemKind::Prealloc,
            ),
            item(
                464 * k,
                3 << 20,
                16 * k,
                128 * k,
                128 * k,
                3,
                ItemKind::Regular,
            ),
            item(592 * k, 4 << 20, 8 * k, 8 * k, 8 * k, 0, ItemKind::Regular), // shared
            item(
                600 * k,
                5 << 20,
                12 * k,
                12 * k,
                12 * k,
                0,
                ItemKind::Regular,
            ), // ends past EOF
        ];
        let size = 605 * k + 7;
        let (groups, shared) = plan(&items, size, &[(592 * k, 600 * k)]);
        assert_eq!(shared, 8 * k);
        assert_eq!(groups.len(), 3);
        assert!(!groups[0].joint);
        assert_eq!(
            groups[0].pieces,
            [
                Piece {
                    start: 0,
                    len: 128 * k
                },
                Piece {
                    start: 128 * k,
                    len: 128 * k
                },
                Piece {
                    start: 256 * k,
                    len: 44 * k
                },
            ]
        );
        assert!(groups[1].joint);
        assert_eq!(groups[1].old_disk, 16 * k);
        assert_eq!(
            groups[2].pieces,
            [Piece {
                start: 600 * k,
                len: 5 * k + 7
            }]
        );
    }

    #[test]
    fn plan_groups_the_pieces_of_a_partly_overwritten_extent() {
        let k = 1024u64;
        let mut a = item(0, 1 << 20, 32 * k, 128 * k, 32 * k, 3, ItemKind::Regular);
        let mut b = item(
            64 * k,
            1 << 20,
            32 * k,
            128 * k,
            64 * k,
            3,
            ItemKind::Regular,
        );
        b.offset = 64 * k;
        a.offset = 0;
        let middle = item(
            32 * k,
            2 << 20,
            32 * k,
            32 * k,
            32 * k,
            0,
            ItemKind::Regular,
        );
        let (groups, _) = plan(&[a, middle, b], 128 * k, &[]);
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].pieces.len(), 2);
        assert_eq!(groups[0].old_disk, 32 * k);
    }

    #[test]
    fn gain_needs_a_sector_and_the_minimum_percentage() {
        assert!(gains(131072, 65536, 4096, 0.0));
        assert!(!gains(8192, 8192, 4096, 0.0));
        assert!(!gains(131072, 131072 - 4096, 4096, 10.0));
        assert!(gains(131072, 131072 - 16384, 4096, 10.0));
    }
}
