//! Walk a file extent by extent with encoded reads.
//!
//! Mirrors how fs/btrfs/inode.c's btrfs_encoded_read() is meant to be driven: start at 0, and
//! after each call move on by the `len` it reported, until i_size. Each step is one extent of
//! the file as the kernel maps it:
//!
//! * compressed extents (regular or inline) come back whole, in their on-disk encoding;
//! * plain data comes back as is, in pieces of at most the read buffer's size (and at most
//!   128 KiB, the range the kernel locks per call);
//! * holes and preallocated ranges come back as zeros with compression none — encoded reads
//!   cannot tell them from written zeros.
//!
//! The kernel demands CAP_SYS_ADMIN; the file only needs to be open for reading
//! ([`open_for_encoded_read`] opens it `O_RDONLY`).

use std::fs::File;
use std::path::Path;

use crate::error::{BtrfsError, Op};
use crate::ioctl::{encoded_read, Compression, EncodedRead, MAX_COMPRESSED};

/// Largest buffer [`Extents`] grows to when the kernel answers ENOBUFS.
const MAX_BUFFER: usize = 16 * 1024 * 1024;

/// One extent as an encoded read returned it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extent {
    /// File offset the extent's range starts at.
    pub offset: u64,
    /// Length of the file range it covers.
    pub len: u64,
    /// Length of the data once decoded.
    pub unencoded_len: u64,
    /// Where the file range starts inside the decoded data.
    pub unencoded_offset: u64,
    /// How `data` is encoded.
    pub compression: Compression,
    /// `BTRFS_ENCODED_IO_ENCRYPTION_*` (0: none).
    pub encryption: u32,
    /// The bytes as stored (compressed extents may end in zero padding to the sector size).
    pub data: Vec<u8>,
}

impl Extent {
    /// Whether the data must be decoded to give the file's bytes.
    pub fn is_encoded(&self) -> bool {
        self.compression.is_compressed() || self.encryption != 0
    }

    /// The file offset just past this extent.
    pub fn end(&self) -> u64 {
        self.offset + self.len
    }

    fn from_read(offset: u64, read: &EncodedRead, buf: &[u8]) -> Extent {
        Extent {
            offset,
            len: read.len,
            unencoded_len: read.unencoded_len,
            unencoded_offset: read.unencoded_offset,
            compression: read.compression,
            encryption: read.encryption,
            data: buf[..read.bytes.min(buf.len())].to_vec(),
        }
    }
}

/// Open `path` read-only, as encoded reads want it.
pub fn open_for_encoded_read(path: &Path) -> Result<File, BtrfsError> {
    File::open(path).map_err(|e| BtrfsError::io(Op::Open, 0, e))
}

/// Iterator over the extents of a file, from offset 0 to its size when the walk began.
#[derive(Debug)]
pub struct Extents<'f> {
    file: &'f File,
    offset: u64,
    size: u64,
    buf: Vec<u8>,
    done: bool,
}

impl<'f> Extents<'f> {
    /// Start a walk over `file` (opened for reading, on btrfs).
    pub fn new(file: &'f File) -> Result<Self, BtrfsError> {
        let size = file
            .metadata()
            .map_err(|e| BtrfsError::io(Op::Open, 0, e))?
            .len();
        Ok(Extents {
            file,
            offset: 0,
            size,
            buf: vec![0; MAX_COMPRESSED],
            done: false,
        })
    }

    /// Read the extent at the current offset, growing the buffer on ENOBUFS.
    fn read_one(&mut self) -> Result<EncodedRead, BtrfsError> {
        loop {
            match encoded_read(self.file, self.offset, &mut self.buf) {
                Err(BtrfsError::BufferTooSmall { .. }) if self.buf.len() < MAX_BUFFER => {
                    let bigger = self.buf.len() * 2;
                    self.buf.resize(bigger, 0);
                }
                other => return other,
            }
        }
    }

    fn step(&mut self) -> Result<Option<Extent>, BtrfsError> {
        let read = self.read_one()?;
        if read.len == 0 {
            // End of file (it may have shrunk since the walk began).
            if read.bytes == 0 {
                return Ok(None);
            }
            return Err(BtrfsError::NoProgress {
                offset: self.offset,
            });
        }
        let extent = Extent::from_read(self.offset, &read, &self.buf);
        self.offset += read.len;
        Ok(Some(extent))
    }
}

impl Iterator for Extents<'_> {
    type Item = Result<Extent, BtrfsError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.offset >= self.size {
            return None;
        }
        let item = self.step();
        match item {
            Ok(Some(extent)) => Some(Ok(extent)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// Every extent of `file`, collected.
pub fn extents(file: &File) -> Result<Vec<Extent>, BtrfsError> {
    Extents::new(file)?.collect()
}
