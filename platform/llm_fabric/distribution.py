"""Where the distribution's data folders are: inside the wheel, or in the source checkout.

A wheel carries `enrollment/ engine/ kernels/ policies/ playbooks/ stacks/ examples/` under
`llm_fabric/_data/`; an editable install reads them from the checkout next to `platform/`.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from llm_fabric.errors import FabricError

DATA_FOLDERS = ("enrollment", "engine", "kernels", "policies", "playbooks", "stacks", "examples")


def package_root() -> Path:
    """The folder that holds the `llm_fabric` package: platform/ in a checkout, site-packages/ in an install
    (what a child interpreter in another venv puts on PYTHONPATH to import this code)."""
    return Path(__file__).resolve().parents[1]


def checkout_root() -> Path:
    """The folder above platform/: in a source checkout, where `make` puts .venv-engine, .venv-gateway and
    .cache (in an installed wheel, a folder that holds none of them, so the callers fall back)."""
    return package_root().parent


@cache
def data_root() -> Path:
    packaged = Path(__file__).resolve().parent / "_data"
    if (packaged / "examples").is_dir():
        return packaged
    checkout = checkout_root()
    if (checkout / "examples").is_dir() and (checkout / "pyproject.toml").is_file():
        return checkout
    raise FabricError(
        "the distribution's data folders were not found",
        hint="reinstall llm-fabric (`pip install .`); the wheel must contain llm_fabric/_data",
    )


def data_path(folder: str, *parts: str) -> Path:
    """Path of a shipped data file, e.g. `data_path("enrollment", "gpus.yaml")`."""
    if folder not in DATA_FOLDERS:
        raise ValueError(f"unknown data folder {folder!r}")
    return data_root().joinpath(folder, *parts)


def shipped_recipe_ids() -> list[str]:
    """Ids of the engine recipes shipped with the distribution (`engine/models/*.yaml` file stems)."""
    return sorted(p.stem for p in data_path("engine", "models").glob("*.yaml"))
