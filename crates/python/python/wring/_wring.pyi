"""Type stubs of wring's native module (re-exported by ``wring`` and ``wring.btrfs``)."""

from typing import Any, Iterable, Optional, Sequence, Union, final

from typing_extensions import Buffer

__all__ = [
    "CorruptError",
    "DEFAULT_MAX_SIZE",
    "Dict",
    "Engine",
    "__version__",
    "btrfs_decode_extent",
    "btrfs_encode_extent",
    "compress",
    "compress_bound",
    "compress_into",
    "decompress",
    "decompress_into",
    "levels",
    "train_dict",
]
DEFAULT_MAX_SIZE: int
__version__: str

class CorruptError(ValueError):
    """The compressed data is damaged or not of the algorithm named."""

@final
class Dict:
    """A zstd dictionary (trained, or loaded from its bytes)."""

    def __new__(cls, data: Buffer) -> "Dict": ...
    @property
    def id(self) -> int: ...
    def __bytes__(self) -> bytes: ...
    def __len__(self) -> int: ...

@final
class Engine:
    """An engine with its own compression streams."""

    def __new__(cls, streams: Optional[int] = None, workspace_mem: Optional[int] = None) -> "Engine": ...
    @property
    def streams(self) -> int: ...
    def compress_many(
        self, items: Iterable[Buffer], spec: str = "zstd:3", *, dict: Optional[Dict] = None
    ) -> list[bytes]: ...
    def decompress_many(
        self,
        items: Iterable[Buffer],
        spec: str = "zstd",
        sizes: Union[None, int, Sequence[Optional[int]]] = None,
        *,
        dict: Optional[Dict] = None,
        max_size: int = ...,
    ) -> list[bytes]: ...
    def stats(self) -> dict[str, Any]: ...

def compress(data: Buffer, spec: str = "zstd:3", *, dict: Optional[Dict] = None) -> bytes: ...
def compress_into(
    data: Buffer, out: Buffer, spec: str = "zstd:3", *, dict: Optional[Dict] = None
) -> int: ...
def decompress(
    data: Buffer,
    spec: str = "zstd",
    size: Optional[int] = None,
    *,
    dict: Optional[Dict] = None,
    max_size: int = ...,
) -> bytes: ...
def decompress_into(
    data: Buffer, out: Buffer, spec: str = "zstd", *, dict: Optional[Dict] = None
) -> int: ...
def compress_bound(spec: str, size: int) -> int: ...
def levels() -> list[dict[str, Any]]: ...
def train_dict(samples: Iterable[Buffer], size: int = 114688) -> Dict: ...
def btrfs_encode_extent(data: Buffer, spec: str = "zstd:3") -> Optional[bytes]: ...
def btrfs_decode_extent(data: Buffer, algorithm: Union[str, int], ram_bytes: int) -> bytes: ...
