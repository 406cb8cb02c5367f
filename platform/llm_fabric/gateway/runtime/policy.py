"""Policy: which model group a tenant's request goes to, at what engine priority, with what defaults.

Sovereignty holds in independent layers: the group for a data class holds only replicas at sites
its rule allows (config generation); this module routes a request only to a group on the tenant's
allowlist; a restricted class's requests go with `disable_fallbacks`; and the hooks drop any
deployment outside the group's sites before LiteLLM picks one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llm_fabric.gateway.runtime.frontdoor import entry_refusal
from llm_fabric.gateway.runtime.settings import DeploymentAccess, HookSettings, TenantAccess

DATA_CLASS_HEADER = "x-fabric-data-class"
# request fields only the fabric's engines understand: a client may not set them (SGLang's custom logit
# processor is a pickled callable), and they never go to an external provider
ENGINE_ONLY_FIELDS = ("priority", "custom_logit_processor", "custom_params", "vllm_xargs")


@dataclass(frozen=True)
class Route:
    deployment: str
    data_class: str
    group: str
    fallbacks_allowed: bool


@dataclass(frozen=True)
class Denial:
    status: int
    message: str


def choose_data_class(access: TenantAccess, asked: str | None) -> str | Denial:
    """The class the request declares (header), or the tenant's most sensitive: the safe reading."""
    if asked is None or asked == "":
        return access.data_classes[0]
    if asked not in access.data_classes:
        return Denial(403, f"data class `{asked}` is not one of the tenant's ({', '.join(access.data_classes)})")
    return asked


def route(settings: HookSettings, tenant: str, model: str, asked_class: str | None) -> Route | Denial:
    """The group for `model`: a deployment's name (with the request's class), or a group the tenant may use
    (what GET /v1/models lists to it), whose class is then the request's."""
    access = settings.tenants[tenant]
    named = settings.groups.get(model)
    if named is not None and access.groups.get(named.deployment, {}).get(named.data_class) == model:
        if asked_class and asked_class != named.data_class:
            return Denial(403, f"model group `{model}` serves `{named.data_class}` data, not `{asked_class}`")
        if (refused := entry_refusal(settings, named.data_class)) is not None:
            return Denial(403, refused)
        return Route(named.deployment, named.data_class, model, fallbacks_allowed=bool(named.fallbacks))
    data_class = choose_data_class(access, asked_class)
    if isinstance(data_class, Denial):
        return data_class
    if (refused := entry_refusal(settings, data_class)) is not None:
        return Denial(403, refused)
    by_class = access.groups.get(model)
    if by_class is None:
        allowed = sorted(access.groups)
        return Denial(403, f"tenant `{tenant}` may not use model `{model}`; its models: {', '.join(allowed) or 'none'}")
    group = by_class.get(data_class)
    if group is None or group not in settings.groups:
        return Denial(
            403,
            f"model `{model}` does not serve `{data_class}` data for tenant `{tenant}`; "
            f"it serves: {', '.join(sorted(by_class)) or 'nothing'}",
        )
    return Route(model, data_class, group, fallbacks_allowed=bool(settings.groups[group].fallbacks))


def engine_fields(dep: DeploymentAccess, tenant: str) -> dict[str, Any]:
    """What the engine behind `dep` needs in this tenant's request (llm_fabric.engine.request_hooks, at config
    time): its priority, only where the engine schedules by it, and SGLang's per-request loop guard."""
    return dep.owner_fields if dep.owner == tenant else dep.pool_fields


def apply_route(data: dict[str, Any], rt: Route, dep: DeploymentAccess, tenant: str) -> None:
    """Rewrite the request in place: group, engine priority, recipe defaults; no fallbacks if restricted."""
    data["model"] = rt.group
    for name in ENGINE_ONLY_FIELDS:  # a client must not set its own priority or engine plugins
        data.pop(name, None)
    extra = data.get("extra_body")
    if isinstance(extra, dict):
        for name in ENGINE_ONLY_FIELDS:
            extra.pop(name, None)
    fields = engine_fields(dep, tenant)
    if fields:
        data["extra_body"] = {**(extra if isinstance(extra, dict) else {}), **fields}
    for key, value in dep.request_defaults.items():
        if key == "max_tokens":
            asked = data.get("max_tokens") or data.get("max_completion_tokens")
            data["max_tokens"] = min(int(asked), int(value)) if asked else int(value)
            data.pop("max_completion_tokens", None)
        else:
            data.setdefault(key, value)
    if not rt.fallbacks_allowed:
        data["disable_fallbacks"] = True


def output_bound(data: dict[str, Any], dep: DeploymentAccess) -> int | None:
    """The most output tokens the request may get: its max_tokens, capped by the recipe's (as `apply_route`
    sets it); None where neither bounds it."""
    asked = data.get("max_tokens") or data.get("max_completion_tokens")
    cap = dep.request_defaults.get("max_tokens")
    try:
        bounds = [int(v) for v in (asked, cap) if v is not None]
    except (TypeError, ValueError):
        bounds = [int(cap)] if cap is not None else []
    return max(min(bounds), 0) if bounds else None


def strip_engine_fields(kwargs: dict[str, Any]) -> None:
    """Before a call to an external provider: drop what only our engines understand."""
    for name in ENGINE_ONLY_FIELDS:
        kwargs.pop(name, None)
    extra = kwargs.get("extra_body")
    if isinstance(extra, dict):
        for name in ENGINE_ONLY_FIELDS:
            extra.pop(name, None)
