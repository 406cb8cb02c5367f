"""Validate custom resources against the OpenAPI schemas of their CRDs in `<checkout>/../shared/crds/`.

The CRD schemas are loosened only where OpenAPI differs from JSON Schema (`nullable`, the
`x-kubernetes-*` markers) and tightened where the API server is strict: an unknown field is an
error unless the schema preserves unknown fields (what `kubectl apply --validate=strict` does).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

CRDS = Path(__file__).resolve().parents[2].parent / "shared" / "crds"


def crds_or_skip() -> Path:
    if not CRDS.is_dir():
        pytest.skip(
            f"CRD schemas not found at {CRDS} (the shared folder beside the checkout); custom resources unchecked"
        )
    return CRDS


@cache
def _schemas() -> dict[tuple[str, str], dict[str, Any]]:
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted(crds_or_skip().rglob("*.yaml")):
        crd = yaml.load(path.read_text(), Loader=yaml.CSafeLoader)
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            if version.get("served", True):
                out[(f"{group}/{version['name']}", kind)] = strict(version["schema"]["openAPIV3Schema"])
    return out


def strict(schema: Any) -> Any:
    if not isinstance(schema, dict):
        return schema
    out = {k: v for k, v in schema.items() if not k.startswith("x-kubernetes-") and k != "nullable"}
    for key in ("items", "additionalProperties", "not"):
        if isinstance(out.get(key), dict):
            out[key] = strict(out[key])
    for key in ("allOf", "anyOf", "oneOf"):
        if key in out:
            out[key] = [strict(s) for s in out[key]]
    if "properties" in out:
        out["properties"] = {name: strict(sub) for name, sub in out["properties"].items()}
    if isinstance(out.get("pattern"), str) and out["pattern"].startswith("^(?i)"):
        out["pattern"] = "(?i)^" + out["pattern"][5:]  # Go allows the flag after ^, Python does not
    if schema.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if schema.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def known(obj: dict[str, Any]) -> bool:
    return (obj["apiVersion"], obj["kind"]) in _schemas()


def validate_custom(obj: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError when `obj` breaks its CRD schema; KeyError when no CRD is known."""
    schema = _schemas()[(obj["apiVersion"], obj["kind"])]
    # metadata is `type: object` in every CRD; the API server checks it, not the schema
    jsonschema.Draft7Validator(schema).validate(obj)
