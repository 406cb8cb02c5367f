"""`fabric engine tiny-model`, `run --local`, `burst`, `check-args`: a real vLLM on this machine, and
SGLang's argument parser read from its pinned wheel."""

from __future__ import annotations

import signal
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import click

from llm_fabric import wording
from llm_fabric.cli.engine_commands import ENGINE_NAMES
from llm_fabric.cli.output import console, print_json
from llm_fabric.engine.local.server import cpu_stand_in_args, cpu_stand_in_env, start_engine
from llm_fabric.engine.local.tiny_model import build_tiny_model
from llm_fabric.engine.process import LocalEngine
from llm_fabric.errors import PolicyRefusal, UsageError
from llm_fabric.loadtest.burst import plan_burst, send_burst, totals_of, write_records

# Recipes, the GPU catalog and the vLLM checks are imported inside the commands that use them: `fabric --help`
# and every `fabric engine` command import this module, and each should pay only for its own.


@click.group("engine")
def engine_group() -> None:
    """Run and check the vLLM engine locally.

    \b
    Examples:
      fabric engine tiny-model ./tiny
      fabric engine run --model qwen3.5 --local
      fabric engine burst --url http://127.0.0.1:8000 --model qwen3.5 --records requests.jsonl
      fabric engine check-args --json
    """


@engine_group.command("tiny-model")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random weights.")
def tiny_model_command(directory: Path, seed: int) -> None:
    """Write the tiny random-weight Llama test model (no hub needed) into DIRECTORY.

    \b
    Example:
      fabric engine tiny-model ./tiny && ls ./tiny
    """
    build_tiny_model(directory, seed=seed)
    files = sorted(p.name for p in directory.iterdir())
    console.print(f"tiny model in [bold]{directory}[/]: {', '.join(files)}")


@engine_group.command("run")
@click.option("--model", "recipe_id", required=True, metavar="ID", help="Recipe id, e.g. qwen3.5.")
@click.option("--local", is_flag=True, required=True, help="Run on this machine (the only mode so far).")
@click.option("--gpu", "gpu_id", default="h100-sxm", show_default=True, help="GPU whose engine args to start from.")
@click.option("--run-dir", type=click.Path(file_okay=False, path_type=Path), help="Logs and caches (default: temp).")
@click.option("--timeout", type=float, default=240, show_default=True, help="Seconds to wait for /health.")
@click.option("--smoke", is_flag=True, help="Send one request, print it, stop (a contributor's smoke test).")
@click.option("--port", type=click.IntRange(1, 65535), help="Port on 127.0.0.1 (default: a free one).")
def run_command(
    recipe_id: str, local: bool, gpu_id: str, run_dir: Path | None, timeout: float, smoke: bool, port: int | None
) -> None:
    """Start vLLM on 127.0.0.1 from a recipe's engine args, with the tiny model standing in on a CPU.

    The recipe's args for --gpu are adapted to the CPU (see docs/engine.md); the loop guard is loaded.
    Without --smoke it serves until Ctrl-C.

    \b
    Example:
      fabric engine run --model qwen3.5 --local --smoke
    """
    if not local:
        raise UsageError("only --local is supported", hint="add --local")
    from llm_fabric.engine.command import ServingArgs
    from llm_fabric.engine.recipes import get_recipe
    from llm_fabric.engine.vllm.command import engine_command
    from llm_fabric.hardware.catalog import load_gpu_catalog

    recipe = get_recipe(recipe_id)
    gpu = load_gpu_catalog().get(gpu_id)
    try:
        command = engine_command(ServingArgs(recipe, gpu, tensor_parallel_size=max(recipe.tensor_parallel_sizes)))
    except PolicyRefusal as exc:
        raise UsageError(
            f"{recipe.id} has no engine args on {gpu.id}: {exc.message}", hint="pick another --gpu"
        ) from exc
    folder = run_dir or Path(tempfile.mkdtemp(prefix=f"fabric-engine-{recipe.id}-"))
    model = build_tiny_model(folder / "tiny-model")
    args = cpu_stand_in_args(command.args, served_name=recipe.id)  # the loop guard comes with the recipe's args
    engine = start_engine(model, folder, engine_args=args, env=cpu_stand_in_env(command.env), port=port)
    console.print(f"vLLM pid {engine.pid} on {engine.base_url}; log {engine.log_path}")
    console.print("args: " + " ".join(args), markup=False)
    serve_until_stopped(engine, timeout, once=(lambda: _smoke(engine.base_url, recipe.id)) if smoke else None)


def serve_until_stopped(server: LocalEngine, timeout: float, once: Callable[[], None] | None = None) -> None:
    """Wait for health, then `once()` and stop, or serve until Ctrl-C/SIGTERM; the server is stopped either way."""
    # SIGTERM (a script stopping us) must stop the server too, during start-up as well: it runs in its own session
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        seconds = server.wait_healthy(timeout)
        console.print(f"[green]healthy[/] after {seconds:.0f} s: {server.base_url}")
        if once is not None:
            once()
            return
        while server.alive():
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        status = server.stop()
        console.print(f"stopped {server.label} (pid {server.pid}, exit {status})")


def _smoke(base_url: str, model: str) -> None:
    import json
    import urllib.request

    body = json.dumps({"model": model, "prompt": "Hello", "max_tokens": 16, "temperature": 0}).encode()
    request = urllib.request.Request(
        base_url + "/v1/completions", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        answer = json.loads(response.read())
    usage = answer["usage"]
    console.print(
        f"smoke request: {usage['prompt_tokens']} prompt + {usage['completion_tokens']} completion tokens, "
        f"finish {answer['choices'][0]['finish_reason']}"
    )


@engine_group.command("burst")
@click.option("--url", required=True, metavar="URL", help="The engine or the gateway, e.g. http://127.0.0.1:8000.")
@click.option("--model", "served_model", metavar="NAME", help="The served model name (default: --deployment).")
@click.option(
    "--deployment", metavar="NAME", help="Model name in the records, and the plan's deployment (default: --model)."
)
@click.option(
    "--plan",
    "plan_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Plan document: the prompt p50/p95 are its --deployment's.",
)
@click.option("--requests", "count", type=click.IntRange(1, 10_000), default=20, show_default=True)
@click.option("--sessions", type=click.IntRange(1, 1_000), help="Agentic sessions instead of single requests.")
@click.option("--turns", type=click.IntRange(1, 200), default=5, show_default=True, help="Turns per session.")
@click.option(
    "--prefix-tokens",
    type=click.IntRange(1),
    help="Shared system prompt and tool list of every session (default: half the p50).",
)
@click.option("--p50", type=click.IntRange(1), help="Prompt length p50 (tokens) [default: the plan's, else 96].")
@click.option("--p95", type=click.IntRange(2), help="Prompt length p95 (tokens) [default: the plan's, else 480].")
@click.option("--max-prompt-tokens", type=click.IntRange(1), default=900, show_default=True)
@click.option("--max-output-tokens", type=click.IntRange(1), default=32, show_default=True)
@click.option("--tenant", "tenants", multiple=True, default=["demo"], show_default=True, help="Repeat for several.")
@click.option(
    "--api-key",
    envvar="FABRIC_API_KEY",
    metavar="KEY",
    help="The tenant's gateway key (or FABRIC_API_KEY), sent as a bearer token.",
)
@click.option("--concurrency", type=click.IntRange(1, 64), default=4, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--records",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="JSON Lines request records to write (the `fabric report --requests` schema).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the totals as JSON.")
def burst_command(
    url: str,
    served_model: str | None,
    deployment: str | None,
    plan_file: Path | None,
    count: int,
    sessions: int | None,
    turns: int,
    prefix_tokens: int | None,
    p50: int | None,
    p95: int | None,
    max_prompt_tokens: int,
    max_output_tokens: int,
    tenants: tuple[str, ...],
    api_key: str | None,
    concurrency: int,
    seed: int,
    records: Path,
    as_json: bool,
) -> None:
    """Send a known burst of requests, or agentic sessions, to an engine or the gateway; write their records.

    Prompt lengths follow a log-normal with the given p50/p95, or those the plan holds for
    --deployment (see docs/engine.md). Without --sessions: single completions, outputs exactly
    max_tokens long (ignore_eos), tenants in turn, every third streamed. With --sessions: chat
    sessions that share one system prompt and tool list and re-send their growing conversation
    plus a tool result each turn, input:output about 17:1. --api-key goes through the gateway.

    \b
    Examples:
      fabric engine burst --url http://127.0.0.1:8000 --model qwen3.5 --deployment qwen3-5 \\
        --requests 20 --tenant cerit-sc --tenant muni-researchers --records requests.jsonl
      fabric engine burst --url http://127.0.0.1:4000 --plan plan.json --deployment qwen3-5 \\
        --sessions 4 --turns 5 --tenant muni-researchers --api-key $KEY --records sessions.jsonl
    """
    from llm_fabric.loadtest.sessions import Target, plan_sessions, send_sessions

    name = deployment or served_model
    if name is None:
        raise UsageError("say which model to load", hint="give --model NAME or --deployment NAME")
    if plan_file is not None:
        from llm_fabric.plan.document import load_plan

        if deployment is None:
            raise UsageError("--plan needs --deployment: whose prompt lengths to use", hint="add --deployment NAME")
        shape = load_plan(plan_file).capacity_of(deployment)
        p50, p95 = p50 or shape.context_p50, p95 or shape.context_p95
    p50, p95 = p50 or 96, p95 or 480
    if api_key and len(set(tenants)) > 1:
        raise UsageError("one --api-key is one tenant's", hint="give the key's tenant as the only --tenant")
    url = url.rstrip("/")
    if sessions is None:
        planned = plan_burst(
            count,
            p50=p50,
            p95=p95,
            tenants=tenants,
            max_prompt_tokens=max_prompt_tokens,
            max_output_tokens=max_output_tokens,
            seed=seed,
        )
        sent = send_burst(url, served_model or name, planned, deployment=name, concurrency=concurrency, api_key=api_key)
        what = wording.count(len(sent), "request")
    else:
        planned_sessions = plan_sessions(
            sessions,
            turns,
            p50=p50,
            p95=p95,
            tenants=tenants,
            prefix_chars=prefix_tokens or p50 // 2,
            max_prompt_tokens=max_prompt_tokens,
            max_output_tokens=max_output_tokens,
            seed=seed,
        )
        target = Target(url, served_model or name, name, api_key=api_key)
        sent = [r for session in send_sessions(target, planned_sessions, concurrency=concurrency) for r in session]
        what = f"{sessions} sessions of {turns} turns ({len(sent)} requests)"
    write_records(records, sent)
    totals = {**totals_of(sent), "records": str(records)}
    if as_json:
        print_json(totals)
        return
    agentic = f" ({totals['cached_prompt_tokens']} cached)" if sessions else ""
    refused = f"; {totals['refused']} refused" if totals["refused"] else ""
    console.print(
        f"sent {what} to {url}: {totals['prompt_tokens']} prompt{agentic} + "
        f"{totals['completion_tokens']} completion tokens, prompt p50 {totals['prompt_p50']} / "
        f"p95 {totals['prompt_p95']}{refused}; records in {records}",
        markup=False,
    )


@engine_group.command("check-args")
@click.option(
    "--engine",
    type=click.Choice(ENGINE_NAMES),
    default="vllm",
    show_default=True,
    help="vLLM: the installed vLLM's parser; sglang: the pinned SGLang wheel's parser (`make engine` fetches it).",
)
@click.option("--json", "as_json", is_flag=True, help="Print every verdict as JSON.")
def check_args_command(engine: str, as_json: bool) -> None:
    """Check every recipe's engine args on every GPU that can run it with the engine's own parser.

    Exit 0 when all pass, 2 when any fails.

    \b
    Examples:
      fabric engine check-args
      fabric engine check-args --engine sglang
    """
    from llm_fabric.engine.backends import backend

    check = backend(engine).check_args()
    verdicts, refused, parser = check.verdicts, check.refused, check.parser
    failing = [v for v in verdicts if not v.ok]
    if as_json:
        print_json(
            {
                "checked": len(verdicts),
                "refused_by_kernel_matrix": len(refused),
                "failing": [{"label": v.label, "problems": v.problems} for v in failing],
            }
        )
    else:
        for verdict in failing:
            console.print(f"[red]fail[/] {verdict.label}: " + "; ".join(verdict.problems))
        console.print(
            f"{len(verdicts) - len(failing)}/{len(verdicts)} engine commands pass {parser} "
            f"({len(refused)} combinations refused by the kernel matrix, not generated)"
        )
    if failing:
        raise UsageError(
            f"{len(failing)} of {len(verdicts)} engine commands fail {parser}",
            hint="each failure names its recipe and GPU: fix the recipe (engine/models/) or the engine's command.py",
        )


commands = [engine_group]
