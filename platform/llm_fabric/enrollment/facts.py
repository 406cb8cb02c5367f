"""Gather a machine's raw facts with `playbooks/enroll.yml` through ansible-runner.

The result per host is a `FactsBundle`: the exact outputs of each probe, which can be saved
(`fabric facts HOST -o FILE`) and decided on later (`fabric enroll --facts FILE`) on an
air-gapped control machine. Parsing happens here, on the control machine, never on the host.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import ansible_runner
from pydantic import Field, ValidationError

from llm_fabric.atomicio import write_atomic
from llm_fabric.basemodel import FabricModel
from llm_fabric.distribution import data_path
from llm_fabric.errors import UsageError

PROBE_TASK = "Run the probes"
Connection = Literal["ssh", "local"]


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


@dataclass(frozen=True)
class Target:
    """One machine to gather from; `name` is its inventory name (unique within one run)."""

    name: str
    address: str
    connection: Connection = "ssh"
    user: str | None = None
    port: int | None = None
    key: Path | None = None
    extra_vars: dict[str, str] = field(default_factory=dict)

    def inventory_vars(self) -> dict[str, object]:
        if self.connection == "local":
            out: dict[str, object] = {"ansible_connection": "local"}
        else:
            out = {"ansible_host": self.address, "ansible_ssh_use_tty": False}
            if self.user:
                out["ansible_user"] = self.user
            if self.port:
                out["ansible_port"] = self.port
            if self.key:
                out["ansible_ssh_private_key_file"] = str(self.key)
        out.update(self.extra_vars)
        return out


@dataclass
class GatherResult:
    bundles: dict[str, FactsBundle] = field(default_factory=dict)
    unreachable: dict[str, str] = field(default_factory=dict)


ProgressCallback = Callable[[str, str], None]  # (host, what is happening)


def _search_path() -> str:
    """PATH with the folder of this Python's ansible-playbook first (a venv's bin/ need not be on PATH)."""
    path = os.environ.get("PATH", os.defpath)
    beside = Path(sys.executable).parent
    if (beside / "ansible-playbook").exists():
        return f"{beside}{os.pathsep}{path}"
    if shutil.which("ansible-playbook") is None:
        raise UsageError(
            "ansible-playbook is not installed", hint="pip install llm-fabric (it depends on ansible-core)"
        )
    return path


def _envvars(work: Path) -> dict[str, str]:
    control = work / "cp"
    control.mkdir()
    return {
        # an unknown machine is enrolled by its address; trust is the operator's review of the manifest
        "PATH": _search_path(),
        "ANSIBLE_HOST_KEY_CHECKING": "False",
        "ANSIBLE_SSH_ARGS": (
            "-o ControlMaster=auto -o ControlPersist=30s -o ConnectTimeout=5 -o BatchMode=yes"
            " -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"
        ),
        "ANSIBLE_SSH_CONTROL_PATH_DIR": str(control),
        "ANSIBLE_SSH_RETRIES": "0",
        "ANSIBLE_TIMEOUT": "10",
        "ANSIBLE_LOCAL_TEMP": str(work / "tmp"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
    }


def gather(
    targets: Sequence[Target], *, forks: int | None = None, progress: ProgressCallback | None = None
) -> GatherResult:
    """Run the enroll playbook once over all targets (in parallel, `forks` at a time)."""
    names = [t.name for t in targets]
    if len(set(names)) != len(names):
        raise UsageError("the same host is listed twice", hint="give each host once")
    work = Path(tempfile.mkdtemp(prefix="fabric-facts-"))
    marker = f"@@fabric-probe-{secrets.token_hex(8)}"
    events: list[dict[str, Any]] = []

    def on_event(event: dict[str, Any]) -> bool:
        events.append(event)
        data = event.get("event_data", {})
        if progress is not None and event.get("event") in ("runner_on_start", "runner_on_ok", "runner_on_unreachable"):
            progress(str(data.get("host", "")), {"runner_on_start": "probing"}.get(str(event["event"]), "done"))
        return False  # the events are kept in memory; no need to write them to the artifacts folder

    try:
        runner = ansible_runner.run(
            private_data_dir=str(work),
            playbook=str(data_path("playbooks", "enroll.yml")),
            inventory={"all": {"hosts": {t.name: t.inventory_vars() for t in targets}}},
            envvars=_envvars(work),
            extravars={"fabric_marker": marker},
            forks=forks or min(len(targets), 20),
            quiet=True,
            event_handler=on_event,
            rotate_artifacts=1,
        )
        status = str(runner.status)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = _collect(events, {t.name: t for t in targets}, marker)
    missing = [n for n in names if n not in result.bundles and n not in result.unreachable]
    if missing:
        raise UsageError(f"Ansible ended ({status}) without facts from {', '.join(missing)}", hint="rerun with --debug")
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


def default_forks() -> int:
    return max(1, min(20, (os.cpu_count() or 1) * 5))
