"""wring: btrfs's and zram's compression in userspace.

One-shot calls on buffers of any size in the codecs' own formats (zstd frames, zlib streams,
btrfs's LZO framing, raw lz4 blocks), btrfs extents as the kernel stores them
(:mod:`wring.btrfs`), batches on many compression streams with the GIL released
(:class:`Engine`), zstd dictionaries, and the level memory table.

Specs are btrfs's option text (``zstd:3``, ``zlib:9``, ``lzo``) and zram's names for what
btrfs lacks (``lz4``, ``lz4hc:9``, ``lzo-rle``, ``deflate:6``).
"""

from ._wring import (
    DEFAULT_MAX_SIZE,
    CorruptError,
    Dict,
    Engine,
    __version__,
    compress,
    compress_bound,
    compress_into,
    decompress,
    decompress_into,
    levels,
    train_dict,
)
from . import btrfs

__all__ = [
    "DEFAULT_MAX_SIZE",
    "CorruptError",
    "Dict",
    "Engine",
    "__version__",
    "btrfs",
    "compress",
    "compress_bound",
    "compress_into",
    "decompress",
    "decompress_into",
    "levels",
    "train_dict",
]
