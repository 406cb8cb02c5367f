"""Time to evaluate the capacity model over the whole catalog: every recipe x GPU x count 1..8 and 16.

Each evaluation is what `fabric capacity` does without --tp: `--parallelism auto` (every strategy the
recipe supports: TP at each allowed size, and DP attention + EP at each rank count, for MLA MoE
recipes; 16 GPUs add the multi-node layouts where no node holds the model), a 32K context, 64 users,
the ceiling and the expected speed, and an ITL target of 50 ms (the bisection over the batch for the
sessions that meet it). The target is interactive use by the planner: the full sweep well under one
second. Baseline: one evaluation at a fixed TP, no target.

    .venv/bin/python bench/capacity.py [--runs 7]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

from llm_fabric.engine.capacity.model import LatencyTarget, estimate
from llm_fabric.engine.recipes import load_recipes
from llm_fabric.hardware.catalog import load_gpu_catalog

TARGET_S = 1.0
COUNTS = (*range(1, 9), 16)
TARGET = LatencyTarget(itl_ms=50)


def sweep() -> int:
    recipes = load_recipes()
    gpus = load_gpu_catalog().all()
    n = 0
    for recipe in recipes.values():
        for gpu in gpus:
            for count in COUNTS:
                if min(recipe.tensor_parallel_sizes) > count:
                    continue
                estimate(recipe, gpu, count, context_tokens=32_768, users=64, latency_target=TARGET)
                n += 1
    return n


def one() -> None:
    recipe = load_recipes()["deepseek-v3"]
    estimate(
        recipe,
        load_gpu_catalog().get("b200"),
        8,
        tensor_parallel_size=8,
        parallelism="tp",
        context_tokens=32_768,
        users=64,
    )


def timed(fn: object, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    sweep()  # warm the caches (catalog, recipes, kernel matrix are loaded once per process)
    count = sweep()
    full = statistics.median(timed(sweep, runs))
    single = statistics.median(timed(one, runs * 20))
    print(f"machine: {platform.machine()} {platform.processor() or ''} python {platform.python_version()}")
    print(f"evaluations per sweep: {count} (recipes x GPUs x counts 1..8 and 16, parallelism auto, ITL target)")
    print(f"sweep median of {runs}: {full * 1000:.1f} ms ({full / count * 1e6:.1f} us per evaluation)")
    print(f"baseline, one fixed-TP evaluation, median of {runs * 20}: {single * 1e6:.1f} us")
    verdict = "met" if full < TARGET_S else "MISSED"
    print(f"ratio sweep / baseline: {full / single:.0f}x; target < {TARGET_S:.0f} s: {verdict}")


if __name__ == "__main__":
    main()
