"""The recipe catalog: one YAML per model under the distribution's `engine/models/`."""

from __future__ import annotations

from pathlib import Path

from llm_fabric.distribution import data_path


def recipe_dir() -> Path:
    return data_path("engine", "models")


def recipe_ids() -> list[str]:
    """Ids of the recipes shipped with the distribution (file stems)."""
    return sorted(p.stem for p in recipe_dir().glob("*.yaml"))
