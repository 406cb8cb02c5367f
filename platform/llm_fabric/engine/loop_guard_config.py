"""Per-recipe loop-guard settings (`engine/plugins/loop_guard.yaml`) and the engine flags that load the guard."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import Field

from llm_fabric.basemodel import FabricModel
from llm_fabric.distribution import data_path
from llm_fabric.documents import load_model
from llm_fabric.engine.runtime.loop_detect import LoopGuardSettings

PLUGIN_CLASS = "llm_fabric.engine.runtime.loop_guard:LoopGuardLogitsProcessor"


class LoopGuardOverrides(FabricModel):
    enabled: bool | None = None
    max_period: int | None = Field(None, ge=1, le=1024)
    min_repeats: int | None = Field(None, ge=2)
    min_span: int | None = Field(None, ge=2)


class LoopGuardDefaults(FabricModel):
    enabled: bool = True
    max_period: int = Field(64, ge=1, le=1024)
    min_repeats: int = Field(4, ge=2)
    min_span: int = Field(64, ge=2)


class LoopGuardFile(FabricModel):
    version: Literal[1] = 1
    defaults: LoopGuardDefaults = Field(default_factory=LoopGuardDefaults)
    recipes: dict[str, LoopGuardOverrides] = Field(default_factory=dict)


@dataclass(frozen=True)
class EngineFlags:
    args: list[str]
    env: dict[str, str]


@cache
def _load(path: Path) -> LoopGuardFile:
    return load_model(path, LoopGuardFile)


def loop_guard_settings(recipe_id: str | None, path: Path | None = None) -> LoopGuardSettings:
    config = _load(path or data_path("engine", "plugins", "loop_guard.yaml"))
    merged = config.defaults.model_dump()
    if recipe_id is not None and recipe_id in config.recipes:
        merged |= config.recipes[recipe_id].model_dump(exclude_none=True)
    return LoopGuardSettings(**merged)


def loop_guard_flags(recipe_id: str | None, path: Path | None = None) -> EngineFlags:
    """What to add to a recipe's `vllm serve` args and environment to run it with the loop guard."""
    settings = loop_guard_settings(recipe_id, path)
    return EngineFlags(args=["--logits-processors", PLUGIN_CLASS], env=settings.to_env())
