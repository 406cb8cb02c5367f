"""The runtimes' import contracts are allow-lists that a new import breaks (tests/import_allow_list.py).

lint-imports runs on a copy of the package with three new imports written into it: one the runtime
makes itself, one of a third-party package the pod does not have, and one an allowed foundation
module makes (which the runtime would drag into its process).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# the code that runs in another program's process, and the small tools that must stay on the foundation
ALLOW_LISTED = (
    "llm_fabric.engine.runtime",
    "llm_fabric.gateway.runtime",
    "llm_fabric.engine.local",
    "llm_fabric.loadtest.burst",
    "llm_fabric.loadtest.sessions",
)


def _contracts() -> list[dict[str, object]]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    contracts: list[dict[str, object]] = config["contracts"]
    return contracts


def test_each_runtime_and_tool_has_an_allow_list() -> None:
    kinds = {src: c["type"] for c in _contracts() for src in c.get("source_modules", [])}  # type: ignore[attr-defined]
    assert {r: kinds.get(r) for r in ALLOW_LISTED} == dict.fromkeys(ALLOW_LISTED, "allow_list"), (
        "these contracts must say what the code may import (type allow_list), not what it may not"
    )


def _append(path: Path, line: str) -> int:
    """Write `line` at the end of the file; its line number."""
    text = path.read_text() + line + "\n"
    path.write_text(text)
    return len(text.splitlines())


def test_a_new_import_breaks_the_runtime_contracts(tmp_path: Path) -> None:
    shutil.copytree(REPO / "platform" / "llm_fabric", tmp_path / "platform" / "llm_fabric")
    # the tests too: the contract type lives there, and the contracts also speak of the tests' stand-ins
    shutil.copytree(REPO / "tests", tmp_path / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    package = tmp_path / "platform" / "llm_fabric"
    _append(package / "gateway" / "runtime" / "meter.py", "from llm_fabric.site import loader")
    _append(package / "engine" / "runtime" / "probe.py", "import yaml")
    at = _append(package / "request_record.py", "import llm_fabric.distribution")

    run = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports"), "--no-cache"],
        cwd=tmp_path,
        env={"PYTHONPATH": "platform", "COLUMNS": "400", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    said = " ".join((run.stdout + run.stderr).split())
    assert run.returncode == 1, said
    assert ", 3 broken." in said  # the gateway runtime, the engine runtime, and the burst (request_record)
    assert "- llm_fabric.gateway.runtime.meter -> llm_fabric.site.loader (l." in said
    assert "- llm_fabric.engine.runtime.probe -> yaml (l." in said
    assert (
        f"- llm_fabric.request_record -> llm_fabric.distribution (l.{at}): llm_fabric.distribution is not on this "
        "contract's allow-list (reached through llm_fabric.gateway.runtime.hooks)" in said
    )
