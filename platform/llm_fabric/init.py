"""`fabric init`: create a site repo (empty skeleton or a shipped example), export schemas, commit."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from llm_fabric.atomicio import write_atomic
from llm_fabric.distribution import data_path
from llm_fabric.enrollment.registry import sign_file
from llm_fabric.errors import UsageError
from llm_fabric.site import gitrepo
from llm_fabric.site.schemas import SCHEMA_DIR, export_schemas, kind_of, modeline
from llm_fabric.trust.signatures import KeyPair, default_private_key_path, init_keys, load_private_key

SKELETON_FABRIC = """\
version: 1
federation:
  name: {name}
  display_name: {name}
  currency: USD
data_classes:
  public: {{description: Public data, rank: 0}}
  internal: {{description: Internal research data, rank: 1}}
  sensitive: {{description: Personal or regulated data, rank: 2}}
sites:
  main:
    display_name: Main site
    jurisdiction: {{country: CZ, eu: true}}
    operator: {{name: {name}, federation_member: true}}
    cluster: {{name: main, namespace: llm-fabric}}
defaults:
  data_class: internal
"""


@dataclass
class InitResult:
    root: Path
    example: str | None
    files: list[Path]
    commit: str | None
    key: KeyPair | None = None


def examples() -> list[str]:
    return sorted(p.name for p in data_path("examples").iterdir() if (p / "fabric.yaml").is_file())


def init_site(root: Path, example: str | None = None, key_path: Path | None = None) -> InitResult:
    """Build the repo in a hidden sibling folder, commit it there, and only then rename it into place.

    A run killed at any moment leaves either no DIRECTORY or a complete, committed one; the hidden
    folder it leaves is removed by the next run.
    """
    if root.is_symlink() or (root.exists() and not root.is_dir()):
        raise UsageError(f"{root} exists and is not a folder", hint="choose a new folder for the site repo")
    if root.exists() and any(root.iterdir()):
        raise UsageError(f"{root} exists and is not empty", hint="choose a new folder for the site repo")
    if example is not None and example not in examples():
        raise UsageError(f"unknown example `{example}`", hint=f"available: {', '.join(examples())}")
    target = root.resolve()
    if target == Path.cwd().resolve():
        # the repo is renamed into place: the current folder cannot be replaced under the shell that is in it
        raise UsageError(f"{root} is the current folder", hint=f"run it from the parent: fabric init {target.name}")
    staging = target.with_name(f".{target.name}.init-tmp")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        if example is not None:
            shutil.copytree(data_path("examples", example), staging)
        else:
            staging.mkdir(parents=True)
            (staging / "fabric.yaml").write_text(SKELETON_FABRIC.format(name=_federation_name(root)))
            for folder in ("nodes", "tenants", "deployments", "policies"):
                (staging / folder).mkdir()
                (staging / folder / ".gitkeep").touch()
        key = _sign_declared_nodes(staging, key_path or default_private_key_path(root, new_repo=True))
        export_schemas(staging / SCHEMA_DIR)
        files = _add_modelines(staging)
        gitrepo.init_repo(staging)
        commit = gitrepo.commit_paths(staging, [Path(".")], f"fabric init{f' --example {example}' if example else ''}")
        # the site repo appears complete and committed, or not at all
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            target.rmdir()
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    files = [root / f.relative_to(staging) for f in files]
    return InitResult(root=root, example=example, files=files, commit=commit, key=key)


def _federation_name(root: Path) -> str:
    """The folder's name as a DNS label (the skeleton must validate), or `fabric`."""
    label = re.sub(r"[^a-z0-9-]+", "-", root.resolve().name.lower()).strip("-")[:63].strip("-")
    return label or "fabric"


def _sign_declared_nodes(staging: Path, key_path: Path) -> KeyPair | None:
    """An example's operator-declared nodes are signed with a new federation key (private key beside the repo).

    `fabric validate` accepts only signed nodes; signing here is the operator vouching for the
    example's hardware, with the same key that `fabric enroll` will use for new machines.
    """
    unsigned = sorted((staging / "nodes").glob("*.yaml")) if (staging / "nodes").is_dir() else []
    if not unsigned:
        return None
    pair = init_keys(staging, key_path, reuse=True)
    private = load_private_key(key_path)
    for path in unsigned:
        sign_file(path, private)
    return pair


def _add_modelines(root: Path) -> list[Path]:
    files = []
    for path in sorted(root.rglob("*.yaml")):
        rel = path.relative_to(root)
        if kind_of(rel) is None:
            continue
        text = path.read_text(encoding="utf-8")
        if not text.startswith("# yaml-language-server:"):
            write_atomic(path, modeline(rel) + "\n" + text)
        files.append(path)
    return files
