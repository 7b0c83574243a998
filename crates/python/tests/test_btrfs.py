"""btrfs extents against the kernel's own: what the kernel's btrfs writes decodes in
wring.btrfs.decode_extent, and what encode_extent gives, stored with ENCODED_WRITE, reads back
through the kernel (as crates/btrfs/tests/kernel_compat.rs does for the bridge). Needs root:
a loop-mounted btrfs."""

import ctypes
import fcntl
import os
import subprocess
import tempfile

import pytest

import wring
from conftest import corpus_bytes, require_root, text

ENCODED_READ = 0x80809440  # _IOR(0x94, 64, struct btrfs_ioctl_encoded_io_args)
ENCODED_WRITE = 0x40809440  # _IOW(0x94, 64, ...)
EXTENT = 128 * 1024
CODES = {"zlib": wring.btrfs.ZLIB, "zstd": wring.btrfs.ZSTD, "lzo": wring.btrfs.LZO}


class Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class EncodedArgs(ctypes.Structure):
    """struct btrfs_ioctl_encoded_io_args (include/uapi/linux/btrfs.h)."""

    _fields_ = [
        ("iov", ctypes.c_void_p),
        ("iovcnt", ctypes.c_ulong),
        ("offset", ctypes.c_int64),
        ("flags", ctypes.c_uint64),
        ("len", ctypes.c_uint64),
        ("unencoded_len", ctypes.c_uint64),
        ("unencoded_offset", ctypes.c_uint64),
        ("compression", ctypes.c_uint32),
        ("encryption", ctypes.c_uint32),
        ("reserved", ctypes.c_uint8 * 64),
    ]


def encoded_extents(path: str):
    """(offset, args, encoded bytes) for every extent of the file, through ENCODED_READ."""
    size = os.path.getsize(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        offset = 0
        while offset < size:
            buf = ctypes.create_string_buffer(EXTENT * 2)
            iov = Iovec(ctypes.cast(buf, ctypes.c_void_p), len(buf))
            args = EncodedArgs(iov=ctypes.addressof(iov), iovcnt=1, offset=offset)
            n = fcntl.ioctl(fd, ENCODED_READ, args, True)
            yield offset, args, buf.raw[:n]
            offset += args.len
    finally:
        os.close(fd)


def encoded_write(fd: int, offset: int, data: bytes, plain_len: int, code: int) -> None:
    buf = ctypes.create_string_buffer(data, len(data))
    iov = Iovec(ctypes.cast(buf, ctypes.c_void_p), len(data))
    args = EncodedArgs(
        iov=ctypes.addressof(iov),
        iovcnt=1,
        offset=offset,
        len=plain_len,
        unencoded_len=plain_len,
        compression=code,
    )
    written = fcntl.ioctl(fd, ENCODED_WRITE, args, True)
    assert written == len(data)


@pytest.fixture()
def btrfs_mount():
    require_root("btrfs extents against the kernel")
    work = tempfile.mkdtemp(prefix="wring-py-btrfs-")
    image, mnt = os.path.join(work, "fs.img"), os.path.join(work, "mnt")
    os.mkdir(mnt)
    with open(image, "wb") as f:
        f.truncate(512 << 20)
    subprocess.run(["mkfs.btrfs", "-q", "-f", image], check=True)
    subprocess.run(["mount", "-o", "loop", image, mnt], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", mnt], check=False)
        os.unlink(image)
        os.rmdir(mnt)
        os.rmdir(work)


def remount(mnt: str, option: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{option}", mnt], check=True)


def drop_caches(mnt: str) -> None:
    subprocess.run(["sync", "-f", mnt], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def test_what_the_kernel_writes_decodes_in_wring(btrfs_mount):
    data = corpus_bytes(4 << 20) + text(5001)
    for option in ("zlib:3", "lzo", "zstd:1", "zstd:9", "zstd:-3"):
        remount(btrfs_mount, f"compress-force={option}")
        path = os.path.join(btrfs_mount, option.replace(":", "_"))
        with open(path, "wb") as f:
            f.write(data)
        drop_caches(btrfs_mount)
        compressed = 0
        for offset, args, encoded in encoded_extents(path):
            decoded = wring.btrfs.decode_extent(encoded, args.compression, args.unencoded_len)
            start = args.unencoded_offset
            assert decoded[start : start + args.len] == data[offset : offset + args.len], (option, offset)
            if args.compression:
                assert args.compression == CODES[option.split(":")[0]]
                compressed += 1
        assert compressed >= 16, f"{option}: only {compressed} compressed extents"


def test_what_wring_encodes_reads_back_through_the_kernel(btrfs_mount):
    data = corpus_bytes(2 << 20)
    for spec in ("zlib:1", "zlib:9", "lzo", "zstd:-5", "zstd:3", "zstd:15", "zstd:19"):
        path = os.path.join(btrfs_mount, "wring_" + spec.replace(":", "_"))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        stored = 0
        try:
            for offset in range(0, len(data), EXTENT):
                chunk = data[offset : offset + EXTENT]
                encoded = wring.btrfs.encode_extent(chunk, spec)
                if encoded is None:
                    os.pwrite(fd, chunk, offset)
                    continue
                encoded_write(fd, offset, encoded, len(chunk), CODES[spec.split(":")[0]])
                stored += 1
        finally:
            os.close(fd)
        assert stored >= 8, f"{spec}: only {stored} extents compressed"
        drop_caches(btrfs_mount)
        with open(path, "rb") as f:
            assert f.read() == data, spec
