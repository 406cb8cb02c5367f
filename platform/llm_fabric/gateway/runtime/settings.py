"""The hook settings: what `fabric gateway config` writes beside LiteLLM's config and the hooks read.

The hooks run inside the LiteLLM proxy (its own venv, like vLLM's), so this module imports only
pydantic and the foundation: never the site loader, the planner or the ledger.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from llm_fabric.basemodel import FabricModel
from llm_fabric.errors import UsageError

SETTINGS_ENV = "FABRIC_GATEWAY_SETTINGS"
RECORDS_ENV = "FABRIC_GATEWAY_RECORDS"  # the meter's folder
WRITER_ENV = "FABRIC_GATEWAY_WRITER"  # the meter's file-name suffix: the pod's name in a cluster
KEYS_ENV = "FABRIC_GATEWAY_KEYS"
SETTINGS_FILE = "fabric-gateway.json"
KEYS_FILE = "tenant-keys.json"
LITELLM_CONFIG_FILE = "litellm-config.yaml"


class TenantAccess(FabricModel):
    key_sha256: list[str] = Field(description="SHA-256 (hex) of each valid key; the keys themselves are never stored")
    data_classes: list[str] = Field(description="the tenant's classes, most sensitive first: the first is the default")
    requests_per_minute: int | None = None
    input_tokens_per_minute: int | None = None
    output_tokens_per_minute: int | None = None
    max_concurrent_requests: int | None = None
    groups: dict[str, dict[str, str]] = Field(
        default_factory=dict, description="deployment -> data class -> model group: the key's allowlist"
    )


class DeploymentAccess(FabricModel):
    capacity: int = Field(ge=1, description="requests the gateway lets in at once (planned sessions, all replicas)")
    owner: str | None = Field(None, description="tenant whose dedicated replicas these are")
    owner_reserved: int = Field(0, ge=0, description="of `capacity`, slots only the owner may take")
    engine: Literal["vllm", "sglang"] = "vllm"
    priority_scheduling: bool = Field(False, description="every replica runs its engine's priority scheduler")
    owner_fields: dict[str, Any] = Field(
        default_factory=dict, description="request fields for the engine on the owner's requests (priority, guard)"
    )
    pool_fields: dict[str, Any] = Field(default_factory=dict, description="the same for everyone else's requests")
    request_defaults: dict[str, float | int] = Field(default_factory=dict, description="from the recipe")


class GroupAccess(FabricModel):
    deployment: str
    data_class: str
    sites: list[str] = Field(description="sites whose replicas the group holds")
    fallbacks: list[str] = Field(default_factory=list, description="external providers it may fall back to")


class HookSettings(FabricModel):
    version: Literal[1] = 1
    federation: str
    retry_after_s: int = Field(ge=1)
    log_prompts: dict[str, bool] = Field(default_factory=dict, description="data class -> prompts may be recorded")
    tenants: dict[str, TenantAccess] = Field(default_factory=dict)
    deployments: dict[str, DeploymentAccess] = Field(default_factory=dict)
    groups: dict[str, GroupAccess] = Field(default_factory=dict)
    external: list[str] = Field(default_factory=list, description="model names of external providers")
    site: str | None = Field(None, description="the site whose gateway this is")
    entry_sites: dict[str, list[str]] = Field(
        default_factory=dict, description="data class -> the sites whose gateways its requests may enter"
    )

    def tenant_by_hash(self) -> dict[str, str]:
        return {h: name for name, t in self.tenants.items() for h in t.key_sha256}

    def key_hashes(self) -> dict[str, list[str]]:
        return {name: list(t.key_sha256) for name, t in self.tenants.items()}

    def without_keys(self) -> HookSettings:
        """For a ConfigMap: the key hashes go in a Secret ($FABRIC_GATEWAY_KEYS) instead."""
        tenants = {n: t.model_copy(update={"key_sha256": []}) for n, t in self.tenants.items()}
        return self.model_copy(update={"tenants": tenants})

    def with_keys(self, hashes: dict[str, list[str]]) -> HookSettings:
        tenants = {n: t.model_copy(update={"key_sha256": hashes.get(n, [])}) for n, t in self.tenants.items()}
        return self.model_copy(update={"tenants": tenants})


def load_settings(path: Path) -> HookSettings:
    try:
        return HookSettings.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:  # ValidationError is a ValueError
        what = "is not valid" if isinstance(exc, ValidationError) else "cannot be read"
        raise UsageError(
            f"{path}: gateway hook settings {what}: {exc}", hint="write them with `fabric gateway config --out DIR`"
        ) from exc


def settings_from_env() -> HookSettings:
    """The settings the proxy was started with ($FABRIC_GATEWAY_SETTINGS)."""
    value = os.environ.get(SETTINGS_ENV)
    if not value:
        raise UsageError(f"${SETTINGS_ENV} is not set", hint="start the proxy with `fabric gateway run`")
    settings = load_settings(Path(value))
    keys = os.environ.get(KEYS_ENV)
    if keys:  # in a cluster the hashes come from a Secret, not the ConfigMap
        try:
            hashes = json.loads(Path(keys).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UsageError(
                f"{keys}: tenant key hashes cannot be read: {exc}",
                hint=f"mount the {KEYS_FILE} that `fabric gateway config` wrote",
            ) from exc
        settings = settings.with_keys({str(k): [str(h) for h in v] for k, v in hashes.items()})
    return settings
