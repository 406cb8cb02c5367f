"""The site repo as it was at a git revision, materialised in a folder (for `fabric plan --base`)."""

from __future__ import annotations

from pathlib import Path

from llm_fabric.atomicio import write_atomic
from llm_fabric.errors import UsageError
from llm_fabric.site.gitrepo import git, show_file
from llm_fabric.site.weights_lock import LOCK_FILE


def checkout_revision(site_dir: Path, rev: str, into: Path) -> Path:
    """Write the site repo files of `rev` under `into`; return the site root there.

    `site_dir` may be a sub-folder of a larger repository: the same sub-folder is taken at `rev`.
    """
    site_dir = site_dir.resolve()
    top = Path(git(site_dir, "rev-parse", "--show-toplevel").strip())
    prefix = git(site_dir, "rev-parse", "--show-prefix").strip()
    probe = git(top, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False).strip()
    if not probe:
        raise UsageError(
            f"`{rev}` is not a revision of the git repository {top}",
            hint="use a branch, tag or commit, e.g. --base main or --base HEAD~1",
        )
    names = git(top, "ls-tree", "-r", "--name-only", rev, "--", prefix or ".").splitlines()
    for name in names:
        if not name.endswith((".yaml", ".yml", LOCK_FILE)):
            continue
        text = show_file(top, rev, name)
        if text is not None:
            write_atomic(into / name, text)
    root = into / prefix
    root.mkdir(parents=True, exist_ok=True)
    return root
