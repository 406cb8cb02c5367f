"""Time to build and render the stacks for 100 and 1,000 replicas (target: < 3 s for 100).

Replicas are spread over synthetic nodes (8 GPUs each, 1 replica per GPU pair) added to the
reference site; each run builds all three stacks and writes them to a fresh folder.
`--baseline` measures the writer as it was before batching: `write_atomic` (two fsyncs) per file and
PyYAML's stock CSafeDumper representer, on the same machine at the same time.

    .venv/bin/python bench/render.py [--runs 5] [--baseline] [--replicas 100 1000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import yaml
from tests.deploy.planfixture import CONTEXT, seed_fingerprint

from llm_fabric.atomicio import write_atomic
from llm_fabric.deploy import render
from llm_fabric.deploy.build import load_inputs
from llm_fabric.deploy.render import render_stacks
from llm_fabric.distribution import data_path
from llm_fabric.kube.options import StackOptions
from llm_fabric.plan.document import Plan, ReplicaPlacement, SolverReport
from llm_fabric.site.loader import load_site

REFERENCE = data_path("examples", "cerit-sc")


def synthetic(replicas: int) -> tuple[object, Plan]:
    site = load_site(REFERENCE)
    template = site.nodes["dgx-b200-01"]
    nodes = dict(site.nodes)
    placements = []
    for i in range(replicas):
        name = f"gpu-{i // 4:04d}"
        if name not in nodes:
            nodes[name] = template.model_copy(update={"name": name, "labels": {}})
        deployment = sorted(site.deployments)[i % len(site.deployments)]
        placements.append(
            ReplicaPlacement(
                deployment=deployment,
                index=i,
                node=name,
                site="brno",
                owner="cerit-sc",
                gpu_indices=[2 * (i % 4), 2 * (i % 4) + 1],
                gpu_model="b200",
                tensor_parallel_size=2,
                quantization="fp8",
                checkpoint="org/model",
                revision=None,
                served_model_name=deployment,
                context_length=CONTEXT,
                config_fingerprint=seed_fingerprint("org/model", "fp8"),
                engine_args=["org/model", "--tensor-parallel-size", "2"],
                data_classes=["public"],
            )
        )
    solver = SolverReport(
        status="trivial", objective=0, best_bound=0, gap=0, wall_seconds=0, node_classes=0, variables=0
    )
    # the engine replicas are what is measured: without the tenant gateway (which routes only to signed
    # nodes, and these copies are not), as the recorded baseline was
    config = site.config.model_copy(update={"gateway": None})
    return replace(site, nodes=nodes, config=config), Plan(federation="cerit-sc", replicas=placements, solver=solver)


class _PerFileWrites:
    """The writer before batching: every file synced and renamed on its own."""

    def __enter__(self) -> _PerFileWrites:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def write(self, path: Path, data: str, *, mode: int | None = None) -> None:
        # AtomicBatch's None is "the default mode"; write_atomic states its default itself
        if mode is None:
            write_atomic(path, data)
        else:
            write_atomic(path, data, mode=mode)


class _StockDumper(yaml.CSafeDumper):
    def ignore_aliases(self, data: object) -> bool:
        return True


def use_baseline() -> None:
    render.AtomicBatch = _PerFileWrites  # type: ignore[misc, assignment]
    render.dump_yaml = lambda data: yaml.dump(  # type: ignore[assignment]
        data, Dumper=_StockDumper, sort_keys=False, default_flow_style=False, width=1 << 16
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline", action="store_true", help="per-file fsync and the stock dumper")
    parser.add_argument("--replicas", type=int, nargs="+", default=[100, 1000], help="plan sizes to render")
    args = parser.parse_args()
    if args.baseline:
        use_baseline()
    for count in args.replicas:
        site, plan = synthetic(count)
        times = []
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory() as out:
                start = time.perf_counter()
                inputs = load_inputs(StackOptions(site_repo=REFERENCE, site="brno"), site=site, plan=plan)  # type: ignore[arg-type]
                result = render_stacks(inputs, Path(out))
                times.append(time.perf_counter() - start)
        median = statistics.median(times)
        print(
            f"{count:>5} replicas: {sum(result.objects.values())} objects, median {median:.3f} s "
            f"(min {min(times):.3f}, max {max(times):.3f}, {args.runs} runs), target 3 s for 100: "
            f"{'met' if count != 100 or median < 3 else 'MISSED'}"
        )


if __name__ == "__main__":
    main()
