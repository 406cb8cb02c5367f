"""The GPU fault alerts that fire now, read from the Prometheus HTTP API (`/api/v1/alerts`).

The alerts, not a query of `DCGM_FI_DEV_XID_ERRORS`: what `fabric nodes remediate` acts on is what
paged, after the rules' own selection (the rules are generated from the same Xid table), and a
Prometheus that does not run the fabric's GPU rules is told apart from a fleet without faults by
`/api/v1/rules`: reading the series there would remediate what nobody was paged for.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from llm_fabric.errors import UsageError
from llm_fabric.names import XID_ALERT_PREFIX
from llm_fabric.site.paths import check_name


@dataclass(frozen=True)
class FiringXid:
    """One GPU's firing Xid alert: the node (the Kubernetes node name, a manifest's name) and the GPU."""

    node: str
    xid: int
    gpu: str  # "GPU 3 (GPU-30130bfd-...)" as the alert's labels name it
    index: int | None  # the GPU's index on the node (dcgm-exporter's `gpu` label), as the plan numbers GPUs
    alert: str
    active_at: str
    uuid: str | None = None  # the GPU's UUID label: what the node's signed manifest must list


@dataclass(frozen=True)
class Firing:
    """The usable firing alerts, and why each other firing GPU fault alert was skipped (never acted on)."""

    xids: list[FiringXid]
    skipped: list[str]


def firing_xids(url: str, *, timeout: float = 10.0) -> Firing:
    """The firing FabricGpuXid* alerts at `url`; UsageError when unreachable or the GPU rules are not loaded.

    An alert whose labels name no node, a node that is no valid name, or no positive Xid is skipped
    with its reason: what Prometheus says is input, and one bad alert must not stop the others."""
    rules = _get(url, "rules", {"type": "alert"}, timeout)
    loaded = {
        rule.get("name", "")
        for group in rules.get("groups", [])
        for rule in group.get("rules", [])
        if str(rule.get("name", "")).startswith(XID_ALERT_PREFIX)
    }
    if not loaded:
        raise UsageError(
            f"Prometheus at {url} has no {XID_ALERT_PREFIX}* alert rules loaded, so no GPU fault can fire there",
            hint="load the observability stack's PrometheusRule (`fabric render --stack observability`), "
            "or point --prometheus at the Prometheus that runs it",
        )
    out, skipped = [], []
    for alert in _get(url, "alerts", {}, timeout).get("alerts", []):
        labels = alert.get("labels", {}) if isinstance(alert, dict) else {}
        labels = labels if isinstance(labels, dict) else {}
        name = str(labels.get("alertname", ""))
        if not name.startswith(XID_ALERT_PREFIX) or alert.get("state") != "firing":
            continue
        node = str(labels.get("node") or labels.get("Hostname") or "")
        xid = _xid(alert.get("value"))
        problem = _unusable(node, xid, alert.get("value"))
        if problem is not None or xid is None:
            skipped.append(f"skipped alert {name[:80]}: {problem}; nothing done for it")
            continue
        index = str(labels.get("gpu", ""))
        uuid = str(labels["UUID"]) if labels.get("UUID") else None
        gpu = f"GPU {index or '?'} ({uuid or 'no UUID'})"
        out.append(
            FiringXid(
                node, xid, gpu, int(index) if index.isdigit() else None, name, str(alert.get("activeAt", "")), uuid
            )
        )
    return Firing(sorted(out, key=lambda f: (f.node, f.xid, f.gpu)), skipped)


def _unusable(node: str, xid: int | None, value: Any) -> str | None:
    if not node:  # the ServiceMonitor relabels `node`; a series without it names no machine to act on
        return "it names no node (no `node` or `Hostname` label)"
    try:
        check_name(node, "its node label")
    except UsageError as exc:  # a label that is no manifest's name: a path or branch built from it would be wrong
        return exc.message
    if xid is None:
        return f"its value `{str(value)[:40]}` on {node} is no Xid"
    return None


def _xid(value: Any) -> int | None:
    # the alert's value is the gauge's, as Prometheus formats a float ("7.9e+01")
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return int(number) if number.is_integer() and number > 0 else None


def _get(url: str, path: str, params: dict[str, str], timeout: float) -> dict[str, Any]:
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    target = f"{url.rstrip('/')}/api/v1/{path}{query}"
    try:
        with urllib.request.urlopen(target, timeout=timeout) as resp:
            body = json.load(resp)
    except urllib.error.HTTPError as exc:
        raise UsageError(f"Prometheus at {url} answered HTTP {exc.code} for /api/v1/{path}") from exc
    except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError) as exc:
        raise UsageError(
            f"Prometheus at {url} is unreachable: {getattr(exc, 'reason', exc)}",
            hint="check --prometheus (e.g. http://prometheus-operated.monitoring.svc:9090) and that the server is up",
        ) from exc
    if not isinstance(body, dict) or body.get("status") != "success":
        raise UsageError(f"Prometheus at {url} answered an error for /api/v1/{path}: {str(body)[:300]}")
    data = body.get("data")
    return data if isinstance(data, dict) else {}
