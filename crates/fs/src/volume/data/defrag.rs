//! `BTRFS_IOC_DEFRAG_RANGE` (and `BTRFS_IOC_DEFRAG`): what `btrfs filesystem defragment -c`
//! asks of a file, as fs/btrfs/defrag.c's btrfs_defrag_file and ioctl.c's btrfs_ioctl_defrag
//! answer it.
//!
//! The rules taken from the kernel:
//! - a regular file needs CAP_SYS_ADMIN or write permission on the inode (not a writable
//!   descriptor: btrfs-progs opens read-only); a directory needs CAP_SYS_ADMIN and defrags
//!   the subvolume's tree, which wring has not: it answers success and changes nothing;
//!   anything else is EINVAL; a read-only mount is EROFS;
//! - the checks come in the kernel's order (the differential tester compares errnos with a
//!   real btrfs): permission, then the flags (EOPNOTSUPP for any but COMPRESS 1, START_IO 2,
//!   COMPRESS_LEVEL 4 and NOCOMPRESS 8; EINVAL for COMPRESS with NOCOMPRESS), then an empty
//!   file is success at once, a start at or past the end EINVAL, and only then the
//!   compression;
//! - COMPRESS takes `compress_type` (0 = zlib, 1 zlib, 2 lzo, 3 zstd; more is EINVAL); with
//!   COMPRESS_LEVEL its low byte is the type and the next, signed, the level, which must be
//!   one btrfs_compress_level_valid accepts (zlib 1-9, lzo 0-1, zstd from -15 — to 22 here,
//!   15 in the kernel), else EINVAL; a type of 0 ignores the level. Without a level, the
//!   algorithm's default (the kernel's level 0). NOCOMPRESS stores the range
//!   uncompressed;
//! - COMPRESS implies START_IO and an `extent_thresh` of every extent, so each extent in the
//!   range is rewritten with the requested compression, forced (inode_need_compress tests
//!   the defrag's compression before the NOCOMPRESS flag, so a NOCOMPRESS file is compressed
//!   too); a nodatacow file (which btrfs cannot compress) is left as it is;
//! - without COMPRESS btrfs rewrites extents below `extent_thresh` to merge fragments.
//!   wring's extents are fixed windows of the file and cannot be fragmented, so there is
//!   nothing to merge: START_IO writes back the range's dirty data, and that is all.
//!
//! How a rewrite is done is [`super::recompress`]'s, shared with the dictionary pass: the
//! extents are decoded from a snapshot, compressed on the offload's workers, and put in one
//! transaction per batch only if each item is still the one read and no write of it waits
//! for writeback.
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
pub(crate) const BTRFS_IOC_DEFRAG: u32 = 0x5000_9402;
/// `BTRFS_IOC_DEFRAG_RANGE`: `_IOW(0x94, 16, struct btrfs_ioctl_defrag_range_args)`.
pub const BTRFS_IOC_DEFRAG_RANGE: u32 = 0x4030_9410;
/// The size of `struct btrfs_ioctl_defrag_range_args`.
pub(crate) const DEFRAG_ARGS_LEN: usize = 48;

/// `BTRFS_DEFRAG_RANGE_COMPRESS`.
pub const DEFRAG_COMPRESS: u64 = 1;
/// `BTRFS_DEFRAG_RANGE_START_IO`.
pub const DEFRAG_START_IO: u64 = 2;
/// `BTRFS_DEFRAG_RANGE_COMPRESS_LEVEL`: `compress_type`'s low byte is the type, the next
/// (signed) the level.
pub const DEFRAG_COMPRESS_LEVEL: u64 = 4;
/// `BTRFS_DEFRAG_RANGE_NOCOMPRESS`: store the extents uncompressed.
pub const DEFRAG_NOCOMPRESS: u64 = 8;
const SUPPORTED: u64 =
    DEFRAG_COMPRESS | DEFRAG_START_IO | DEFRAG_COMPRESS_LEVEL | DEFRAG_NOCOMPRESS;

/// Extents decoded and compressed per transaction.
const BATCH: usize = 64;

/// `struct btrfs_ioctl_defrag_range_args`, as given: the kernel checks its fields at
/// different points (see [`Volume::defrag`]), so their errors come in its order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DefragArgs {
    /// First byte of the range.
    pub start: u64,
    /// Bytes in the range (`u64::MAX`: to the end).
    pub len: u64,
    /// `BTRFS_DEFRAG_RANGE_*`.
    pub flags: u64,
    /// Extents at least this big count as done (without compression only; 0: 256 KiB).
    pub extent_thresh: u32,
    /// `BTRFS_COMPRESS_*` (0 = zlib), or with COMPRESS_LEVEL the type and the level.
    pub compress_type: u32,
}

/// What a defrag does to the extents of its range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rewrite {
    /// Nothing (no compression asked: wring's extents have no fragments to merge).
    Nothing,
    /// Compress each with this, forced.
    Compress(CompressSpec),
    /// Store each uncompressed.
    Raw,
}

impl DefragArgs {
    /// The ioctl's argument; EINVAL when shorter than the struct.
    pub fn from_bytes(b: &[u8]) -> Result<DefragArgs, FsError> {
        let b: &[u8; DEFRAG_ARGS_LEN] = b
            .get(..DEFRAG_ARGS_LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or(FsError::Errno(libc::EINVAL))?;
        let u64_at = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(w)
        };
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Ok(DefragArgs {
            start: u64_at(0),
            len: u64_at(8),
            flags: u64_at(16),
            extent_thresh: u32_at(24),
            compress_type: u32_at(28),
        })
    }

    /// The ioctl's argument for these fields.
    pub fn to_bytes(&self) -> [u8; DEFRAG_ARGS_LEN] {
        let mut b = [0u8; DEFRAG_ARGS_LEN];
        b[0..8].copy_from_slice(&self.start.to_le_bytes());
        b[8..16].copy_from_slice(&self.len.to_le_bytes());
        b[16..24].copy_from_slice(&self.flags.to_le_bytes());
        b[24..28].copy_from_slice(&self.extent_thresh.to_le_bytes());
        b[28..32].copy_from_slice(&self.compress_type.to_le_bytes());
        b
    }

    /// The whole file, no compression (what BTRFS_IOC_DEFRAG, with no argument, asks).
    pub fn whole() -> DefragArgs {
        DefragArgs {
            start: 0,
            len: u64::MAX,
            flags: 0,
            extent_thresh: 0,
            compress_type: 0,
        }
    }

    /// `start..start+len` compressed with `spec` at its level (what `wring defrag` sends);
    /// `spec`'s algorithm must be one btrfs names ([`in_btrfs_defrag`]).
    pub fn compressing(spec: CompressSpec, start: u64, len: u64) -> DefragArgs {
        let t = spec.algorithm.map_or(0, type_of);
        let level = spec.level.clamp(-128, 127) as i8 as u8;
        DefragArgs {
            start,
            len,
            flags: DEFRAG_COMPRESS | DEFRAG_COMPRESS_LEVEL,
            extent_thresh: 0,
            compress_type: u32::from_le_bytes([t, level, 0, 0]),
        }
    }

    /// btrfs_ioctl_defrag's checks of the flags: EOPNOTSUPP for one it does not know,
    /// EINVAL for compress and nocompress at once.
    pub fn check_flags(&self) -> Result<(), FsError> {
        if self.flags & !SUPPORTED != 0 {
            return Err(FsError::Errno(libc::EOPNOTSUPP));
        }
        if self.flags & DEFRAG_COMPRESS != 0 && self.flags & DEFRAG_NOCOMPRESS != 0 {
            return Err(FsError::Errno(libc::EINVAL));
        }
        Ok(())
    }

    /// Whether the range's dirty data is written back first (START_IO, which compress and
    /// nocompress imply).
    pub fn start_io(&self) -> bool {
        self.flags & (DEFRAG_START_IO | DEFRAG_COMPRESS | DEFRAG_NOCOMPRESS) != 0
    }

    /// What the extents become, by btrfs_defrag_file's checks of the compression (EINVAL for
    /// a type past zstd or a level the algorithm lacks). An algorithm named without a level
    /// takes its default, as the kernel's level 0 does and as the `compression` property does.
    pub fn rewrite(&self) -> Result<Rewrite, FsError> {
        if self.flags & DEFRAG_NOCOMPRESS != 0 {
            return Ok(Rewrite::Raw);
        }
        if self.flags & DEFRAG_COMPRESS == 0 {
            return Ok(Rewrite::Nothing);
        }
        let [t, level, ..] = self.compress_type.to_le_bytes();
        if self.flags & DEFRAG_COMPRESS_LEVEL == 0 {
            let alg = algorithm(self.compress_type)?;
            return Ok(Rewrite::Compress(CompressSpec::default_for(alg)));
        }
        let alg = algorithm(u32::from(t))?;
        // The level is read only with a type named (0 is the default algorithm, at its level).
        if t == 0 {
            return Ok(Rewrite::Compress(CompressSpec::default_for(alg)));
        }
        let level = i32::from(level as i8);
        if !level_ok(alg, level) {
            return Err(FsError::Errno(libc::EINVAL));
        }
        Ok(Rewrite::Compress(CompressSpec::new(alg, level)))
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

/// btrfs_compress_level_valid: zlib 1 to 9, lzo 0 or 1, zstd -15 up — to 22 here, where the
/// kernel's zstd stops at 15.
fn level_ok(alg: Algorithm, level: i32) -> bool {
    let (min, max) = match alg {
        Algorithm::Zlib => (1, 9),
        Algorithm::Lzo => (0, 1),
        _ => (alg.min_level(), alg.max_level()),
    };
    (min..=max).contains(&level)
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
    /// BTRFS_IOC_DEFRAG_RANGE on `ino` for `caller`, in btrfs_ioctl_defrag's order of checks
    /// (see the module's header). The extents
    /// rewritten.
    pub fn defrag(&self, ino: u64, caller: Caller, args: &DefragArgs) -> Result<u64, FsError> {
        self.writable()?;
        // What the kernel still holds of the file first: under FUSE's writeback cache its
        // dirty pages (and the size they give) have not reached the daemon, where btrfs sees
        // them. Invalidating its pages makes the kernel write them back and wait, as for
        // `wring.sync` (the writes come in on the other request threads; no lock is held).
        if let Some(n) = self.notifier.get() {
            let _ = n.inval_inode(ino, 0, 0);
        }
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
        args.check_flags()?;
        if inode.size == 0 {
            return Ok(0);
        }
        if args.start >= inode.size {
            return Err(FsError::Errno(libc::EINVAL));
        }
        let rewrite = args.rewrite()?;
        if args.start_io() {
            self.wait_writeback(Some(ino));
        }
        let decision: Decision = match rewrite {
            Rewrite::Nothing => return Ok(0),
            Rewrite::Raw => None,
            Rewrite::Compress(spec) => Some(Compression {
                spec,
                policy: Policy::Force,
                judge: false,
                dict: None,
            }),
        };
        if inode.flags & FLAG_NOCOW != 0 {
            return Ok(0);
        }
        let es = self.extent_size(&inode);
        let end = args.start.saturating_add(args.len).min(inode.size);
        let (mut from, last) = (args.start / es, end.div_ceil(es));
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

    fn args(start: u64, len: u64, flags: u64, ctype: [u8; 4]) -> DefragArgs {
        let mut b = vec![0u8; DEFRAG_ARGS_LEN];
        b[0..8].copy_from_slice(&start.to_le_bytes());
        b[8..16].copy_from_slice(&len.to_le_bytes());
        b[16..24].copy_from_slice(&flags.to_le_bytes());
        b[24..28].copy_from_slice(&u32::MAX.to_le_bytes());
        b[28..32].copy_from_slice(&ctype);
        DefragArgs::from_bytes(&b).unwrap()
    }

    fn rewrite(a: DefragArgs) -> Result<Rewrite, i32> {
        a.check_flags()
            .and_then(|()| a.rewrite())
            .map_err(|e| e.errno())
    }

    /// What btrfs-progs 6.2 sends for `-czstd` (the type in a u32, no level), what a newer
    /// one sends with a level, and `wring defrag`'s.
    #[test]
    fn btrfs_progs_requests_read_as_the_kernel_reads_them() {
        let a = args(0, u64::MAX, 1, [3, 0, 0, 0]);
        let zstd = |l| Ok(Rewrite::Compress(CompressSpec::new(Algorithm::Zstd, l)));
        assert_eq!(rewrite(a), zstd(3));
        assert!(a.start_io());
        assert_eq!((a.start, a.len, a.extent_thresh), (0, u64::MAX, u32::MAX));
        assert_eq!(rewrite(args(0, 4096, 1 | 4, [3, 19, 0, 0])), zstd(19));
        assert_eq!(
            rewrite(args(0, 4096, 1 | 4, [3, (-5i8) as u8, 0, 0])),
            zstd(-5)
        );
        let sent = DefragArgs::compressing(CompressSpec::new(Algorithm::Zstd, 22), 5, 6);
        assert_eq!(DefragArgs::from_bytes(&sent.to_bytes()).ok(), Some(sent));
        assert_eq!(rewrite(sent), zstd(22));
        // Type 0 is the kernel's default, zlib, whatever the level byte says.
        let zlib = Ok(Rewrite::Compress(CompressSpec::default_for(
            Algorithm::Zlib,
        )));
        assert_eq!(rewrite(args(0, 1, 1, [0; 4])), zlib);
        assert_eq!(rewrite(args(0, 1, 1 | 4, [0, 99, 0, 0])), zlib);
        // No COMPRESS leaves the type unread; START_IO alone rewrites nothing.
        assert_eq!(rewrite(args(0, 1, 0, [9; 4])), Ok(Rewrite::Nothing));
        let io = args(0, 1, 2, [0; 4]);
        assert!(io.start_io());
        assert_eq!(rewrite(io), Ok(Rewrite::Nothing));
        assert_eq!(rewrite(args(0, 1, 8, [0; 4])), Ok(Rewrite::Raw));
    }

    #[test]
    fn what_the_kernel_refuses_is_refused_with_its_errno() {
        assert_eq!(rewrite(args(0, 1, 16, [0; 4])), Err(libc::EOPNOTSUPP));
        assert_eq!(rewrite(args(0, 1, 1 | 8, [3, 0, 0, 0])), Err(libc::EINVAL));
        assert_eq!(rewrite(args(0, 1, 1, [4, 0, 0, 0])), Err(libc::EINVAL));
        assert_eq!(rewrite(args(0, 1, 1 | 4, [3, 23, 0, 0])), Err(libc::EINVAL));
        assert_eq!(rewrite(args(0, 1, 1 | 4, [1, 10, 0, 0])), Err(libc::EINVAL));
        assert_eq!(rewrite(args(0, 1, 1 | 4, [1, 0, 0, 0])), Err(libc::EINVAL));
        assert_eq!(rewrite(args(0, 1, 1 | 4, [2, 2, 0, 0])), Err(libc::EINVAL));
        let short = DefragArgs::from_bytes(&[0; DEFRAG_ARGS_LEN - 1]);
        assert_eq!(short.map_err(|e| e.errno()), Err(libc::EINVAL));
    }

    proptest! {
        /// Any 48 bytes read back as they were given, and their flags and compression are
        /// taken or refused with one of the kernel's errnos, never a panic.
        #[test]
        fn any_argument_reads_back_and_is_taken_or_refused_plainly(
            b in proptest::collection::vec(any::<u8>(), DEFRAG_ARGS_LEN..=DEFRAG_ARGS_LEN)
        ) {
            let a = DefragArgs::from_bytes(&b).unwrap();
            prop_assert_eq!(&a.to_bytes()[..32], &b[..32]);
            if let Err(e) = rewrite(a) {
                prop_assert!([libc::EINVAL, libc::EOPNOTSUPP].contains(&e));
            }
        }

        /// What `wring defrag` sends is taken as it was meant.
        #[test]
        fn what_wring_sends_is_taken_as_meant(start in any::<u64>(), len in any::<u64>(),
                                              alg in 0usize..3, level in -15i32..23) {
            let alg = [Algorithm::Zlib, Algorithm::Lzo, Algorithm::Zstd][alg];
            let spec = CompressSpec::new(alg, level);
            let a = DefragArgs::compressing(spec, start, len);
            prop_assert_eq!(rewrite(a), Ok(Rewrite::Compress(spec)));
        }
    }
}
