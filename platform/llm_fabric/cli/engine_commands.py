"""`fabric capacity` and `fabric engine-args`: the capacity model and the vLLM command of a recipe."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.table import Table

from llm_fabric.cli.output import FabricConsole, console, print_json

if TYPE_CHECKING:
    from llm_fabric.engine.capacity import CapacityEstimate

# The engine's modules load recipes and the GPU catalog: imported inside the commands, so that other
# `fabric` commands do not pay for them. llm_fabric.engine.capacity.DEFAULT_CONTEXT_TOKENS, spelled out
# for the same reason (tests/cli/test_startup.py checks that the two agree).
DEFAULT_CONTEXT_TOKENS = 8192

_ROWS = [
    ("weights_gb", "weights (GB)"),
    ("kv_bytes_per_token", "KV bytes per token"),
    ("kv_pool_gb", "KV pool (GB, all GPUs)"),
    ("kv_sessions", "sessions the KV pool holds"),
    ("max_num_seqs", "max-num-seqs per replica"),
    ("max_concurrency", "max concurrency at context"),
    ("replicas_needed", "replicas needed for users"),
    ("decode_tokens_per_s_single", "decode tok/s, one stream"),
    ("decode_tokens_per_s_per_user", "decode tok/s per user"),
    ("decode_tokens_per_s_total", "decode tok/s total"),
    ("prefill_seconds", "prefill of one context (s)"),
]


_max_num_seqs_option = click.option(
    "--max-num-seqs",
    type=int,
    default=None,
    help="Sequences a replica runs at once (default: vLLM's for the GPU, 1024 on H100 and larger).",
)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if value < 10 else f"{value:,.1f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def _print_estimate(est: CapacityEstimate) -> None:
    title = (
        f"{est.recipe} ({est.quantization}, KV {est.kv_cache_dtype}) on {est.count} x {est.gpu}, "
        f"TP {est.tensor_parallel_size} = {est.replicas} replica(s); context {est.context_tokens:,}, "
        f"{est.users:,} user(s)"
    )
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column("figure")
    table.add_column("value", justify="right")
    data = est.as_dict()
    for key, label in _ROWS:
        table.add_row(label, _fmt(data[key]))
    table.add_row("fits", "[green]yes[/]" if est.fits else f"[red]no[/]: {est.reason}")
    console.print(table)
    console.print(f"kernel: {est.kernel}", markup=False)


@click.command("capacity")
@click.option("--model", "model", metavar="ID", help="Recipe id (engine/models/ID.yaml).")
@click.option("--gpu", "gpu_id", metavar="GPU_ID", help="GPU catalog id, e.g. h200.")
@click.option("--count", type=int, help="Number of GPUs.")
@click.option("--tp", type=int, default=None, help="Tensor-parallel size (default: the one holding most sessions).")
@click.option("--quantization", default=None, help="One the recipe offers (default: the recipe's).")
@click.option("--kv-dtype", default=None, help="KV-cache dtype (auto, fp8, ...).")
@click.option("--context", type=int, default=DEFAULT_CONTEXT_TOKENS, show_default=True, help="Tokens per session.")
@click.option("--users", type=int, default=1, show_default=True, help="Concurrent sessions.")
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
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (a list with --site).")
def capacity_command(
    model: str | None,
    gpu_id: str | None,
    count: int | None,
    tp: int | None,
    quantization: str | None,
    kv_dtype: str | None,
    context: int,
    users: int,
    gpu_memory_utilization: float,
    max_num_seqs: int | None,
    site_dir: Path | None,
    legacy_site_dir: Path | None,
    as_json: bool,
) -> int:
    """Whether a model fits a set of GPUs, how many sessions it carries and how fast.

    \b
    Examples:
      fabric capacity --model llama-3.3-70b --gpu h200 --count 1 --context 3000 --users 48
      fabric capacity --model deepseek-v3 --gpu b200 --count 8 --context 100000 --json
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
    if not (model and gpu_id and count):
        raise click.UsageError("--model, --gpu and --count are required (or -C DIR for a site repo)")
    from llm_fabric.engine.capacity import estimate
    from llm_fabric.engine.recipes import get_recipe
    from llm_fabric.hardware.catalog import load_gpu_catalog

    est = estimate(
        get_recipe(model),
        load_gpu_catalog().get(gpu_id),
        count,
        tensor_parallel_size=tp,
        quantization=quantization,
        kv_cache_dtype=kv_dtype,
        context_tokens=context,
        users=users,
        gpu_memory_utilization=gpu_memory_utilization,
        max_num_seqs=max_num_seqs,
    )
    if as_json:
        print_json(est.as_dict())
    else:
        _print_estimate(est)
    return 0 if est.fits else 3


def _site(site_dir: Path, as_json: bool) -> int:
    from llm_fabric.engine.site_capacity import site_capacity
    from llm_fabric.site.loader import load_site

    rows = site_capacity(load_site(site_dir))
    if as_json:
        print_json([r.as_dict() for r in rows])
        return 0 if all(r.estimate.fits for r in rows) else 3
    table = Table(title=f"capacity of the deployments of {site_dir}", title_justify="left")
    for col in ("deployment", "GPUs", "quant", "context", "weights GB", "KV GB", "sessions", "tok/s 1", "fits"):
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
@click.option("--quantization", default=None)
@click.option("--kv-dtype", default=None)
@click.option("--max-model-len", type=int, default=None)
@click.option("--gpu-memory-utilization", type=float, default=0.9, show_default=True)
@_max_num_seqs_option
@click.option("--priority", is_flag=True, help="Priority scheduling (dedicated allocations).")
@click.option("--json", "as_json", is_flag=True, help="Print {args, env, request_defaults, argv}.")
def engine_args_command(
    model: str,
    gpu_id: str,
    count: int,
    tp: int | None,
    quantization: str | None,
    kv_dtype: str | None,
    max_model_len: int | None,
    gpu_memory_utilization: float,
    max_num_seqs: int | None,
    priority: bool,
    as_json: bool,
) -> None:
    """Print the `vllm serve` command and environment for a recipe on a GPU model.

    \b
    Examples:
      fabric engine-args --model kimi-k2.6 --gpu b300 --count 4
      fabric engine-args --model gpt-oss-120b --gpu h200 --count 1 --priority --json
    """
    from llm_fabric.engine.args import engine_command
    from llm_fabric.engine.capacity import estimate
    from llm_fabric.engine.recipes import get_recipe
    from llm_fabric.hardware.catalog import load_gpu_catalog

    recipe = get_recipe(model)
    gpu = load_gpu_catalog().get(gpu_id)
    if tp is None:
        tp = estimate(
            recipe,
            gpu,
            count,
            quantization=quantization,
            kv_cache_dtype=kv_dtype,
            context_tokens=max_model_len or recipe.architecture.max_context,
            gpu_memory_utilization=gpu_memory_utilization,
        ).tensor_parallel_size
    cmd = engine_command(
        recipe,
        gpu=gpu,
        tensor_parallel_size=tp,
        quantization=quantization,
        kv_cache_dtype=kv_dtype,
        max_model_len=max_model_len,
        gpu_memory_utilization=gpu_memory_utilization,
        max_num_seqs=max_num_seqs,
        priority_scheduling=priority,
    )
    if as_json:
        print_json(cmd.as_dict())
        return
    for key, value in sorted(cmd.env.items()):
        click.echo(f"export {key}={shlex.quote(value)}")
    click.echo(" \\\n    ".join(_pairs(cmd.argv())))
    if cmd.request_defaults:
        click.echo(f"# request defaults for the gateway to inject: {cmd.request_defaults}")


def _pairs(argv: list[str]) -> list[str]:
    """`vllm serve MODEL` on the first line, then each flag with its value on a line of its own."""
    out: list[str] = [" ".join(shlex.quote(a) for a in argv[:3])]
    for item in argv[3:]:
        if out and not item.startswith("--") and out[-1].startswith("--") and " " not in out[-1]:
            out[-1] += " " + shlex.quote(item)
        else:
            out.append(shlex.quote(item))
    return out


commands = [capacity_command, engine_args_command]
