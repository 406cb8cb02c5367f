"""Atomic file writes: a reader sees the old file or the new one, never half of either.

Written files get mode 0644 (published reports and rendered manifests are read by web servers and
GitOps controllers) unless the caller asks for another (0600 for private keys). A write killed
before its rename leaves a temporary file `.NAME.XXXXXXXX.tmp`; `remove_temp_files` is how the
next run of a command clears those from the folders it owns.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import re
import tempfile
from pathlib import Path

FILE_MODE = 0o644
# tempfile.mkstemp's name: our prefix `.NAME.`, 8 characters of its alphabet, our suffix
_TEMP_NAME = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp$")


def write_atomic(path: Path, data: str | bytes, *, mode: int = FILE_MODE) -> None:
    """Write `data` to `path` (mode 0644 unless given) through a temporary file in the same folder and `os.replace`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class AtomicBatch:
    """Many files, each replaced atomically, for two file system syncs in all instead of two per file.

    `write` puts the new content in a temporary file beside its target; `commit` syncs the file system
    once (every new content is on disk before any rename), renames each temporary file over its target,
    and syncs once more (the renames). After a crash each target holds its old or its new content, as
    with `write_atomic`; a rendered tree of 2,000 files costs 2 syncs instead of 4,000.
    """

    def __init__(self) -> None:
        self._pending: list[tuple[Path, Path]] = []  # (temporary file, target)

    def __enter__(self) -> AtomicBatch:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()

    def write(self, path: Path, data: str | bytes, *, mode: int = FILE_MODE) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        tmp = Path(tmp_name)
        self._pending.append((tmp, path))
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.chmod(tmp, mode)

    def commit(self) -> None:
        # one folder per file system the targets are on
        folders = {tmp.stat().st_dev: path.parent for tmp, path in self._pending}
        try:
            for folder in folders.values():
                sync_file_system(folder)
            while self._pending:
                tmp, path = self._pending[-1]
                os.replace(tmp, path)
                self._pending.pop()
        except BaseException:
            self.abort()
            raise
        for folder in folders.values():
            sync_file_system(folder)

    def abort(self) -> None:
        for tmp, _ in self._pending:
            tmp.unlink(missing_ok=True)
        self._pending.clear()


def is_temp_file(path: Path) -> bool:
    return bool(_TEMP_NAME.match(path.name))


def remove_temp_files(folder: Path) -> list[Path]:
    """Delete the temporary files a killed write left under `folder` (recursively); returns them.

    Only for folders a command owns (its --out, the site repo under its lock): a write running
    concurrently into the same folder would lose its temporary file.
    """
    if not folder.is_dir() or folder.is_symlink():
        return []
    removed = []
    for path in sorted(folder.rglob(".*.tmp")):
        if is_temp_file(path) and path.is_file() and not path.is_symlink():
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def sync_file_system(folder: Path) -> None:
    """Flush the file system that holds `folder` (Linux syncfs); elsewhere every file system (sync)."""
    syncfs = getattr(_libc(), "syncfs", None)
    if syncfs is None:
        os.sync()
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        if syncfs(fd) != 0:
            os.sync()
    finally:
        os.close(fd)


@functools.cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name, use_errno=True) if name else None
    except OSError:
        return None
