"""One btrfs extent in the kernel's on-disk formats, in memory.

:func:`encode_extent` gives the bytes ``BTRFS_IOC_ENCODED_WRITE`` takes (and btrfs stores
under ``compress-force=``); :func:`decode_extent` decodes what ``BTRFS_IOC_ENCODED_READ``
gives or a ``btrfs send --compressed-data`` stream carries, including btrfs's LZO framing
with its per-segment headers. The same code as ``wring recompress`` and ``wring verify``.
"""

from ._wring import btrfs_decode_extent as decode_extent
from ._wring import btrfs_encode_extent as encode_extent

#: The kernel's encoding numbers (BTRFS_ENCODED_IO_COMPRESSION_*).
NONE, ZLIB, ZSTD, LZO = 0, 1, 2, 3

__all__ = ["LZO", "NONE", "ZLIB", "ZSTD", "decode_extent", "encode_extent"]
