"""Atomic file writes: a reader sees the old file or the new one, never half of either."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import tempfile
from pathlib import Path


def write_atomic(path: Path, data: str | bytes, *, mode: int | None = None) -> None:
    """Write `data` to `path` through a temporary file in the same folder and `os.replace`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
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

    def write(self, path: Path, data: str | bytes, *, mode: int | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        tmp = Path(tmp_name)
        self._pending.append((tmp, path))
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
        if mode is not None:
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
