"""Where a site repo is: the folder with fabric.yaml, found from any folder inside it as git finds .git.

Imports only the foundation, so the CLI can find the repo before a command loads anything.
"""

from __future__ import annotations

from pathlib import Path

from llm_fabric.errors import Problem, UsageError

FABRIC_FILE = "fabric.yaml"
SITE_REPO_ENV = "FABRIC_SITE_REPO"
NOT_A_SITE_REPO_HINT = (
    f"run the command inside a site repo (or any folder of one), pass -C DIR, or set {SITE_REPO_ENV}=DIR; "
    "`fabric init DIR` creates one"
)


def find_site_root(start: Path) -> Path | None:
    """The nearest of `start` and the folders above it, up to the file-system root, that holds fabric.yaml."""
    return next((folder for folder in [start, *start.parents] if (folder / FABRIC_FILE).is_file()), None)


def not_a_site_repo(root: Path) -> Problem | None:
    """The problem of a folder without fabric.yaml (None for a site repo), saying how to name one."""
    path = root / FABRIC_FILE
    if path.exists() or path.is_symlink():
        return None
    return Problem(f"{root} is not a site repo: it has no {FABRIC_FILE}", hint=NOT_A_SITE_REPO_HINT)


def require_site_root(root: Path) -> None:
    """UsageError unless `root` holds fabric.yaml: for commands that read a part of the repo only."""
    problem = not_a_site_repo(root)
    if problem is not None:
        raise UsageError(problem.message, hint=problem.hint)
