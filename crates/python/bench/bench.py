"""wring's Python package beside python-zstandard (and python-lz4), on the same machine.

Throughput: the corpus in 128 KiB extents, compressed by
  * wring.Engine(streams=2).compress_many,
  * python-zstandard's ZstdCompressor.multi_compress_to_buffer(threads=2) (zstd),
  * a 2-thread pool over one-shot calls: python-zstandard (one compressor per thread),
    compression.zstd where Python has it (3.14+), python-lz4's lz4.block (lz4), and wring;
and the ratio of each to the fastest peer. Latency: one-shot calls on 4 KiB blocks, median
nanoseconds per call, wring against the peer. Prints markdown (and --json FILE).

  usage: bench.py CORPUS_DIR [--mb N] [--rounds N] [--json FILE]
"""

import argparse
import concurrent.futures as cf
import importlib.util
import json
import os
import statistics
import sys
import threading
import time

import zstandard

import wring

EXTENT = 128 * 1024
BLOCK = 4096


def load(corpus: str, limit: int) -> bytes:
    out = bytearray()
    for name in sorted(os.listdir(corpus)):
        path = os.path.join(corpus, name)
        if name == "MANIFEST" or not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            out += f.read(limit - len(out))
        if len(out) >= limit:
            break
    return bytes(out)


def has(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def best_of(rounds: int, run):
    """(seconds of the fastest round, its output bytes)."""
    best, size = None, 0
    for _ in range(rounds):
        start = time.perf_counter()
        size = run()
        spent = time.perf_counter() - start
        best = spent if best is None else min(best, spent)
    return best, size


def pool(fn, items, threads=2):
    """Run fn over items on a thread pool, keeping every result as a caller would (as the
    batch calls do)."""
    with cf.ThreadPoolExecutor(threads) as ex:
        results = list(ex.map(fn, items, chunksize=16))
    return sum(len(x) for x in results)


def per_thread(make):
    local = threading.local()

    def get():
        if not hasattr(local, "obj"):
            local.obj = make()
        return local.obj

    return get


def throughput(extents, rounds):
    total = sum(len(e) for e in extents)
    rows = []
    engine = wring.Engine(streams=2)
    for spec, level in (("zstd:3", 3), ("lz4", None)):
        runs = {"wring Engine.compress_many (2 streams)": lambda: sum(len(x) for x in engine.compress_many(extents, spec))}
        runs["wring one-shot, 2-thread pool"] = lambda: pool(lambda e: wring.compress(e, spec), extents)
        peers = []
        if level is not None:
            zc = zstandard.ZstdCompressor(level=level)
            name = "python-zstandard multi_compress_to_buffer(threads=2)"
            runs[name] = lambda: zc.multi_compress_to_buffer(extents, threads=2).size()
            get = per_thread(lambda: zstandard.ZstdCompressor(level=level))
            pname = "python-zstandard one-shot, 2-thread pool"
            runs[pname] = lambda: pool(lambda e: get().compress(e), extents)
            peers += [name, pname]
            if has("compression.zstd"):
                from compression import zstd as stdzstd  # Python 3.14+

                sname = "compression.zstd one-shot, 2-thread pool"
                runs[sname] = lambda: pool(lambda e: stdzstd.compress(e, level), extents)
                peers.append(sname)
        elif has("lz4"):
            import lz4.block

            lname = "python-lz4 lz4.block one-shot, 2-thread pool"
            runs[lname] = lambda: pool(lambda e: lz4.block.compress(e, store_size=False), extents)
            peers.append(lname)
        results = {name: best_of(rounds, run) for name, run in runs.items()}
        fastest = min((results[p][0] for p in peers), default=None)
        for name, (secs, size) in results.items():
            rows.append(
                {
                    "spec": spec,
                    "method": name,
                    "mb_per_s": total / secs / 1e6,
                    "ratio": total / size,
                    "vs_fastest_peer": (fastest / secs) if fastest else None,
                }
            )
    return rows


def latency(blocks, rounds):
    rows = []
    zc, zd = zstandard.ZstdCompressor(level=3), zstandard.ZstdDecompressor()
    frames = [zc.compress(b) for b in blocks]
    cases = [
        ("zstd:3 compress 4 KiB", lambda b: wring.compress(b, "zstd:3"), zc.compress, blocks, "python-zstandard ZstdCompressor.compress"),
        ("zstd decompress 4 KiB", lambda f: wring.decompress(f, "zstd", BLOCK), zd.decompress, frames, "python-zstandard ZstdDecompressor.decompress"),
    ]
    if has("lz4"):
        import lz4.block

        lz = [lz4.block.compress(b, store_size=False) for b in blocks]
        cases.append(("lz4 compress 4 KiB", lambda b: wring.compress(b, "lz4"), lambda b: lz4.block.compress(b, store_size=False), blocks, "python-lz4 lz4.block.compress"))
        cases.append(("lz4 decompress 4 KiB", lambda f: wring.decompress(f, "lz4", BLOCK), lambda f: lz4.block.decompress(f, uncompressed_size=BLOCK), lz, "python-lz4 lz4.block.decompress"))
    for what, ours, theirs, items, peer in cases:
        times = {"wring": [], "peer": []}
        for _ in range(rounds):
            for key, fn in (("wring", ours), ("peer", theirs)):
                start = time.perf_counter_ns()
                for it in items:
                    fn(it)
                times[key].append((time.perf_counter_ns() - start) / len(items))
        w, p = statistics.median(times["wring"]), statistics.median(times["peer"])
        rows.append({"call": what, "peer": peer, "wring_ns": w, "peer_ns": p, "wring_over_peer": w / p})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus")
    ap.add_argument("--mb", type=int, default=96, help="corpus megabytes to use (default 96)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds; the best (throughput) or median (latency) is kept")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    data = load(args.corpus, args.mb << 20)
    extents = [data[i : i + EXTENT] for i in range(0, len(data), EXTENT)]
    blocks = [data[i : i + BLOCK] for i in range(0, min(len(data), 16 << 20), BLOCK)][:4096]
    print(f"Python {sys.version.split()[0]}, wring {wring.__version__}, zstandard {zstandard.__version__}, "
          f"{len(data) / 1e6:.1f} MB in {len(extents)} extents of 128 KiB, {os.cpu_count()} CPUs\n")
    tp = throughput(extents, args.rounds)
    print("| spec | method | MB/s | ratio | × fastest peer |\n|---|---|--:|--:|--:|")
    for r in tp:
        vs = f"{r['vs_fastest_peer']:.2f}" if r["vs_fastest_peer"] else "n/a"
        print(f"| {r['spec']} | {r['method']} | {r['mb_per_s']:.0f} | {r['ratio']:.3f} | {vs} |")
    if not has("compression.zstd"):
        print(f"\n(compression.zstd: not in Python {sys.version_info.major}.{sys.version_info.minor}; it arrived in 3.14)")
    lat = latency(blocks, max(args.rounds, 5))
    print("\n| one-shot call | peer | wring ns | peer ns | wring ÷ peer |\n|---|---|--:|--:|--:|")
    for r in lat:
        print(f"| {r['call']} | {r['peer']} | {r['wring_ns']:.0f} | {r['peer_ns']:.0f} | {r['wring_over_peer']:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"throughput": tp, "latency": lat}, f, indent=2)


if __name__ == "__main__":
    main()
