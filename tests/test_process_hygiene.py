"""Every process a command or a test starts is gone when it ends: SSH masters, sshd sessions, sshd.

Ansible keeps an SSH master per host (ControlPersist) and the host keeps an sshd session for it; a
`fabric enroll` that exits without closing them left both for 30 s, and a test host's teardown that
killed only the listening sshd left the sessions in the namespace. Counted here, before and after,
with a real `fabric enroll` over SSH into a real sshd in a network namespace.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.fixtures.testhost import TestHostFactory, namespace_pids, namespaces_available

FABRIC = str(Path(sys.executable).parent / "fabric")
pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(not namespaces_available(), reason="needs root, ip netns and sshd"),
]


def ssh_masters(control_dir_prefix: str) -> list[int]:
    """PIDs of ssh processes whose command line names a control socket under the prefix."""
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if cmdline.startswith("ssh") and control_dir_prefix in cmdline:
            out.append(int(proc.name))
    return out


def state(pid: int) -> str:
    """The process's state letter (R, S, Z, ...), or "" when there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return ""


def settled(netns: str, count: int) -> set[int]:
    """The namespace's PIDs once there have been `count` of them for half a second (or after 10 s)."""
    deadline, stable_since = time.monotonic() + 10, time.monotonic()
    while time.monotonic() < deadline:
        if len(namespace_pids(netns)) != count:
            stable_since = time.monotonic()
        elif time.monotonic() - stable_since > 0.5:
            break
        time.sleep(0.02)
    return namespace_pids(netns)


def test_enroll_and_test_host_teardown_leave_no_process(site_repo: Path, tmp_path: Path) -> None:
    factory = TestHostFactory(tmp_path / "hosts")
    # short: a Unix socket path holds 108 bytes, and pytest's tmp_path is long
    tmp = Path(tempfile.mkdtemp(prefix="fh-"))
    try:
        host = factory.make("h100x8", uuid_salt="hygiene")
        assert host.netns is not None
        listener = settled(host.netns, 1)  # the readiness probe's connection ends asynchronously
        assert len(listener) == 1  # sshd, nothing else yet

        env = os.environ | {"TMPDIR": str(tmp)}  # the run's control sockets go under tmp/fabric-ansible-*
        args = [FABRIC, "enroll", *host.cli_args(), "-C", str(site_repo), "--owner", "cerit-sc", "--site", "brno"]
        out = subprocess.run([*args, "--name", "hygiene"], capture_output=True, text=True, env=env, timeout=300)
        assert out.returncode == 0, out.stderr

        # after `fabric enroll` exits: no SSH master of its run, no session left in the host
        assert ssh_masters(str(tmp)) == []
        assert settled(host.netns, 1) == listener  # sshd ends a closed session asynchronously

        # a session that outlives its client (a killed run) is ended by the teardown, with the listener
        session = subprocess.Popen(
            ["ssh", "-i", str(host.key_path), "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
             "-o", "BatchMode=yes", f"root@{host.address}", "sleep", "600"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while len(namespace_pids(host.netns)) < 3 and time.monotonic() < deadline:  # sshd, session, sleep
            time.sleep(0.05)
        inside = namespace_pids(host.netns)
        assert len(inside) >= 3
    finally:
        factory.close()
        shutil.rmtree(tmp, ignore_errors=True)
    session.wait(timeout=10)  # the client ends when its session is killed
    alive = {pid: state(pid) for pid in inside if state(pid) not in ("", "Z")}  # a zombie awaits init's reaping
    assert alive == {}
