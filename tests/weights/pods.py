"""A site's rendered serving objects, and the pod's weights check run as its init container would run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from llm_fabric.cli.main import main
from tests.fixtures.hf_cache import ENGINE_PYTHON
from tests.fixtures.siterepo import REPO_ROOT


def render_vienna(site: Path, plan: Path, out: Path) -> dict[str, dict[str, object]]:
    assert main(["render", "-C", str(site), "--plan", str(plan), "--site", "vienna", "--out", str(out)]) == 0
    serving = out / "vienna" / "serving"
    return {p.name: yaml.safe_load(p.read_text()) for p in serving.glob("*.yaml")}


def run_pod_check(
    rendered: dict[str, dict[str, object]], tmp_path: Path, cache: Path
) -> subprocess.CompletedProcess[str]:
    """The rendered init container's command, with its two mounts where this machine has them."""
    pod = rendered["deployment-gpt-oss-120b-0.yaml"]["spec"]["template"]["spec"]  # type: ignore[index]
    init = pod["initContainers"][0]
    lock = tmp_path / "weights.json"
    lock.write_text(rendered["configmap-llm-fabric-weights-lock.yaml"]["data"]["weights.json"])  # type: ignore[index]
    mounts = {"/etc/llm-fabric/weights/weights.json": str(lock), "/models/hf": str(cache / "hf")}
    args = [mounts.get(a, a) for a in init["args"]]
    assert init["command"][1:] == ["-m", "llm_fabric.engine.runtime.weights_check"]
    python = ENGINE_PYTHON if ENGINE_PYTHON.exists() else Path(sys.executable)  # the engine image's interpreter
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO_ROOT / "platform")}
    return subprocess.run(
        [str(python), *init["command"][1:], *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )
