"""Names from users and paths inside a site repo, checked before anything is read or written.

A name (`--name`, a node or tenant name on a command line) becomes part of a path, so it is checked
as a DNS label first: `../../x` never reaches `Path`. A path inside the repo must stay inside it once
resolved, and the loader reads no symlink and no special file (a FIFO would hang it, a link to
/dev/zero would fill memory, a linked `nodes/` would make `enroll` write outside the repo).
"""

from __future__ import annotations

import re
import stat
from pathlib import Path

from llm_fabric.errors import Problem, UsageError
from llm_fabric.site.models import NAME_PATTERN, suggest_name

RETIRED = "retired"  # the folder of retirement records (llm_fabric.site.models.RetirementRecord)
_NAME = re.compile(NAME_PATTERN)
NAME_HINT = "a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit, 63 at most"


def check_name(value: str, what: str = "name") -> str:
    """`value` if it is a DNS label; UsageError (exit 2) naming `what` otherwise."""
    if not _NAME.match(value):
        shown = value if len(value) <= 80 else value[:77] + "..."
        raise UsageError(f"{what} `{shown}` is not a valid name", hint=f"{NAME_HINT}; e.g. `{suggest_name(value)}`")
    return value


def repo_path(root: Path, *parts: str) -> Path:
    """`root/parts...`, refused (UsageError) when a symlink on the way or `..` would lead outside the repo."""
    path = root.joinpath(*parts)
    walked = root
    for part in parts:
        walked = walked / part
        if walked.is_symlink():
            raise UsageError(f"{walked} is a symbolic link", hint="a site repo holds plain files and folders only")
    base = root.resolve()
    if not path.resolve().is_relative_to(base):
        raise UsageError(f"{path} is outside the site repo {base}", hint="give a name, not a path")
    return path


def unsafe_entry(path: Path) -> Problem | None:
    """A Problem when `path` is a symlink or neither a regular file nor a folder; None when it is safe to read."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        return Problem(f"cannot inspect: {exc.strerror or exc}", file=path)
    if stat.S_ISLNK(mode):
        return Problem("symbolic links are not read", file=path, hint="replace the link with the file or folder itself")
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        return Problem("not a regular file or folder (a FIFO, socket or device)", file=path, hint="remove it")
    return None
