"""A replica drained through the real LiteLLM proxy (`fabric gateway run`), the real prober (`fabric canary
--serve`) and the replica's rendered preStop command (`fabric render`, then `probe drain` as the kubelet
runs it, pointed at this machine's prober and stand-in engine).

Two replicas of qwen3-5 are stand-in engines that stream slowly (tests/fixtures/streaming_engine.py) and
keep their own records. The gateway routes `least-busy`, so the test drains the replica with FEWER
streams in flight: without the drain, every new request would go to it. It asserts that its streams
finish whole, that the drain returns only after they end, and that the requests sent once the gateway
has read the mark (one rotation refresh) all reach the other replica.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.engine.probe_runner import PLATFORM, flag_value, probe_commands
from tests.fixtures.gateway_site import edit_yaml
from tests.fixtures.processes import background, wait_for
from tests.fixtures.streaming_engine import RUNNING_METRIC, StreamingEngine
from tests.gateway.conftest import require_gateway
from tests.live.plans import DEPLOYMENT, plan_of, planned_site

from llm_fabric.cli.main import main
from llm_fabric.engine.process import free_port
from llm_fabric.gateway.runtime.rotation import REFRESH_S
from llm_fabric.names import CANARY_PORT, CANARY_SERVICE, CANARY_TOKEN_FILE
from llm_fabric.plan.document import load_plan
from llm_fabric.serving.probes import ROTATION_MARGIN_S

pytestmark = [pytest.mark.slow]

TOKENS = 120  # content chunks of each long stream, 0.2 s apart: 24 s, well past the drain's settle
NAMESPACE = "llm-fabric"


@dataclass
class Stream:
    """A streamed chat completion read through the gateway in a thread."""

    text: str
    content: str = ""
    finish_reason: str | None = None
    done: bool = False
    ended: float | None = None
    error: str | None = None
    thread: threading.Thread | None = field(default=None, repr=False)


def _request(gateway: str, key: str, text: str, max_tokens: int, stream: bool) -> urllib.request.Request:
    body = {"model": f"{DEPLOYMENT}@public", "messages": [{"role": "user", "content": text}], "max_tokens": max_tokens}
    if stream:
        body["stream"] = True
    return urllib.request.Request(
        gateway + "/v1/chat/completions", data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
    )  # fmt: skip


def _read_stream(request: urllib.request.Request, into: Stream) -> None:
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            for raw in response:
                line = raw.decode().strip()
                if line == "data: [DONE]":
                    into.done = True
                elif line.startswith("data: "):
                    for choice in json.loads(line[6:]).get("choices") or []:
                        into.content += (choice.get("delta") or {}).get("content") or ""
                        into.finish_reason = choice.get("finish_reason") or into.finish_reason
    except OSError as exc:
        into.error = str(exc)
    into.ended = time.monotonic()


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


@pytest.fixture
def engines() -> Iterator[dict[int, StreamingEngine]]:
    started = {i: StreamingEngine(f"replica-{i}").start() for i in (0, 1)}
    yield started
    for engine in started.values():
        engine.stop()


def test_a_draining_replica_finishes_its_streams_and_new_requests_go_to_the_other(
    engines: dict[int, StreamingEngine], tmp_path: Path
) -> None:
    require_gateway()
    repo = planned_site(tmp_path / "site", replicas=2)
    # two qwen3-5 replicas need the B300 GPUs kimi-k2-6 holds in the example
    edit_yaml(repo / "deployments" / "kimi-k2-6.yaml", lambda d: d.update(replicas=0))
    subprocess.run(["git", "commit", "-qam", "drain test site"], cwd=repo, check=True, capture_output=True)
    plan_file = plan_of(repo, tmp_path / "plan.json")
    plan = load_plan(plan_file)
    out = tmp_path / "out"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["render", "--site", "brno", "-C", str(repo), "--plan", str(plan_file), "--out", str(out)]) == 0
    pods = {
        i: yaml.safe_load((out / "brno" / "serving" / f"deployment-{DEPLOYMENT}-{i}.yaml").read_text()) for i in (0, 1)
    }
    # the prober asks one replica of another deployment (it needs one to ask; that one fails, on port 9):
    # qwen3-5's replicas are not asked, so only a drain takes them out
    other = next(r for r in plan.replicas if r.deployment != DEPLOYMENT)
    fabric = str(Path(sys.executable).parent / "fabric")
    prober_port = free_port()
    token = tmp_path / "canary-token"  # the Secret fabric-canary-token's file, mounted on the prober and the engines
    token.write_text("drain-notice-token\n")
    prober = f"http://127.0.0.1:{prober_port}"
    prober_argv = [
        fabric, "canary", "-C", str(repo), "--plan", str(plan_file), "--timeout", "1",
        "--endpoint", f"{other.deployment}/{other.index}=http://127.0.0.1:9",
        "--serve", f"127.0.0.1:{prober_port}", "--every", "2", "--write-token-file", str(token),
    ]  # fmt: skip
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main(["tenants", "key", "issue", "-C", str(repo), "muni-researchers", "--json"]) == 0
    key = json.loads(buffer.getvalue())["key"]
    gateway_port = free_port()
    gateway = f"http://127.0.0.1:{gateway_port}"
    gateway_argv = [
        fabric, "gateway", "run", "-C", str(repo), "--site", "brno", "--plan", str(plan_file),
        "--port", str(gateway_port), "--records", str(tmp_path / "records"), "--run-dir", str(tmp_path / "gateway"),
        "--replica", f"{DEPLOYMENT}/0={engines[0].url}", "--replica", f"{DEPLOYMENT}/1={engines[1].url}",
    ]  # fmt: skip
    logs = [tmp_path / "prober.log", tmp_path / "gateway.log"]
    with (
        background(prober_argv, logs[0]),
        background(gateway_argv, logs[1], {"FABRIC_CANARY_URL": prober}),
    ):
        rotation = wait_for("the prober did not serve its rotation", lambda: _get(f"{prober}/rotation"), logs)
        for i in (0, 1):
            entry = next(r for r in rotation["replicas"] if r["replica"] == f"{DEPLOYMENT}/{i}")
            assert entry["in_rotation"] is True and entry["reasons"] == []
        wait_for("the gateway did not start", lambda: _get(gateway + "/health/liveliness"), logs)

        # long streams until one replica has fewer in flight than the other (least-busy spreads them)
        streams: list[Stream] = []
        while True:
            stream = Stream(f"long stream {len(streams)}")
            request = _request(gateway, key, stream.text, TOKENS, stream=True)
            stream.thread = threading.Thread(target=_read_stream, args=(request, stream), daemon=True)
            stream.thread.start()
            streams.append(stream)
            wait_for(
                "a stream reached no engine", lambda: sum(len(e.served) for e in engines.values()) == len(streams), logs
            )
            counts = {i: len(e.running()) for i, e in engines.items()}
            if min(counts.values()) >= 1 and max(counts.values()) > min(counts.values()):
                break
            assert len(streams) < 6, f"least-busy did not spread the streams: {counts}"
        drained = min(counts, key=lambda i: counts[i])
        a, b = engines[drained], engines[1 - drained]
        on_a = list(a.texts())

        # the rendered preStop of the drained replica, told of this machine's engine and prober
        command = probe_commands(pods[drained]["spec"]["template"]["spec"])["drain"]
        notice = flag_value(command, "--notice-url")
        path = f"/replicas/{DEPLOYMENT}/{drained}/drain"
        assert notice == f"http://{CANARY_SERVICE}.{NAMESPACE}.svc.cluster.local:{CANARY_PORT}{path}"
        assert float(flag_value(command, "--settle")) >= REFRESH_S + ROTATION_MARGIN_S
        assert flag_value(command, "--running-metric") == RUNNING_METRIC
        assert flag_value(command, "--notice-token-file") == CANARY_TOKEN_FILE
        settle = REFRESH_S + 2  # the rendered 30 s also waits for the Services' endpoints, which this test has not
        values = {"--port": str(a.port), "--drain-file": str(tmp_path / "draining"), "--settle": str(settle),
                  "--notice-url": prober + path, "--notice-token-file": str(token)}  # fmt: skip
        argv = [sys.executable, *command[1:]]
        for flag, value in values.items():
            argv[argv.index(flag) + 1] = value
        drain_started = time.monotonic()
        drain = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONPATH": str(PLATFORM)},
        )
        marked = wait_for(
            "the prober never showed the drain",
            lambda: (
                next(r for r in _get(f"{prober}/rotation")["replicas"] if r["replica"] == f"{DEPLOYMENT}/{drained}")[
                    "reasons"
                ]
                == ["draining"]
            ),
            logs,
            timeout=10,
        )
        assert marked
        time.sleep(REFRESH_S + 0.5)  # the gateway reads the prober again on its first pick after this
        for n in range(8):
            with urllib.request.urlopen(
                _request(gateway, key, f"after the drain {n}", 2, stream=False), timeout=30
            ) as r:
                assert r.status == 200
        assert drain.poll() is None, "the drain returned while its replica still streamed"
        output, _ = drain.communicate(timeout=120)
        drain_returned = time.monotonic()

    assert drain.returncode == 0, output
    assert output.startswith("drain: drained: no request running after "), output
    assert output.rstrip().endswith("(the gateway was told (the prober took it out of rotation))"), output
    # nothing new reached the drained replica; the other took every request sent after the drain
    assert a.texts() == on_a
    assert [t for t in b.texts() if t.startswith("after the drain")] == [f"after the drain {n}" for n in range(8)]
    # the drained replica's streams went on to their end, whole, and the drain waited for them
    mine = [s for s in streams if s.text in on_a]
    assert mine
    for stream in streams:
        assert stream.thread is not None
        stream.thread.join(60)
        assert stream.error is None and stream.done, stream
        assert stream.content == "x" * TOKENS and stream.finish_reason == "length", stream
    for served in a.served:
        assert served.ended is not None and served.chunks == TOKENS + 2
        assert drain_started + settle < served.ended <= drain_returned
