"""What the canary costs an engine: tokens per run and per hour, from the engine's own counters.

Starts the real vLLM (CPU) with the tiny model from the reference site's plan (qwen3-5, context 1024),
runs `fabric canary`'s core `--runs` times and reads vLLM's `prompt_tokens_total` and
`generation_tokens_total` before and after. The CPU stand-in serves without the recipe's tool parser,
so the `tool` prompt is left out (`--prompt capital --prompt count`); the tiny model's tokenizer spends
one token per byte, which a real tokenizer divides by about four for prompts (docs/canary.md).

    .venv/bin/python bench/canary.py [--runs 5] [--every 60]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import tempfile
import time
import urllib.request
from pathlib import Path

from llm_fabric.cli.main import main
from llm_fabric.engine.local.server import cpu_stand_in_args, cpu_stand_in_env, start_engine
from llm_fabric.engine.local.tiny_model import build_tiny_model
from llm_fabric.init import init_site
from llm_fabric.live.canary import run_canary
from llm_fabric.plan.document import load_plan

PROMPTS = ["capital", "count"]


def counters(url: str) -> tuple[float, float]:
    with urllib.request.urlopen(url + "/metrics", timeout=30) as response:
        text = response.read().decode()

    def total(name: str) -> float:
        return sum(float(v) for v in re.findall(rf"^vllm:{name}_total{{[^}}]*}} (\S+)$", text, re.M))

    return total("prompt_tokens"), total("generation_tokens")


def main_bench() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--every", type=float, default=60.0, help="the prober's seconds between runs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="canary-bench-") as scratch:
        root = Path(scratch)
        repo = init_site(root / "site", "cerit-sc").root
        deployment = repo / "deployments" / "qwen3-5.yaml"
        deployment.write_text(re.sub(r"max_model_len: \d+", "max_model_len: 1024", deployment.read_text()))
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["plan", "-C", str(repo), "-o", str(root / "plan.json"), "--json"]) == 0
        plan = load_plan(root / "plan.json")
        replica = plan.replicas_of("qwen3-5")[0]
        checkpoint = replica.engine_args[0]
        (root / "run" / checkpoint).parent.mkdir(parents=True)
        (root / "run" / checkpoint).symlink_to(build_tiny_model(root / "model"))
        engine = start_engine(
            checkpoint,
            root / "run",
            engine_args=cpu_stand_in_args(replica.engine_args, served_name="qwen3-5", max_model_len=1024),
            env=cpu_stand_in_env(replica.engine_env),
        )
        try:
            engine.wait_healthy(600)
            before = counters(engine.base_url)
            started = time.perf_counter()
            for _ in range(args.runs):
                run_canary(plan, {("qwen3-5", 0): engine.base_url}, {}, only=PROMPTS)
            seconds = (time.perf_counter() - started) / args.runs
            after = counters(engine.base_url)
        finally:
            engine.stop()
    prompt, answer = ((a - b) / args.runs for a, b in zip(after, before, strict=True))
    per_hour = 3600 / args.every
    print(
        f"prompts {', '.join(PROMPTS)}: {prompt:.0f} prompt + {answer:.0f} answer tokens a run, {seconds:.2f} s a run"
    )
    print(f"at --every {args.every:g}: {prompt * per_hour:.0f} prompt + {answer * per_hour:.0f} answer tokens an hour")


if __name__ == "__main__":
    main_bench()
