"""The site repo is a real git repository; these helpers run the git CLI.

Commits take an exclusive lock on `.git/fabric.lock` so that concurrent enrolments into one repo
serialise their add+commit instead of racing for git's index lock.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from llm_fabric.atomicio import remove_temp_files, write_atomic
from llm_fabric.errors import UsageError
from llm_fabric.site.root import require_site_root

_IDENTITY = {
    "GIT_AUTHOR_NAME": "llm-fabric",
    "GIT_AUTHOR_EMAIL": "fabric@localhost",
    "GIT_COMMITTER_NAME": "llm-fabric",
    "GIT_COMMITTER_EMAIL": "fabric@localhost",
}


def _env(root: Path) -> dict[str, str]:
    env = dict(os.environ)
    probe = subprocess.run(["git", "config", "user.email"], cwd=root, capture_output=True, text=True, check=False)
    if probe.returncode != 0 or not probe.stdout.strip():
        env.update(_IDENTITY)
    return env


def git(root: Path, *args: str, check: bool = True) -> str:
    try:
        proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, env=_env(root), check=False)
    except FileNotFoundError as exc:
        raise UsageError("git is not installed", hint="install git (apt-get install git)") from exc
    if check and proc.returncode != 0:
        if "not a git repository" in proc.stderr:
            # a command run outside the site repo: say so as every other command does (-C DIR), not git's words
            require_site_root(root)
        raise UsageError(f"git {' '.join(args)} failed in {root}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def is_repo(root: Path) -> bool:
    return (root / ".git").exists()


def init_repo(root: Path) -> None:
    git(root, "init", "-q", "-b", "main")


@contextmanager
def file_lock(lock_path: Path) -> Iterator[None]:
    """An exclusive flock on `lock_path`, held for the with-block (blocks until it is free)."""
    with open(lock_path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def write_lock(root: Path, folders: Sequence[str]) -> Iterator[None]:
    """The lock every command that writes node manifests, retirement records or keys holds (`.git/fabric-enroll.lock`).

    All writes into `folders` happen under it, so a temporary file found there on entry was left by a
    killed run: it is removed (a re-run completes, and `git add` never picks the leftover up).
    """
    with file_lock(root / ".git" / "fabric-enroll.lock"):
        for folder in folders:
            remove_temp_files(root / folder)
        yield


def repo_lock(root: Path) -> AbstractContextManager[None]:
    return file_lock(root / ".git" / "fabric.lock")


def commit_paths(root: Path, paths: Sequence[Path], message: str) -> str | None:
    """Stage `paths` (relative or absolute) and commit them alone; returns the commit id, or None if unchanged."""
    rel = [str(p.relative_to(root) if p.is_absolute() else p) for p in paths]
    with repo_lock(root):
        git(root, "add", "-A", "--", *rel)
        if not git(root, "diff", "--cached", "--name-only", "--", *rel).strip():
            return None
        git(root, "commit", "-q", "-m", message, "--", *rel)
        return git(root, "rev-parse", "HEAD").strip()


def in_head(root: Path, path: Path | str) -> bool:
    """Whether HEAD holds `path` (relative or absolute). Not the index: a killed command may have staged
    a new file without committing it, and that file is still the command's to complete or remove."""
    rel = str(Path(path).relative_to(root) if Path(path).is_absolute() else path)
    return bool(git(root, "ls-tree", "--name-only", "HEAD", "--", rel, check=False).strip())


@contextmanager
def rolled_back_on_error(root: Path, paths: Sequence[Path]) -> Iterator[None]:
    """Run the with-block; if it raises, put `paths` back as HEAD has them (deleting those HEAD lacks)."""
    try:
        yield
    except BaseException:
        for path in paths:
            rel = str(path.relative_to(root) if path.is_absolute() else path)
            if in_head(root, rel):
                git(root, "checkout", "HEAD", "--", rel, check=False)
            else:
                git(root, "rm", "-q", "--cached", "--ignore-unmatch", "--", rel, check=False)
                (root / rel).unlink(missing_ok=True)
        raise


def show_file(root: Path, rev: str, path: str) -> str | None:
    """Content of `path` at `rev`, or None when it did not exist there."""
    proc = subprocess.run(
        ["git", "show", f"{rev}:{path}"], cwd=root, capture_output=True, text=True, env=_env(root), check=False
    )
    return proc.stdout if proc.returncode == 0 else None


def _plumbing(root: Path, *args: str, env: dict[str, str], stdin: str | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=root, input=stdin, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise UsageError(f"git {' '.join(args)} failed in {root}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout.strip()


def commit_to_branch(root: Path, branch: str, files: dict[str, str], message: str) -> str | None:
    """Commit `files` (repo-relative path -> text) onto `branch` without touching the checkout.

    The branch starts at HEAD when it does not exist yet. Git's plumbing builds the commit in a
    temporary index, so the working tree and the checked-out branch stay as they were: the change
    waits on the branch for review (a merge request). Returns the commit id, or None if unchanged.
    """
    if subprocess.run(["git", "check-ref-format", "--branch", branch], capture_output=True, check=False).returncode:
        raise UsageError(f"`{branch}` is not a valid git branch name", hint="e.g. --branch enroll/gpu7")
    ref = f"refs/heads/{branch}"
    if git(root, "symbolic-ref", "-q", "HEAD", check=False).strip() == ref:
        raise UsageError(
            f"`{branch}` is the branch checked out in {root}",
            hint="name a review branch, or leave --branch out to commit to the checkout",
        )
    with repo_lock(root), tempfile.TemporaryDirectory(dir=root / ".git") as scratch:
        env = _env(root) | {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        existing = git(root, "rev-parse", "-q", "--verify", f"{ref}^{{commit}}", check=False).strip()
        parent = existing or git(root, "rev-parse", "HEAD").strip()
        _plumbing(root, "read-tree", parent, env=env)
        for rel, text in files.items():
            blob = _plumbing(root, "hash-object", "-w", "--stdin", env=env, stdin=text)
            _plumbing(root, "update-index", "--add", "--cacheinfo", f"100644,{blob},{rel}", env=env)
        tree = _plumbing(root, "write-tree", env=env)
        if tree == _plumbing(root, "rev-parse", f"{parent}^{{tree}}", env=env):
            return None
        commit = _plumbing(root, "commit-tree", tree, "-p", parent, "-m", message, env=env)
        # compare-and-swap: the branch must still be where it was read (or still absent)
        _plumbing(root, "update-ref", ref, commit, existing or "0" * 40, env=env)
        return commit


def off_main_branch(root: Path) -> str | None:
    """The branch checked out in `root` when it is not `main` and `main` exists (a commit made there lands on
    a feature branch, not where the federation's nodes live); None otherwise, and outside a git repo."""
    current = git(root, "symbolic-ref", "-q", "--short", "HEAD", check=False).strip()
    has_main = git(root, "rev-parse", "-q", "--verify", "refs/heads/main", check=False).strip()
    return current if current and current != "main" and has_main else None


def is_checked_out(root: Path, branch: str | None) -> bool:
    """True when `branch` is the branch checked out in `root` (a command writing to it commits to the checkout)."""
    if branch is None:
        return False
    return git(root, "symbolic-ref", "-q", "HEAD", check=False).strip() == f"refs/heads/{branch}"


def require_committed(root: Path, paths: Sequence[str], command: str) -> None:
    """UsageError (exit 2) naming the files among `paths` that differ from HEAD (modified, staged or untracked).

    A command that commits judges its change against these files but commits only its own: over
    uncommitted edits it would leave a commit that `fabric validate` of the history rejects. The hint's
    commands run as written: untracked files are added before the commit (`git commit PATH` refuses a
    path git does not know, and `checkout --` cannot undo one), and a commit names its message.
    """
    lines = [line for line in git(root, "status", "--porcelain", "--", *paths).splitlines() if line.strip()]
    if not lines:
        return
    untracked = [line[3:] for line in lines if line.startswith("??")]
    tracked = [line[3:] for line in lines if not line.startswith("??")]
    keep, drop = [], []
    if tracked:
        listed = " ".join(tracked)
        keep.append(f'git -C {root} commit -qm "update {listed}" -- {listed}')
        drop.append(f"git -C {root} checkout HEAD -- {listed}")
    if untracked:
        listed = " ".join(untracked)
        keep.append(f'git -C {root} add -- {listed} && git -C {root} commit -qm "add {listed}"')
        drop.append(f"move {listed} out of the repo ({' '.join(f'{root}/{u}' for u in untracked)})")
    raise UsageError(
        f"{command} depends on uncommitted changes: {', '.join(tracked + untracked)}",
        hint=f"commit them first ({' && '.join(keep)}), or undo them ({'; '.join(drop)}); nothing was written",
    )


@contextmanager
def branch_tree(root: Path, branch: str | None) -> Iterator[Path]:
    """The folder a command that commits onto `branch` judges its change against.

    Without a branch, or with the branch checked out, that is the checkout. Otherwise it is the branch's
    committed tree (HEAD's, for a branch that does not exist yet and will start there), written to a
    temporary folder: what is already on a review branch counts, the checkout's edits do not.
    """
    if branch is None or is_checked_out(root, branch):
        yield root
        return
    exists = git(root, "rev-parse", "-q", "--verify", f"refs/heads/{branch}^{{commit}}", check=False).strip()
    rev = f"refs/heads/{branch}" if exists else "HEAD"
    with tempfile.TemporaryDirectory(prefix="fabric-branch-") as tmp:
        for name in git(root, "ls-tree", "-r", "--name-only", rev).splitlines():
            text = show_file(root, rev, name)
            if text is not None:
                write_atomic(Path(tmp) / name, text)
        yield Path(tmp)
