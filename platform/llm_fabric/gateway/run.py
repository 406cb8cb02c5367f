"""Write the gateway's files, and run the real LiteLLM proxy with them on 127.0.0.1 (`fabric gateway run`).

LiteLLM lives in its own venv (`make gateway` builds `.venv-gateway`; an installed fabric names one with
FABRIC_GATEWAY_PYTHON): its pins (click, rich, cryptography) are not the fabric's. The proxy imports the
hooks from this checkout or wheel (PYTHONPATH: a folder holding only a link to the package), never
calls out at start-up (LITELLM_LOCAL_MODEL_COST_MAP=True), and gets a random master key that nobody
holds: every request goes through the fabric's key check.

The proxy is owned by the fabric that started it (docs/gateway.md, "Who owns the proxy"): it runs in
its own process group, stopped as a whole, and with a parent-death signal, so it dies with the fabric
even when the fabric is killed with SIGKILL; it counts as healthy only when the port answers from a
socket the proxy's own processes hold.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import secrets
import signal
import socket
import sys
from importlib import metadata
from pathlib import Path

from llm_fabric.atomicio import write_atomic
from llm_fabric.distribution import checkout_root, package_root
from llm_fabric.engine.process import EngineStartError, LocalEngine, free_port, spawn_server
from llm_fabric.errors import FabricError, UsageError
from llm_fabric.gateway.config import GatewayFiles, gateway_texts
from llm_fabric.gateway.runtime.frontdoor import PEER_KEY_ENV
from llm_fabric.gateway.runtime.settings import KEYS_FILE, LITELLM_CONFIG_FILE, RECORDS_ENV, SETTINGS_ENV, SETTINGS_FILE

GATEWAY_VENV = ".venv-gateway"
HEALTH_PATH = "/health/liveliness"
PR_SET_PDEATHSIG = 1  # linux/prctl.h
ADDRESS_IN_USE = "address already in use"  # how uvicorn's bind error ends
TCP_LISTEN = "0A"  # the `st` column of /proc/net/tcp


class GatewayExited(FabricError):
    """LiteLLM exited by itself while the fabric served: the message names its exit code and log."""


def _port_in_use(port: int) -> UsageError:
    return UsageError(
        f"port {port} on 127.0.0.1 is already in use: another process listens there, not this gateway",
        hint=f"stop it (`ss -ltnp 'sport = :{port}'` names it) or give another --port",
    )


def check_port_free(port: int) -> None:
    """UsageError naming `port` when something already listens on 127.0.0.1:`port`."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # as uvicorn binds: a closed connection in TIME_WAIT does not hold the port, a listener does
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            raise _port_in_use(port) from exc


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table, encoding="ascii") as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                if fields[3] == TCP_LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(fields[9])
    return inodes


def _group_pids(group: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            # the field after the parenthesised command name: state, ppid, pgrp
            if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[2]) == group:
                pids.append(int(entry.name))
    return pids


def owns_listener(group: int, port: int) -> bool:
    """Whether a process of process group `group` holds the socket listening on `port` (Linux /proc)."""
    wanted = {f"socket:[{inode}]" for inode in _listening_inodes(port)}
    for pid in _group_pids(group):
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in wanted:
                        return True
    return False


def _owned_child(parent: int) -> None:
    """preexec of the proxy (in its own session already): SIGTERM when the fabric dies, even by SIGKILL."""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the fabric died before the death signal was armed
        os._exit(1)


def wait_owned(gateway: LocalEngine, timeout: float) -> float:
    """Seconds until the gateway's own proxy answered on its port. UsageError naming the port when another
    process holds it (the proxy died with address in use, or a stranger answered); EngineStartError else."""
    try:
        seconds = gateway.wait_healthy(timeout)
    except EngineStartError:
        if ADDRESS_IN_USE in gateway.log_tail(60).lower():
            raise _port_in_use(gateway.port) from None
        raise
    if not (gateway.alive() and owns_listener(gateway.pid, gateway.port)):
        gateway.stop()
        raise _port_in_use(gateway.port)
    return seconds


def exited_error(gateway: LocalEngine, status: int | None) -> GatewayExited:
    return GatewayExited(
        f"{gateway.label} (pid {gateway.pid}) exited by itself with exit code {status} (log {gateway.log_path}):\n"
        f"{gateway.log_tail()}",
        hint="the log's last lines say why; `fabric gateway run` stops when its proxy does",
    )


def write_gateway_files(files: GatewayFiles, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in gateway_texts(files).items():
        write_atomic(out / name, text)
        written.append(out / name)
    keys = out / KEYS_FILE  # the same hashes on their own, for the cluster's Secret
    write_atomic(keys, json.dumps(files.settings.key_hashes(), indent=2, sort_keys=True) + "\n", mode=0o600)
    return [*written, keys]


def gateway_python(explicit: str | None = None) -> Path:
    """The interpreter that has LiteLLM: FABRIC_GATEWAY_PYTHON or the checkout's .venv-gateway."""
    candidate = explicit or os.environ.get("FABRIC_GATEWAY_PYTHON")
    if candidate:
        path = Path(candidate)
        if not path.is_file():
            raise UsageError(
                f"gateway interpreter {path} does not exist", hint="point FABRIC_GATEWAY_PYTHON at a python"
            )
        return path
    venv = checkout_root() / GATEWAY_VENV / "bin" / "python"
    if venv.is_file():
        return venv
    raise UsageError(
        "LiteLLM is not installed for the fabric: the gateway runs it from a venv of its own "
        "(its pins differ from the fabric's)",
        hint=f"{install_steps()}; from a checkout, `make gateway` builds {GATEWAY_VENV} instead (docs/gateway.md)",
    )


def _hooks_path(folder: Path) -> Path:
    """A folder holding only `llm_fabric` (a link to this fabric's package), for the proxy's PYTHONPATH: the
    hooks import from it, while an installed fabric's site-packages (its own pins of click, rich, ...)
    stays off the proxy's path."""
    path = folder / "pythonpath"
    path.mkdir(exist_ok=True)
    link = path / "llm_fabric"
    if not link.is_symlink():
        link.symlink_to(package_root() / "llm_fabric", target_is_directory=True)
    return path


def install_steps(venv: str = "~/.fabric-gateway") -> str:
    """The commands that give an installed fabric its gateway venv: the fabric's `gateway` extra at its pins
    (LiteLLM, Redis, the Prometheus client), then the variable naming it (the hooks come from this fabric:
    `_hooks_path`)."""
    wanted = ["litellm[proxy]"]
    with contextlib.suppress(metadata.PackageNotFoundError):
        extra = [r for r in metadata.requires("llm-fabric") or [] if "extra == 'gateway'" in r.replace('"', "'")]
        wanted = [r.split(";")[0].strip() for r in extra] or wanted
    pins = " ".join(f"'{r}'" for r in wanted)
    return (
        f"python3 -m venv {venv} && {venv}/bin/pip install {pins}, then export FABRIC_GATEWAY_PYTHON={venv}/bin/python"
    )


def exit_words(status: int | None) -> str:
    """A stopped process's status in words: `exit 0`, or the signal that ended it (`by SIGTERM`), not `-15`."""
    if status is not None and status < 0:
        with contextlib.suppress(ValueError):
            return f"by {signal.Signals(-status).name}"
    return f"exit {status}"


def start_gateway(
    folder: Path, records: Path, *, port: int | None = None, python: Path | None = None, master_key: str | None = None
) -> LocalEngine:
    """Start LiteLLM's proxy with the files in `folder` (written by write_gateway_files), its meter writing to the
    folder `records`; wait with wait_owned(). A --port already taken is refused before the start."""
    folder = folder.resolve()  # LiteLLM runs in `folder`: a relative path would be read relative to it
    records = records.resolve()
    interpreter = python or gateway_python()
    litellm = interpreter.parent / "litellm"
    if not litellm.is_file():
        raise UsageError(f"{interpreter.parent} has no `litellm` command", hint="run `make gateway`")
    if port is not None:
        check_port_free(port)
    port = port or free_port()
    argv = [
        str(litellm),
        "--config",
        str(folder / LITELLM_CONFIG_FILE),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--num_workers",
        "1",
    ]
    env = dict(os.environ)
    # relays between local gateways need one value: the caller's, else one that no peer holds
    env.setdefault(PEER_KEY_ENV, "fpk-" + secrets.token_hex(24))
    env.update(
        {
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            # nobody holds it unless a caller (bench/gateway.py's hook-less proxy) asks for it
            "LITELLM_MASTER_KEY": master_key or "sk-" + secrets.token_hex(24),
            SETTINGS_ENV: str(folder / SETTINGS_FILE),
            RECORDS_ENV: str(records),
            "PYTHONPATH": os.pathsep.join(p for p in (str(_hooks_path(folder)), env.get("PYTHONPATH", "")) if p),
            "LITELLM_LOG": env.get("LITELLM_LOG", "WARNING"),
            "NO_PROXY": "127.0.0.1,localhost",
        }
    )
    records.mkdir(parents=True, exist_ok=True)
    log_path = folder / "litellm.log"
    parent = os.getpid()
    process = spawn_server(argv, env=env, cwd=folder, log_path=log_path, preexec=lambda: _owned_child(parent))
    return LocalEngine(
        pid=process.pid,
        port=port,
        model="gateway",
        run_dir=folder,
        log_path=log_path,
        argv=argv,
        process=process,
        health_path=HEALTH_PATH,
        label="LiteLLM",
    )
