"""A replica's weights checked against the site's lock before the engine starts (the pod's init container).

    python3 -m llm_fabric.engine.runtime.weights_check --lock /etc/llm-fabric/weights/weights.json \
        --root /models/hf --checkpoint Qwen/Qwen3-8B

The lock is `weights.lock` of the site repo, rendered into the pod's ConfigMap as JSON
(serving/weights.py): the engine image has no YAML parser, and JSON is one the standard
library reads completely, where a hand-made YAML subset would be a second parser of the same file to
keep in step with PyYAML. The checkpoint's files are those of the Hugging Face cache under `--root`
(HF_HOME): `hub/models--ORG--NAME/snapshots/REVISION/PATH`, and `refs/main` must name the locked
revision, because that is the snapshot the engine opens with HF_HUB_OFFLINE=1 and no `--revision`.

Every file's size, then its sha256, is compared with the lock. Exit status 0: every file matches;
1: a file is missing or differs (each one named on stdout, with what to do); 2: the command line,
the lock or its checkpoint is not usable. Standard library only, like the probes (probe.py).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

CHUNK = 8 * 1024 * 1024
# files hashed at once: hashlib releases the GIL on large buffers, so a few threads keep a fast disk busy
# (one core hashes ~1.5 GB/s; a 700 GB checkpoint would take ~8 minutes on one)
HASH_THREADS = min(8, os.cpu_count() or 1)
RESTAGE = (
    "re-stage it: delete the snapshot from the node's model cache, run `fabric weights stage` there, restart the pod"
)


class LockUnusable(Exception):
    """The lock file cannot be read, or does not pin the checkpoint (exit 2)."""


@dataclass(frozen=True)
class Locked:
    path: str
    size: int
    sha256: str


def repo_folder(root: Path, checkpoint: str) -> Path:
    """Where huggingface_hub keeps a model repo under HF_HOME (`hub/models--ORG--NAME`)."""
    return root / "hub" / ("models--" + checkpoint.replace("/", "--"))


def snapshot_folder(root: Path, checkpoint: str, revision: str) -> Path:
    return repo_folder(root, checkpoint) / "snapshots" / revision


def load_pins(lock: Path, checkpoint: str) -> tuple[str, list[Locked]]:
    """The checkpoint's revision and files from the JSON lock."""
    try:
        data = json.loads(lock.read_text(encoding="utf-8"))
    except OSError as exc:
        raise LockUnusable(f"cannot read the weights lock {lock}: {exc.strerror}") from exc
    except ValueError as exc:
        raise LockUnusable(f"the weights lock {lock} is not JSON: {exc}") from exc
    entry = data.get("checkpoints", {}).get(checkpoint) if isinstance(data, dict) else None
    if not isinstance(entry, dict):
        raise LockUnusable(
            f"the weights lock {lock} does not pin `{checkpoint}`: re-render the site after `fabric weights stage`"
        )
    try:
        files = [Locked(str(f["path"]), int(f["size"]), str(f["sha256"])) for f in entry["files"]]
        return str(entry["revision"]), files
    except (KeyError, TypeError, ValueError) as exc:
        raise LockUnusable(f"the weights lock {lock} has a malformed entry for `{checkpoint}`: {exc!r}") from exc


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _readable_sha256(path: Path) -> str | None:
    try:
        return file_sha256(path)
    except OSError:
        return None


def check(root: Path, checkpoint: str, revision: str, files: list[Locked]) -> list[str]:
    """One line per problem: the cache's revision, then every missing or differing file."""
    problems: list[str] = []
    ref = repo_folder(root, checkpoint) / "refs" / "main"
    try:
        current = ref.read_text(encoding="utf-8").strip()
    except OSError:
        current = None
    if current != revision:
        seen = f"names {current}" if current else "is missing"
        problems.append(
            f"{checkpoint}: {ref} {seen}, the lock pins revision {revision}: the engine would load other files"
        )
    snapshot = snapshot_folder(root, checkpoint, revision)
    to_hash: list[tuple[Locked, Path]] = []
    for pin in files:
        path = snapshot / pin.path
        try:
            size = path.stat().st_size  # follows the snapshot's symlink into blobs/
        except OSError:
            problems.append(f"{checkpoint}: {pin.path} is missing ({path})")
            continue
        if size != pin.size:
            problems.append(f"{checkpoint}: {pin.path} has {size} bytes, the lock says {pin.size} ({path})")
        else:
            to_hash.append((pin, path))
    with ThreadPoolExecutor(max_workers=HASH_THREADS) as pool:
        digests = list(pool.map(lambda item: _readable_sha256(item[1]), to_hash))
    for (pin, path), digest in zip(to_hash, digests, strict=True):
        if digest is None:
            problems.append(f"{checkpoint}: {pin.path} cannot be read ({path})")
        elif digest != pin.sha256:
            problems.append(f"{checkpoint}: {pin.path} has sha256 {digest}, the lock says {pin.sha256} ({path})")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="weights_check", description="verify a checkpoint against weights.lock")
    parser.add_argument("--lock", type=Path, required=True, help="the lock as JSON (the pod's ConfigMap)")
    parser.add_argument("--root", type=Path, required=True, help="HF_HOME of the model cache")
    parser.add_argument("--checkpoint", required=True, help="the Hugging Face repo id the engine loads")
    args = parser.parse_args(argv)
    try:
        revision, files = load_pins(args.lock, args.checkpoint)
    except LockUnusable as exc:
        print(exc)
        return 2
    problems = check(args.root, args.checkpoint, revision, files)
    if problems:
        for line in problems:
            print(line)
        print(f"{args.checkpoint}: {len(problems)} problem(s) against weights.lock; {RESTAGE}")
        return 1
    total = sum(f.size for f in files)
    print(
        f"{args.checkpoint}@{revision}: {len(files)} file{'s' if len(files) != 1 else ''}, "
        f"{total} bytes match weights.lock"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
