"""The canary prober: `fabric canary --serve`, run per site (observability/canary.py) or locally.

Every `every` seconds it runs the canary (`live.canary.run_canary`) over the replicas it is given,
then decides which replicas are out of the gateway's rotation: a replica whose canary fails (an
engine that is down fails it: no answer), whose node has a firing node-fatal Xid alert
(`FabricGpuXidNodeFatal`) or is cordoned (`kube_node_spec_unschedulable`, both read from Prometheus
when `--prometheus` is given; and a node the site repo marks cordoned), or that told it it is draining
(its pod's preStop hook). A replica is back in as soon as a cycle finds none of these.

A failing canary cannot take a whole deployment out (`canary_holds`): it takes a replica out only while
a sibling of the same deployment passes, or while the reference it failed was recorded for the
replica's own configuration fingerprint. When every replica fails and no such reference bears the
failure out (a reference of a configuration since changed and recorded without a fingerprint, an
agreement that nothing passes), the canary may be what is wrong: the replicas stay in rotation and
ready, and `fabric_canary_held_in_rotation` (alert `FabricCanaryHeldInRotation`) says so. It serves:

- `GET /replicas/DEPLOYMENT/INDEX` -> `{"state": "pass"|"fail"|"unknown", ...}`: the canary verdict
  (the lanes' contract: a readiness probe may read it, and must fail open when the prober is away);
  a failure held in rotation reads `unknown`, with `held` saying why;
- `GET /rotation` -> every replica with `in_rotation` and its reasons: what the gateway's
  `gateway.runtime.rotation` reads;
- `POST /replicas/DEPLOYMENT/INDEX/drain` (body `{"seconds": S}`, optional): the replica is going away
  (`engine.runtime.probe drain`); it is out of rotation, reason `draining`, at once (not at the next
  cycle) and for S seconds (`DRAIN_MARK_S` without a body). The mark expires rather than being
  cleared: the container that sent it is gone by then (the drain's limit plus the engine's stop is
  its grace period), and its replacement (a new pod, or the container the kubelet restarts after a
  failed liveness probe) is back in rotation when it expires, with no one having to say so; a cold
  start seldom ends sooner. A repeated notice keeps the first `since`; a prober that restarts
  forgets the marks (the replica then leaves by its Service's readiness alone). A write needs the
  prober's write token (`Authorization: Bearer TOKEN`, the file `--write-token-file` names, a Secret
  in the cluster; compared in constant time): without it, or when the prober has none, 401. Renewals
  are capped: a mark lasts at most `DRAIN_MARK_MAX_S` after its first notice however often it is
  renewed, and a replica whose mark ran out that way is not marked again until it has been back in
  rotation as long (409 meanwhile): no notice keeps a replica out for more than half the time;
- `GET /metrics`: the canary exposition plus `fabric_canary_in_rotation`.
"""

from __future__ import annotations

import hmac
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from llm_fabric.live.canary import CanaryRun, exposition
from llm_fabric.names import (
    CANARY_DRAIN,
    CANARY_HEALTH,
    CANARY_HELD_METRIC,
    CANARY_IN_ROTATION_METRIC,
    CANARY_METRICS,
    CANARY_REPLICAS,
    CANARY_ROTATION,
    CANARY_TOKEN_SECRET,
    ROTATION_DEPLOYMENT,
    ROTATION_IN,
    ROTATION_REPLICA,
    ROTATION_REPLICAS,
    ROTATION_SITE,
    XID_NODE_FATAL_ALERT,
)
from llm_fabric.plan.document import Plan

DRAINING = "draining"  # the reason a drain notice puts on a replica
DRAIN_MARK_S = 180.0  # a notice without `seconds`: past any pod's termination grace (serving/probes.py)
DRAIN_MARK_MAX_S = 3600.0


@dataclass(frozen=True)
class RotationEntry:
    deployment: str
    index: int
    site: str
    node: str
    state: str  # the canary's: pass, fail, unknown
    reasons: list[str]
    held: str | None = None  # why a failing canary leaves the replica in (canary_holds)

    @property
    def in_rotation(self) -> bool:
        return not self.reasons

    def as_dict(self) -> dict[str, object]:
        return {
            ROTATION_REPLICA: f"{self.deployment}/{self.index}",
            ROTATION_DEPLOYMENT: self.deployment,
            "index": self.index,
            ROTATION_SITE: self.site,
            "node": self.node,
            "state": self.state,
            ROTATION_IN: self.in_rotation,
            "reasons": self.reasons,
        } | ({"held": self.held} if self.held else {})


def prometheus_nodes_out(url: str, timeout: float = 10.0) -> tuple[dict[str, str], str | None]:
    """node -> why it is out (a firing node-fatal Xid alert, a cordoned Kubernetes node), and an error if
    Prometheus could not be asked (then nothing is taken out for it: the canary still judges answers)."""
    queries = {
        f'ALERTS{{alertname="{XID_NODE_FATAL_ALERT}",alertstate="firing"}}': (
            f"node-fatal Xid alert {XID_NODE_FATAL_ALERT}"
        ),
        "kube_node_spec_unschedulable == 1": "node cordoned (unschedulable)",
    }
    out: dict[str, str] = {}
    for expr, why in queries.items():
        query = urllib.parse.urlencode({"query": expr})
        try:
            with urllib.request.urlopen(f"{url.rstrip('/')}/api/v1/query?{query}", timeout=timeout) as response:
                data = json.loads(response.read())
        except (urllib.error.URLError, OSError, ValueError) as exc:
            return out, f"Prometheus at {url} not asked: {getattr(exc, 'reason', exc)}"
        for series in data.get("data", {}).get("result", []):
            node = series.get("metric", {}).get("node")
            if node:
                out.setdefault(str(node), why)
    return out, None


def canary_holds(run: CanaryRun) -> dict[tuple[str, int], str]:
    """The failing replicas a canary failure does not take out, and why: no sibling of their deployment
    passes and the reference they were compared with, if any, was not recorded for their own configuration
    fingerprint. Taking them out would take the whole deployment out of its Service."""
    passing = {v.deployment for v in run.replicas if not v.failures}
    return {
        (v.deployment, v.index): (
            f"every replica of {v.deployment} fails its canary and no reference recorded for its configuration "
            "fingerprint bears it out: kept in rotation (record a reference, or look at the canary)"
        )
        for v in run.replicas
        if v.failures and v.deployment not in passing and not v.reference_matches
    }


def rotation(plan: Plan, run: CanaryRun, nodes_out: dict[str, str]) -> list[RotationEntry]:
    """Every replica of the plan with the reasons it is out of rotation (none: in)."""
    verdicts = {(v.deployment, v.index): v for v in run.replicas}
    holds = canary_holds(run)
    entries = []
    for r in sorted(plan.replicas, key=lambda r: (r.deployment, r.index)):
        verdict = verdicts.get((r.deployment, r.index))
        held = holds.get((r.deployment, r.index))
        reasons = [f"canary: {f}" for f in verdict.failures] if verdict and held is None else []
        for node in r.nodes:
            if node in nodes_out:
                reasons.append(f"{node}: {nodes_out[node]}")
        state = verdict.state if verdict else "unknown"
        entries.append(RotationEntry(r.deployment, r.index, r.site, r.node, state, reasons, held))
    return entries


def rotation_exposition(entries: list[RotationEntry]) -> str:
    lines = [
        f"# HELP {CANARY_IN_ROTATION_METRIC} 1 while the gateway may route to the replica, 0 while it is taken out.",
        f"# TYPE {CANARY_IN_ROTATION_METRIC} gauge",
    ]
    for e in entries:
        labels = f'deployment="{e.deployment}",node="{e.node}",replica="{e.index}",site="{e.site}"'
        lines.append(f"{CANARY_IN_ROTATION_METRIC}{{{labels}}} {1.0 if e.in_rotation else 0.0}")
    lines += [
        f"# HELP {CANARY_HELD_METRIC} 1 while the replica fails its canary but is kept in rotation: its whole "
        "deployment fails and no reference recorded for its configuration bears the failure out.",
        f"# TYPE {CANARY_HELD_METRIC} gauge",
    ]
    for e in entries:
        labels = f'deployment="{e.deployment}",node="{e.node}",replica="{e.index}",site="{e.site}"'
        lines.append(f"{CANARY_HELD_METRIC}{{{labels}}} {1.0 if e.held else 0.0}")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class DrainMark:
    since: float  # wall time of the first notice
    until: float  # monotonic time the mark expires
    started: float = 0.0  # monotonic time of the first notice: the renewals' cap counts from it


class DrainRefused(ValueError):
    """A drain notice the renewal cap refuses (its message says until when)."""


def write_refusal(token_file: Path | None, authorization: str | None) -> str | None:
    """Why a write is not authorised (None: it is): the bearer token must be the token file's.

    The file is read at each write, so a rotated Secret takes effect without a restart; a prober
    without a token file, or with one it cannot read or that is empty, takes no writes at all."""
    if token_file is None:
        return "this prober takes no writes: it was started without a write token (--write-token-file)"
    try:
        expected = token_file.read_bytes().strip()
    except OSError as exc:
        return f"this prober takes no writes: its write token {token_file} cannot be read ({exc.strerror})"
    if not expected:
        return f"this prober takes no writes: its write token {token_file} is empty"
    scheme, _, given = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), expected):
        return (
            f"a write needs the prober's write token: `Authorization: Bearer TOKEN` (the Secret {CANARY_TOKEN_SECRET})"
        )
    return None


class UnknownReplica(LookupError):
    """A drain notice for a replica the prober's plan does not have."""


@dataclass
class ProberState:
    """The latest cycle's findings and the drain notices, read and written by the HTTP handler's threads.

    `entries` starts as the plan's replicas, all in (`serve`'s `replicas`), so a notice that comes
    before the first cycle is kept and shown."""

    run: CanaryRun | None = None
    entries: list[RotationEntry] = field(default_factory=list)
    checked_at: float | None = None
    notes: list[str] = field(default_factory=list)
    draining: dict[tuple[str, int], DrainMark] = field(default_factory=dict)
    # replicas whose mark ran to the cap -> the monotonic time they may be marked again
    capped: dict[tuple[str, int], float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def update(self, run: CanaryRun, entries: list[RotationEntry], notes: list[str]) -> None:
        with self.lock:
            self.run, self.entries, self.notes, self.checked_at = run, entries, notes, time.time()

    def drain(self, deployment: str, index: int, seconds: float) -> dict[str, object]:
        """Mark a replica draining for `seconds` from now, within the renewals' cap (UnknownReplica if the
        plan has none such; DrainRefused when the cap holds it back)."""
        key = (deployment, index)
        with self.lock:
            if not any((e.deployment, e.index) == key for e in self.entries):
                raise UnknownReplica(f"{deployment}/{index}")
            now = time.monotonic()
            mark = self._mark(key, now)
            again = self.capped.get(key, 0.0)
            if mark is None and again > now:
                raise DrainRefused(
                    f"{deployment}/{index} was out by drain notices for {DRAIN_MARK_MAX_S:g} s; it takes none for "
                    f"{again - now:.0f} s more"
                )
            started = mark.started if mark else now
            cap = started + DRAIN_MARK_MAX_S
            if mark is not None and mark.until >= cap:
                raise DrainRefused(
                    f"{deployment}/{index} is out by drain notices until the cap ({DRAIN_MARK_MAX_S:g} s after the "
                    "first notice); it is not renewed"
                )
            until = min(max(now + seconds, mark.until if mark else 0.0), cap)
            self.draining[key] = DrainMark(mark.since if mark else time.time(), until, started)
            since = self.draining[key].since
        return {"replica": f"{deployment}/{index}", "draining": True, "since": since, "seconds": round(until - now, 1)}

    def _mark(self, key: tuple[str, int], now: float) -> DrainMark | None:
        mark = self.draining.get(key)
        if mark is not None and mark.until <= now:
            del self.draining[key]  # expired: the pod that sent it is gone
            if mark.until >= mark.started + DRAIN_MARK_MAX_S:  # ran to the cap: as long back in before another
                self.capped[key] = mark.until + DRAIN_MARK_MAX_S
            return None
        return mark

    def _entries(self) -> list[RotationEntry]:
        """The cycle's entries with the drain notices applied (lock held)."""
        now = time.monotonic()
        out = []
        for e in self.entries:
            if self._mark((e.deployment, e.index), now) is not None and DRAINING not in e.reasons:
                e = replace(e, reasons=[*e.reasons, DRAINING])
            out.append(e)
        return out

    def replica(self, deployment: str, index: int) -> dict[str, object]:
        with self.lock:
            verdict = next(
                (v for v in (self.run.replicas if self.run else []) if (v.deployment, v.index) == (deployment, index)),
                None,
            )
            entry = next((e for e in self._entries() if (e.deployment, e.index) == (deployment, index)), None)
        if verdict is None:
            return {
                "state": "unknown",
                "replica": f"{deployment}/{index}",
                ROTATION_IN: entry.in_rotation if entry else True,
            }
        answer = verdict.as_dict() | {ROTATION_IN: entry.in_rotation if entry else True, "checked_at": self.checked_at}
        if entry is not None and entry.held:
            # readiness fails on `fail`: a held failure must not take the replica out of its Service
            answer |= {"state": "unknown", "held": entry.held}
        return answer

    def rotation_document(self) -> dict[str, object]:
        with self.lock:
            entries = self._entries()
            return {
                "checked_at": self.checked_at,
                ROTATION_REPLICAS: [e.as_dict() for e in entries],
                "notes": self.notes,
            }

    def metrics(self) -> str:
        with self.lock:
            if self.run is None:
                return ""
            return exposition(self.run) + rotation_exposition(self._entries())


def _drain_seconds(raw: bytes) -> float | str:
    """The notice's `seconds` (DRAIN_MARK_S without a body), or why the body is not accepted."""
    if not raw.strip():
        return DRAIN_MARK_S
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return 'the body is not JSON: send {"seconds": S} or nothing'
    seconds = body.get("seconds", DRAIN_MARK_S) if isinstance(body, dict) else None
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 < seconds <= DRAIN_MARK_MAX_S:
        return f"`seconds` must be a number in (0, {DRAIN_MARK_MAX_S:g}], not {str(seconds)[:40]}"
    return float(seconds)


def _handler(state: ProberState, token_file: Path | None) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _send(
            self, status: int, body: str, content_type: str = "application/json", *, www_authenticate: bool = False
        ) -> None:
            data = body.encode()
            self.send_response(status)
            if www_authenticate:
                self.send_header("WWW-Authenticate", 'Bearer realm="fabric-canary"')
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            parts = [urllib.parse.unquote(p) for p in self.path.split("?", 1)[0].strip("/").split("/")]
            if parts == [CANARY_METRICS]:
                self._send(200, state.metrics(), "text/plain; version=0.0.4")
            elif parts == [CANARY_ROTATION]:
                self._send(200, json.dumps(state.rotation_document()))
            elif parts == [CANARY_HEALTH]:
                self._send(200, json.dumps({"ok": True, "checked_at": state.checked_at}))
            elif len(parts) == 3 and parts[0] == CANARY_REPLICAS and parts[2].isdigit():
                self._send(200, json.dumps(state.replica(parts[1], int(parts[2]))))
            else:
                self._send(404, json.dumps({"error": "GET /replicas/DEPLOYMENT/INDEX, /rotation or /metrics"}))

        def do_POST(self) -> None:
            parts = [urllib.parse.unquote(p) for p in self.path.split("?", 1)[0].strip("/").split("/")]
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            refusal = write_refusal(token_file, self.headers.get("Authorization"))
            if refusal is not None:  # before the path: an unauthorised caller learns nothing of the replicas
                self._send(401, json.dumps({"error": f"POST {self.path}: {refusal}"}), www_authenticate=True)
                return
            drain = len(parts) == 4 and parts[0] == CANARY_REPLICAS and parts[2].isdigit() and parts[3] == CANARY_DRAIN
            if not drain:
                self._send(404, json.dumps({"error": f"POST {self.path}: only POST /replicas/DEPLOYMENT/INDEX/drain"}))
                return
            seconds = _drain_seconds(raw)
            if isinstance(seconds, str):
                self._send(400, json.dumps({"error": f"POST {self.path}: {seconds}"}))
                return
            try:
                answer = state.drain(parts[1], int(parts[2]), seconds)
            except UnknownReplica as exc:
                self._send(404, json.dumps({"error": f"POST {self.path}: no replica {exc} in the prober's plan"}))
                return
            except DrainRefused as exc:
                self._send(409, json.dumps({"error": f"POST {self.path}: {exc}"}))
                return
            self._send(200, json.dumps(answer))

        def log_message(self, format: str, *args: object) -> None:
            return  # a probe every few seconds per pod: no access log

    return Handler


def serve(
    address: tuple[str, int],
    cycle: Callable[[], tuple[CanaryRun, list[RotationEntry], list[str]]],
    every: float,
    *,
    cycles: int | None = None,
    on_cycle: Callable[[CanaryRun, list[RotationEntry], list[str]], None] | None = None,
    replicas: list[RotationEntry] | None = None,
    write_token: Path | None = None,
) -> None:
    """Serve the endpoints on `address` and run `cycle` every `every` seconds (`cycles` times, or forever);
    `replicas`: the entries served until the first cycle ends (the plan's replicas, all in); `write_token`:
    the file whose token a drain notice must carry (None: the prober takes no writes)."""
    state = ProberState(entries=list(replicas or []))
    server = ThreadingHTTPServer(address, _handler(state, write_token))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        done = 0
        while cycles is None or done < cycles:
            started = time.monotonic()
            run, entries, notes = cycle()
            state.update(run, entries, notes)
            if on_cycle is not None:
                on_cycle(run, entries, notes)
            done += 1
            time.sleep(max(every - (time.monotonic() - started), 0.0))
    finally:
        server.shutdown()
        server.server_close()
