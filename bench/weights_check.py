"""The pod's weights check (`engine/runtime/weights_check`, the init container before every pinned engine)
against the baseline an operator would reach for, `sha256sum -c`, over the same checkpoint.

A checkpoint of `--files` files of `--mib` MiB each is laid out as huggingface_hub leaves it
(`tests/fixtures/hf_cache.place_checkpoint`: blobs, snapshot links, refs/main) and locked with the
fabric's own `weights.snapshot.lock_snapshot`; the lock goes to the check as the pod's ConfigMap holds
it (`deploy.resources.weights.lock_configmap`). Each run times the check and `sha256sum -c` on the
same files, the order flipped every other run. The files are read from the page cache (they were just
written): this measures the hashing, which is what the check adds to a cold start once the disk has
delivered the bytes; the disk's own speed is `host.storage_read_mb_s`. Reported: medians in GB/s and
the ratio baseline time / check time (above 1: the check is faster).

    PYTHONPATH=platform .venv/bin/python bench/weights_check.py [--runs 5] [--files 8] [--mib 256]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fixtures.hf_cache import place_checkpoint

from llm_fabric.serving.weights import LOCK_KEY, PinnedWeights, lock_configmap
from llm_fabric.weights.snapshot import lock_snapshot

CHECKPOINT = "bench/checkpoint"
REVISION = "0123456789abcdef0123456789abcdef01234567"


def _layout(tmp: Path, files: int, mib: int) -> tuple[Path, Path, Path]:
    source = tmp / "source"
    source.mkdir()
    block = bytes(range(256)) * 4096  # 1 MiB; sha256's speed does not depend on the bytes
    for i in range(files):
        with (source / f"model-{i:05d}-of-{files:05d}.safetensors").open("wb") as out:
            for j in range(mib):
                out.write(block[j % 256 :] + block[: j % 256])  # no two MiB alike
    hf_home = tmp / "hf"
    snapshot = place_checkpoint(hf_home, CHECKPOINT, REVISION, source)
    locked = lock_snapshot(hf_home, CHECKPOINT, REVISION)
    lock = tmp / LOCK_KEY
    lock.write_text(lock_configmap("bench", [PinnedWeights(CHECKPOINT, locked)])["data"][LOCK_KEY])
    sums = tmp / "SHA256SUMS"
    sums.write_text("".join(f"{f.sha256}  {snapshot / f.path}\n" for f in locked.files))
    return hf_home, lock, sums


def _time(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--mib", type=int, default=256)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-weights-") as tmp:
        hf_home, lock, sums = _layout(Path(tmp), args.files, args.mib)
        check = [sys.executable, "-m", "llm_fabric.engine.runtime.weights_check", "--lock", str(lock)]
        check += ["--root", str(hf_home), "--checkpoint", CHECKPOINT]
        baseline = ["sha256sum", "--quiet", "-c", str(sums)]
        ours, theirs = [], []
        for run in range(args.runs):
            pair = [(ours, check), (theirs, baseline)]
            for into, command in pair if run % 2 == 0 else reversed(pair):
                into.append(_time(command))
    size_gb = args.files * args.mib * 1024 * 1024 / 1e9
    result = {
        "bytes_gb": round(size_gb, 3),
        "runs": args.runs,
        "check_s_median": round(statistics.median(ours), 3),
        "sha256sum_s_median": round(statistics.median(theirs), 3),
        "check_gb_s": round(size_gb / statistics.median(ours), 3),
        "sha256sum_gb_s": round(size_gb / statistics.median(theirs), 3),
        "ratio_sha256sum_over_check": round(statistics.median(theirs) / statistics.median(ours), 2),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
