"""The hook settings: what `fabric gateway config` writes beside LiteLLM's config and the hooks read.

The hooks run inside the LiteLLM proxy (its own venv, like vLLM's), so this module imports only
pydantic and the foundation: never the site loader, the planner or the ledger.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from llm_fabric.basemodel import FabricModel
from llm_fabric.errors import UsageError

SETTINGS_ENV = "FABRIC_GATEWAY_SETTINGS"
RECORDS_ENV = "FABRIC_GATEWAY_RECORDS"  # the meter's folder
WRITER_ENV = "FABRIC_GATEWAY_WRITER"  # the meter's file-name suffix: the pod's name in a cluster
KEYS_ENV = "FABRIC_GATEWAY_KEYS"
# the counter store's URL when it carries a password (from a Secret), instead of the settings' `counters.url`
COUNTERS_URL_ENV = "FABRIC_GATEWAY_COUNTERS_URL"
# seconds added to the system clock for the budgets' months and the meter (a month end rehearsed); unset: none
CLOCK_OFFSET_ENV = "FABRIC_GATEWAY_CLOCK_OFFSET_S"
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
    tokens_per_month: int | None = Field(
        None, description="input + output tokens this gateway site may admit in a UTC month (its budget share)"
    )
    price_per_month: Decimal | None = Field(
        None, description="the same in the reference currency, at the price ledger's reference prices"
    )
    whole_tokens_per_month: int | None = Field(
        None, description="the tenant's whole monthly token budget, of which tokens_per_month is this site's share"
    )
    whole_price_per_month: Decimal | None = Field(None, description="the same for price_per_month")
    fail_closed: bool = Field(
        False, description="restricted (a class that may not leave the federation): refused while the store is down"
    )
    key_expiry: dict[str, datetime] = Field(
        default_factory=dict, description="key id (first 12 hex of its hash) -> when the key stops being accepted"
    )
    groups: dict[str, dict[str, str]] = Field(
        default_factory=dict, description="deployment -> data class -> model group: the key's allowlist"
    )


class DeploymentAccess(FabricModel):
    capacity: int = Field(ge=1, description="requests the gateway lets in at once (planned sessions, all replicas)")
    owner: str | None = Field(None, description="tenant whose dedicated replicas these are")
    owner_reserved: int = Field(0, ge=0, description="of `capacity`, slots only the owner may take")
    fair_shares: dict[str, float] = Field(
        default_factory=dict,
        description="tenant -> its allocation of `capacity` (slots): the owner's dedicated share, the rest "
        "split among the other tenants; a saturated deployment admits in proportion to these",
    )
    lent: bool = Field(False, description="every replica is the owner's: the others run on what it lends")
    engine: Literal["vllm", "sglang"] = "vllm"
    priority_scheduling: bool = Field(False, description="every replica runs its engine's priority scheduler")
    owner_fields: dict[str, Any] = Field(
        default_factory=dict, description="request fields for the engine on the owner's requests (priority, guard)"
    )
    pool_fields: dict[str, Any] = Field(default_factory=dict, description="the same for everyone else's requests")
    request_defaults: dict[str, float | int] = Field(default_factory=dict, description="from the recipe")


class TokenRates(FabricModel):
    """A deployment's reference prices per million tokens (ledger.yaml `reference_prices`)."""

    input: Decimal
    cached_input: Decimal | None = None
    output: Decimal


class CounterSettings(FabricModel):
    """Where the gateway's pods count together (Redis); without it each pod counts alone (one replica only)."""

    url: str | None = Field(None, description="redis:// or rediss://; $FABRIC_GATEWAY_COUNTERS_URL overrides it")
    prefix: str = Field(description="key prefix: the federation's name, so that one Redis may serve several")
    timeout_s: float = Field(1.0, gt=0, description="a store slower than this counts as unreachable")


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
    counters: CounterSettings | None = None
    currency: str = Field("USD", description="the ledger's currency: of `price_per_month` and `prices`")
    prices: dict[str, TokenRates] = Field(default_factory=dict, description="deployment -> its reference prices")
    stale_after_s: float = Field(
        3600.0, gt=0, description="an open request older than this no longer holds a slot (a lost callback)"
    )
    reserve_tokens: int = Field(
        4096,
        ge=1,
        description="a budgeted tenant's request that names no max_tokens (and whose recipe sets none) is "
        "given this max_tokens, and reserves it against the month while it runs",
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


def clock_from_env() -> Callable[[], float]:
    """The hooks' clock: the system's, shifted by $FABRIC_GATEWAY_CLOCK_OFFSET_S when that is set."""
    value = os.environ.get(CLOCK_OFFSET_ENV)
    if not value:
        return time.time
    try:
        offset = float(value)
    except ValueError as exc:
        raise UsageError(f"${CLOCK_OFFSET_ENV} is not a number of seconds: {value!r}") from exc
    return lambda: time.time() + offset


def counters_url(settings: HookSettings) -> str | None:
    """The store's URL: $FABRIC_GATEWAY_COUNTERS_URL (a Secret's) or the settings'; None: count in the process."""
    if settings.counters is None:
        return None
    return os.environ.get(COUNTERS_URL_ENV) or settings.counters.url
