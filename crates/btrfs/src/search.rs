//! A file's extent items, read from the subvolume tree with `BTRFS_IOC_TREE_SEARCH_V2`.
//!
//! Mirrors fs/btrfs/ioctl.c's search_ioctl() (`struct btrfs_ioctl_search_args_v2`, key ranges,
//! item headers) and the on-disk `struct btrfs_file_extent_item` of
//! include/uapi/linux/btrfs_tree.h, read the way compsize reads it: every `EXTENT_DATA` item of
//! one inode, in file-offset order. Also `BTRFS_IOC_FS_INFO` for the filesystem's UUID and
//! sector size. Tree search needs CAP_SYS_ADMIN.
//!
//! The items are what is in the tree now: data still in the page cache (delalloc) or under
//! writeback has no item yet, so callers that need the full picture `fdatasync` first.

use std::fs::File;
use std::io;

use rustix::ioctl::{ioctl, opcode, Opcode, Updater};

use crate::error::{BtrfsError, Op};
use crate::ioctl::BTRFS_IOCTL_MAGIC;

/// `BTRFS_EXTENT_DATA_KEY`.
pub const EXTENT_DATA_KEY: u32 = 108;

/// `struct btrfs_ioctl_search_key`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct SearchKey {
    /// Tree to search; 0 = the subvolume of the file descriptor.
    pub tree_id: u64,
    /// Smallest objectid.
    pub min_objectid: u64,
    /// Largest objectid.
    pub max_objectid: u64,
    /// Smallest key offset.
    pub min_offset: u64,
    /// Largest key offset.
    pub max_offset: u64,
    /// Smallest leaf generation.
    pub min_transid: u64,
    /// Largest leaf generation.
    pub max_transid: u64,
    /// Smallest key type.
    pub min_type: u32,
    /// Largest key type.
    pub max_type: u32,
    /// In: most items wanted; out: items returned.
    pub nr_items: u32,
    unused: u32,
    unused1: u64,
    unused2: u64,
    unused3: u64,
    unused4: u64,
}

/// `struct btrfs_ioctl_search_args_v2` without its flexible buffer.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct SearchArgsV2 {
    key: SearchKey,
    buf_size: u64,
}

/// Size of `struct btrfs_ioctl_search_header`.
const SEARCH_HEADER: usize = 32;
/// Result buffer per call (the kernel takes up to 16 MiB).
const SEARCH_BUF: usize = 64 * 1024;

/// `struct btrfs_ioctl_search_args_v2` with its flexible buffer: `buf_size` bytes of results
/// follow the header in the same allocation.
#[repr(C)]
struct SearchRequest {
    args: SearchArgsV2,
    results: [u8; SEARCH_BUF],
}

/// `BTRFS_IOC_TREE_SEARCH_V2`: `_IOWR(BTRFS_IOCTL_MAGIC, 17, struct btrfs_ioctl_search_args_v2)`.
pub const BTRFS_IOC_TREE_SEARCH_V2: Opcode =
    opcode::read_write::<SearchArgsV2>(BTRFS_IOCTL_MAGIC, 17);

/// `struct btrfs_ioctl_fs_info_args` (1 KiB).
#[repr(C)]
#[derive(Clone, Copy)]
struct FsInfoArgs {
    max_id: u64,
    num_devices: u64,
    fsid: [u8; 16],
    nodesize: u32,
    sectorsize: u32,
    clone_alignment: u32,
    csum_type: u16,
    csum_size: u16,
    flags: u64,
    generation: u64,
    metadata_uuid: [u8; 16],
    reserved: [u8; 944],
}

impl FsInfoArgs {
    /// All zero: `flags` 0 asks for no optional fields.
    fn zeroed() -> FsInfoArgs {
        FsInfoArgs {
            max_id: 0,
            num_devices: 0,
            fsid: [0; 16],
            nodesize: 0,
            sectorsize: 0,
            clone_alignment: 0,
            csum_type: 0,
            csum_size: 0,
            flags: 0,
            generation: 0,
            metadata_uuid: [0; 16],
            reserved: [0; 944],
        }
    }
}

/// `BTRFS_IOC_FS_INFO`: `_IOR(BTRFS_IOCTL_MAGIC, 31, struct btrfs_ioctl_fs_info_args)`.
pub const BTRFS_IOC_FS_INFO: Opcode = opcode::read::<FsInfoArgs>(BTRFS_IOCTL_MAGIC, 31);

/// What `BTRFS_IOC_FS_INFO` says about a filesystem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BtrfsInfo {
    /// The filesystem's UUID (the same in every subvolume).
    pub fsid: [u8; 16],
    /// Sector size in bytes.
    pub sector_size: u32,
    /// Metadata node size in bytes.
    pub node_size: u32,
}

/// Ask btrfs about the filesystem holding `file` (any file or directory on it).
pub fn btrfs_info(file: &File) -> Result<BtrfsInfo, BtrfsError> {
    // The kernel reads `flags` in (btrfs_ioctl_fs_info copies the struct from userspace first),
    // so this is an updater on a zeroed struct, not a getter on uninitialized memory.
    let mut args = FsInfoArgs::zeroed();
    // SAFETY: the descriptor is open for the call and `args` is a live, exclusively borrowed
    // `btrfs_ioctl_fs_info_args` of the size the opcode declares; the kernel writes only it.
    let ret = unsafe { ioctl(file, Updater::<BTRFS_IOC_FS_INFO, _>::new(&mut args)) };
    ret.map_err(|errno| not_btrfs_or(Op::Search, io::Error::from(errno)))?;
    Ok(BtrfsInfo {
        fsid: args.fsid,
        sector_size: args.sectorsize,
        node_size: args.nodesize,
    })
}

/// `BTRFS_FILE_EXTENT_*`: how an extent item stores its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemKind {
    /// Data inside the item itself (`BTRFS_FILE_EXTENT_INLINE`), `len` bytes as stored.
    Inline {
        /// Bytes stored in the item (compressed size when compressed).
        len: u64,
    },
    /// A reference to a data extent (`BTRFS_FILE_EXTENT_REG`); a hole when `disk_bytenr` is 0.
    Regular,
    /// Preallocated, unwritten space (`BTRFS_FILE_EXTENT_PREALLOC`): reads as zeros.
    Prealloc,
    /// A type this code does not know.
    Unknown(u8),
}

/// The on-disk compression byte of a file extent item (`BTRFS_COMPRESS_*`, not the encoded
/// I/O numbering).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DiskCompression {
    /// `BTRFS_COMPRESS_NONE`.
    None,
    /// `BTRFS_COMPRESS_ZLIB`.
    Zlib,
    /// `BTRFS_COMPRESS_LZO`.
    Lzo,
    /// `BTRFS_COMPRESS_ZSTD`.
    Zstd,
    /// Anything else.
    Unknown(u8),
}

impl DiskCompression {
    /// Decode the on-disk byte.
    pub fn from_raw(raw: u8) -> DiskCompression {
        match raw {
            0 => DiskCompression::None,
            1 => DiskCompression::Zlib,
            2 => DiskCompression::Lzo,
            3 => DiskCompression::Zstd,
            other => DiskCompression::Unknown(other),
        }
    }

    /// compsize's name for it (`?N` for unknown types).
    pub fn name(self) -> String {
        match self {
            DiskCompression::None => "none".into(),
            DiskCompression::Zlib => "zlib".into(),
            DiskCompression::Lzo => "lzo".into(),
            DiskCompression::Zstd => "zstd".into(),
            DiskCompression::Unknown(n) => format!("?{n}"),
        }
    }
}

impl std::fmt::Display for DiskCompression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

/// One `EXTENT_DATA` item: the file range `[file_offset, file_offset + num_bytes)` maps to
/// `[offset, offset + num_bytes)` of the decoded data extent at `disk_bytenr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileExtentItem {
    /// File offset (the item key's offset).
    pub file_offset: u64,
    /// Transaction that wrote the item.
    pub generation: u64,
    /// Decoded size of the whole data extent (inline: of the inline data).
    pub ram_bytes: u64,
    /// How the extent is compressed.
    pub compression: DiskCompression,
    /// Encryption byte (0: none).
    pub encryption: u8,
    /// How the data is stored.
    pub kind: ItemKind,
    /// Logical address of the data extent (0: a hole). Regular/prealloc only.
    pub disk_bytenr: u64,
    /// Bytes the data extent takes on disk. Regular/prealloc only.
    pub disk_num_bytes: u64,
    /// Where this item's range starts inside the decoded extent.
    pub offset: u64,
    /// Length of the file range (inline: `ram_bytes`).
    pub num_bytes: u64,
}

impl FileExtentItem {
    /// Size of a regular/prealloc item (`sizeof(struct btrfs_file_extent_item)`).
    pub const SIZE: usize = 53;
    /// Where inline data starts in the item.
    pub const INLINE_DATA_START: usize = 21;

    /// End of the file range.
    pub fn end(&self) -> u64 {
        self.file_offset + self.num_bytes
    }

    /// Whether this is an explicit hole (a regular item with no data extent).
    pub fn is_hole(&self) -> bool {
        self.kind == ItemKind::Regular && self.disk_bytenr == 0
    }

    /// Parse an item's bytes; None when it is too short to be one.
    pub fn parse(file_offset: u64, bytes: &[u8]) -> Option<FileExtentItem> {
        let u64_at = |at: usize| -> Option<u64> {
            Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
        };
        let generation = u64_at(0)?;
        let ram_bytes = u64_at(8)?;
        let compression = DiskCompression::from_raw(*bytes.get(16)?);
        let encryption = *bytes.get(17)?;
        let kind = match *bytes.get(20)? {
            0 => ItemKind::Inline {
                len: (bytes.len() - Self::INLINE_DATA_START) as u64,
            },
            1 => ItemKind::Regular,
            2 => ItemKind::Prealloc,
            other => ItemKind::Unknown(other),
        };
        let mut item = FileExtentItem {
            file_offset,
            generation,
            ram_bytes,
            compression,
            encryption,
            kind,
            disk_bytenr: 0,
            disk_num_bytes: 0,
            offset: 0,
            num_bytes: ram_bytes,
        };
        if matches!(kind, ItemKind::Regular | ItemKind::Prealloc) {
            item.disk_bytenr = u64_at(21)?;
            item.disk_num_bytes = u64_at(29)?;
            item.offset = u64_at(37)?;
            item.num_bytes = u64_at(45)?;
        }
        Some(item)
    }
}

/// Every `EXTENT_DATA` item of inode `ino` (which `file` must be, or share a subvolume with),
/// in file-offset order.
pub fn file_extent_items(file: &File, ino: u64) -> Result<Vec<FileExtentItem>, BtrfsError> {
    let mut key = SearchKey {
        tree_id: 0,
        min_objectid: ino,
        max_objectid: ino,
        min_offset: 0,
        max_offset: u64::MAX,
        min_transid: 0,
        max_transid: u64::MAX,
        min_type: EXTENT_DATA_KEY,
        max_type: EXTENT_DATA_KEY,
        nr_items: u32::MAX,
        ..SearchKey::default()
    };
    let mut items = Vec::new();
    let mut req = Box::new(SearchRequest {
        args: SearchArgsV2::default(),
        results: [0; SEARCH_BUF],
    });
    loop {
        key.nr_items = u32::MAX;
        req.args = SearchArgsV2 {
            key,
            buf_size: SEARCH_BUF as u64,
        };
        // SAFETY: the descriptor is open for the call; `req` is a live, exclusively borrowed
        // `btrfs_ioctl_search_args_v2` whose `buf_size` (SEARCH_BUF) bytes of result space follow
        // it inside the same allocation; the kernel writes at most that much.
        let ret = unsafe { ioctl(file, Updater::<BTRFS_IOC_TREE_SEARCH_V2, _>::new(&mut *req)) };
        ret.map_err(|errno| not_btrfs_or(Op::Search, io::Error::from(errno)))?;
        let found = req.args.key.nr_items;
        if found == 0 {
            break;
        }
        let results = &req.results[..];
        let mut at = 0usize;
        let mut last_offset = None;
        for _ in 0..found {
            let header = results
                .get(at..at + SEARCH_HEADER)
                .ok_or_else(|| malformed("search header past the buffer"))?;
            let field =
                |o: usize| u64::from_le_bytes(header[o..o + 8].try_into().unwrap_or([0; 8]));
            let offset = field(16);
            let ty = u32::from_le_bytes(header[24..28].try_into().unwrap_or([0; 4]));
            let len = u32::from_le_bytes(header[28..32].try_into().unwrap_or([0; 4])) as usize;
            at += SEARCH_HEADER;
            let data = results
                .get(at..at + len)
                .ok_or_else(|| malformed("search item past the buffer"))?;
            at += len;
            last_offset = Some(offset);
            if ty != EXTENT_DATA_KEY || field(8) != ino {
                continue;
            }
            items.push(
                FileExtentItem::parse(offset, data)
                    .ok_or_else(|| malformed("file extent item too short"))?,
            );
        }
        match last_offset {
            Some(o) if o < u64::MAX => key.min_offset = o + 1,
            _ => break,
        }
    }
    Ok(items)
}

fn malformed(what: &str) -> BtrfsError {
    BtrfsError::io(
        Op::Search,
        0,
        io::Error::new(io::ErrorKind::InvalidData, what),
    )
}

/// ENOTTY/EOPNOTSUPP mean "not btrfs"; EPERM means "not root"; anything else stays as it is.
pub(crate) fn not_btrfs_or(op: Op, err: io::Error) -> BtrfsError {
    match err.raw_os_error() {
        Some(libc::ENOTTY) | Some(libc::EOPNOTSUPP) => BtrfsError::NotBtrfs { op },
        Some(libc::EPERM) => BtrfsError::NeedsCapSysAdmin { op },
        _ => BtrfsError::io(op, 0, err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(all(
        target_pointer_width = "64",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    fn ioctl_numbers_match_the_uapi_header() {
        assert_eq!(std::mem::size_of::<SearchKey>(), 104);
        assert_eq!(std::mem::size_of::<SearchArgsV2>(), 112);
        assert_eq!(std::mem::size_of::<FsInfoArgs>(), 1024);
        assert_eq!(BTRFS_IOC_TREE_SEARCH_V2, 0xC070_9411);
        assert_eq!(BTRFS_IOC_FS_INFO, 0x8400_941F);
    }

    fn item_bytes(kind: u8, compression: u8) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&7u64.to_le_bytes()); // generation
        b.extend_from_slice(&131072u64.to_le_bytes()); // ram_bytes
        b.push(compression);
        b.push(0);
        b.extend_from_slice(&0u16.to_le_bytes());
        b.push(kind);
        b.extend_from_slice(&(1u64 << 30).to_le_bytes()); // disk_bytenr
        b.extend_from_slice(&16384u64.to_le_bytes()); // disk_num_bytes
        b.extend_from_slice(&4096u64.to_le_bytes()); // offset
        b.extend_from_slice(&8192u64.to_le_bytes()); // num_bytes
        b
    }

    #[test]
    fn parses_regular_prealloc_and_inline_items() {
        let reg = FileExtentItem::parse(65536, &item_bytes(1, 3)).unwrap();
        assert_eq!(reg.kind, ItemKind::Regular);
        assert_eq!(reg.compression, DiskCompression::Zstd);
        assert_eq!(
            (
                reg.disk_bytenr,
                reg.disk_num_bytes,
                reg.offset,
                reg.num_bytes
            ),
            (1 << 30, 16384, 4096, 8192)
        );
        assert_eq!(reg.end(), 65536 + 8192);
        let pre = FileExtentItem::parse(0, &item_bytes(2, 0)).unwrap();
        assert_eq!(pre.kind, ItemKind::Prealloc);
        let mut inline = item_bytes(0, 1)[..21].to_vec();
        inline.extend_from_slice(&[1, 2, 3, 4, 5]);
        let inl = FileExtentItem::parse(0, &inline).unwrap();
        assert_eq!(inl.kind, ItemKind::Inline { len: 5 });
        assert_eq!(inl.num_bytes, 131072);
        assert!(FileExtentItem::parse(0, &item_bytes(1, 0)[..30]).is_none());
        let mut hole = item_bytes(1, 0);
        hole[21..29].copy_from_slice(&0u64.to_le_bytes());
        assert!(FileExtentItem::parse(0, &hole).unwrap().is_hole());
    }
}
