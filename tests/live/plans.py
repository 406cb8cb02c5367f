"""Site repos and their plans for `fabric check live` tests, made by the real `fabric init` and `fabric plan -o`."""

from __future__ import annotations

import contextlib
import io
import shutil
import subprocess
from pathlib import Path
from typing import Any

from llm_fabric.cli.main import main
from tests.fixtures.gateway_site import edit_yaml
from tests.fixtures.siterepo import site_copy

DEPLOYMENT = "qwen3-5"  # the cerit-sc deployment of the qwen3.5 recipe (the tiny engine's recipe)


def planned_site(root: Path, **deployment: Any) -> Path:
    """The cerit-sc example with `deployment`'s fields set on qwen3-5."""
    repo = site_copy(root)
    edit_yaml(repo / "deployments" / f"{DEPLOYMENT}.yaml", lambda d: d.update(deployment))
    return repo


def plan_of(repo: Path, path: Path) -> Path:
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["plan", "-C", str(repo), "-o", str(path), "--json"]) == 0
    return path


def promtool_lint(text: str) -> str:
    """`promtool check metrics` findings on an exposition ('' when clean)."""
    promtool = shutil.which("promtool") or "/usr/bin/promtool"
    done = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False)
    return (
        f"{done.returncode} {done.stdout}{done.stderr}".strip() if done.returncode or done.stdout or done.stderr else ""
    )


def drift_sample(field: str, value: int) -> str:
    """The exposition line of `fabric_replica_config_drift` for qwen3-5's replica 0 and `field`."""
    return (
        f'fabric_replica_config_drift{{deployment="{DEPLOYMENT}",field="{field}",replica="{DEPLOYMENT}-0"}} {value:.1f}'
    )
