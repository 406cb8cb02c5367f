"""Output folders the fabric owns (`report --out`, `render --out`): marked, and only then cleaned.

A command that replaces its earlier output must delete the files it no longer writes, and must never
delete anything else. So it writes into a folder that is new, empty, or carries the marker file
`.fabric-output` from an earlier run; a folder holding other files (the user's README.md, a home
directory given by mistake) is refused before anything is written or removed.
"""

from __future__ import annotations

from pathlib import Path

from llm_fabric.atomicio import remove_temp_files, write_atomic
from llm_fabric.errors import UsageError

MARKER = ".fabric-output"


def claim_folder(folder: Path, command: str) -> Path:
    """Create `folder` with the marker, or accept it when it has the marker; leftover temp files are removed."""
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise UsageError(f"{folder} is not a folder", hint=f"give `{command}` a new or empty folder")
    marker = folder / MARKER
    if marker.is_file() and not marker.is_symlink():
        remove_temp_files(folder)
        return marker
    if folder.exists() and any(folder.iterdir()):
        raise UsageError(
            f"{folder} holds files that `{command}` did not write, and it replaces and deletes files in its output",
            hint=f"give a new or empty folder (an earlier output of `{command}` carries the file {MARKER})",
        )
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(marker, f"Written by `fabric {command}`: files here are replaced or deleted by its next run.\n")
    return marker
