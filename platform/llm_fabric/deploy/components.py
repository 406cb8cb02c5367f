"""Pulumi ComponentResources over the resource bundles: one component per concept, the same dicts inside.

A stack's `__main__.py` calls `deploy_stack(NAME, pulumi.Config())`. Core kinds become typed
pulumi-kubernetes resources (their awaiters know when a Deployment is ready); custom resources
(Kueue, Prometheus Operator) become `apiextensions.CustomResource`. Either way the inputs are the
manifest dicts `fabric render` writes, unchanged.

A plan's rollout waves (`deploy.waves`) order the engine workloads: one of wave N is registered with
`depends_on` every workload of wave N-1, and those of wave 1 with `depends_on` every object of the base (a
Deployment counts as created once the pulumi-kubernetes awaiter sees it ready). A wave's workload stays the
child of its served model's component: another parent would change its URN, which Pulumi carries out as a
delete and a create of the object.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from llm_fabric.deploy.build import StackInputs, build_stack, load_inputs
from llm_fabric.kube.manifests import Bundle, Manifest, object_id
from llm_fabric.kube.options import StackOptions, camel
from llm_fabric.serving.waves import wave_of

TYPED: dict[tuple[str, str], Any] = {
    ("v1", "Namespace"): k8s.core.v1.Namespace,
    ("v1", "Service"): k8s.core.v1.Service,
    ("v1", "ConfigMap"): k8s.core.v1.ConfigMap,
    ("v1", "ServiceAccount"): k8s.core.v1.ServiceAccount,
    ("rbac.authorization.k8s.io/v1", "Role"): k8s.rbac.v1.Role,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): k8s.rbac.v1.RoleBinding,
    ("apps/v1", "Deployment"): k8s.apps.v1.Deployment,
    ("apps/v1", "DaemonSet"): k8s.apps.v1.DaemonSet,
    ("networking.k8s.io/v1", "NetworkPolicy"): k8s.networking.v1.NetworkPolicy,
    ("policy/v1", "PodDisruptionBudget"): k8s.policy.v1.PodDisruptionBudget,
    ("scheduling.k8s.io/v1", "PriorityClass"): k8s.scheduling.v1.PriorityClass,
}


def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def kubernetes_resource(obj: Manifest, opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """The Pulumi resource for one manifest; its inputs are the manifest's fields as they are."""
    name = object_id(obj).split("/", 1)[1]
    fields = {_snake(k): v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    typed = TYPED.get((obj["apiVersion"], obj["kind"]))
    if typed is not None:
        resource: pulumi.CustomResource = typed(name, opts=opts, **fields)
        return resource
    return k8s.apiextensions.CustomResource(
        name,
        api_version=obj["apiVersion"],
        kind=obj["kind"],
        opts=opts,
        **{k: obj[k] for k in obj if k not in ("apiVersion", "kind")},
    )


def concept_type(stack: str, concept: str) -> str:
    return f"llm-fabric:{stack}:" + "".join(part.capitalize() for part in concept.split("-"))


class FabricConcept(pulumi.ComponentResource):
    """One concept of a stack (a served model, a tenant's queue, the alert rules) and its Kubernetes objects."""

    def __init__(self, stack: str, bundle: Bundle, opts: pulumi.ResourceOptions | None = None) -> None:
        """Registers the bundle's base objects; those of a rollout wave wait for `add_wave`."""
        super().__init__(concept_type(stack, bundle.concept), bundle.name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.resources = [kubernetes_resource(obj, child) for obj in bundle.objects if not wave_of(obj)]
        self.object_ids = [object_id(obj) for obj in bundle.objects]
        self.waves: dict[int, list[Manifest]] = {}
        for obj in bundle.objects:
            if wave_of(obj):
                self.waves.setdefault(wave_of(obj), []).append(obj)
        if not self.waves:
            self.register_outputs({"objects": self.object_ids})

    def add_wave(self, wave: int, after: list[pulumi.Resource]) -> list[pulumi.CustomResource]:
        """Register this concept's objects of `wave`, each depending on `after` (the wave before's)."""
        opts = pulumi.ResourceOptions(parent=self, depends_on=list(after))
        added = [kubernetes_resource(obj, opts) for obj in self.waves.get(wave, [])]
        self.resources += added
        if wave == max(self.waves):
            self.register_outputs({"objects": self.object_ids})
        return added


def options_from_config(config: pulumi.Config) -> StackOptions:
    """Stack config (camelCase keys of Pulumi.yaml) as options; `siteRepo` is relative to the project folder."""
    values: dict[str, Any] = {}
    for name in StackOptions.model_fields:
        raw = config.get(camel(name))
        if raw not in (None, ""):
            values[name] = raw
    values.setdefault("site_repo", config.require("siteRepo"))
    options = StackOptions.model_validate(values)
    return options.model_copy(update={"site_repo": Path(options.site_repo).expanduser().resolve()})


def deploy_stack(
    stack: str, config: pulumi.Config | None = None, *, inputs: StackInputs | None = None
) -> list[FabricConcept]:
    """Register every concept of `stack`; namespaced objects wait for the namespace when the stack makes it."""
    if inputs is None:
        inputs = load_inputs(options_from_config(config or pulumi.Config()))
    components: list[FabricConcept] = []
    depends: list[pulumi.Resource] = []
    for bundle in build_stack(stack, inputs):
        component = FabricConcept(stack, bundle, pulumi.ResourceOptions(depends_on=list(depends)))
        components.append(component)
        if bundle.concept == "namespace":
            depends.append(component)
    after: list[pulumi.Resource] = [r for c in components for r in c.resources]  # the base
    for wave in sorted({w for c in components for w in c.waves}):
        after = [r for c in components if c.waves for r in c.add_wave(wave, after)] or after
    pulumi.export("site", inputs.site_id)
    pulumi.export("namespace", inputs.namespace)
    pulumi.export("objects", [oid for c in components for oid in c.object_ids])
    return components
