"""`fabric models`, `fabric capacity`, `fabric engine-args`: the recipes, their capacity, their engine command."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.table import Table

from llm_fabric import wording
from llm_fabric.cli.options import json_option
from llm_fabric.cli.output import FabricConsole, console, print_json

if TYPE_CHECKING:
    from llm_fabric.engine.capacity.model import CapacityEstimate
    from llm_fabric.engine.queries import OptionError

# The engine's modules load recipes and the GPU catalog: imported inside the commands, so that other
# `fabric` commands do not pay for them. llm_fabric.engine.capacity.model.DEFAULT_CONTEXT_TOKENS, spelled out
# for the same reason (tests/cli/test_startup.py checks that the two agree).
DEFAULT_CONTEXT_TOKENS = 8192
# the names of llm_fabric.engine.backends.BACKENDS, spelled out for the same reason (checked there too)
ENGINE_NAMES = ["vllm", "sglang"]

_ROWS = [
    ("weights_gb", "weights (GB)"),
    ("kv_bytes_per_token", "KV bytes per token"),
    ("kv_pool_gb", "KV pool (GB, all GPUs)"),
    ("kv_sessions", "sessions the KV pool holds"),
    ("max_num_seqs", "max-num-seqs per replica (per DP rank)"),
    ("max_concurrency", "max concurrency at context"),
    ("replicas_needed", "replicas needed for users"),
    ("decode_tokens_per_s_single", "ceiling: decode tok/s, one stream"),
    ("decode_tokens_per_s_per_user", "ceiling: decode tok/s per user"),
    ("decode_tokens_per_s_total", "ceiling: decode tok/s total"),
    ("prefill_seconds", "prefill of one context at 50% of peak (s)"),
]
_SPEED_ROWS = [
    ("output_tokens_per_s_total", "output tok/s total"),
    ("output_tokens_per_s_per_user", "output tok/s per user"),
    ("itl_ms", "inter-token latency (ms)"),
    ("ttft_ms", "time to first token (ms)"),
]


_max_num_seqs_option = click.option(
    "--max-num-seqs",
    type=int,
    default=None,
    help="Sequences a replica (each DP rank) runs at once (default: vLLM's for the GPU, 1024 on H100 and larger).",
)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if value < 10 else f"{value:,.1f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def _print_estimate(est: CapacityEstimate) -> None:
    nodes = f" on {est.nodes} nodes of {est.gpus_per_node}" if est.nodes > 1 else ""
    title = (
        f"{est.recipe} ({est.quantization}, KV {est.kv_cache_dtype}) on {est.count} x {est.gpu}: "
        f"{est.layout.describe()} = {wording.count(est.replicas, 'replica')} "
        f"of {wording.count(est.replica_gpus, 'GPU')}{nodes}; "
        f"context {est.context_tokens:,}; traffic {est.input_tokens:,} in / {est.output_tokens:,} out, "
        f"{est.users:,} user(s){' (max)' if est.users_max else ''}"
    )
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column("figure")
    table.add_column("value", justify="right")
    data = est.as_dict()
    for key, label in _ROWS:
        table.add_row(label, _fmt(data[key]))
    if est.ceiling is not None and est.expected is not None and est.fits:
        ceiling, expected = est.ceiling.as_dict(), est.expected.as_dict()
        low, high = est.expected.error_band or (1.0, 1.0)
        for key, label in _SPEED_ROWS:
            table.add_row(f"ceiling: {label}", _fmt(ceiling[key]))
        for key, label in _SPEED_ROWS:
            table.add_row(f"expected: {label}", _fmt(expected[key]))
        table.add_row("expected: error band (x measured/expected)", f"{low:.2f} - {high:.2f}")
    if est.latency_target:
        at = est.concurrency_at_target
        table.add_row(f"sessions per replica at {est.latency_target.describe()}", _fmt(at) if at else "none")
        table.add_row("replicas needed at the target", _fmt(est.replicas_at_target or 0))
        if est.target_reason:
            table.add_row("target", est.target_reason)
    table.add_row("fits", "[green]yes[/]" if est.fits else f"[red]no[/]: {est.reason}")
    console.print(table)
    for other in est.strategies:
        mark = "chosen" if other.strategy == est.strategy else "also computed"
        verdict = (
            f"{other.max_concurrency:,} sessions, {other.replicas_needed:,} replica(s) needed, expected "
            f"{other.expected_output_tokens_per_s_total:,.0f} output tok/s"
            if other.fits
            else f"does not fit: {other.reason}"
        )
        console.print(f"{mark}: {other.strategy} ({other.layout}): {verdict}", markup=False)
    console.print(f"kernel: {est.kernel}", markup=False)


@click.command("capacity")
@click.option("--model", "model", metavar="ID", help="Recipe id (engine/models/ID.yaml).")
@click.option("--gpu", "gpu_id", metavar="GPU_ID", help="GPU catalog id, e.g. h200.")
@click.option("--count", type=int, help="Number of GPUs (more than one node holds: a multi-node replica).")
@click.option("--gpus-per-node", type=int, default=None, help="GPUs in one node (default: the catalog's, 8 mostly).")
@click.option("--tp", type=int, default=None, help="Tensor-parallel size (default: the one holding most sessions).")
@click.option(
    "--parallelism",
    type=click.Choice(["tp", "dp-ep", "auto"]),
    default="auto",
    show_default=True,
    help="tp: tensor parallel (pipeline stages across nodes); dp-ep: data-parallel attention + expert "
    "parallelism (MLA MoE recipes); auto: compute each the recipe supports, keep the best.",
)
@click.option("--quantization", default=None, help="One the recipe offers (default: the recipe's).")
@click.option("--kv-dtype", default=None, help="KV-cache dtype (auto, fp8, ...).")
@click.option(
    "--context",
    type=int,
    default=None,
    help=f"Tokens a session holds in the KV cache (default: input + output tokens, else {DEFAULT_CONTEXT_TOKENS}).",
)
@click.option("--input-tokens", type=int, default=None, help="Prompt tokens per request (default: the context).")
@click.option("--output-tokens", type=int, default=None, help="Output tokens per request (default: 1024).")
@click.option("--users", default="1", show_default=True, help="Concurrent sessions, or `max` (as many as admitted).")
@click.option("--itl-ms", type=float, default=None, help="Latency target: expected inter-token latency at most this.")
@click.option("--ttft-ms", type=float, default=None, help="Latency target: expected time to first token at most this.")
@click.option("--gpu-memory-utilization", type=float, default=0.9, show_default=True)
@_max_num_seqs_option
@click.option(
    "-C",
    "--site-repo",
    "site_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help="Instead: the capacity of every deployment of this site repo.",
)
@click.option("--site", "legacy_site_dir", type=click.Path(file_okay=False, path_type=Path), default=None, hidden=True)
@click.option(
    "--engine",
    type=click.Choice(ENGINE_NAMES),
    default="vllm",
    show_default=True,
    help="sglang: SGLang's memory semantics (--mem-fraction-static, DP attention).",
)
@click.option("--attn-dp", type=int, default=1, show_default=True, help="SGLang: attention data-parallel size.")
@json_option("Print one JSON object (a list with --site).")
def capacity_command(site_dir: Path | None, legacy_site_dir: Path | None, as_json: bool, **asked: Any) -> int:
    """Whether a model fits a set of GPUs, how many sessions it carries and how fast.

    Speeds come twice: the ceiling (roofline: datasheet bandwidth and FLOPs, nothing else) and the
    expected figure (calibrated on published measurements, with its error band; docs/capacity.md).

    \b
    Examples:
      fabric capacity --model llama-3.3-70b --gpu h200 --count 1 --context 3000 --users 48
      fabric capacity --model deepseek-v3 --gpu b200 --count 8 --context 100000 --users 300 --json
      fabric capacity --model deepseek-v3 --gpu b200 --count 8 --input-tokens 1000 --output-tokens 1000 --users max
      fabric capacity --model llama-3.3-70b --gpu h200 --count 8 --input-tokens 2000 --output-tokens 500 \\
          --users 500 --itl-ms 50
      fabric capacity --model deepseek-v3 --gpu h100-sxm --count 16
      fabric capacity --model deepseek-v3.2 --gpu b200 --count 8 --tp 8 --engine sglang --attn-dp 8
      fabric capacity -C ./site
    """
    if legacy_site_dir is not None:
        # `--site` names a site id everywhere else (enroll, render); here it was the repo folder
        click.echo(
            f"note: `capacity --site DIR` is deprecated (next release removes it); use `-C {legacy_site_dir}`", err=True
        )
        site_dir = site_dir or legacy_site_dir
    if site_dir is not None:
        return _site(site_dir, as_json)
    if not (asked["model"] and asked["gpu_id"] and asked["count"]):
        raise click.UsageError("--model, --gpu and --count are required (or -C DIR for a site repo)")
    from llm_fabric.engine.queries import CapacityRequest, OptionError, capacity_report

    try:
        report = capacity_report(CapacityRequest(**asked))
    except OptionError as refused:
        raise _click_error(refused) from None
    if as_json:
        print_json(report.as_dict())
    else:
        _print_estimate(report.estimate)
        if report.note:
            console.print(report.note, markup=False)
    return 0 if report.estimate.fits else 3


def _site(site_dir: Path, as_json: bool) -> int:
    from llm_fabric.engine.capacity.site import site_capacity
    from llm_fabric.site.loader import load_site

    # plain load_site: an estimate printed for people (GPU models of the nodes); nothing reaches a cluster
    rows = site_capacity(load_site(site_dir))
    if as_json:
        print_json([r.as_dict() for r in rows])
        return 0 if all(r.estimate.fits for r in rows) else 3
    table = Table(title=f"capacity of the deployments of {site_dir}", title_justify="left")
    columns = (
        "deployment",
        "GPUs",
        "quant",
        "context",
        "weights GB",
        "KV GB",
        "sessions",
        "tok/s 1 ceiling",
        "tok/s expected",
        "fits",
    )
    for col in columns:
        table.add_column(col, justify="left" if col in ("deployment", "quant", "fits") else "right", no_wrap=True)
    for r in rows:
        e = r.estimate
        # when --max-num-seqs is the limit, the KV pool's own figure follows in brackets
        sessions = f"{e.max_concurrency:,}" + (f" (KV {e.kv_sessions:,})" if e.kv_sessions > e.max_concurrency else "")
        table.add_row(
            r.deployment,
            f"{e.count}x{e.gpu}",
            e.quantization,
            f"{e.context_tokens:,}",
            _fmt(e.weights_gb),
            _fmt(e.kv_pool_gb),
            sessions,
            _fmt(e.decode_tokens_per_s_single),
            _fmt(e.expected.output_tokens_per_s_total) if e.expected and e.fits else "-",
            "yes" if e.fits else f"no: {e.reason}",
        )
    # wider than a pipe's default 80 columns: the figures must not be cut
    FabricConsole(width=max(console.width, 120), highlight=False).print(table)
    return 0 if all(r.estimate.fits for r in rows) else 3


@click.command("engine-args")
@click.option("--model", "model", required=True, metavar="ID", help="Recipe id.")
@click.option("--gpu", "gpu_id", required=True, metavar="GPU_ID", help="GPU catalog id.")
@click.option("--count", type=int, required=True, help="GPUs of the node given to the replica.")
@click.option("--tp", type=int, default=None, help="Tensor-parallel size (default: as `fabric capacity` picks).")
@click.option(
    "--parallelism",
    type=click.Choice(["tp", "dp-ep", "auto"]),
    default="auto",
    show_default=True,
    help="As `fabric capacity`: the layout's flags (--data-parallel-size/--enable-expert-parallel for dp-ep).",
)
@click.option("--node-rank", type=int, default=0, show_default=True, help="Node of a multi-node replica (0: leader).")
@click.option("--quantization", default=None)
@click.option("--kv-dtype", default=None)
@click.option("--max-model-len", type=int, default=None)
@click.option("--gpu-memory-utilization", type=float, default=0.9, show_default=True)
@_max_num_seqs_option
@click.option("--priority", is_flag=True, help="Priority scheduling (dedicated allocations).")
@click.option(
    "--engine",
    type=click.Choice(ENGINE_NAMES),
    default=None,
    help="The serving engine (default: the recipe's, vLLM unless it says).",
)
@click.option("--attn-dp", type=int, default=1, show_default=True, help="SGLang: attention data-parallel size.")
@click.option("--ep", type=int, default=1, show_default=True, help="SGLang: expert-parallel size.")
@json_option("Print {args, env, request_defaults, argv}.")
def engine_args_command(as_json: bool, **asked: Any) -> None:
    """Print the engine command and environment for a recipe on a GPU model.

    `vllm serve ...` or, with `--engine sglang`, `python3 -m sglang.launch_server ...`.

    \b
    Examples:
      fabric engine-args --model kimi-k2.6 --gpu b300 --count 4
      fabric engine-args --model gpt-oss-120b --gpu h200 --count 1 --priority --json
      fabric engine-args --model deepseek-v3 --gpu b200 --count 8 --parallelism dp-ep
      fabric engine-args --model deepseek-v3 --gpu h100-sxm --count 16 --node-rank 1   # the second node
      fabric engine-args --model deepseek-v3.2 --gpu b200 --count 8 --engine sglang --attn-dp 8 --ep 8
    """
    from llm_fabric.engine.queries import EngineArgsRequest, OptionError, engine_args

    try:
        args = engine_args(EngineArgsRequest(**asked))
    except OptionError as refused:
        raise _click_error(refused) from None
    if as_json:
        print_json(args.as_dict())
        return
    for line in args.lines():
        click.echo(line)


def _click_error(refused: OptionError) -> click.UsageError:
    """An option the engine refused, shown as click shows its own: the usage, then the error (exit 2)."""
    return click.BadParameter(refused.message) if refused.value else click.UsageError(refused.message)


@click.command("models")
@json_option("Rows as JSON.")
def models_command(as_json: bool) -> None:
    """The model recipes a site may deploy: the ids a deployment's `recipe:` takes.

    `small` recipes may also be placed on limited-tier nodes; the others need full-tier nodes.

    \b
    Examples:
      fabric models
      fabric models --json
    """
    from llm_fabric.engine.recipes import load_recipes

    recipes = sorted(load_recipes().values(), key=lambda r: r.id)
    if as_json:
        print_json(
            [
                {"id": r.id, "name": r.display_name, "params_b": r.architecture.total_params_b,
                 "active_params_b": r.architecture.active_params_b, "max_context": r.architecture.max_context,
                 "quantizations": sorted(r.quantizations), "default_quantization": r.default_quantization,
                 "small": r.small, "engine": r.engine}
                for r in recipes
            ]
        )  # fmt: skip
        return
    table = Table("id", "model", "params (B)", "active (B)", "context", "quantizations", "tiers", "engine")
    for r in recipes:
        quantizations = ", ".join(f"{q}*" if q == r.default_quantization else q for q in sorted(r.quantizations))
        a = r.architecture
        table.add_row(
            r.id,
            r.display_name,
            f"{a.total_params_b:g}",
            f"{a.active_params_b:g}",
            f"{a.max_context:,}",
            quantizations,
            "full, limited" if r.small else "full",
            r.engine,
        )
    console.print(table)
    console.print("* the default quantization", markup=False)


commands = [models_command, capacity_command, engine_args_command]
