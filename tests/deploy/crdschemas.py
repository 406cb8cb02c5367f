"""The CRD snapshots in `<checkout>/../shared/crds/`, loaded by the package's own checker.

The checker itself is `llm_fabric.deploy.crd_validation` (what `fabric render --check --crds DIR`
runs); the tests use it as users do, with the shared folder as DIR, and skip where it is absent.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest

from llm_fabric.deploy.crd_validation import CrdSchemas

CRDS = Path(__file__).resolve().parents[2].parent / "shared" / "crds"


def crds_or_skip() -> Path:
    if not CRDS.is_dir():
        pytest.skip(
            f"CRD schemas not found at {CRDS} (the shared folder beside the checkout); custom resources unchecked"
        )
    return CRDS


@cache
def shared_crds() -> CrdSchemas:
    return CrdSchemas.load(crds_or_skip())


def known(obj: dict[str, Any]) -> bool:
    return shared_crds().known(obj)


def validate_custom(obj: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError when `obj` breaks its CRD schema; KeyError when no CRD is known."""
    shared_crds().validate(obj)
