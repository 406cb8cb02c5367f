"""Planning a site repo: policies, sizing, placement, and the plan (being written)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llm_fabric.errors import UsageError
from llm_fabric.site.loader import SiteRepo

if TYPE_CHECKING:
    from llm_fabric.deploy.plan import Plan


def plan_site(site: SiteRepo, base: Plan | None = None) -> Plan:
    raise UsageError("planning is not implemented yet")
