"""Write the gateway's files, and run the real LiteLLM proxy with them on 127.0.0.1 (`fabric gateway run`).

LiteLLM lives in its own venv (`make gateway` builds `.venv-gateway`): its pins (click, rich,
cryptography) are not the fabric's. The proxy imports the hooks from this checkout or wheel
(PYTHONPATH), never calls out at start-up (LITELLM_LOCAL_MODEL_COST_MAP=True), and gets a random
master key that nobody holds: every request goes through the fabric's key check.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

from llm_fabric.atomicio import write_atomic
from llm_fabric.distribution import checkout_root, package_root
from llm_fabric.engine.local.server import LocalEngine, free_port, spawn_server
from llm_fabric.errors import UsageError
from llm_fabric.gateway.config import GatewayFiles, gateway_texts
from llm_fabric.gateway.runtime.settings import KEYS_FILE, LITELLM_CONFIG_FILE, RECORDS_ENV, SETTINGS_ENV, SETTINGS_FILE

GATEWAY_VENV = ".venv-gateway"
HEALTH_PATH = "/health/liveliness"


def write_gateway_files(files: GatewayFiles, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in gateway_texts(files).items():
        write_atomic(out / name, text)
        written.append(out / name)
    keys = out / KEYS_FILE  # the same hashes on their own, for the cluster's Secret
    write_atomic(keys, json.dumps(files.settings.key_hashes(), indent=2, sort_keys=True) + "\n", mode=0o600)
    return [*written, keys]


def gateway_python(explicit: str | None = None) -> Path:
    """The interpreter that has LiteLLM: FABRIC_GATEWAY_PYTHON or the checkout's .venv-gateway."""
    candidate = explicit or os.environ.get("FABRIC_GATEWAY_PYTHON")
    if candidate:
        path = Path(candidate)
        if not path.is_file():
            raise UsageError(
                f"gateway interpreter {path} does not exist", hint="point FABRIC_GATEWAY_PYTHON at a python"
            )
        return path
    venv = checkout_root() / GATEWAY_VENV / "bin" / "python"
    if venv.is_file():
        return venv
    raise UsageError(
        "LiteLLM is not installed for the fabric",
        hint=f"run `make gateway` (builds {GATEWAY_VENV}) or set FABRIC_GATEWAY_PYTHON",
    )


def start_gateway(
    folder: Path, records: Path, *, port: int | None = None, python: Path | None = None, master_key: str | None = None
) -> LocalEngine:
    """Start LiteLLM's proxy with the files in `folder` (written by write_gateway_files), its meter writing to the
    folder `records`; wait with wait_healthy()."""
    interpreter = python or gateway_python()
    litellm = interpreter.parent / "litellm"
    if not litellm.is_file():
        raise UsageError(f"{interpreter.parent} has no `litellm` command", hint="run `make gateway`")
    port = port or free_port()
    argv = [
        str(litellm),
        "--config",
        str(folder / LITELLM_CONFIG_FILE),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--num_workers",
        "1",
    ]
    env = dict(os.environ)
    env.update(
        {
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            # nobody holds it unless a caller (bench/gateway.py's hook-less proxy) asks for it
            "LITELLM_MASTER_KEY": master_key or "sk-" + secrets.token_hex(24),
            SETTINGS_ENV: str(folder / SETTINGS_FILE),
            RECORDS_ENV: str(records),
            "PYTHONPATH": os.pathsep.join(p for p in (str(package_root()), env.get("PYTHONPATH", "")) if p),
            "LITELLM_LOG": env.get("LITELLM_LOG", "WARNING"),
            "NO_PROXY": "127.0.0.1,localhost",
        }
    )
    records.mkdir(parents=True, exist_ok=True)
    log_path = folder / "litellm.log"
    process = spawn_server(argv, env=env, cwd=folder, log_path=log_path)
    return LocalEngine(
        pid=process.pid,
        port=port,
        model="gateway",
        run_dir=folder,
        log_path=log_path,
        argv=argv,
        process=process,
        health_path=HEALTH_PATH,
        label="LiteLLM",
    )
