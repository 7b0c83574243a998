"""Shared helpers: test data, and the repository's rule for tests that need root."""

import os

import pytest


def text(n: int) -> bytes:
    """Compressible bytes that are not a single repeated word."""
    words = b"wring squeezes extents the way btrfs and zram do; "
    reps = words * (n // len(words) + 1)
    return bytes(b ^ ((i // 7919) & 0xFF) for i, b in enumerate(reps[:n]))


def corpus_bytes(n: int) -> bytes:
    """n bytes of the shared corpus when WRING_CORPUS names it, else of text()."""
    root = os.environ.get("WRING_CORPUS")
    if root and os.path.isdir(root):
        out = b""
        for name in sorted(os.listdir(root)):
            path = os.path.join(root, name)
            if os.path.isfile(path) and name != "MANIFEST":
                with open(path, "rb") as f:
                    out += f.read(n - len(out))
            if len(out) >= n:
                return out
    return text(n)


def require_root(what: str) -> None:
    """Fail without root, unless WRING_SKIP_ROOT=1 opts out (logged like the Rust tests)."""
    if os.geteuid() == 0:
        return
    if os.environ.get("WRING_SKIP_ROOT") == "1":
        log = os.environ.get("WRING_SKIP_LOG")
        if log:
            with open(log, "a") as f:
                f.write(f"wring-test-skipped: python {what} (needs root, opted out by WRING_SKIP_ROOT=1)\n")
        pytest.skip(f"{what} needs root")
    pytest.fail(f"{what} needs root (WRING_SKIP_ROOT=1 opts out)")
