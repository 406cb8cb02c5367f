"""The engine pod's probes, run INSIDE the engine container with the image's Python (an exec probe).

    python3 -m llm_fabric.engine.runtime.probe live  --port 8000 --model NAME --deadline S [--state-file F] ...
    python3 -m llm_fabric.engine.runtime.probe ready --port 8000 --drain-file F [--canary-url URL] ...
    python3 -m llm_fabric.engine.runtime.probe drain --port 8000 --drain-file F --running-metric M [--notice-url U] ...

- `live`: one streamed, greedy completion of a fixed prompt (`PROMPT`, `--tokens` output tokens) to the
  engine's own OpenAI port; passes when the answer ends (every token or an early stop) within
  `--deadline` seconds. An engine that answers `/health` and never sends a token fails it. Its verdict
  is kept in `--state-file`, for readiness.
- `ready`: false while the engine is loading (its health path does not answer 200), while the pod drains
  (the drain file exists), while the last liveness probe failed (the engine is not generating: out of
  the Service at once, restarted only after the liveness threshold) and while the canary prober's
  verdict for this replica is `fail`. A prober
  that cannot be reached, or answers anything else, does not make the replica unready (fail open): the
  prober being down must not empty every Service.
- `drain` (the container's preStop): writes the drain file (readiness turns false, the Service drops the
  pod), tells the canary prober (`--notice-url`, its `POST /replicas/DEPLOYMENT/INDEX/drain`: the
  gateway, which addresses each replica itself, takes it out of its rotation at its next refresh), waits
  `--settle` seconds for both to take effect, then until the engine's running-requests gauge
  (`--running-metric` on /metrics) reads 0, or `--limit` seconds have passed; then Kubernetes stops it.
  The notice carries the prober's write token (`--notice-token-file`, the Secret mounted on the pod) as a
  bearer: the prober takes no write without it. The notice is best effort: one that cannot be delivered
  (`NOTICE_TIMEOUT_S`), or that the prober refuses, is said in the drain's line and the drain goes on
  (the replica then leaves by its Services' readiness alone).

Exit status 0 passes, 1 fails, 2 a command line this program does not accept; one line on stdout says
why (the kubelet puts it in the pod's events). What differs per engine (its health path, its metric,
the request fields that skip the loop guard or set a priority) comes in the arguments, from the
engine's backend at render time. Standard library only: the engine's environment has none of the
fabric's dependencies, and a probe must start fast.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# short and ordinary, so that every tokenizer makes few tokens of it and every model continues it
PROMPT = "The capital of France is"
DEFAULT_TOKENS = 4
NOTICE_TIMEOUT_S = 2.0
# the prober keeps the drain mark for the drain's limit and this much more: the engine's own stop and the
# kubelet's kill (serving/probes.ENGINE_STOP_S is 15 s); a replacement's cold start seldom ends sooner
NOTICE_MARGIN_S = 30.0
_CONNECT_ERRORS = (urllib.error.URLError, TimeoutError, OSError)


class ProbeFailed(Exception):
    """Why a probe did not pass, in one line."""


def _base(port: int) -> str:
    return f"http://127.0.0.1:{port}"


def _stream_events(response: Any, stop_at: float) -> Iterator[dict[str, Any] | None]:
    """The JSON events of a server-sent-event stream, then None for its `[DONE]`; ProbeFailed past `stop_at`."""
    for raw in response:
        if time.monotonic() > stop_at:
            raise ProbeFailed("past the deadline")
        line = raw.decode("utf-8", errors="replace").strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            yield None
            return
        try:
            yield json.loads(data)
        except json.JSONDecodeError:
            raise ProbeFailed(f"the stream sent something that is not JSON: {data[:80]!r}") from None


def live(port: int, model: str, deadline: float, tokens: int, fields: dict[str, Any]) -> str:
    """One greedy completion of `tokens` tokens within `deadline` seconds; what happened, or ProbeFailed."""
    body = fields | {
        "model": model,
        "prompt": PROMPT,
        "max_tokens": tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    url = _base(port) + "/v1/completions"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    start = time.monotonic()
    stop_at = start + deadline
    received, first, finished, done = 0, None, None, False
    try:
        # the socket timeout bounds each read; the deadline bounds the whole answer
        with urllib.request.urlopen(request, timeout=deadline) as response:
            for event in _stream_events(response, stop_at):
                if event is None:
                    done = True
                    break
                for choice in event.get("choices") or []:
                    if choice.get("text") is not None:
                        received += 1
                        first = first if first is not None else time.monotonic() - start
                    finished = choice.get("finish_reason") or finished
                usage = event.get("usage")
                if usage and usage.get("completion_tokens") is not None:
                    received = int(usage["completion_tokens"])
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", errors="replace")[:200]
        raise ProbeFailed(f"POST {url} answered {exc.code}: {detail}") from None
    except ProbeFailed as exc:
        raise ProbeFailed(_silence(received, deadline, str(exc))) from None
    except _CONNECT_ERRORS as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        if isinstance(reason, TimeoutError) or "timed out" in str(reason):
            raise ProbeFailed(_silence(received, deadline, "timed out")) from None
        raise ProbeFailed(f"POST {url} failed: {reason}") from None
    took = time.monotonic() - start
    if not (done or finished) or received == 0:
        raise ProbeFailed(f"the stream broke off after {received} tokens ({took:.2f} s)")
    return f"ok: {received} tokens in {took:.2f} s (first after {first or took:.2f} s)"


def _silence(received: int, deadline: float, how: str) -> str:
    if received == 0:
        return f"the engine sent no token within the {deadline:g} s deadline ({how}): it is not generating"
    return f"the engine sent {received} tokens, then nothing until the {deadline:g} s deadline ({how})"


def _canary_state(url: str, timeout: float) -> tuple[str, str]:
    """(state, note) of the canary prober's verdict; state `unreachable` when it cannot be read."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            verdict = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return "unreachable", f"the canary prober answered {exc.code}"
    except (*_CONNECT_ERRORS, json.JSONDecodeError, UnicodeDecodeError) as exc:
        return "unreachable", f"the canary prober could not be read ({exc})"
    state = verdict.get("state") if isinstance(verdict, dict) else None
    if state not in ("pass", "fail", "unknown"):
        return "unreachable", f"the canary prober answered no state ({str(verdict)[:80]})"
    reason = verdict.get("reason") or verdict.get("detail") or ""
    return state, str(reason)


def _record(state_file: Path | None, passed: bool, message: str) -> None:
    """The liveness verdict for readiness; written whole (rename), so readiness never reads half of it."""
    if state_file is None:
        return
    partial = state_file.with_name(state_file.name + ".partial")
    partial.write_text(json.dumps({"passed": passed, "message": message, "at": time.time()}), encoding="utf-8")
    partial.replace(state_file)


def _last_liveness(state_file: Path | None) -> dict[str, Any] | None:
    if state_file is None:
        return None
    try:
        state = json.loads(state_file.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None  # no liveness probe has run yet in this container
    return state if isinstance(state, dict) else None


def ready(
    port: int,
    health_path: str,
    drain_file: Path,
    live_state: Path | None,
    canary_url: str | None,
    timeout: float,
) -> str:
    if drain_file.exists():
        raise ProbeFailed(f"draining (since {drain_file.read_text(encoding='utf-8').strip() or 'the preStop hook'})")
    last = _last_liveness(live_state)
    if last is not None and not last.get("passed"):
        raise ProbeFailed(f"not generating: the last liveness probe failed: {last.get('message')}")
    url = _base(port) + health_path
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            response.read()
    except urllib.error.HTTPError as exc:
        raise ProbeFailed(f"loading: GET {health_path} answered {exc.code}") from None
    except _CONNECT_ERRORS as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        raise ProbeFailed(f"loading: GET {health_path} failed: {reason}") from None
    if canary_url is None:
        return "ok: healthy (no canary prober named)"
    state, note = _canary_state(canary_url, timeout)
    if state == "fail":
        raise ProbeFailed(f"the canary fails for this replica{': ' + note if note else ''}")
    if state == "unreachable":
        return f"ok: healthy; {note}: ready anyway (fail open)"
    return f"ok: healthy, canary {state}"


def _running(port: int, metric: str, timeout: float) -> float | None:
    """The running-requests gauge summed over its series; None when /metrics cannot be read."""
    try:
        with urllib.request.urlopen(_base(port) + "/metrics", timeout=timeout) as response:
            text = response.read().decode("utf-8", errors="replace")
    except (*_CONNECT_ERRORS, urllib.error.HTTPError):
        return None
    total, seen = 0.0, False
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(metric):
            continue
        name, labelled, rest = line.partition("{")
        if labelled:
            rest = rest.rpartition("}")[2]
        else:
            name, _, rest = line.partition(" ")
        if name.strip() != metric:
            continue
        try:
            total += float(rest.split()[0])
        except (ValueError, IndexError):
            continue
        seen = True
    return total if seen else None


def _notify(url: str, seconds: float, told: list[str], token_file: Path | None = None) -> None:
    """POST the drain notice, with the prober's write token when its file is there; what came of it into
    `told` (one line)."""
    body = json.dumps({"seconds": seconds}).encode()
    headers = {"Content-Type": "application/json"}
    try:
        token = token_file.read_text(encoding="utf-8").strip() if token_file is not None else ""
    except OSError:
        token = ""  # the Secret is optional on the pod: the prober refuses the notice (401), and that is said
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=NOTICE_TIMEOUT_S) as response:
            response.read()
        told.append("the gateway was told (the prober took it out of rotation)")
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", errors="replace")[:200]
        told.append(f"the gateway was not told: the prober answered {exc.code}: {detail}")
    except _CONNECT_ERRORS as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        told.append(f"the gateway was not told: the prober could not be reached ({reason})")


def drain(
    port: int,
    drain_file: Path,
    metric: str,
    settle: float,
    limit: float,
    poll: float,
    notice_url: str | None = None,
    notice_token_file: Path | None = None,
) -> str:
    start = time.monotonic()
    drain_file.write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) + "\n", encoding="utf-8")
    told: list[str] = []
    notice = None
    if notice_url is not None:
        # in a thread: a name that does not resolve is not bounded by the socket timeout, and the drain
        # must not wait on the prober
        notice = threading.Thread(
            target=_notify, args=(notice_url, limit + NOTICE_MARGIN_S, told, notice_token_file), daemon=True
        )
        notice.start()
    # the Service's endpoints follow readiness a probe period or two later; the gateway's rotation its refresh
    time.sleep(min(settle, limit))
    if notice is not None:
        notice.join(max(0.0, NOTICE_TIMEOUT_S - (time.monotonic() - start)))
        told = told or [f"the gateway was not told: the prober did not answer within {NOTICE_TIMEOUT_S:g} s"]
    said = f" ({told[0]})" if told else ""
    while True:
        running = _running(port, metric, timeout=poll)
        waited = time.monotonic() - start
        if running is None:
            return f"drained: /metrics has no {metric} after {waited:.0f} s (the engine is gone or silent){said}"
        if running == 0:
            return f"drained: no request running after {waited:.0f} s{said}"
        if waited >= limit:
            return f"stopping with {running:g} requests still running: the {limit:g} s drain limit passed{said}"
        time.sleep(poll)


def _parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(prog="python3 -m llm_fabric.engine.runtime.probe", description=__doc__)
    sub = cli.add_subparsers(dest="probe", required=True)
    p_live = sub.add_parser("live", help="a few greedy tokens within a deadline")
    p_live.add_argument("--port", type=int, required=True)
    p_live.add_argument("--model", required=True, help="the served model name")
    p_live.add_argument("--deadline", type=float, required=True, help="seconds for the whole answer")
    p_live.add_argument("--tokens", type=int, default=DEFAULT_TOKENS)
    p_live.add_argument("--fields", type=json.loads, default={}, help="JSON object merged into the request")
    p_live.add_argument("--state-file", type=Path, help="where the verdict is kept for readiness")
    p_ready = sub.add_parser("ready", help="loaded, not draining, canary not failing")
    p_ready.add_argument("--port", type=int, required=True)
    p_ready.add_argument("--health-path", default="/health")
    p_ready.add_argument("--drain-file", type=Path, required=True)
    p_ready.add_argument("--live-state-file", type=Path, help="the liveness probe's --state-file")
    p_ready.add_argument("--canary-url", help="the prober's verdict for this replica (GET, JSON `state`)")
    p_ready.add_argument("--timeout", type=float, default=2.0, help="seconds per HTTP request")
    p_drain = sub.add_parser("drain", help="mark the pod draining, wait for its streams")
    p_drain.add_argument("--port", type=int, required=True)
    p_drain.add_argument("--drain-file", type=Path, required=True)
    p_drain.add_argument("--running-metric", required=True, help="the engine's running-requests gauge")
    p_drain.add_argument("--settle", type=float, default=20.0, help="seconds for the endpoints to drop the pod")
    p_drain.add_argument("--limit", type=float, required=True, help="seconds to wait at most")
    p_drain.add_argument("--poll", type=float, default=2.0)
    p_drain.add_argument("--notice-url", help="the canary prober's drain endpoint for this replica (POST)")
    p_drain.add_argument("--notice-token-file", type=Path, help="the prober's write token (a Secret's file)")
    return cli


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.probe == "live":
            if not isinstance(args.fields, dict):
                print("--fields must be a JSON object", file=sys.stderr)
                return 2
            try:
                message = live(args.port, args.model, args.deadline, args.tokens, args.fields)
            except ProbeFailed as exc:
                _record(args.state_file, False, str(exc))
                raise
            _record(args.state_file, True, message)
        elif args.probe == "ready":
            live_state = args.live_state_file
            message = ready(args.port, args.health_path, args.drain_file, live_state, args.canary_url, args.timeout)
        else:
            message = drain(
                args.port,
                args.drain_file,
                args.running_metric,
                args.settle,
                args.limit,
                args.poll,
                args.notice_url,
                args.notice_token_file,
            )
    except ProbeFailed as exc:
        print(f"{args.probe}: FAIL: {exc}", flush=True)
        return 1
    print(f"{args.probe}: {message}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
