"""`fabric gateway run` owns its proxy (issue 32): the real command and the real LiteLLM proxy.

Its proxy counts as healthy only when the port answers from the proxy's own socket; a port already
taken is refused naming it; SIGTERM, SIGHUP, a closed stdout and the fabric's own death (SIGKILL)
leave no proxy behind; a proxy that exits by itself makes the fabric exit non-zero naming its code.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from tests.fixtures.gateway_site import make_gateway_plan, make_gateway_site
from tests.gateway.conftest import START_TIMEOUT, require_gateway

from llm_fabric.engine.process import free_port

FABRIC = str(Path(sys.executable).parent / "fabric")
GONE_WITHIN = 10.0  # seconds for a stopped or orphaned proxy to be gone
LITELLM_PID = re.compile(r"LiteLLM pid (\d+) on")


@dataclass
class Federation:
    repo: Path
    plan: Path
    root: Path

    def argv(self, port: int, *, run_dir: str | None = "./run/gw", records: str = "./records") -> list[str]:
        # relative --run-dir and --records on purpose: both are resolved against the fabric's folder
        return [
            FABRIC, "gateway", "run", "--site", "brno", "-C", str(self.repo), "--plan", str(self.plan),
            "--port", str(port),
            "--endpoint", "qwen3-5=http://127.0.0.1:9/v1", "--records", records,
            *(["--run-dir", run_dir] if run_dir is not None else []),
        ]  # fmt: skip


@pytest.fixture(scope="module")
def federation(tmp_path_factory: pytest.TempPathFactory) -> Federation:
    require_gateway()
    root = tmp_path_factory.mktemp("gateway-run")
    repo = make_gateway_site(root / "site")
    return Federation(repo, make_gateway_plan(repo, root), root)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _gone(pid: int, port: int) -> bool:
    deadline = time.monotonic() + GONE_WITHIN
    while time.monotonic() < deadline:
        if not _alive(pid) and not _listening(port):
            return True
        time.sleep(0.2)
    return False


@contextlib.contextmanager
def _started(
    federation: Federation, tmp_path: Path, *, run_dir: str | None = "./run/gw", env: dict[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[str], int, int, Path]]:
    """`fabric gateway run` until healthy: (the fabric, its proxy's pid, the port, its output file)."""
    port = free_port()
    out = tmp_path / "fabric.out"
    with out.open("w") as sink:
        fabric = subprocess.Popen(
            federation.argv(port, run_dir=run_dir),
            env=env,
            cwd=tmp_path,
            stdout=sink,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    pid = 0
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline and "healthy after" not in out.read_text():
            assert fabric.poll() is None, out.read_text()
            time.sleep(0.3)
        text = out.read_text()
        assert "healthy after" in text, text
        pid = int(LITELLM_PID.search(text).group(1))  # type: ignore[union-attr]
        yield fabric, pid, port, out
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(fabric.pid, signal.SIGKILL)
        fabric.wait()
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)


class _Health(BaseHTTPRequestHandler):
    """Another proxy's health route: it answers 200, as the other LiteLLM of the issue did."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b'"I\'m alive!"')

    def log_message(self, *args: Any) -> None:
        pass


def test_a_port_another_server_listens_on_is_refused_naming_it(federation: Federation, tmp_path: Path) -> None:
    other = ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    port = other.server_address[1]
    try:
        proc = subprocess.run(federation.argv(port), cwd=tmp_path, capture_output=True, text=True, timeout=120)
    finally:
        other.shutdown()
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"port {port} on 127.0.0.1 is already in use" in proc.stderr
    assert "healthy" not in proc.stdout


def test_sigterm_stops_the_proxy_and_relative_paths_work(federation: Federation, tmp_path: Path) -> None:
    with _started(federation, tmp_path) as (fabric, pid, port, out):
        fabric.send_signal(signal.SIGTERM)
        assert fabric.wait(timeout=60) == 0, out.read_text()
        assert _gone(pid, port), f"LiteLLM pid {pid} or port {port} still there after SIGTERM"
    text = out.read_text()
    assert re.search(rf"stopped LiteLLM \(pid {pid}, (by SIGTERM|exit 0)\)", text), text  # not "exit -15"
    assert f"config {tmp_path / 'run' / 'gw'}" in text  # the relative --run-dir, resolved
    assert (tmp_path / "run" / "gw" / "litellm-config.yaml").is_file()
    assert f"kept: config, tenant key hashes and log in {tmp_path / 'run' / 'gw'}" in text


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_without_run_dir_a_stopped_gateway_leaves_no_folder(
    federation: Federation, tmp_path: Path, stop: signal.Signals
) -> None:
    # issue 41 point 7: a /tmp/fabric-gateway-* folder (config, tenant key hashes, log) was left per start
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    with _started(federation, tmp_path, run_dir=None, env=env) as (fabric, pid, port, out):
        assert [p.name for p in tmp.iterdir() if p.name.startswith("fabric-gateway-")], out.read_text()
        fabric.send_signal(stop)
        assert fabric.wait(timeout=60) in (0, 130), out.read_text()
        assert _gone(pid, port)
    assert not [p for p in tmp.iterdir() if p.name.startswith("fabric-gateway-")], out.read_text()
    assert "kept:" not in out.read_text()


def test_a_failed_start_leaves_no_folder(federation: Federation, tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        argv = federation.argv(taken.getsockname()[1], run_dir=None)
        proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                              env={**os.environ, "TMPDIR": str(tmp)})  # fmt: skip
    assert proc.returncode == 2 and "is already in use" in proc.stderr, proc.stderr
    assert not list(tmp.iterdir())


def test_sighup_stops_the_proxy(federation: Federation, tmp_path: Path) -> None:
    with _started(federation, tmp_path) as (fabric, pid, port, out):
        fabric.send_signal(signal.SIGHUP)
        assert fabric.wait(timeout=60) == 0, out.read_text()
        assert _gone(pid, port), f"LiteLLM pid {pid} or port {port} still there after SIGHUP"


def test_sigkill_of_the_fabric_leaves_no_proxy(federation: Federation, tmp_path: Path) -> None:
    with _started(federation, tmp_path) as (fabric, pid, port, _out):
        fabric.kill()  # only the fabric: the proxy is in its own process group
        fabric.wait()
        assert _gone(pid, port), f"LiteLLM pid {pid} outlived the fabric killed with SIGKILL (port {port})"


def test_a_proxy_that_dies_ends_the_fabric_with_its_exit_code(federation: Federation, tmp_path: Path) -> None:
    with _started(federation, tmp_path) as (fabric, pid, _port, out):
        os.kill(pid, signal.SIGKILL)
        assert fabric.wait(timeout=30) == 1, out.read_text()
    assert f"LiteLLM (pid {pid}) exited by itself with exit code -9" in out.read_text()


@pytest.mark.parametrize(
    "reader",
    [
        "head -1",  # gone before the fabric's next line: that write finds the pipe closed
        "grep -m1 healthy",  # gone while the fabric serves silently: it watches its stdout
    ],
)
def test_a_closed_stdout_stops_the_proxy(federation: Federation, tmp_path: Path, reader: str) -> None:
    port = free_port()
    command = " ".join(f"'{a}'" for a in federation.argv(port)) + f" | {reader}"
    proc = subprocess.run(
        ["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=START_TIMEOUT + 60
    )
    pid = int(re.search(r"pid (\d+)", proc.stdout).group(1))  # type: ignore[union-attr]
    assert proc.stderr == ""  # quiet: no traceback, no complaint about the pipe
    assert _gone(pid, port), f"LiteLLM pid {pid} still serves port {port} after `{reader}` exited"
