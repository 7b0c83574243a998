"""wring.Engine: batches on the engine's streams, with the GIL released."""

import threading
import time

import pytest

import wring
from conftest import corpus_bytes, text


def extents(n: int, size: int = 128 * 1024) -> list:
    data = corpus_bytes(n * size)
    return [data[i * size : (i + 1) * size] for i in range(n)]


@pytest.mark.parametrize("spec", ["zstd:3", "zstd:1", "lz4", "zlib:6", "lzo", "deflate:1"])
def test_batches_round_trip_in_order(spec):
    engine = wring.Engine(streams=2)
    items = extents(24) + [b"", text(5)]
    if spec == "lzo":
        items = items[:-2]  # btrfs's LZO framing of 5 bytes grows: see the one-shot test
    frames = engine.compress_many(items, spec)
    assert [wring.decompress(f, spec, size=len(i)) for f, i in zip(frames, items)] == items
    assert engine.decompress_many(frames, spec, sizes=[len(i) for i in items]) == items
    assert engine.compress_many(iter(items), spec) == frames  # any iterable


def test_decompress_many_sizes_from_frames_one_or_a_list():
    engine = wring.Engine(streams=2)
    items = extents(8)
    frames = engine.compress_many(items, "zstd:3")
    assert engine.decompress_many(frames) == items  # zstd frames record their size
    assert engine.decompress_many(frames, sizes=128 * 1024) == items
    lz4 = engine.compress_many(items, "lz4")
    with pytest.raises(ValueError, match="item 0: the decoded size is not known"):
        engine.decompress_many(lz4, "lz4")
    with pytest.raises(ValueError, match="sizes has 2 entries for 8 items"):
        engine.decompress_many(lz4, "lz4", sizes=[1, 2])


def test_a_failure_names_its_item():
    engine = wring.Engine(streams=2)
    frames = engine.compress_many(extents(4), "zstd:3")
    frames[2] = b"not a frame at all, but long enough"
    with pytest.raises(wring.CorruptError, match="item 2"):
        engine.decompress_many(frames, sizes=128 * 1024)
    with pytest.raises(ValueError, match="item 1: extent of 131073 bytes is larger than max_extent"):
        engine.compress_many([b"x", bytes(128 * 1024 + 1)], "zstd:3")
    with pytest.raises(ValueError, match="streams must be at least 1"):
        wring.Engine(streams=0)


def test_many_chunks_keep_their_order_and_a_late_failure_names_its_item():
    engine = wring.Engine(streams=2)
    items = [text(1000 + 97 * i) for i in range(100)]  # several chunks of the batch
    frames = engine.compress_many(items, "lz4")
    assert [wring.decompress(f, "lz4", size=len(i)) for f, i in zip(frames, items)] == items
    items[70] = bytes(128 * 1024 + 1)
    with pytest.raises(ValueError, match="item 70: extent of 131073 bytes"):
        engine.compress_many(items, "lz4")
    assert engine.compress_many(items[:70], "lz4") == frames[:70]  # the engine still works


def test_stats_count_the_work():
    engine = wring.Engine(streams=2, workspace_mem=64 << 20)
    assert engine.streams == 2
    engine.compress_many(extents(16), "zstd:3")
    stats = engine.stats()
    assert stats["offload"]["completed"] >= 16 and stats["offload"]["workers"] == 2
    zstd = stats["workspaces"]["zstd"]
    assert zstd["workspaces"] >= 1 and zstd["resident_bytes"] > 0 and zstd["streams"] == 2


def test_the_gil_is_released_while_a_batch_runs():
    engine = wring.Engine(streams=2)
    items = extents(8) * 24  # 24 MiB at zstd:19: long enough to watch
    counted = [0]
    running = threading.Event()
    done = threading.Event()

    def count():
        running.set()
        while not done.is_set():
            counted[0] += 1

    t = threading.Thread(target=count)
    t.start()
    running.wait()
    before = counted[0]
    start = time.monotonic()
    engine.compress_many(items, "zstd:19")
    spent = time.monotonic() - start
    during = counted[0] - before
    done.set()
    t.join()
    # With the GIL held for the whole batch the counter could not move at all.
    assert during > 10_000, f"the counting thread ran {during} times in {spent:.2f} s"


def test_threads_submit_batches_to_one_engine():
    engine = wring.Engine(streams=2)
    items = extents(6)
    errors = []

    def work():
        try:
            for spec in ("zstd:3", "lz4", "zlib:1"):
                frames = engine.compress_many(items, spec)
                assert engine.decompress_many(frames, spec, sizes=128 * 1024) == items
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
