"""`fabric weights mirror --serve DIR`: the Hub mirror an operator starts (issue 41 point 1), run as the
real command, in the background, and staged from by `fabric weights stage`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from llm_fabric.engine.local.tiny_model import build_tiny_model
from llm_fabric.weights.mirror import commit_of

FABRIC = str(Path(sys.executable).parent / "fabric")
CHECKPOINT = "openai/gpt-oss-120b"


def _fabric(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [FABRIC, *args], cwd=cwd, capture_output=True, text=True, timeout=300, check=False, env=env or dict(os.environ)
    )


def test_a_detached_mirror_prints_its_url_and_stage_downloads_from_it(site_repo: Path, tmp_path: Path) -> None:
    build_tiny_model(tmp_path / "checkpoints" / CHECKPOINT)
    started = _fabric("weights", "mirror", "--serve", "checkpoints", "--detach", "--idle-stop", "30", cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    url = started.stdout.strip()
    assert url.startswith("http://127.0.0.1:") and f"at {url} (HF_ENDPOINT)" in started.stderr
    pid = int(started.stderr.split("as pid ")[1].split(";")[0])
    try:
        assert "mirror of 1 checkpoint from checkpoints (openai/gpt-oss-120b)" in started.stderr
        assert _fabric("plan", "-C", str(site_repo), "-o", "plan.json", cwd=tmp_path).returncode == 0
        env = {**os.environ, "HF_ENDPOINT": url}
        staged = _fabric(
            "weights", "stage", "-C", str(site_repo), "--plan", "plan.json", "--site", "vienna", "--cache", "models",
            cwd=tmp_path, env=env,
        )  # fmt: skip
        assert staged.returncode == 0, staged.stdout + staged.stderr
        assert f"downloaded {CHECKPOINT}@{commit_of(CHECKPOINT)[:12]}" in staged.stdout
        port = url.rsplit(":", 1)[1]
        again = _fabric("weights", "mirror", "--serve", "checkpoints", "--port", port, "--detach", cwd=tmp_path)
        assert again.returncode == 2 and f"port {port} is in use on 127.0.0.1" in again.stderr, again.stderr
    finally:
        os.kill(pid, signal.SIGTERM)


def test_a_folder_without_checkpoints_says_what_one_looks_like(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    done = _fabric("weights", "mirror", "--serve", "empty", "--detach", cwd=tmp_path)
    assert done.returncode == 2
    assert "empty holds no checkpoint: each is a folder ORG/NAME/ with its files" in done.stderr
    assert "hf download openai/gpt-oss-120b --local-dir empty/openai/gpt-oss-120b" in done.stderr
