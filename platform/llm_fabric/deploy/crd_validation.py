"""Check rendered manifests before a GitOps controller applies them (`fabric render --check`).

Kinds of Kubernetes itself are validated with kubernetes-validate's strict schemas for the cluster's
version (`cluster.kubernetes_version` in fabric.yaml): an unknown field is an error, as with
`kubectl apply --validate=strict`. Custom resources (Kueue, Prometheus Operator, Pulumi Operator, ...)
are validated against the OpenAPI schemas of the CRDs the user points at, loosened only where OpenAPI
differs from JSON Schema (`nullable`, the `x-kubernetes-*` markers) and tightened where the API server
is strict (unknown fields are errors unless the schema preserves them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from kubernetes_validate import utils as kv
from referencing import Registry, Resource

from llm_fabric.documents import parse_yaml
from llm_fabric.errors import ConfigError, PolicyRefusal, Problem, UsageError

Manifest = dict[str, Any]
_CRD_KIND = "CustomResourceDefinition"
# API groups under k8s.io that a cluster gets from CRDs, not from Kubernetes itself
_CRD_GROUPS_UNDER_K8S_IO = {"gateway.networking.k8s.io", "inference.networking.k8s.io"}


def is_core(obj: Manifest) -> bool:
    """Kinds of Kubernetes itself (the schemas kubernetes-validate bundles), not of a CRD."""
    api = str(obj.get("apiVersion", ""))
    group = api.rsplit("/", 1)[0] if "/" in api else ""
    if group in _CRD_GROUPS_UNDER_K8S_IO:
        return False
    return group in ("", "apps", "policy") or (group.endswith(".k8s.io") and not group.endswith(".x-k8s.io"))


def strict_schema(schema: Any) -> Any:
    """A CRD's OpenAPI v3 schema as a JSON Schema the API server's strictness would agree with."""
    if not isinstance(schema, dict):
        return schema
    out = {k: v for k, v in schema.items() if not k.startswith("x-kubernetes-") and k != "nullable"}
    for key in ("items", "additionalProperties", "not"):
        if isinstance(out.get(key), dict):
            out[key] = strict_schema(out[key])
    for key in ("allOf", "anyOf", "oneOf"):
        if key in out:
            out[key] = [strict_schema(s) for s in out[key]]
    if "properties" in out:
        out["properties"] = {name: strict_schema(sub) for name, sub in out["properties"].items()}
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


@dataclass
class CrdSchemas:
    """The served versions of every CRD in a folder, keyed by (apiVersion, kind)."""

    folder: Path
    schemas: dict[tuple[str, str], Any] = field(default_factory=dict)

    @classmethod
    def load(cls, folder: Path) -> CrdSchemas:
        if not folder.is_dir():
            raise UsageError(f"CRD folder {folder} does not exist", hint="point --crds at a folder of CRD YAML files")
        out = cls(folder)
        for path in sorted(p for p in folder.rglob("*") if p.suffix in (".yaml", ".yml")):
            for crd in _crds_in(path):
                spec = crd["spec"]
                for version in spec.get("versions", []):
                    schema = (version.get("schema") or {}).get("openAPIV3Schema")
                    if version.get("served", True) and schema is not None:
                        out.schemas[(f"{spec['group']}/{version['name']}", spec["names"]["kind"])] = strict_schema(
                            schema
                        )
        if not out.schemas:
            raise UsageError(f"no CustomResourceDefinition with a schema in {folder}", hint="is it the right folder?")
        return out

    def known(self, obj: Manifest) -> bool:
        return (obj.get("apiVersion"), obj.get("kind")) in self.schemas

    def errors(self, obj: Manifest) -> Iterator[jsonschema.ValidationError]:
        """What breaks the CRD's schema (metadata is left to the API server, as every CRD leaves it open)."""
        validator = jsonschema.Draft7Validator(self.schemas[(obj["apiVersion"], obj["kind"])])
        yield from validator.iter_errors(obj)

    def validate(self, obj: Manifest) -> None:
        """Raise jsonschema.ValidationError when `obj` breaks its CRD schema; KeyError when no CRD is known."""
        error = jsonschema.exceptions.best_match(self.errors(obj))
        if error is not None:
            raise error


def _crds_in(path: Path) -> Iterator[Manifest]:
    try:
        docs = list(yaml.load_all(path.read_text(encoding="utf-8"), Loader=_Loader))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError([Problem(f"not a readable YAML file: {exc}", file=path)]) from exc
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == _CRD_KIND and isinstance(doc.get("spec"), dict):
            yield doc


_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@cache
def _core_validator(version: str, api_version: str, kind: str) -> jsonschema.Draft202012Validator | None:
    """kubernetes-validate's strict schema for a kind, built once (its `validate` re-reads 1.4 MB per call)."""
    wanted = version.removeprefix("v")
    bundled = [v for v in kv.all_versions() if _minor_key(v) <= _minor_key(wanted)]
    if not bundled or _minor_key(wanted) > _minor_key(kv.latest_version()):
        raise UsageError(
            f"kubernetes-validate has no schemas for Kubernetes {wanted}",
            hint=f"it bundles {kv.all_versions()[0]} to {kv.latest_version()}; check cluster.kubernetes_version",
        )
    schema_dir = f"kubernetes-json-schema/v{bundled[-1]}-local-strict"
    api = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = kv.schema_contents(f"{schema_dir}/{kind.lower()}-{api}.json", wanted)
    except FileNotFoundError:
        return None
    registry: Registry[Any] = Resource.from_contents(schema) @ Registry()
    registry = Resource.from_contents(_definitions(schema_dir, wanted)) @ registry
    return jsonschema.Draft202012Validator(schema, registry=registry)


@cache
def _definitions(schema_dir: str, version: str) -> Any:
    return kv.schema_contents(f"{schema_dir}/_definitions.json", version)


def _minor_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in kv.major_minor(version).split(".")[:2])


def core_errors(obj: Manifest, kubernetes_version: str) -> list[jsonschema.ValidationError] | None:
    """Strict schema errors for a Kubernetes kind; None when that version of Kubernetes has no such kind."""
    validator = _core_validator(kubernetes_version, str(obj.get("apiVersion")), str(obj.get("kind")))
    return None if validator is None else list(validator.iter_errors(obj))


@dataclass
class CheckReport:
    kubernetes_version: str
    core: int = 0
    custom: int = 0
    custom_unchecked: int = 0  # no CRD folder given
    crds: Path | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "kubernetes_version": self.kubernetes_version,
            "core": self.core,
            "custom": self.custom,
            "custom_unchecked": self.custom_unchecked,
            "crds": str(self.crds) if self.crds is not None else None,
        }


def check_manifests(
    manifests: Iterable[tuple[Path, str]], kubernetes_version: str, crds: CrdSchemas | None
) -> CheckReport:
    """Validate every manifest (its file's path and YAML text); raise PolicyRefusal naming each invalid file and field.

    Texts, not files: `fabric render --check` validates what it would write before it writes anything.
    """
    report = CheckReport(kubernetes_version, crds=crds.folder if crds is not None else None)
    problems: list[Problem] = []
    for path, text in manifests:
        obj = yaml.load(text, Loader=_Loader)
        # kustomize's own file is no cluster object; Flux's Kustomization (kustomize.toolkit.fluxcd.io) is one
        if not isinstance(obj, dict) or str(obj.get("apiVersion", "")).startswith("kustomize.config.k8s.io/"):
            continue
        problems.extend(_check_one(path, text, obj, report, crds))
    if problems:
        raise PolicyRefusal(
            f"{len({p.file for p in problems})} rendered manifests are not valid for their cluster",
            problems=problems,
            hint="fix the site repo (or the resource builders) and render again; nothing was written",
        )
    return report


def _check_one(path: Path, text: str, obj: Manifest, report: CheckReport, crds: CrdSchemas | None) -> list[Problem]:
    what = f"{obj.get('apiVersion')} {obj.get('kind')}"
    if is_core(obj):
        report.core += 1
        errors = core_errors(obj, report.kubernetes_version)
        if errors is None:
            return [Problem(f"Kubernetes {report.kubernetes_version} has no {what}", file=path, field="apiVersion")]
        return [_problem(path, text, e, f"invalid {what} for Kubernetes {report.kubernetes_version}") for e in errors]
    if crds is None:
        report.custom_unchecked += 1
        return []
    report.custom += 1
    if not crds.known(obj):
        return [
            Problem(
                f"no CRD for {what} in {crds.folder}",
                file=path,
                field="apiVersion",
                hint="add that CRD's YAML to the folder, or the cluster will reject this resource too",
            )
        ]
    return [_problem(path, text, e, f"invalid {what} (CRD schema)") for e in crds.errors(obj)]


def _problem(path: Path, text: str, error: jsonschema.ValidationError, what: str) -> Problem:
    loc = tuple(error.absolute_path)
    try:
        line = parse_yaml(text, path).line_of(loc, key=True)  # the `field:` line, not its first child
    except ConfigError:
        line = None
    return Problem(f"{what}: {error.message}", file=path, line=line, field=".".join(str(s) for s in loc) or None)
