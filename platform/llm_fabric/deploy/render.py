"""`fabric render`: the stacks' resources as YAML files for Argo CD / Flux.

Layout under OUT, per site: `<site>/<stack>/<kind>-<name>.yaml` and a `kustomization.yaml` in each
stack folder and one above them (`kubectl apply -k OUT/<site>` applies all three in order).
Files a previous render wrote that the site repo no longer yields are removed, so that a GitOps
controller prunes them. With `operator_repo`, `<site>/operator/` holds Pulumi Kubernetes Operator
`Stack` resources that run the same stacks from the site repo's git remote; with `flux_repo`,
`<site>/flux/` holds the Flux GitRepository and Kustomization that make the site's cluster pull its
own folder (and only it) from that remote.

A plan with a rollout (`fabric plan --base`) moves the workloads its waves restart or bring up to
`<site>/waves/wave-N/`, listed after the stacks in the site's `kustomization.yaml` (each carries Argo CD's
sync-wave annotation); for Flux, `<site>/flux/` then also holds one Kustomization per wave, each waiting for
the one before, and the base one applies `<site>/flux/base/` (the stacks without the waves).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from llm_fabric import __version__
from llm_fabric.atomicio import AtomicBatch
from llm_fabric.deploy.build import STACK_ORDER, StackInputs, build_stack
from llm_fabric.distribution import data_path
from llm_fabric.errors import UsageError
from llm_fabric.kube.manifests import Manifest, all_objects, file_name
from llm_fabric.outdir import claim_folder
from llm_fabric.serving.waves import wave_of

KUSTOMIZATION = "kustomization.yaml"
WAVE_OF = "llm-fabric.io/wave-of"  # on a wave's Flux Kustomization: the site's Kustomization it follows
OPERATOR_API = "pulumi.com/v1"


@dataclass
class RenderResult:
    out: Path
    site: str
    files: list[Path] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)
    objects: dict[str, int] = field(default_factory=dict)
    manifests: list[Path] = field(default_factory=list)  # the files that hold a Kubernetes object

    def as_dict(self) -> dict[str, object]:
        return {
            "out": str(self.out),
            "site": self.site,
            "objects": self.objects,
            "files": [str(p) for p in self.files],
            "removed": [str(p) for p in self.removed],
        }


_Dumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # the C emitter where built
_STR, _MAP, _SEQ = "tag:yaml.org,2002:str", "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"
_RESOLVED: dict[tuple[str, tuple[bool, bool]], str] = {}  # (scalar, implicit) -> tag; bounded below


class _PlainDumper(_Dumper):  # type: ignore[valid-type, misc]
    """No `&id001` anchors: a reviewer (and kustomize) reads every object in full.

    Faster than SafeDumper for the plain dicts, lists and strings of manifests, with the same output:
    the emitter asks the resolver twice about every scalar (regular expressions, in Python), and keys
    and label values repeat across a thousand objects, so the answers are cached; strings, dicts and
    lists become nodes without the representer's per-type dispatch.
    """

    def ignore_aliases(self, data: Any) -> bool:
        return True

    def represent_data(self, data: Any) -> yaml.Node:
        kind = type(data)
        if kind is str:
            return yaml.ScalarNode(_STR, data)
        if kind is dict:
            pairs = [(self.represent_data(k), self.represent_data(v)) for k, v in data.items()]
            return yaml.MappingNode(_MAP, pairs, flow_style=False)
        if kind is list:
            return yaml.SequenceNode(_SEQ, [self.represent_data(item) for item in data], flow_style=False)
        node: yaml.Node = super().represent_data(data)
        return node

    def resolve(self, kind: type[yaml.Node], value: Any, implicit: Any) -> str:
        key = (value, implicit) if kind is yaml.ScalarNode and type(value) is str and type(implicit) is tuple else None
        tag = _RESOLVED.get(key) if key is not None else None
        if tag is None:
            tag = super().resolve(kind, value, implicit)
            if key is not None and len(_RESOLVED) < 1 << 16:
                _RESOLVED[key] = tag
        return tag


def dump_yaml(data: Any) -> str:
    return yaml.dump(data, Dumper=_PlainDumper, sort_keys=False, default_flow_style=False, width=1 << 16)


def render_stacks(
    inputs: StackInputs,
    out: Path,
    *,
    stacks: tuple[str, ...] = STACK_ORDER,
    operator_repo: str | None = None,
    operator_branch: str = "main",
    flux_repo: str | None = None,
    flux_branch: str = "main",
    check: Callable[[list[tuple[Path, str]]], object] | None = None,
) -> RenderResult:
    """Render, then (with `check`) validate the manifests' texts, then write: a refused check writes nothing."""
    site_dir = out / inputs.site_id
    result = RenderResult(out=out, site=inputs.site_id)
    texts: dict[Path, str] = {}
    waves: dict[int, list[Manifest]] = {}
    for stack in stacks:
        objects = all_objects(build_stack(stack, inputs))
        for obj in objects:
            if wave_of(obj):
                waves.setdefault(wave_of(obj), []).append(obj)
        _render_stack(site_dir / stack, [o for o in objects if not wave_of(o)], result, texts)
        result.objects[stack] = len(objects)
    for number, objects in sorted(waves.items()):
        _render_stack(site_dir / wave_folder(number), objects, result, texts)
    texts[site_dir / KUSTOMIZATION] = dump_yaml(kustomization([*stacks, *(wave_folder(n) for n in sorted(waves))]))
    site = _SiteRender(inputs, site_dir, stacks, result, texts)
    if operator_repo is not None:
        _render_operator(site, operator_repo, operator_branch)
    if flux_repo is not None:
        _render_flux(site, flux_repo, flux_branch, sorted(waves))
    # an earlier rollout's waves go with it
    result.removed.extend(
        p for p in sorted((site_dir / "waves").rglob("*.yaml")) if p not in texts and p not in result.removed
    )
    if check is not None:
        check([(path, texts[path]) for path in result.manifests])
    # OUT/SITE is the render's own (a marker file): stale files and a killed run's temp files go, nothing else
    claim_folder(site_dir, "render")
    # every file is replaced atomically, with two syncs for the whole tree (not two per file)
    with AtomicBatch() as batch:
        for path, text in texts.items():
            # an unchanged file is left alone, so a re-render leaves git and the controller quiet
            if not (path.is_file() and path.read_text(encoding="utf-8") == text):
                batch.write(path, text)
            result.files.append(path)
    # stale files go only once the kustomizations that no longer list them are in place
    for stale in result.removed:
        stale.unlink(missing_ok=True)
    emptied = [*sorted((site_dir / "waves").glob("wave-*")), site_dir / "waves", site_dir / "flux" / "base"]
    for folder in (f for f in emptied if f.is_dir() and not any(f.iterdir())):
        folder.rmdir()
    return result


def wave_folder(number: int) -> str:
    return f"waves/wave-{number}"


def kustomization(resources: list[str]) -> dict[str, Any]:
    return {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": resources}


def _render_stack(folder: Path, objects: list[Manifest], result: RenderResult, texts: dict[Path, str]) -> None:
    names: list[str] = []
    for obj in objects:
        name = file_name(obj)
        if name in names:
            raise UsageError(f"two resources would be written to {folder / name}", hint="rename one of them")
        names.append(name)
        texts[folder / name] = dump_yaml(obj)
        result.manifests.append(folder / name)
    texts[folder / KUSTOMIZATION] = dump_yaml(kustomization(names))
    keep = {*names, KUSTOMIZATION}
    result.removed.extend(stale for stale in sorted(folder.glob("*.yaml")) if stale.name not in keep)


def _repo_relative(inputs: StackInputs, site_dir: Path, option: str) -> Path:
    """The site's folder relative to the site repo: what a controller pulling the repo's remote finds."""
    root = inputs.site.root.resolve()
    try:
        return site_dir.resolve().relative_to(root)
    except ValueError as exc:
        raise UsageError(
            f"{option} needs the output inside the site repo ({root}); {site_dir} is not",
            hint=f"render into a folder of the site repo, e.g. --out {root / 'deploy'}",
        ) from exc


@dataclass(frozen=True)
class _SiteRender:
    """One site's render in progress, as the GitOps targets add to it: what it renders, where, and the texts
    and result written so far."""

    inputs: StackInputs
    site_dir: Path
    stacks: tuple[str, ...]
    result: RenderResult
    texts: dict[Path, str]


def _render_flux(site: _SiteRender, repo: str, branch: str, waves: list[int]) -> None:
    """`<site>/flux/`: a Flux GitRepository that pulls only this site's folder, with this site's own
    credentials, and a Flux Kustomization that applies it. Each site's cluster gets only its own pair.

    With rollout waves, the Kustomization applies `flux/base/` (the stacks, without the waves), and each wave
    gets a Kustomization of its own that depends on the one before (the first on the base): Flux applies
    wave N only once wave N-1's workloads are ready (`wait`)."""
    inputs, site_dir, stacks, result, texts = site.inputs, site.site_dir, site.stacks, site.result, site.texts
    rel = _repo_relative(inputs, site_dir, "--flux-repo").as_posix()
    name = f"llm-fabric-{inputs.site_id}"
    source: Manifest = {
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "GitRepository",
        "metadata": {"name": name, "namespace": "flux-system"},
        "spec": {
            "url": repo,
            "ref": {"branch": branch},
            "interval": "1m",
            "secretRef": {"name": f"{name}-git"},  # this site's read credentials, created on its cluster only
            "ignore": f"/*\n!/{rel}/\n",  # everything but this site's folder stays out of the artifact
        },
    }
    base = f"./{rel}/flux/base" if waves else f"./{rel}"
    applies = [_flux_kustomization(name, base, name)]
    after = name
    for number in waves:
        wave = _flux_kustomization(f"{name}-wave-{number}", f"./{rel}/{wave_folder(number)}", name)
        # what selects them for deletion once a render without the rollout has left them out
        wave["metadata"]["labels"] = {WAVE_OF: name}
        wave["spec"]["dependsOn"] = [{"name": after}]
        wave["spec"]["timeout"] = f"{_wave_timeout_s(inputs, number)}s"
        applies.append(wave)
        after = wave["metadata"]["name"]
    if waves:
        # kustomize takes folders outside the kustomization's own as resources (not files): the stacks as they are
        texts[site_dir / "flux" / "base" / KUSTOMIZATION] = dump_yaml(kustomization([f"../../{s}" for s in stacks]))
    names = []
    for obj in (source, *applies):
        names.append(file_name(obj))
        texts[site_dir / "flux" / file_name(obj)] = dump_yaml(obj)
        result.manifests.append(site_dir / "flux" / file_name(obj))
    texts[site_dir / "flux" / KUSTOMIZATION] = dump_yaml(kustomization(names))
    # an earlier rollout's wave Kustomizations and base folder go (docs/deploy.md: deleting the Kustomizations
    # on the cluster is the operator's, as applying flux/ is)
    keep = {site_dir / "flux" / n for n in (*names, KUSTOMIZATION)} | set(texts)
    result.removed.extend(p for p in sorted((site_dir / "flux").rglob("*.yaml")) if p not in keep)


def _flux_kustomization(name: str, path: str, source: str) -> Manifest:
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": name, "namespace": "flux-system"},
        "spec": {
            "interval": "10m",
            "path": path,
            "prune": True,
            # ready only once every object it applied is: what the next wave's dependsOn waits for
            "wait": True,
            "sourceRef": {"kind": "GitRepository", "name": source},
        },
    }


def _wave_timeout_s(inputs: StackInputs, number: int) -> int:
    """How long Flux waits for a wave's workloads: twice the slowest expected cold start of the wave (the
    startup probe's budget), at least Flux's default of the interval; a wave still starting past it is
    reported failed and checked again at the next interval."""
    rollout = inputs.the_plan().rollout
    cold = [w.cold_start_s for d in (rollout.deployments if rollout else []) for w in d.waves if w.wave == number]
    return max(600, 2 * max(cold, default=0))


def _render_operator(site: _SiteRender, repo: str, branch: str) -> None:
    inputs, site_dir, stacks, result, texts = site.inputs, site.site_dir, site.stacks, site.result, site.texts
    rel = _repo_relative(inputs, site_dir, "--operator-repo")
    names: list[str] = []
    for i, stack in enumerate(stacks):
        project = site_dir / "pulumi" / stack
        for source in ("Pulumi.yaml", "__main__.py"):
            texts[project / source] = data_path("stacks", stack, source).read_text(encoding="utf-8")
        texts[project / "requirements.txt"] = f"llm-fabric=={__version__}\n"
        back = "/".join([".."] * (len(rel.parts) + 2))
        previous = stacks[i - 1] if i else None
        cr = operator_stack(inputs, stack, repo, branch, f"{rel.as_posix()}/pulumi/{stack}", back, previous)
        names.append(file_name(cr))
        texts[site_dir / "operator" / file_name(cr)] = dump_yaml(cr)
        result.manifests.append(site_dir / "operator" / file_name(cr))
    texts[site_dir / "operator" / KUSTOMIZATION] = dump_yaml(kustomization(names))


def operator_stack_name(stack: str, site_id: str) -> str:
    return f"llm-fabric-{stack}-{site_id}"


def operator_stack(
    inputs: StackInputs, stack: str, repo: str, branch: str, repo_dir: str, site_repo: str, after: str | None
) -> Manifest:
    """A Pulumi Operator `Stack` that runs `stack` from the site repo's remote (program copied beside the YAML)."""
    spec: dict[str, Any] = {
        "stack": f"organization/{stack}-{inputs.site_id}",
        "projectRepo": repo,
        "branch": branch,
        "repoDir": repo_dir,
        "config": {"siteRepo": site_repo, "site": inputs.site_id},
        "serviceAccountName": "pulumi",
        "refresh": True,
        "destroyOnFinalize": False,
    }
    if after is not None:
        spec["prerequisites"] = [{"name": operator_stack_name(after, inputs.site_id)}]
    return {
        "apiVersion": OPERATOR_API,
        "kind": "Stack",
        "metadata": {"name": operator_stack_name(stack, inputs.site_id), "namespace": "pulumi-operator"},
        "spec": spec,
    }
