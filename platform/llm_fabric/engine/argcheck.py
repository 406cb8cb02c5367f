"""What both engines' argument checks share: a case (a generated command), a verdict, and the probe run.

Each backend builds its cases (`engine.vllm.check`, `engine.sglang.check`) and hands them to its
engine's own parser, which runs in the engine venv (`engine.runtime.*_probe`) through `run_probe`.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from llm_fabric.errors import FabricError


@dataclass(frozen=True)
class ArgCase:
    label: str
    args: list[str]


@dataclass(frozen=True)
class ArgVerdict:
    label: str
    ok: bool
    problems: list[str]


def run_probe(
    engine: str, interpreter: Path, module: list[str], cases: list[ArgCase], env: dict[str, str], timeout: float
) -> list[ArgVerdict]:
    """`python -m MODULE...` in the engine venv, the cases as JSON on stdin, the verdicts as JSON on stdout."""
    payload = json.dumps([{"label": c.label, "args": c.args} for c in cases])
    try:
        done = subprocess.run(
            [str(interpreter), "-m", *module],
            input=payload,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=env | {"PATH": "/usr/bin:/bin", "HOME": str(Path.home())},
        )
    except subprocess.TimeoutExpired as exc:
        raise FabricError(f"{engine}'s argument check did not finish in {timeout:.0f} s") from exc
    if done.returncode != 0:
        raise FabricError(
            f"{engine}'s argument check failed (exit {done.returncode}):\n{done.stderr[-2000:]}",
            hint="is llm-fabric installed in the engine environment? (`make engine` does it)",
        )
    return [ArgVerdict(r["label"], bool(r["ok"]), list(r["problems"])) for r in json.loads(done.stdout)]
