"""Every file-system shape in every place the loader reads gives a clear error naming the entry (exit 2),
never an internal error (issue 31 point 4): folders named like files, symlinks (to a file in the repo,
dangling, out of the repo), FIFOs, sockets, unreadable files.

Unreadable files: the suite runs as root, and root reads a chmod 000 file. Where the test runs as root,
the unreadable case runs `fabric validate` as root without the capabilities that bypass file modes
(setpriv), so the checkout and the repo may live anywhere root can write, a folder of mode 700
included (issue 41 point 12); without setpriv it fails, naming the missing tool.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from llm_fabric.cli.main import main

FABRIC = str(Path(sys.executable).parent / "fabric")
# the folders of named documents the loader reads (llm_fabric.site.loader.collect_site), and its two files
FOLDERS = ("nodes", "tenants", "deployments", "policies", "retired")
FILES = ("fabric.yaml", "ledger.yaml")


def _folder(path: Path, _outside: Path) -> str:
    path.mkdir()
    (path / "inner.yaml").write_text("version: 1\n")
    return "is a folder, not a file"


def _link_inside(path: Path, _outside: Path) -> str:
    target = path.parent / "target.txt"
    target.write_text("version: 1\n")
    path.symlink_to(target)
    return "symbolic links are not read"


def _dangling(path: Path, _outside: Path) -> str:
    path.symlink_to(path.parent / "does-not-exist.yaml")
    return "symbolic links are not read"


def _out_of_repo(path: Path, outside: Path) -> str:
    target = outside / "elsewhere.yaml"
    target.write_text("version: 1\nname: elsewhere\n")
    path.symlink_to(target)
    return "symbolic links are not read"


def _fifo(path: Path, _outside: Path) -> str:
    os.mkfifo(path)
    return "FIFO"


def _socket(path: Path, _outside: Path) -> str:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.close()
    return "not a regular file or folder"


SHAPES: dict[str, Callable[[Path, Path], str]] = {
    "folder": _folder,
    "symlink-inside": _link_inside,
    "symlink-dangling": _dangling,
    "symlink-out-of-repo": _out_of_repo,
    "fifo": _fifo,
    "socket": _socket,
}


def _place(site_repo: Path, where: str) -> Path:
    if where in FILES:
        path = site_repo / where
        if path.exists():
            path.unlink()
        return path
    folder = site_repo / where
    folder.mkdir(exist_ok=True)
    return folder / "x.yaml"


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("where", [*FOLDERS, *FILES])
def test_each_shape_is_a_clear_error(
    site_repo: Path, tmp_path: Path, where: str, shape: str, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    path = _place(site_repo, where)
    expected = SHAPES[shape](path, outside)
    capsys.readouterr()
    code = main(["validate", "-C", str(site_repo)])
    out = "".join(capsys.readouterr())
    assert code == 2, out
    assert path.name in out and expected in out, out
    assert "internal error" not in out and "Traceback" not in out


@pytest.mark.parametrize("where", ["nodes", "deployments"])
def test_plan_names_a_folder_named_like_a_file(site_repo: Path, where: str, capsys: pytest.CaptureFixture[str]) -> None:
    (site_repo / where / "x.yaml").mkdir()
    capsys.readouterr()
    code = main(["plan", "-C", str(site_repo)])
    out = "".join(capsys.readouterr())
    assert code == 2, out
    assert "x.yaml" in out and "is a folder, not a file" in out and "internal error" not in out


# root without the two capabilities that let it read and search past file modes: a mode-000 file is
# unreadable to it, while everything else it owns stays reachable, wherever the checkout lives (a
# clone under a mode-700 folder, as `mktemp -d` or /root, is out of reach of any other user)
WITHOUT_DAC = ("--inh-caps=-dac_override,-dac_read_search", "--bounding-set=-dac_override,-dac_read_search")


def unreadable_file_command(fabric: str, site_repo: Path) -> list[str]:
    """`fabric validate` as a process that cannot read a mode-000 file: as it is for a user, under
    setpriv without the capabilities that bypass file modes for root."""
    command = [fabric, "validate", "-C", str(site_repo)]
    if os.geteuid() != 0:
        return command
    setpriv = shutil.which("setpriv")
    assert setpriv, (
        "setpriv not found: apt-get install util-linux (the unreadable-file case drops root's file capabilities)"
    )
    return [setpriv, *WITHOUT_DAC, *command]


def test_an_unreadable_file_is_named(site_repo: Path) -> None:
    path = site_repo / "tenants" / "unreadable.yaml"
    path.write_text("version: 1\nname: unreadable\n")
    path.chmod(0)
    proc = subprocess.run(
        unreadable_file_command(FABRIC, site_repo), capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "unreadable.yaml" in proc.stdout and "cannot read file: Permission denied" in proc.stdout, proc.stdout


def test_the_unreadable_file_case_runs_from_a_checkout_under_a_mode_700_folder(site_repo: Path, tmp_path: Path) -> None:
    # the venv reached through a folder only root may enter, as a clone under `mktemp -d` or /root has it
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o700)
    (locked / "venv").symlink_to(Path(sys.executable).parent.parent)
    path = site_repo / "tenants" / "unreadable.yaml"
    path.write_text("version: 1\nname: unreadable\n")
    path.chmod(0)
    proc = subprocess.run(
        unreadable_file_command(str(locked / "venv" / "bin" / "fabric"), site_repo),
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert "cannot read file: Permission denied" in proc.stdout, proc.stdout + proc.stderr
