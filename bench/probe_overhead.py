"""The generating liveness probe's overhead on the engine: decode throughput of the real vLLM (CPU, tiny
model) under a steady load, without and with the rendered liveness probe running at its period.

The reference site is rendered by the real commands (`fabric plan -o`, `fabric render --plan`); the
probe is the qwen3-5 replica's rendered exec command, run with the engine venv's Python against the
local engine (its port and served name swapped in). A window is `--window` seconds of `--streams`
concurrent streaming completions of 64 tokens; the load's throughput is the engine's
`vllm:generation_tokens_total` rise over the window minus the probes' own tokens. Windows alternate
without / with, the order flipped every other run (a loaded machine drifts); the "with" windows run
the probe every `--period` seconds (default: the rendered one), and a second pair of windows runs it
every `--stress-period` seconds to bound the cost from above.
Reported: the median of each, and the ratio with / without.

    PYTHONPATH=platform .venv/bin/python bench/probe_overhead.py [--runs 3] [--window 60] [--streams 4]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.engine.live import counter_totals
from tests.engine.probe_runner import probe_commands, render_engines, run_rendered
from tests.fixtures.engine import ENGINE_RECIPE

from llm_fabric.engine.command import ServingArgs
from llm_fabric.engine.local.server import cpu_stand_in_args, cpu_stand_in_env, start_engine
from llm_fabric.engine.local.tiny_model import build_tiny_model
from llm_fabric.engine.process import LocalEngine, engine_python
from llm_fabric.engine.recipes import get_recipe
from llm_fabric.engine.runtime.probe import PROMPT
from llm_fabric.engine.vllm.command import engine_command
from llm_fabric.hardware.catalog import load_gpu_catalog
from llm_fabric.serving.probes import LIVE_TOKENS

GENERATED = {"generation": "vllm:generation_tokens_total"}
PROBE_SECONDS: list[float] = []  # each probe's answer time under the load, as the probe printed it


def generated(engine: LocalEngine) -> int:
    with urllib.request.urlopen(engine.base_url + "/metrics", timeout=30) as response:
        return counter_totals(response.read().decode(), GENERATED)["generation"]


def load(engine: LocalEngine, stop: threading.Event) -> None:
    body = json.dumps(
        {"model": ENGINE_RECIPE, "prompt": "Once upon a time", "max_tokens": 64, "temperature": 0, "stream": True}
    ).encode()
    while not stop.is_set():
        request = urllib.request.Request(
            engine.base_url + "/v1/completions", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=300) as response:
            for _ in response:
                pass


def window(
    engine: LocalEngine, seconds: float, streams_n: int, probe: list[str] | None, period: float, python: Path
) -> float:
    """Load tokens per second over one window; `probe` (a command) runs at its start and every `period`."""
    stop = threading.Event()
    streams = [threading.Thread(target=load, args=(engine, stop)) for _ in range(streams_n)]
    for stream in streams:
        stream.start()
    time.sleep(3)  # the streams reach their steady state before the window opens
    start_tokens, start = generated(engine), time.monotonic()
    probes = 0
    next_probe = start
    with tempfile.TemporaryDirectory() as tmp:
        while (now := time.monotonic()) < start + seconds:
            if probe is not None and now >= next_probe:
                values = {"--port": str(engine.port), "--model": ENGINE_RECIPE, "--state-file": f"{tmp}/liveness"}
                result = run_rendered(probe, python, values, timeout=300)
                if result.returncode != 0:
                    raise SystemExit(f"the probe failed under load: {result.stdout}{result.stderr}")
                PROBE_SECONDS.append(float(result.stdout.split(" tokens in ", 1)[1].split(" s", 1)[0]))
                probes += 1
                next_probe += period
            time.sleep(0.05)
    tokens = generated(engine) - start_tokens - probes * LIVE_TOKENS
    elapsed = time.monotonic() - start
    stop.set()
    for stream in streams:
        stream.join()
    return float(tokens) / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--window", type=float, default=60.0)
    parser.add_argument("--streams", type=int, default=4)
    parser.add_argument("--period", type=float, help="seconds between probes (default: the rendered period)")
    parser.add_argument("--stress-period", type=float, default=5.0)
    args = parser.parse_args()
    python = engine_python()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        pod = render_engines(folder / "render", sglang=False)["qwen3-5-0"]
        probe = probe_commands(pod)["live"]
        period = args.period or float(pod["containers"][0]["livenessProbe"]["periodSeconds"])
        recipe = get_recipe(ENGINE_RECIPE)
        gpu = load_gpu_catalog().get("h100-sxm")
        command = engine_command(ServingArgs(recipe, gpu=gpu, tensor_parallel_size=min(recipe.tensor_parallel_sizes)))
        engine = start_engine(
            build_tiny_model(folder / "model"),
            folder / "engine",
            engine_args=cpu_stand_in_args(command.args, served_name=recipe.id),
            env=cpu_stand_in_env(command.env),
            python=python,
        )
        try:
            engine.wait_healthy(600)
            rows: dict[str, list[float]] = {"without": [], "with": [], "stress without": [], "stress with": []}
            for run in range(args.runs):
                half = args.window / 2
                pairs = [
                    ("without", args.window, None, period),
                    ("with", args.window, probe, period),
                    ("stress without", half, None, args.stress_period),
                    ("stress with", half, probe, args.stress_period),
                ]
                if run % 2:  # every other run the other order: a drift within a run cancels out
                    pairs = [pairs[1], pairs[0], pairs[3], pairs[2]]
                for key, seconds, command, every in pairs:
                    rows[key].append(window(engine, seconds, args.streams, command, every, python))
                order = " / ".join(key for key, *_ in pairs)
                print(f"run {run + 1} ({order}): " + ", ".join(f"{k} {v[-1]:.1f} tok/s" for k, v in rows.items()))
        finally:
            engine.stop()
    med = {key: statistics.median(values) for key, values in rows.items()}
    print(
        f"probe every {period:g} s (rendered): without {med['without']:.1f} tok/s, with {med['with']:.1f} tok/s, "
        f"ratio {med['with'] / med['without']:.3f}"
    )
    share = (LIVE_TOKENS + len(PROMPT.encode())) / (med["without"] * period)
    print(
        f"probe answer under load: median {statistics.median(PROBE_SECONDS):.2f} s, max {max(PROBE_SECONDS):.2f} s "
        f"({len(PROBE_SECONDS)} probes); a probe's tokens / the load's tokens in one period: {share:.2e}"
    )
    print(
        f"probe every {args.stress_period:g} s (stress): without {med['stress without']:.1f} tok/s, "
        f"with {med['stress with']:.1f} tok/s, ratio {med['stress with'] / med['stress without']:.3f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
