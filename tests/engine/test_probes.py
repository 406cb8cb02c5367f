"""The rendered probes of an SGLang replica run against the SGLang stand-in, as the kubelet runs them.

The site is rendered by the real commands; each test runs the rendered exec command with this
machine's Python, pointed at the stand-in's port (and, where it says so, at a local verdict server
and temporary files instead of the pod's). An engine that answers /health and /metrics but never
sends a token fails liveness within its deadline, saying so, and readiness turns false with it.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llm_fabric.engine.argcheck import ArgCase
from llm_fabric.engine.process import free_port
from llm_fabric.engine.request_hooks import request_priority
from llm_fabric.engine.sglang.check import check_with_sglang
from tests.engine.probe_runner import VerdictServer, flag_value, probe_commands, render_engines, run_rendered
from tests.fixtures.sglang_standin import SglangStandin, StandinOptions, options_from_args

PY = sys.executable  # the probe needs the standard library only: this Python stands in for the image's


@pytest.fixture(scope="module")
def sglang_pods(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    return render_engines(tmp_path_factory.mktemp("sglang-render"), sglang=True)


@pytest.fixture
def quickest(sglang_pods: dict[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """The replica with the shortest liveness deadline (the stuck engine's test waits for it)."""
    return min(sglang_pods.items(), key=lambda kv: int(flag_value(probe_commands(kv[1])["live"], "--deadline")))


@pytest.fixture
def standins() -> Iterator[list[SglangStandin]]:
    started: list[SglangStandin] = []
    yield started
    for standin in started:
        standin.stop()


@pytest.fixture
def verdicts() -> Iterator[VerdictServer]:
    server = VerdictServer()
    yield server
    server.stop()


def start(standins: list[SglangStandin], pod: dict[str, Any], **options: Any) -> SglangStandin:
    """The stand-in started from the replica's rendered SGLang arguments."""
    parsed, _ = options_from_args(pod["containers"][0]["args"], lenient=True)
    fields = {k: v for k, v in vars(parsed).items() if k not in options}
    standin = SglangStandin(StandinOptions(**fields, **options)).start()
    standins.append(standin)
    return standin


def port(standin: SglangStandin) -> str:
    return standin.base_url.rsplit(":", 1)[1]


def files(tmp_path: Path) -> dict[str, str]:
    return {"--drain-file": str(tmp_path / "draining"), "--live-state-file": str(tmp_path / "liveness")}


def test_sglang_replica_passes_its_rendered_probes(
    sglang_pods: dict[str, dict[str, Any]],
    standins: list[SglangStandin],
    engine_python_path: Path,
    sglang_wheel: Path,
    tmp_path: Path,
) -> None:
    name, pod = "glm-5-1-0", sglang_pods["glm-5-1-0"]
    container = pod["containers"][0]
    assert container["name"] == "sglang"
    # the replica's arguments are ones the pinned SGLang's own parser accepts
    verdicts = check_with_sglang([ArgCase(name, container["args"])], python=engine_python_path, wheel=sglang_wheel)
    assert [(v.ok, v.problems) for v in verdicts] == [(True, [])]
    # /health only says "started" (readiness every 10 s generates nothing): the switch is the pinned SGLang's
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION"] == "0"
    environ = (sglang_wheel / "sglang" / "srt" / "environ.py").read_text()
    assert "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION = EnvBool(True)" in environ
    standin = start(standins, pod, seconds_per_token=0.001)
    commands = probe_commands(pod)
    with urllib.request.urlopen(standin.base_url + "/v1/models", timeout=5) as response:
        served = response.read().decode()
    assert f'"id": "{flag_value(commands["live"], "--model")}"' in served  # the probe asks for the served name
    assert flag_value(commands["drain"], "--running-metric") == "sglang:num_running_reqs"
    state = str(tmp_path / "liveness")
    live = run_rendered(commands["live"], PY, {"--port": port(standin), "--state-file": state}, timeout=60)
    assert live.returncode == 0, live.stdout + live.stderr
    assert live.stdout.startswith("live: ok: 4 tokens in "), live.stdout
    # the rendered prober address is the cluster's: unreachable here, so the replica stays ready (fail open)
    ready = run_rendered(
        commands["ready"],
        PY,
        {"--port": port(standin), "--drain-file": str(tmp_path / "d"), "--live-state-file": state},
        30,
    )
    assert ready.returncode == 0, ready.stdout + ready.stderr
    assert "the canary prober could not be read" in ready.stdout and "ready anyway (fail open)" in ready.stdout


def test_an_engine_that_never_sends_a_token_fails_liveness_within_its_deadline(
    quickest: tuple[str, dict[str, Any]], standins: list[SglangStandin], tmp_path: Path
) -> None:
    _, pod = quickest
    commands = probe_commands(pod)
    deadline = int(flag_value(commands["live"], "--deadline"))
    stuck = start(standins, pod, seconds_per_token=3600)  # admits the request, and the first token never comes
    for path in ("/health", "/metrics"):
        with urllib.request.urlopen(stuck.base_url + path, timeout=5) as response:
            assert response.status == 200  # what a /health probe would have seen
    paths = files(tmp_path)
    begun = time.monotonic()
    live = run_rendered(
        commands["live"], PY, {"--port": port(stuck), "--state-file": paths["--live-state-file"]}, deadline + 30
    )
    took = time.monotonic() - begun
    assert live.returncode == 1
    assert live.stdout.strip() == (
        f"live: FAIL: the engine sent no token within the {deadline} s deadline (timed out): it is not generating"
    )
    assert deadline <= took < deadline + 5  # within the kubelet's timeoutSeconds (deadline + 5)
    assert pod["containers"][0]["livenessProbe"]["timeoutSeconds"] == deadline + 5
    ready = run_rendered(commands["ready"], PY, {"--port": port(stuck), **paths}, timeout=30)
    assert ready.returncode == 1
    assert ready.stdout.startswith("ready: FAIL: not generating: the last liveness probe failed: the engine sent no")


@pytest.mark.parametrize(
    ("verdict", "code", "says"),
    [
        (
            {"state": "fail", "reason": "answer differs from the reference"},
            1,
            "ready: FAIL: the canary fails for this replica: answer differs from the reference",
        ),
        ({"state": "pass"}, 0, "ready: ok: healthy, canary pass"),
        ({"state": "unknown"}, 0, "ready: ok: healthy, canary unknown"),
        ("<html>bad gateway</html>", 0, "could not be read"),
        ({"verdict": "fail"}, 0, "the canary prober answered no state"),
    ],
)
def test_readiness_follows_the_canary_verdict_and_fails_open(
    verdict: dict[str, Any] | str,
    code: int,
    says: str,
    sglang_pods: dict[str, dict[str, Any]],
    standins: list[SglangStandin],
    verdicts: VerdictServer,
    tmp_path: Path,
) -> None:
    pod = sglang_pods["glm-5-1-0"]
    ready = probe_commands(pod)["ready"]
    rendered_url = flag_value(ready, "--canary-url")
    assert rendered_url == "http://fabric-canary.llm-fabric.svc.cluster.local:9400/replicas/glm-5-1/0"
    standin = start(standins, pod)
    verdicts.verdict = verdict
    values = {"--port": port(standin), "--canary-url": verdicts.url(rendered_url), **files(tmp_path)}
    result = run_rendered(ready, PY, values, timeout=30)
    assert (result.returncode, verdicts.asked) == (code, ["/replicas/glm-5-1/0"]), result.stdout
    assert says in result.stdout
    if code == 0 and isinstance(verdict, str):
        assert "ready anyway (fail open)" in result.stdout


def test_a_prober_that_is_down_leaves_the_replica_ready(
    sglang_pods: dict[str, dict[str, Any]], standins: list[SglangStandin], verdicts: VerdictServer, tmp_path: Path
) -> None:
    pod = sglang_pods["glm-5-1-0"]
    ready = probe_commands(pod)["ready"]
    url = verdicts.url(flag_value(ready, "--canary-url"))
    verdicts.stop()  # connection refused
    standin = start(standins, pod)
    result = run_rendered(ready, PY, {"--port": port(standin), "--canary-url": url, **files(tmp_path)}, timeout=30)
    assert result.returncode == 0
    assert "Connection refused" in result.stdout and "ready anyway (fail open)" in result.stdout


def test_draining_makes_the_replica_unready_and_waits_for_its_streams(
    sglang_pods: dict[str, dict[str, Any]], standins: list[SglangStandin], tmp_path: Path
) -> None:
    pod = sglang_pods["glm-5-1-0"]
    commands = probe_commands(pod)
    assert flag_value(commands["drain"], "--drain-file") == flag_value(commands["ready"], "--drain-file")
    assert int(flag_value(commands["drain"], "--limit")) < pod["terminationGracePeriodSeconds"]
    standin = start(standins, pod, seconds_per_token=0.05)
    paths = files(tmp_path)
    ready_values = {"--port": port(standin), **paths}
    assert run_rendered(commands["ready"], PY, ready_values, timeout=30).returncode == 0
    finished: list[float] = []

    def stream() -> None:
        body = b'{"model": "glm-5-1", "prompt": "a long answer", "max_tokens": 80}'
        request = urllib.request.Request(standin.base_url + "/v1/completions", data=body)
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=60) as response:
            response.read()
        finished.append(time.monotonic())

    in_flight = threading.Thread(target=stream)
    in_flight.start()
    while standin.scheduler.running == 0:
        time.sleep(0.01)
    # the rendered preStop, waiting 1 s instead of 30 for the endpoints to drop the pod
    drain_values = {"--port": port(standin), "--drain-file": paths["--drain-file"], "--settle": "1"}
    drain = run_rendered(commands["drain"], PY, drain_values, timeout=60)
    ended = time.monotonic()
    in_flight.join(10)
    assert drain.returncode == 0, drain.stdout + drain.stderr
    assert drain.stdout.startswith("drain: drained: no request running after "), drain.stdout
    assert finished and finished[0] <= ended  # the stream ended before the drain let the engine stop
    ready = run_rendered(commands["ready"], PY, ready_values, timeout=30)
    assert ready.returncode == 1 and ready.stdout.startswith("ready: FAIL: draining (since 20"), ready.stdout


def test_the_drain_gives_up_at_its_limit(
    sglang_pods: dict[str, dict[str, Any]], standins: list[SglangStandin], tmp_path: Path
) -> None:
    pod = sglang_pods["glm-5-1-0"]
    standin = start(standins, pod, seconds_per_token=3600)
    body = b'{"model": "glm-5-1", "prompt": "never ends", "max_tokens": 8}'
    request = urllib.request.Request(standin.base_url + "/v1/completions", data=body)
    request.add_header("Content-Type", "application/json")

    def never_answered() -> None:
        with contextlib.suppress(OSError):  # the stand-in stops under it at the test's end
            urllib.request.urlopen(request, timeout=30)

    threading.Thread(target=never_answered, daemon=True).start()
    while standin.scheduler.running == 0:
        time.sleep(0.01)
    values = {"--port": port(standin), "--drain-file": str(tmp_path / "d"), "--settle": "0", "--limit": "2"}
    # a prober that cannot be told does not hold the drain up: best effort, and said
    values["--notice-url"] = "http://127.0.0.1:9/replicas/glm-5-1/0/drain"
    drain = run_rendered(probe_commands(pod)["drain"], PY, values, timeout=30)
    assert drain.returncode == 0
    assert drain.stdout.strip() == (
        "drain: stopping with 1 requests still running: the 2 s drain limit passed "
        "(the gateway was not told: the prober could not be reached ([Errno 111] Connection refused))"
    )


def test_a_priority_queue_lets_the_probe_go_first(
    sglang_pods: dict[str, dict[str, Any]], standins: list[SglangStandin], tmp_path: Path
) -> None:
    """A busy but healthy engine must not fail liveness: the probe carries the owner's priority."""
    pod = sglang_pods["qwen3-5-122b-0"]  # a dedicated deployment: its engine schedules by priority
    live = probe_commands(pod)["live"]
    assert json.loads(flag_value(live, "--fields")) == {"priority": request_priority(owner=True)}
    pool = request_priority(owner=False)
    # a request without a priority counts as the pool's: without its field the probe would wait its turn
    standin = start(standins, pod, max_running=1, seconds_per_token=0.02, default_priority=pool)
    assert standin.options.priority_scheduling and standin.options.low_priority_values_first

    def send(name: str, priority: int, tokens: int) -> None:
        body = {"model": "m", "prompt": name, "max_tokens": tokens, "user": name, "priority": priority}
        request = urllib.request.Request(
            standin.base_url + "/v1/completions", data=json.dumps(body).encode(), method="POST"
        )
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=60) as response:
            response.read()

    senders = [threading.Thread(target=send, args=("blocker", pool, 40))]
    senders[0].start()
    while standin.scheduler.running == 0:
        time.sleep(0.005)
    senders.append(threading.Thread(target=send, args=("pool", pool, 4)))
    senders[1].start()
    while not standin.scheduler.waiting:
        time.sleep(0.005)
    result = run_rendered(live, PY, {"--port": port(standin), "--state-file": str(tmp_path / "live")}, timeout=60)
    for sender in senders:
        sender.join(30)
    assert result.returncode == 0, result.stdout
    assert standin.started == ["blocker", "", "pool"]  # the probe (no `user`) before the waiting pool request


def test_a_loading_engine_is_not_ready(sglang_pods: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    ready = probe_commands(sglang_pods["glm-5-1-0"])["ready"]
    nothing = str(free_port())  # the server does not listen yet: the weights are still loading
    result = run_rendered(ready, PY, {"--port": nothing, **files(tmp_path)}, timeout=30)
    assert result.returncode == 1
    assert result.stdout.startswith("ready: FAIL: loading: GET /health failed: [Errno 111] Connection refused")
