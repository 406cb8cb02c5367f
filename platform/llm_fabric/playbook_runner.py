"""Run one of the distribution's playbooks (`playbooks/*.yml`) against machines, through ansible-runner.

The one way the fabric runs Ansible: enrolment's fact gathering (`enroll.yml`), provisioning
(`provision.yml`) and draining (`drain.yml`) all go through `run_playbook`. A `Target` says how to
reach a machine; `run_playbook` builds the inventory from targets (or takes host variables as they
are), sets the environment every run needs (below), and returns the play's outcome per host.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import ansible_runner

from llm_fabric.distribution import data_path
from llm_fabric.errors import UsageError

Connection = Literal["ssh", "local"]
Event = dict[str, Any]
EventHandler = Callable[[Event], None]


@dataclass(frozen=True)
class Target:
    """One machine to run on; `name` is its inventory name (unique within one run)."""

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


def control_machine() -> dict[str, object]:
    """Host variables for a play that runs here (drain.yml): this Python runs the modules."""
    return {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}


@dataclass
class PlaybookResult:
    playbook: str
    status: str
    stats: dict[str, dict[str, int]] = field(default_factory=dict)  # host -> ok/changed/failures/...
    failures: list[str] = field(default_factory=list)

    @property
    def changed(self) -> int:
        return sum(s.get("changed", 0) for s in self.stats.values())

    @property
    def succeeded(self) -> bool:
        return self.status == "successful" and not self.failures

    def as_dict(self) -> dict[str, object]:
        return {
            "playbook": self.playbook,
            "status": self.status,
            "changed": self.changed,
            "stats": self.stats,
            "failures": self.failures,
        }


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


def ansible_env(work: Path) -> dict[str, str]:
    """Environment of every run; `work` is the run's private folder (SSH control sockets, temp files)."""
    control = work / "cp"
    control.mkdir(exist_ok=True)
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


def inventory(hosts: Sequence[Target] | Mapping[str, Mapping[str, object]]) -> dict[str, dict[str, object]]:
    """Inventory host variables from targets, or host variables given as they are."""
    if isinstance(hosts, Mapping):
        return {name: dict(variables) for name, variables in hosts.items()}
    names = [t.name for t in hosts]
    if len(set(names)) != len(names):
        raise UsageError("the same host is listed twice", hint="give each host once")
    return {t.name: t.inventory_vars() for t in hosts}


def run_playbook(
    playbook: str,
    hosts: Sequence[Target] | Mapping[str, Mapping[str, object]],
    *,
    extravars: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = False,
    forks: int | None = None,
    on_event: EventHandler | None = None,
) -> PlaybookResult:
    """Run `playbooks/<playbook>` over `hosts`; `env` adds to (or overrides) the environment above.

    `on_event` sees every ansible-runner event as it happens (progress, or results the caller parses);
    the events are not written to disk. Failed and unreachable tasks are summed up in the result.
    """
    hostvars = inventory(hosts)
    work = Path(tempfile.mkdtemp(prefix="fabric-ansible-"))
    failures: list[str] = []
    stats: dict[str, Any] = {}

    def handle(event: Event) -> bool:
        if on_event is not None:
            on_event(event)
        data = event.get("event_data", {})
        if event.get("event") == "playbook_on_stats":
            stats.update(data)
        if event.get("event") in ("runner_on_failed", "runner_on_unreachable") and not data.get("ignore_errors"):
            failures.append(f"{data.get('host')}: {data.get('task')}: {_what_failed(data.get('res', {}))}")
        return False  # kept in memory only: no need to write them to the artifacts folder

    try:
        runner = ansible_runner.run(
            private_data_dir=str(work),
            playbook=str(data_path("playbooks", playbook)),
            inventory={"all": {"hosts": hostvars}},
            envvars=ansible_env(work) | dict(env or {}),
            extravars=dict(extravars or {}),
            cmdline="--check --diff" if check else None,
            forks=forks or max(1, min(len(hostvars), 20)),
            quiet=True,
            event_handler=handle,
            rotate_artifacts=1,
        )
        status = str(runner.status)
    finally:
        close_ssh_masters(work / "cp")
        shutil.rmtree(work, ignore_errors=True)
    per_host: dict[str, dict[str, int]] = {}
    for key in ("ok", "changed", "failures", "dark", "skipped"):
        for host, count in (stats.get(key) or {}).items():
            per_host.setdefault(host, {})[key] = int(count)
    return PlaybookResult(playbook, status, per_host, failures)


def close_ssh_masters(control_dir: Path) -> None:
    """Stop the SSH master connections of a run (ControlPersist would keep them, and the remote
    sshd sessions they hold, alive for 30 s after `fabric` exits; their sockets are about to go)."""
    for socket_path in control_dir.glob("*") if control_dir.is_dir() else []:
        # with a literal ControlPath, `ssh -O exit` needs a destination argument but does not use it
        subprocess.run(
            ["ssh", "-o", f"ControlPath={socket_path}", "-O", "exit", "fabric-control-master"],
            capture_output=True,
            timeout=10,
            check=False,
        )


def _what_failed(res: dict[str, Any]) -> str:
    # a failed command's own words (kubectl's "context does not exist") say more than "non-zero return code"
    said = str(res.get("stderr") or "").strip().splitlines()[-1:] or [str(res.get("msg", "")).strip()]
    return said[0]
