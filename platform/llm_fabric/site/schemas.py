"""JSON Schema for each kind of site-repo file, for editors (yaml-language-server) and CI."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from llm_fabric.atomicio import write_atomic
from llm_fabric.site.models import Deployment, FabricConfig, LedgerConfig, NodeManifest, PolicySet, Tenant

SCHEMA_DIR = "schemas"

# kind -> (model, where files of this kind live, relative to the site repo root)
FILE_KINDS: dict[str, tuple[type[BaseModel], str]] = {
    "fabric": (FabricConfig, "fabric.yaml"),
    "node": (NodeManifest, "nodes/*.yaml"),
    "tenant": (Tenant, "tenants/*.yaml"),
    "deployment": (Deployment, "deployments/*.yaml"),
    "policy": (PolicySet, "policies/*.yaml"),
    "ledger": (LedgerConfig, "ledger.yaml"),
}


def schema_for(kind: str) -> dict[str, object]:
    model, pattern = FILE_KINDS[kind]
    schema = model.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = f"llm-fabric {kind} ({pattern})"
    return schema


def export_schemas(out: Path) -> list[Path]:
    written = []
    for kind in FILE_KINDS:
        path = out / f"{kind}.schema.json"
        write_atomic(path, json.dumps(schema_for(kind), indent=2, sort_keys=True) + "\n")
        written.append(path)
    return written


def kind_of(relative: Path) -> str | None:
    """Which file kind a path inside the site repo holds (None for files the fabric does not read)."""
    parts = relative.parts
    if len(parts) == 1:
        return {"fabric.yaml": "fabric", "ledger.yaml": "ledger"}.get(parts[0])
    if len(parts) == 2 and relative.suffix == ".yaml":
        return {"nodes": "node", "tenants": "tenant", "deployments": "deployment", "policies": "policy"}.get(parts[0])
    return None


def modeline(relative: Path) -> str:
    kind = kind_of(relative)
    if kind is None:
        raise ValueError(f"{relative} is not a site-repo file")
    up = "../" * (len(relative.parts) - 1)
    return f"# yaml-language-server: $schema={up or './'}{SCHEMA_DIR}/{kind}.schema.json"
