"""`llm_fabric.names`: the names that cross processes, importable by every runtime, and their users agree."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import llm_fabric.names as N
from llm_fabric.engine.backends import BACKENDS, series_selector
from llm_fabric.ledger.store import engine_usage
from llm_fabric.observability.rules import either

PLATFORM = Path(__file__).resolve().parents[1] / "platform"


def test_names_imports_only_the_standard_library() -> None:
    """The engine pod and LiteLLM's proxy import it with none of the fabric's dependencies at hand."""
    tree = ast.parse((PLATFORM / "llm_fabric" / "names.py").read_text(encoding="utf-8"))
    imported = {
        alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    } | {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert imported <= {"__future__"} | set(sys.stdlib_module_names), f"names.py imports {sorted(imported)}"
    code = (
        "import sys, llm_fabric.names as N; "
        "print(sorted(m for m in sys.modules if m.startswith('llm_fabric')), N.canary_url('serving'))"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(PLATFORM)!r}); {code}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == "['llm_fabric', 'llm_fabric.names'] http://fabric-canary.serving.svc.cluster.local:9400"


def test_the_prober_paths_the_probes_and_the_gateway_use() -> None:
    replica = N.canary_replica_path("qwen3-5", 1)
    assert replica == "/replicas/qwen3-5/1", replica
    assert f"{replica}/{N.CANARY_DRAIN}" == "/replicas/qwen3-5/1/drain"
    assert N.XID_NODE_FATAL_ALERT.startswith(N.XID_ALERT_PREFIX), N.XID_NODE_FATAL_ALERT
    assert N.XID_UNCLASSIFIED_ALERT.startswith(N.XID_ALERT_PREFIX), N.XID_UNCLASSIFIED_ALERT


def test_the_engines_series_come_from_their_backends() -> None:
    """The rules, the dashboards and the ledger select each registered engine's own name of a series."""
    running = either("requests_running")
    for name, engine in BACKENDS.items():
        assert engine.metrics.requests_running in running, f"{name}: {running}"
        assert engine.probe_traits.running_metric == engine.metrics.requests_running, name
        assert engine.metrics.generation_tokens in engine_usage.COUNTERS, f"{name}: {engine_usage.COUNTERS}"
    assert running == series_selector(lambda m: m.requests_running)
    assert running == '{__name__=~"vllm:num_requests_running|sglang:num_running_reqs"}', running
