//! `BTRFS_IOC_DEFRAG_RANGE` (and `BTRFS_IOC_DEFRAG`): what `btrfs filesystem defragment -c`
//! asks of a file, as fs/btrfs/defrag.c's btrfs_defrag_file and ioctl.c's btrfs_ioctl_defrag
//! answer it.
//!
//! The rules taken from the kernel:
//! - a regular file needs CAP_SYS_ADMIN or write permission on the inode (not a writable
//!   descriptor: btrfs-progs opens read-only); a directory needs CAP_SYS_ADMIN and defrags
//!   the subvolume's tree, which wring has not: it answers success and changes nothing;
//!   anything else is EINVAL; a read-only mount is EROFS;
//! - flags other than COMPRESS (1), START_IO (2) and COMPRESS_LEVEL (4) are EOPNOTSUPP;
//! - an empty file is success at once; a start at or past the end is EINVAL;
//! - COMPRESS takes `compress_type` (0 = zlib, 1 zlib, 2 lzo, 3 zstd; more is EINVAL); with
//!   COMPRESS_LEVEL its low byte is the type and the next, signed, the level, which must be
//!   one the algorithm has (EINVAL otherwise); without it the mount's level for that
//!   algorithm, else the algorithm's default;
//! - COMPRESS implies START_IO and an `extent_thresh` of every extent, so each extent in the
//!   range is rewritten with the requested compression, forced (inode_need_compress tests
//!   the defrag's compression before the NOCOMPRESS flag, so a NOCOMPRESS file is compressed
//!   too); a nodatacow file (which btrfs cannot compress) is left as it is;
//! - without COMPRESS btrfs rewrites extents below `extent_thresh` to merge fragments.
//!   wring's extents are fixed windows of the file and cannot be fragmented, so there is
//!   nothing to merge: START_IO writes back the range's dirty data, and that is all.
//!
//! How a rewrite is done is the dictionary pass's ([`super::dict_rewrite`]): the extents are
//! decoded from a snapshot, compressed on the offload's workers, and put in one transaction
//! per batch only if each item is still the one read and no write of it waits for writeback.
//! The content never changes, only how it is stored, so a crash keeps the old extent or the
//! new one; a full store fails the batch's transaction with ENOSPC and leaves its extents as
//! they were.

use wring_engine::{Algorithm, CompressSpec, Policy};

use super::recompress::Spread;
use crate::error::FsError;
use crate::store::records::{Inode, Kind, FLAG_NOCOW};
use crate::store::XATTRS;
use crate::volume::data::encode::{Compression, Decision};
use crate::volume::names::acl::{self, Acl};
use crate::volume::stat::Viewer;
use crate::volume::{Caller, Volume};

/// `BTRFS_IOC_DEFRAG`: `_IOW(0x94, 2, struct btrfs_ioctl_vol_args)` (4,096 bytes).
pub const BTRFS_IOC_DEFRAG: u32 = 0x5000_9402;
/// `BTRFS_IOC_DEFRAG_RANGE`: `_IOW(0x94, 16, struct btrfs_ioctl_defrag_range_args)`.
pub const BTRFS_IOC_DEFRAG_RANGE: u32 = 0x4030_9410;
/// The size of `struct btrfs_ioctl_defrag_range_args`.
pub const DEFRAG_ARGS_LEN: usize = 48;

/// `BTRFS_DEFRAG_RANGE_COMPRESS`.
pub const DEFRAG_COMPRESS: u64 = 1;
/// `BTRFS_DEFRAG_RANGE_START_IO`.
pub const DEFRAG_START_IO: u64 = 2;
/// `BTRFS_DEFRAG_RANGE_COMPRESS_LEVEL`.
pub const DEFRAG_COMPRESS_LEVEL: u64 = 4;
const SUPPORTED: u64 = DEFRAG_COMPRESS | DEFRAG_START_IO | DEFRAG_COMPRESS_LEVEL;

/// Extents decoded and compressed per transaction.
const BATCH: usize = 64;

/// A parsed `struct btrfs_ioctl_defrag_range_args`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DefragArgs {
    /// First byte of the range.
    pub start: u64,
    /// Bytes in the range (`u64::MAX`: to the end).
    pub len: u64,
    /// The compression to rewrite with; `None` without `BTRFS_DEFRAG_RANGE_COMPRESS`.
    pub compress: Option<CompressSpec>,
    /// Write back the range's dirty data (`BTRFS_DEFRAG_RANGE_START_IO`, implied by compress).
    pub start_io: bool,
}

impl DefragArgs {
    /// Parse the ioctl's argument as btrfs_ioctl_defrag and btrfs_defrag_file check it;
    /// `level_of` gives the level for an algorithm named without one (the mount's).
    pub fn parse(b: &[u8], level_of: impl Fn(Algorithm) -> i32) -> Result<DefragArgs, FsError> {
        let b: &[u8; DEFRAG_ARGS_LEN] = b
            .get(..DEFRAG_ARGS_LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or(FsError::Errno(libc::EINVAL))?;
        let u64_at = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(w)
        };
        let (start, len, flags) = (u64_at(0), u64_at(8), u64_at(16));
        let compress_type = [b[28], b[29], b[30], b[31]];
        if flags & !SUPPORTED != 0 {
            return Err(FsError::Errno(libc::EOPNOTSUPP));
        }
        let compress = match flags & DEFRAG_COMPRESS {
            0 => None,
            _ if flags & DEFRAG_COMPRESS_LEVEL != 0 => {
                let alg = algorithm(u32::from(compress_type[0]))?;
                let level = i32::from(compress_type[1] as i8);
                if !level_ok(alg, level) {
                    return Err(FsError::Errno(libc::EINVAL));
                }
                Some(CompressSpec::new(alg, level))
            }
            _ => {
                let alg = algorithm(u32::from_le_bytes(compress_type))?;
                Some(CompressSpec::new(alg, level_of(alg)))
            }
        };
        Ok(DefragArgs {
            start,
            len,
            start_io: compress.is_some() || flags & DEFRAG_START_IO != 0,
            compress,
        })
    }

    /// The whole file, without compression (BTRFS_IOC_DEFRAG's range).
    pub fn whole() -> DefragArgs {
        DefragArgs {
            start: 0,
            len: u64::MAX,
            compress: None,
            start_io: true,
        }
    }

    /// The ioctl's argument for these fields (what `wring defrag` sends).
    pub fn to_bytes(&self) -> [u8; DEFRAG_ARGS_LEN] {
        let mut b = [0u8; DEFRAG_ARGS_LEN];
        let mut flags = if self.start_io { DEFRAG_START_IO } else { 0 };
        if let Some(spec) = self.compress {
            flags |= DEFRAG_COMPRESS | DEFRAG_COMPRESS_LEVEL;
            b[28] = spec.algorithm.map_or(0, type_of);
            b[29] = spec.level.clamp(-128, 127) as i8 as u8;
        }
        b[0..8].copy_from_slice(&self.start.to_le_bytes());
        b[8..16].copy_from_slice(&self.len.to_le_bytes());
        b[16..24].copy_from_slice(&flags.to_le_bytes());
        b
    }
}

/// btrfs's compression type numbers (BTRFS_COMPRESS_*): 0 asks for the default, zlib.
fn algorithm(t: u32) -> Result<Algorithm, FsError> {
    match t {
        0 | 1 => Ok(Algorithm::Zlib),
        2 => Ok(Algorithm::Lzo),
        3 => Ok(Algorithm::Zstd),
        _ => Err(FsError::Errno(libc::EINVAL)),
    }
}

/// Whether `level` is one of `alg`'s levels, or 0 for its default. wring's range, which for
/// zstd goes to 22 where the kernel's stops at 15.
fn level_ok(alg: Algorithm, level: i32) -> bool {
    level == 0 || (alg.min_level()..=alg.max_level()).contains(&level)
}

/// The type number of an algorithm btrfs has; others (lz4 and the rest wring adds) have
/// none, and `wring defrag` refuses them before the ioctl.
fn type_of(a: Algorithm) -> u8 {
    match a {
        Algorithm::Zlib => 1,
        Algorithm::Lzo => 2,
        Algorithm::Zstd => 3,
        _ => 0,
    }
}

/// Whether `a` is an algorithm btrfs's defrag ioctl can name.
pub fn in_btrfs_defrag(a: Algorithm) -> bool {
    type_of(a) != 0
}

impl Volume {
    /// BTRFS_IOC_DEFRAG_RANGE on `ino` for `caller` (see the module's header): the extents
    /// rewritten.
    pub fn defrag(&self, ino: u64, caller: Caller, args: &DefragArgs) -> Result<u64, FsError> {
        self.writable()?;
        let inode = self.inode(ino)?;
        match inode.kind {
            Kind::Dir if caller.uid == 0 => return Ok(0),
            Kind::Dir => return Err(FsError::Errno(libc::EPERM)),
            Kind::File => {}
            _ => return Err(FsError::Errno(libc::EINVAL)),
        }
        if caller.uid != 0 && !self.may_write(ino, &inode, caller)? {
            return Err(FsError::Errno(libc::EPERM));
        }
        if inode.size == 0 {
            return Ok(0);
        }
        if args.start >= inode.size {
            return Err(FsError::Errno(libc::EINVAL));
        }
        if args.start_io {
            self.wait_writeback(Some(ino));
        }
        let Some(spec) = args.compress else {
            return Ok(0);
        };
        if inode.flags & FLAG_NOCOW != 0 {
            return Ok(0);
        }
        let es = self.extent_size(&inode);
        let end = args.start.saturating_add(args.len).min(inode.size);
        let (first, last) = (args.start / es, end.div_ceil(es));
        let decision: Decision = Some(Compression {
            spec,
            policy: Policy::Force,
            judge: false,
            dict: None,
        });
        let mut from = first;
        let mut rewritten = 0;
        loop {
            let (batch, next) = self.extents_of(ino, from..last, BATCH)?;
            let decisions = vec![decision.clone(); batch.len()];
            rewritten += self.replace_extents(&batch, &decisions, Spread::Workers, |_, _| true)?;
            match next {
                Some(n) => from = n,
                None => break,
            }
        }
        Ok(rewritten)
    }
}

impl Volume {
    /// generic_permission(MAY_WRITE) for `caller` on `inode`, by its access ACL when it has
    /// one, else by its mode (root is let through before this is asked).
    fn may_write(&self, ino: u64, inode: &Inode, caller: Caller) -> Result<bool, FsError> {
        let snap = self.store.read()?;
        let xattrs = snap.open_table(XATTRS)?;
        let acl = xattrs.get((ino, acl::ACCESS))?;
        let acl = acl.and_then(|a| Acl::parse(a.value()).ok());
        Ok(Viewer::of(caller).may(inode, acl, 0o2))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn args(start: u64, len: u64, flags: u64, ctype: [u8; 4]) -> Vec<u8> {
        let mut b = vec![0u8; DEFRAG_ARGS_LEN];
        b[0..8].copy_from_slice(&start.to_le_bytes());
        b[8..16].copy_from_slice(&len.to_le_bytes());
        b[16..24].copy_from_slice(&flags.to_le_bytes());
        b[24..28].copy_from_slice(&u32::MAX.to_le_bytes());
        b[28..32].copy_from_slice(&ctype);
        b
    }

    fn mount_level(a: Algorithm) -> i32 {
        CompressSpec::default_for(a).level
    }

    fn errno(r: Result<DefragArgs, FsError>) -> i32 {
        r.map_or_else(|e| e.errno(), |a| panic!("parsed {a:?}"))
    }

    /// What btrfs-progs 6.2 sends for `-czstd` (the type in a u32, no level), and what a
    /// newer one sends with a level.
    #[test]
    fn btrfs_progs_requests_parse_as_the_kernel_reads_them() {
        let a = DefragArgs::parse(&args(0, u64::MAX, 1, [3, 0, 0, 0]), mount_level).unwrap();
        assert_eq!(a.compress, Some(CompressSpec::default_for(Algorithm::Zstd)));
        assert!(a.start_io);
        assert_eq!((a.start, a.len), (0, u64::MAX));
        let a = DefragArgs::parse(&args(0, 4096, 1 | 4, [3, 19, 0, 0]), mount_level).unwrap();
        assert_eq!(a.compress, Some(CompressSpec::new(Algorithm::Zstd, 19)));
        let a = DefragArgs::parse(&args(0, 4096, 1 | 4, [3, (-5i8) as u8, 0, 0]), mount_level);
        assert_eq!(
            a.unwrap().compress,
            Some(CompressSpec::new(Algorithm::Zstd, -5))
        );
        // Type 0 is the kernel's default, zlib; no COMPRESS leaves the type unread.
        let a = DefragArgs::parse(&args(0, 1, 1, [0; 4]), mount_level).unwrap();
        assert_eq!(a.compress.and_then(|s| s.algorithm), Some(Algorithm::Zlib));
        let a = DefragArgs::parse(&args(0, 1, 0, [9; 4]), mount_level).unwrap();
        assert_eq!((a.compress, a.start_io), (None, false));
        let a = DefragArgs::parse(&args(0, 1, 2, [0; 4]), mount_level).unwrap();
        assert!(a.start_io);
    }

    #[test]
    fn what_the_kernel_refuses_is_refused_with_its_errno() {
        let p = |b: Vec<u8>| DefragArgs::parse(&b, mount_level);
        assert_eq!(errno(p(args(0, 1, 8, [0; 4]))), libc::EOPNOTSUPP);
        assert_eq!(errno(p(args(0, 1, 1, [4, 0, 0, 0]))), libc::EINVAL);
        assert_eq!(errno(p(args(0, 1, 1 | 4, [3, 23, 0, 0]))), libc::EINVAL);
        assert_eq!(errno(p(args(0, 1, 1 | 4, [1, 10, 0, 0]))), libc::EINVAL);
        assert_eq!(errno(p(vec![0; DEFRAG_ARGS_LEN - 1])), libc::EINVAL);
    }

    proptest! {
        /// Any bytes parse or fail with one of the kernel's errnos, never a panic; what
        /// `wring defrag` sends parses back to itself.
        #[test]
        fn any_bytes_parse_or_fail_plainly(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            match DefragArgs::parse(&b, mount_level) {
                Ok(a) => prop_assert!(a.compress.is_none() || a.start_io),
                Err(e) => prop_assert!([libc::EINVAL, libc::EOPNOTSUPP].contains(&e.errno())),
            }
        }

        #[test]
        fn what_wring_sends_parses_back(start in any::<u64>(), len in any::<u64>(),
                                        alg in 0usize..3, level in -7i32..23, io in any::<bool>()) {
            let alg = [Algorithm::Zlib, Algorithm::Lzo, Algorithm::Zstd][alg];
            let compress = level_ok(alg, level).then(|| CompressSpec::new(alg, level));
            let a = DefragArgs { start, len, compress, start_io: io || compress.is_some() };
            prop_assert_eq!(DefragArgs::parse(&a.to_bytes(), mount_level).unwrap(), a);
        }
    }
}
