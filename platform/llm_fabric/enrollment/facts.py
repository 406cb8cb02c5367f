"""Gather a machine's raw facts with `playbooks/enroll.yml` through ansible-runner.

The result per host is a `FactsBundle`: the exact outputs of each probe, which can be saved
(`fabric facts HOST -o FILE`) and decided on later (`fabric enroll --facts FILE`) on an
air-gapped control machine. Parsing happens here, on the control machine, never on the host.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from llm_fabric.atomicio import write_atomic
from llm_fabric.basemodel import FabricModel
from llm_fabric.errors import UsageError
from llm_fabric.names import ENGINE_CACHE_MODELS_DIR_VAR
from llm_fabric.playbook_runner import Connection, Target, run_playbook

PROBE_TASK = "Run the probes"
# the provisioning role's model cache (fabric_engine_cache defaults, StackOptions.model_cache_path)
DEFAULT_MODELS_DIR = "/var/lib/llm-fabric/models"
# big enough that a fast NVMe disk reads it for a measurable fraction of a second, small enough to
# write in seconds on any disk the fabric would use
DEFAULT_READ_PROBE_MIB = 512


class ProbeResult(FabricModel):
    rc: int
    stdout: str = ""
    stderr: str = ""


class FactsBundle(FabricModel):
    version: Literal[1] = 1
    host: str = Field(description="the HOST the facts were gathered from, as given")
    connection: Connection
    collected_at: datetime
    probes: dict[str, ProbeResult]


@dataclass
class GatherResult:
    bundles: dict[str, FactsBundle] = field(default_factory=dict)
    unreachable: dict[str, str] = field(default_factory=dict)


ProgressCallback = Callable[[str, str], None]  # (host, what is happening)


@dataclass(frozen=True)
class ReadProbe:
    """The read speed probe of enroll.yml: whose disk it measures and how many MiB it reads back (0: none)."""

    models_dir: str = DEFAULT_MODELS_DIR
    size_mib: int = DEFAULT_READ_PROBE_MIB

    def extravars(self) -> dict[str, object]:
        return {ENGINE_CACHE_MODELS_DIR_VAR: self.models_dir, "fabric_enroll_read_probe_mib": self.size_mib}


def gather(
    targets: Sequence[Target],
    *,
    forks: int | None = None,
    progress: ProgressCallback | None = None,
    read_probe: ReadProbe | None = None,
) -> GatherResult:
    """Run the enroll playbook once over all targets (in parallel, `forks` at a time)."""
    names = [t.name for t in targets]
    marker = f"@@fabric-probe-{secrets.token_hex(8)}"
    events: list[dict[str, Any]] = []

    def on_event(event: dict[str, Any]) -> None:
        events.append(event)
        data = event.get("event_data", {})
        if progress is not None and event.get("event") in ("runner_on_start", "runner_on_ok", "runner_on_unreachable"):
            progress(str(data.get("host", "")), {"runner_on_start": "probing"}.get(str(event["event"]), "done"))

    run = run_playbook(
        "enroll.yml",
        targets,
        extravars={"fabric_marker": marker} | (read_probe or ReadProbe()).extravars(),
        forks=forks or min(len(targets), 20),
        on_event=on_event,
    )
    result = _collect(events, {t.name: t for t in targets}, marker)
    missing = [n for n in names if n not in result.bundles and n not in result.unreachable]
    if missing:
        raise UsageError(
            f"Ansible ended ({run.status}) without facts from {', '.join(missing)}", hint="rerun with --debug"
        )
    return result


def _collect(events: list[dict[str, Any]], targets: dict[str, Target], marker: str) -> GatherResult:
    result = GatherResult()
    now = datetime.now(UTC).replace(microsecond=0)
    for event in events:
        data = event.get("event_data", {})
        host = str(data.get("host", ""))
        if host not in targets or data.get("task") != PROBE_TASK:
            continue
        res = data.get("res", {})
        if event.get("event") == "runner_on_unreachable":
            result.unreachable[host] = str(res.get("msg", "unreachable")).strip()
        elif event.get("event") in ("runner_on_ok", "runner_on_failed"):
            if res.get("rc") not in (0, None):
                result.unreachable[host] = (
                    f"the probe shell failed (exit {res.get('rc')}): {res.get('stderr', '')}".strip()
                )
                continue
            target = targets[host]
            result.bundles[host] = FactsBundle(
                host=target.address,
                connection=target.connection,
                collected_at=now,
                probes=split_probes(str(res.get("stdout", "")), marker),
            )
    return result


def split_probes(stdout: str, marker: str) -> dict[str, ProbeResult]:
    """Cut the framed output of the probe task into one result per probe."""
    probes: dict[str, ProbeResult] = {}
    pattern = re.compile(
        rf"^{re.escape(marker)} begin (\S+)\r?\n(.*?)\r?\n{re.escape(marker)} end \1 (\d+)\r?$",
        re.DOTALL | re.MULTILINE,
    )
    for match in pattern.finditer(stdout):
        probes[match.group(1)] = ProbeResult(rc=int(match.group(3)), stdout=match.group(2))
    return probes


def save_bundle(bundle: FactsBundle, path: Path) -> None:
    write_atomic(path, json.dumps(bundle.model_dump(mode="json"), indent=2, sort_keys=True) + "\n")


def load_bundle(path: Path) -> FactsBundle:
    try:
        return FactsBundle.model_validate_json(path.read_bytes())
    except FileNotFoundError as exc:
        raise UsageError(f"facts file {path} not found", hint="create it with `fabric facts HOST -o FILE`") from exc
    except (OSError, ValidationError) as exc:
        raise UsageError(
            f"{path} is not a facts bundle: {str(exc).splitlines()[0]}", hint="use a file from `fabric facts`"
        ) from exc
