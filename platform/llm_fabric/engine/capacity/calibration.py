"""The speed model against published measurements: the cases, expected vs measured, and the fit.

`engine/calibration/measurements.yaml` holds the cases (model, GPUs, layout, traffic, one measured
figure and its source); `engine/calibration/fit.yaml` the constants fitted to them and the fit's
error. `python -m llm_fabric.engine.capacity.calibration fit` refits and rewrites fit.yaml; `... table`
prints the table docs/capacity.md shows. The fit minimises the squared log error
(expected / measured) by coordinate search over each constant in turn, a few rounds with a
shrinking step: five constants, twenty-odd cases, no solver needed.
"""

from __future__ import annotations

import argparse
import math
import statistics
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import Field

from llm_fabric.atomicio import write_atomic
from llm_fabric.basemodel import FabricModel
from llm_fabric.distribution import data_path
from llm_fabric.documents import dump_yaml, load_model
from llm_fabric.engine.capacity.model import RUNTIME_RESERVE_GB_PER_GPU, default_max_num_seqs, replica_memory
from llm_fabric.engine.capacity.model_shape import ModelShape
from llm_fabric.engine.capacity.parallelism import Layout, Strategy, dp_ep_layout, tp_layout
from llm_fabric.engine.capacity.speed import FitFile, LinkSpec, Speed, SpeedConstants, replica_speed
from llm_fabric.engine.recipes import Architecture, KvCacheDtype, get_recipe
from llm_fabric.errors import ConfigError, Problem
from llm_fabric.hardware.catalog import load_gpu_catalog

Metric = Literal["output_tokens_per_s_total", "output_tokens_per_s_per_user", "itl_ms", "ttft_ms"]
UTILIZATION = 0.9  # the engines' default memory fraction (vLLM gpu_memory_utilization, TRT-LLM kv fraction)
ROUNDS = 8


class CalibrationModel(FabricModel):
    source: str
    architecture: Architecture


class Case(FabricModel):
    id: str
    model: str = Field(description="a model of this file's `models`, else a recipe id")
    quantization: str
    weights_gb: float = Field(gt=0)
    kv_cache_dtype: KvCacheDtype = "auto"
    gpu: str
    strategy: Strategy = "tp"
    tp: int = Field(1, ge=1)
    dp: int = Field(1, ge=1)
    input_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=1)
    users: int | Literal["max"]
    max_num_seqs: int | None = Field(None, ge=1)
    engine: str
    source: str = Field(description="a key of this file's `sources`")
    metric: Metric
    measured: float = Field(gt=0)
    derived: str = ""


class MeasurementsFile(FabricModel):
    version: Literal[1] = 1
    models: dict[str, CalibrationModel]
    sources: dict[str, str]
    cases: list[Case] = Field(min_length=1)


@cache
def measurements(path: Path | None = None) -> MeasurementsFile:
    path = path or data_path("engine", "calibration", "measurements.yaml")
    doc = load_model(path, MeasurementsFile)
    problems = [
        Problem(
            f"case `{c.id}` cites unknown source `{c.source}`",
            file=path,
            field=f"cases/{c.id}/source",
            hint=f"one of {', '.join(doc.sources)}",
        )
        for c in doc.cases
        if c.source not in doc.sources
    ]
    if problems:
        raise ConfigError(problems)
    return doc


def _architecture(doc: MeasurementsFile, name: str) -> Architecture:
    if name in doc.models:
        return doc.models[name].architecture
    return get_recipe(name).architecture


@dataclass(frozen=True)
class Evaluated:
    case: Case
    batch: int
    expected: Speed
    ceiling: Speed

    @property
    def value(self) -> float:
        return float(getattr(self.expected, self.case.metric))

    @property
    def ceiling_value(self) -> float:
        return float(getattr(self.ceiling, self.case.metric))

    @property
    def ratio(self) -> float:
        """measured / expected, as a factor on a throughput (latencies inverted, so > 1 always means faster)."""
        if self.case.metric in ("itl_ms", "ttft_ms"):
            return self.value / self.case.measured
        return self.case.measured / self.value

    @property
    def error(self) -> float:
        return (self.value - self.case.measured) / self.case.measured


def case_layout(case: Case) -> Layout:
    if case.strategy == "dp-ep":
        return dp_ep_layout(case.dp, 8)
    return tp_layout(case.tp, 8)


def evaluate(case: Case, consts: SpeedConstants, doc: MeasurementsFile | None = None) -> Evaluated:
    doc = doc or measurements()
    gpu = load_gpu_catalog().get(case.gpu)
    shape = ModelShape(_architecture(doc, case.model), case.weights_gb, case.quantization, case.kv_cache_dtype)
    layout = case_layout(case)
    batch = case.users if isinstance(case.users, int) else _admitted(case, shape, layout)
    speed = {
        kind: replica_speed(
            shape, gpu, layout, input_tokens=case.input_tokens, output_tokens=case.output_tokens, batch=batch, consts=c
        )
        for kind, c in (("expected", consts), ("ceiling", None))
    }
    return Evaluated(case, batch, speed["expected"], speed["ceiling"])


def _admitted(case: Case, shape: ModelShape, layout: Layout) -> int:
    gpu = load_gpu_catalog().get(case.gpu)
    seqs = case.max_num_seqs or default_max_num_seqs(gpu)
    memory = replica_memory(
        shape, gpu, layout, case.input_tokens + case.output_tokens, UTILIZATION, RUNTIME_RESERVE_GB_PER_GPU, seqs
    )
    return max(1, min(memory.sessions, memory.max_num_seqs))


def evaluate_all(consts: SpeedConstants) -> list[Evaluated]:
    doc = measurements()
    return [evaluate(case, consts, doc) for case in doc.cases]


def _loss(consts: SpeedConstants) -> float:
    return sum(math.log(e.ratio) ** 2 for e in evaluate_all(consts))


_FITTED = (
    "bandwidth_efficiency",
    "compute_efficiency",
    "prefill_efficiency",
    "layer_overhead_us",
    "nvswitch_us",
    "expert_parallel_efficiency",
)


def _with(consts: SpeedConstants, name: str, value: float) -> SpeedConstants:
    if name == "nvswitch_us":
        links = dict(consts.links)
        for kind in ("nvswitch", "nvlink", "xgmi"):
            links[kind] = links[kind].model_copy(update={"latency_us": value})
        return consts.model_copy(update={"links": links})
    return consts.model_copy(update={name: value})


def _get(consts: SpeedConstants, name: str) -> float:
    return consts.links["nvswitch"].latency_us if name == "nvswitch_us" else float(getattr(consts, name))


def _bounded(name: str, value: float) -> float:
    if name.endswith("efficiency"):
        return min(1.0, max(0.02, value))
    return max(0.0, value)


def fit(start: SpeedConstants) -> SpeedConstants:
    """Coordinate search: each constant in turn moves by a factor while the loss drops; the factor shrinks."""
    consts, best = start, _loss(start)
    factor = 1.5
    for _ in range(ROUNDS):
        for name in _FITTED:
            for direction in (factor, 1.0 / factor):
                while True:
                    value = _bounded(name, max(_get(consts, name), 0.1) * direction)
                    trial = _with(consts, name, value)
                    loss = _loss(trial)
                    if loss >= best - 1e-12:
                        break
                    consts, best = trial, loss
        factor = 1.0 + (factor - 1.0) / 2
    return with_error(consts)


def _rounded(consts: SpeedConstants) -> SpeedConstants:
    """Four significant digits: the fit is not more precise than that, and fit.yaml stays readable."""
    for name in _FITTED:
        value = _get(consts, name)
        consts = _with(consts, name, float(f"{value:.4g}"))
    return consts


def with_error(consts: SpeedConstants) -> SpeedConstants:
    consts = _rounded(consts)
    rows = evaluate_all(consts)
    ratios = sorted(e.ratio for e in rows)
    errors = [abs(e.error) for e in rows]
    band = (_percentile(ratios, 0.1), _percentile(ratios, 0.9))
    return consts.model_copy(
        update={
            "error_band": (round(min(band[0], 1.0), 3), round(max(band[1], 1.0), 3)),
            "median_error": round(statistics.median(errors), 3),
            "worst_error": round(max(errors), 3),
            "cases": len(rows),
        }
    )


def _percentile(values: list[float], q: float) -> float:
    pos = q * (len(values) - 1)
    low = math.floor(pos)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (pos - low)


def starting_point() -> SpeedConstants:
    links = {
        "nvswitch": LinkSpec(latency_us=10, bandwidth_gbs=450),
        "nvlink": LinkSpec(latency_us=10, bandwidth_gbs=300),
        "xgmi": LinkSpec(latency_us=10, bandwidth_gbs=300),
        "pcie": LinkSpec(latency_us=25, bandwidth_gbs=25),
        "rdma": LinkSpec(latency_us=30, bandwidth_gbs=45),
    }
    return SpeedConstants(
        bandwidth_efficiency=0.8,
        compute_efficiency=0.5,
        prefill_efficiency=0.5,
        layer_overhead_us=20,
        expert_parallel_efficiency=0.7,
        links=links,
        error_band=(1.0, 1.0),
        median_error=0.0,
        worst_error=0.0,
        cases=1,
    )


def table(consts: SpeedConstants) -> str:
    """The markdown table of docs/capacity.md: every case, expected vs measured."""
    doc = measurements()
    lines = [
        "| case | engine | GPUs | layout | ISL/OSL | users (batch) | metric | measured | ceiling | expected | error |",
        "|---|---|---|---|---|---|---|---:|---:|---:|---:|",
    ]
    for e in evaluate_all(consts):
        c = e.case
        layout = case_layout(c)
        users = f"{c.users}" if isinstance(c.users, int) else f"max ({e.batch})"
        lines.append(
            f"| {c.id} | {c.engine} | {layout.gpus} x {c.gpu} | {layout.describe()} | "
            f"{c.input_tokens}/{c.output_tokens} | {users} | {c.metric} | {c.measured:,.1f} | "
            f"{e.ceiling_value:,.1f} | {e.value:,.1f} | {e.error:+.0%} |"
        )
    lines.append("")
    lines += [f"- `{key}`: {text}" for key, text in doc.sources.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m llm_fabric.engine.capacity.calibration")
    parser.add_argument("action", choices=["fit", "table"])
    parser.add_argument("--from-scratch", action="store_true", help="start the fit from the textbook guesses")
    args = parser.parse_args(argv)
    if args.action == "fit":
        path = data_path("engine", "calibration", "fit.yaml")
        start = starting_point() if args.from_scratch or not path.exists() else load_model(path, FitFile).constants
        consts = fit(start)
        header = (
            "# Written by `python -m llm_fabric.engine.capacity.calibration fit` from measurements.yaml;"
            " do not edit by hand.\n"
            "# error_band: measured/expected, 10th-90th percentile; errors: |expected - measured| / measured.\n"
        )
        write_atomic(path, header + dump_yaml(FitFile(constants=consts).model_dump(mode="json")))
        print(
            f"loss {_loss(consts):.4f}; median error {consts.median_error:.1%}, worst {consts.worst_error:.1%}, "
            f"band {consts.error_band}"
        )
    else:
        from llm_fabric.engine.capacity.speed import fitted_constants

        print(table(fitted_constants()))


if __name__ == "__main__":
    main()
