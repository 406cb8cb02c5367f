"""The registry of serving engines (name -> backend), and which engine serves a deployment.

A deployment says `engine: vllm | sglang` in the site repo; else the site's `defaults.engine` in
fabric.yaml; else its recipe's `engine` (vLLM unless the recipe says otherwise). The plan calls
`command_for` and records the engine with each replica; the renderer and the gateway read it there.
A new engine is one folder (`engine/<name>/`, its backend meeting `engine.backend.EngineBackend`)
and one line in `BACKENDS`.
"""

from __future__ import annotations

from collections.abc import Callable

from llm_fabric.engine.backend import EngineBackend, EngineMetrics
from llm_fabric.engine.command import EngineCommand, ServingArgs
from llm_fabric.engine.fingerprint import ConfigFingerprint, fingerprint, fingerprint_fields
from llm_fabric.engine.recipes import EngineName, Recipe
from llm_fabric.engine.sglang.backend import SGLANG
from llm_fabric.engine.vllm.backend import VLLM
from llm_fabric.errors import UsageError
from llm_fabric.site.models import Deployment

BACKENDS: dict[EngineName, EngineBackend] = {"vllm": VLLM, "sglang": SGLANG}


def backend(name: str) -> EngineBackend:
    try:
        return BACKENDS[name]  # type: ignore[index]
    except KeyError:
        raise UsageError(f"no engine `{name}`", hint=f"use one of {', '.join(BACKENDS)}") from None


def engine_series(pick: Callable[[EngineMetrics], str | None]) -> list[str]:
    """Every engine's name of one series (`pick` of its metrics), in the registry's order; an engine without
    one is left out."""
    return [name for b in BACKENDS.values() if (name := pick(b.metrics)) is not None]


def series_selector(pick: Callable[[EngineMetrics], str | None]) -> str:
    """A PromQL selector of every engine's name of one series: `{__name__=~"vllm:a|sglang:b"}`."""
    return '{__name__=~"' + "|".join(engine_series(pick)) + '"}'


def deployment_engine(dep: Deployment, recipe: Recipe, site_default: EngineName | None = None) -> EngineName:
    return dep.engine or site_default or recipe.engine


def command_for(engine: EngineName, serving: ServingArgs) -> EngineCommand:
    """The command of `engine` for one replica."""
    return backend(engine).command(serving)


def fingerprint_for(engine: EngineName, serving: ServingArgs) -> ConfigFingerprint:
    """The configuration fingerprint of `engine`'s replica (`engine.fingerprint`), at the backend's release."""
    chosen = backend(engine)
    fields = fingerprint_fields(
        engine, serving, chosen.version, chosen.parsers(serving.recipe), chosen.template_and_args(serving.recipe)
    )
    return fingerprint(fields)
