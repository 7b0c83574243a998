"""One-shot calls: round trips, buffers, the formats other libraries read, errors."""

import array
import threading
import zlib

import numpy as np
import pytest
import zstandard

import wring
from conftest import corpus_bytes, text

SPECS = ["zstd:3", "zstd:-5", "zstd:19", "zlib:1", "zlib:9", "lzo", "lz4", "lz4hc:9", "lzo-rle", "deflate:6", "no"]
SIZES = [0, 1, 4096, 128 * 1024, 128 * 1024 + 1, 3 << 20]


@pytest.mark.parametrize("spec", SPECS)
def test_every_spec_round_trips_every_size_with_and_without_the_size(spec):
    for n in SIZES:
        data = corpus_bytes(n)
        packed = wring.compress(data, spec)
        assert wring.decompress(packed, spec, size=n) == data
        assert wring.decompress(packed, spec) == data


@pytest.mark.parametrize(
    "make",
    [bytes, bytearray, memoryview, lambda b: np.frombuffer(b, dtype=np.uint8), lambda b: array.array("B", b)],
)
def test_any_buffer_is_accepted(make):
    data = text(50_000)
    packed = wring.compress(make(data), "zstd:3")
    assert packed == wring.compress(data, "zstd:3")
    assert wring.decompress(make(packed)) == data


def test_zstd_frames_interoperate_with_python_zstandard_both_ways():
    data = corpus_bytes(1 << 20)
    for level in (1, 3, 9, 19, -5):
        ours = wring.compress(data, f"zstd:{level}")
        assert zstandard.ZstdDecompressor().decompress(ours) == data
    theirs = zstandard.ZstdCompressor(level=3).compress(data)
    assert wring.decompress(theirs) == data
    # A frame that does not record its size (python-zstandard #150): decodes without size=.
    no_size = zstandard.ZstdCompressor(level=3, write_content_size=False).compress(data)
    assert wring.decompress(no_size) == data
    streamed = zstandard.ZstdCompressor().compressobj()
    frame = streamed.compress(data) + streamed.flush()
    assert wring.decompress(frame) == data


def test_zlib_streams_interoperate_with_the_zlib_module():
    data = corpus_bytes(1 << 20)
    for level in (1, 6, 9):
        assert zlib.decompress(wring.compress(data, f"zlib:{level}")) == data
        assert wring.decompress(zlib.compress(data, level), "zlib") == data
    raw = zlib.compressobj(6, zlib.DEFLATED, -15)
    assert wring.decompress(raw.compress(data) + raw.flush(), "deflate") == data


def test_into_variants_fill_a_callers_buffer():
    data = text(200_000)
    out = bytearray(wring.compress_bound("zstd:3", len(data)))
    n = wring.compress_into(data, out, "zstd:3")
    assert bytes(out[:n]) == wring.compress(data, "zstd:3")
    back = np.zeros(len(data), dtype=np.uint8)
    assert wring.decompress_into(memoryview(out)[:n], back, "zstd") == len(data)
    assert back.tobytes() == data
    with pytest.raises(ValueError, match="smaller than"):
        wring.compress_into(data, bytearray(10), "zstd:3")
    with pytest.raises(ValueError, match="decodes to more than"):
        wring.decompress_into(bytes(out[:n]), bytearray(100), "zstd")
    with pytest.raises(TypeError, match="writable"):
        wring.decompress_into(bytes(out[:n]), b"read-only", "zstd")


def test_bad_specs_name_what_is_accepted():
    with pytest.raises(ValueError, match=r"accepted are -15..=22"):
        wring.compress(b"x", "zstd:99")
    with pytest.raises(ValueError, match=r"unknown compression algorithm 'brotli': accepted are"):
        wring.compress(b"x", "brotli")
    with pytest.raises(ValueError, match="takes no level"):
        wring.compress(b"x", "lzo:3")
    with pytest.raises(TypeError):
        wring.compress("a str is not bytes")


@pytest.mark.parametrize("spec", [s for s in SPECS if s != "no"])
def test_corrupt_input_is_an_error_never_a_crash(spec):
    data = text(100_000)
    packed = wring.compress(data, spec)
    flipped = bytearray(packed)
    flipped[len(flipped) // 2] ^= 0x55
    damaged = [b"\xff" * 100, bytes(range(256)) * 4, packed[: len(packed) // 2], bytes(flipped)]
    for garbage in damaged:
        try:
            # Some formats carry no checksum: a flipped bit may decode, to other bytes.
            assert wring.decompress(garbage, spec, max_size=1 << 20) != data
        except ValueError:  # CorruptError is one; so is growing past max_size
            pass


def test_damaged_frames_are_corrupt_errors():
    assert issubclass(wring.CorruptError, ValueError)
    for spec in ("zstd", "zlib"):
        with pytest.raises(wring.CorruptError, match="corrupt"):
            wring.decompress(b"\xff" * 100, spec)
    with pytest.raises(wring.CorruptError):
        wring.btrfs.decode_extent(b"\x00" * 64, "lzo", 4096)


def test_growth_stops_at_max_size():
    bomb = wring.compress(bytes(64 << 20), "zstd:3")
    assert len(bomb) < 64 << 10
    with pytest.raises(ValueError, match="max_size"):
        wring.decompress(bomb, max_size=1 << 20)
    with pytest.raises(ValueError, match="max_size"):
        wring.decompress(bomb, size=128 << 20, max_size=1 << 20)


def test_lzo_is_btrfs_framing_and_says_what_it_cannot_hold():
    data = text(8192)
    packed = wring.compress(data, "lzo")
    assert int.from_bytes(packed[:4], "little") == len(packed)  # the framing's total length
    with pytest.raises(ValueError, match="does not compress"):
        wring.compress(np.random.default_rng(1).bytes(100_000), "lzo")


def test_dictionaries_on_every_zstd_call():
    samples = [text(300 + i) + str(i).encode() for i in range(500)]
    d = wring.train_dict(samples, 16 * 1024)
    assert 0 < len(d) <= 16 * 1024 and d.id != 0
    again = wring.Dict(bytes(d))
    small = samples[42]
    with_dict = wring.compress(small, "zstd:3", dict=d)
    assert len(with_dict) < len(wring.compress(small, "zstd:3"))
    assert wring.decompress(with_dict, dict=again) == small
    zd = zstandard.ZstdCompressionDict(bytes(d))
    assert zstandard.ZstdDecompressor(dict_data=zd).decompress(with_dict) == small
    engine = wring.Engine(streams=2)
    frames = engine.compress_many(samples, "zstd:3", dict=d)
    assert engine.decompress_many(frames, dict=d) == samples
    with pytest.raises(ValueError, match="takes no dictionary"):
        wring.compress(small, "lz4", dict=d)


def test_levels_is_the_memory_table():
    rows = wring.levels()
    zstd3 = [r for r in rows if r["algorithm"] == "zstd" and r["level"] == 3][0]
    assert zstd3["default"] and zstd3["in_btrfs"] and zstd3["workspace_bytes"] > 0
    assert not [r for r in rows if r["algorithm"] == "zstd" and r["level"] == 19][0]["in_btrfs"]
    assert {r["algorithm"] for r in rows} >= {"zlib", "lzo", "zstd", "lz4"}


def test_threads_share_the_one_shot_engine():
    data = [corpus_bytes(300_000)[i * 1000 :] for i in range(8)]
    errors = []

    def work(i):
        try:
            for spec in ("zstd:3", "lz4", "zlib:6", "lzo"):
                for _ in range(5):
                    assert wring.decompress(wring.compress(data[i], spec), spec) == data[i]
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
