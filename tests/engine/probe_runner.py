"""What the probe tests share: the reference site rendered by the real commands (`fabric plan -o`, then
`fabric render --plan`), a rendered probe command run as the kubelet would run it, and a stand-in for
the canary prober's verdict endpoint (the canary lane's prober serves the real one)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from llm_fabric.cli.main import main
from llm_fabric.init import init_site
from llm_fabric.kube import labels as L
from llm_fabric.serving.probes import PROBE_MODULE
from tests.deploy.test_sglang_site import switch

PLATFORM = Path(__file__).resolve().parents[2] / "platform"


def render_engines(folder: Path, *, sglang: bool) -> dict[str, dict[str, Any]]:
    """Replica name -> its pod spec, of the reference site's brno serving stack (every deployment on SGLang
    when `sglang`), through `fabric plan -o` and `fabric render --plan`."""
    site = init_site(folder / "site", "cerit-sc").root
    if sglang:
        switch(site)
    plan = folder / "plan.json"
    assert main(["plan", "-C", str(site), "-o", str(plan)]) == 0
    out = folder / "out"
    assert main(["render", "--site", "brno", "-C", str(site), "--plan", str(plan), "--out", str(out)]) == 0
    pods = {}
    for path in sorted((out / "brno" / "serving").glob("deployment-*.yaml")):
        doc = yaml.safe_load(path.read_text())
        if L.REPLICA in doc["metadata"]["labels"]:
            pods[doc["metadata"]["name"]] = doc["spec"]["template"]["spec"]
    return pods


def probe_commands(pod: dict[str, Any]) -> dict[str, list[str]]:
    container = pod["containers"][0]
    return {
        "live": container["livenessProbe"]["exec"]["command"],
        "ready": container["readinessProbe"]["exec"]["command"],
        "drain": container["lifecycle"]["preStop"]["exec"]["command"],
    }


def flag_value(command: list[str], flag: str) -> str:
    return command[command.index(flag) + 1]


def run_rendered(
    command: list[str], python: Path | str, values: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """The rendered command with the image's `python3` replaced by `python` and the named flags' values by
    `values` (the test's port, files and prober instead of the pod's); every one of them must be rendered."""
    assert command[1:3] == ["-m", PROBE_MODULE], command
    argv = [str(python), *command[1:]]
    for flag, value in values.items():
        assert flag in argv, f"the rendered command has no {flag}: {command}"
        argv[argv.index(flag) + 1] = value
    env = dict(os.environ) | {"PYTHONPATH": str(PLATFORM)}
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, check=False)


@dataclass
class VerdictServer:
    """Answers GET /replicas/DEPLOYMENT/INDEX with `verdict` (JSON, or raw text when a str) and keeps the paths."""

    verdict: dict[str, Any] | str = field(default_factory=lambda: {"state": "unknown"})
    asked: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                server.asked.append(self.path)
                body = server.verdict if isinstance(server.verdict, str) else json.dumps(server.verdict)
                payload = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self.thread.start()

    def url(self, rendered: str) -> str:
        """The rendered verdict URL with this server in place of the prober's Service."""
        path = "/" + rendered.split("://", 1)[1].split("/", 1)[1]
        return f"http://127.0.0.1:{self.http.server_address[1]}{path}"

    def stop(self) -> None:
        self.http.shutdown()
        self.http.server_close()
