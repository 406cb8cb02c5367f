"""`fabric validate` checks that need the recipes, the GPU catalog and the capacity model.

Listed in `llm_fabric.validate.site_checks`. A deployment must ask for a
quantization, KV-cache dtype and tensor-parallel size its recipe offers; GPU ids named in
placements and node manifests must be in the catalog; a deployment pinned to GPU models must
fit at least one of them (capacity model, kernel matrix) - all "config" findings (exit 2).
"""

from __future__ import annotations

from pathlib import Path

from llm_fabric.documents import suggest
from llm_fabric.engine.backends import backend, deployment_engine
from llm_fabric.engine.recipes import Recipe, context_limit, load_recipes
from llm_fabric.errors import Problem
from llm_fabric.hardware.catalog import GpuCatalog, load_gpu_catalog
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.models import Deployment
from llm_fabric.site.validation import Finding, SiteCheck


def _unknown(kind: str, value: str, known: list[str]) -> tuple[str, str]:
    guess = suggest(value, known)
    hint = f"did you mean `{guess}`?" if guess else f"known {kind}s: {', '.join(known)}"
    return f"unknown {kind} `{value}`", hint


def check_gpu_ids(site: SiteRepo) -> list[Finding]:
    catalog = load_gpu_catalog()
    out: list[Finding] = []
    for name, node in site.nodes.items():
        if node.gpus.catalog_id not in catalog:
            msg, hint = _unknown("GPU", node.gpus.catalog_id, catalog.ids())
            out.append(Finding("config", site.problem(site.path_of("nodes", name), ("gpus", "catalog_id"), msg, hint)))
    for name, dep in site.deployments.items():
        for i, gpu_id in enumerate(dep.placement.gpu_models):
            if gpu_id not in catalog:
                msg, hint = _unknown("GPU", gpu_id, catalog.ids())
                path = site.path_of("deployments", name)
                out.append(Finding("config", site.problem(path, ("placement", "gpu_models", i), msg, hint)))
    return out


def _recipe_problems(site: SiteRepo, name: str, dep: Deployment, recipe: Recipe) -> list[Problem]:
    path = site.path_of("deployments", name)
    out: list[Problem] = []
    if dep.quantization is not None and dep.quantization not in recipe.quantizations:
        offered: list[str] = list(recipe.quantizations)
        guess = suggest(dep.quantization, offered)
        hint = f"did you mean `{guess}`?" if guess else f"`{recipe.id}` is offered in: {', '.join(offered)}"
        msg = f"recipe `{recipe.id}` does not offer `{dep.quantization}`"
        out.append(site.problem(path, ("quantization",), msg, hint))
    if dep.kv_cache_dtype is not None and dep.kv_cache_dtype not in recipe.kv_cache_dtypes:
        hint = f"use one of {', '.join(recipe.kv_cache_dtypes)}"
        msg = f"recipe `{recipe.id}` has no KV-cache dtype `{dep.kv_cache_dtype}`"
        out.append(site.problem(path, ("kv_cache_dtype",), msg, hint))
    out += _engine_problems(site, path, dep, recipe)
    tp = dep.tensor_parallel_size
    if tp is not None and tp not in recipe.tensor_parallel_sizes:
        hint = f"use one of {recipe.tensor_parallel_sizes} (attention heads must divide evenly)"
        out.append(site.problem(path, ("tensor_parallel_size",), f"recipe `{recipe.id}` cannot run at TP {tp}", hint))
    if dep.max_model_len is not None and dep.max_model_len > recipe.architecture.max_context:
        hint = f"at most {recipe.architecture.max_context}"
        out.append(site.problem(path, ("max_model_len",), "longer than the model's context", hint))
    return out


def _engine_problems(site: SiteRepo, path: Path, dep: Deployment, recipe: Recipe) -> list[Problem]:
    """What the deployment's engine refuses of the recipe (SGLang: no `sglang:` section, a KV-cache dtype it lacks)."""
    engine = backend(deployment_engine(dep, recipe, site.config.defaults.engine))
    refusal = engine.refusal(recipe, dep.kv_cache_dtype or "auto")
    if refusal is None:
        return []
    field, msg, hint = refusal
    return [site.problem(path, (field,), msg, hint)]


def _fit_problems(site: SiteRepo, name: str, dep: Deployment, recipe: Recipe, catalog: GpuCatalog) -> list[Problem]:
    """A deployment pinned to GPU models and a TP size must fit on at least one of them."""
    from llm_fabric.engine.capacity.model import estimate  # capacity imports the kernel matrix; keep validate light

    if not dep.placement.gpu_models or dep.tensor_parallel_size is None:
        return []
    reasons: list[str] = []
    for gpu_id in dep.placement.gpu_models:
        if gpu_id not in catalog:
            return []  # reported by check_gpu_ids
        est = estimate(
            recipe,
            catalog.get(gpu_id),
            dep.tensor_parallel_size,
            quantization=dep.quantization,
            kv_cache_dtype=dep.kv_cache_dtype,
            context_tokens=context_limit(recipe, dep.max_model_len),
        )
        if est.fits:
            return []
        reasons.append(f"{gpu_id}: {est.reason}")
    path = site.path_of("deployments", name)
    hint = "raise tensor_parallel_size, pick a smaller quantization or lower max_model_len"
    return [site.problem(path, ("tensor_parallel_size",), "does not fit: " + "; ".join(reasons), hint)]


def check_deployments(site: SiteRepo) -> list[Finding]:
    recipes = load_recipes()
    catalog = load_gpu_catalog()
    out: list[Finding] = []
    for name, dep in site.deployments.items():
        recipe = recipes.get(dep.recipe)
        if recipe is None:
            continue  # the loader reports unknown recipes
        problems = _recipe_problems(site, name, dep, recipe)
        if not problems:
            problems = _fit_problems(site, name, dep, recipe, catalog)
        out.extend(Finding("config", p) for p in problems)
    return out


site_checks: list[SiteCheck] = [check_gpu_ids, check_deployments]
