"""The serving stack of a plan with a rollout through the real Pulumi SDK (mocked engine): each wave's
workloads are registered depending on the wave before's, the first wave's on the base."""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.runtime.mocks import MockMonitor

from llm_fabric.deploy.build import StackInputs, build_stack
from llm_fabric.deploy.components import deploy_stack
from llm_fabric.kube.manifests import all_objects
from llm_fabric.serving.waves import SYNC_WAVE
from tests.deploy.rolloutfixture import rollout_plan
from tests.deploy.test_pulumi_stacks import RecordingMocks, kubernetes


class DependencyMonitor(MockMonitor):  # type: ignore[misc]
    """The SDK's mock monitor, also keeping the dependencies each registration request carries."""

    def __init__(self, mocks: pulumi.runtime.Mocks) -> None:
        super().__init__(mocks)
        self.depends: dict[str, set[str]] = {}  # "Kind/name" of a Kubernetes object -> "Kind/name" it waits for

    def RegisterResource(self, request: Any) -> Any:  # the gRPC method's name
        if request.type.startswith("kubernetes:"):
            self.depends[_object(request.type, request.name)] = {
                _object(urn.split("::")[-2].split("$")[-1], urn.split("::")[-1])
                for urn in request.dependencies
                if "kubernetes:" in urn
            }
        return super().RegisterResource(request)


def _object(typ: str, name: str) -> str:
    return f"{typ.split(':')[-1]}/{name.split('/')[-1]}"


def _run(inputs: StackInputs) -> DependencyMonitor:
    mocks = RecordingMocks()
    monitor = DependencyMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project="llm-fabric-serving", stack="brno", preview=False, monitor=monitor)

    @pulumi.runtime.test
    def program() -> pulumi.Output[Any]:
        components = deploy_stack("serving", inputs=inputs)
        return pulumi.Output.all(*[r.id for c in components for r in c.resources])

    program()
    return monitor


def test_each_wave_waits_for_the_wave_before(reference_inputs: StackInputs) -> None:
    reference_inputs.plan = rollout_plan()
    depends = _run(reference_inputs).depends
    wave1 = {"Deployment/qwen3-5-surge-0", "Deployment/mistral-small-4-0"}
    base = set(depends) - wave1 - {"Deployment/qwen3-5-0"}
    assert {"Deployment/glm-5-1-0", "Deployment/fabric-gateway", "PodDisruptionBudget/qwen3-5"} <= base
    for name in wave1:
        assert depends[name] == base, name  # every object of the base, and nothing of its own wave
    assert depends["Deployment/qwen3-5-0"] == wave1  # the restart waits for its surge (and wave 1's other restart)
    # the base waits for nothing of a wave (a namespaced object only for the namespace)
    assert all(not (deps & (wave1 | {"Deployment/qwen3-5-0"})) for name, deps in depends.items() if name in base)


def test_without_a_rollout_no_workload_waits_for_another(reference_inputs: StackInputs) -> None:
    depends = _run(reference_inputs).depends
    assert depends["Deployment/qwen3-5-0"] == set()  # its component waits for the namespace's, not the object
    assert not any(d for d in depends.values())


def test_the_stack_registers_the_rendered_objects_with_their_wave_marks(reference_inputs: StackInputs) -> None:
    reference_inputs.plan = rollout_plan()
    mocks = RecordingMocks()
    pulumi.runtime.set_mocks(mocks, project="llm-fabric-serving", stack="brno", preview=False)

    @pulumi.runtime.test
    def program() -> pulumi.Output[Any]:
        components = deploy_stack("serving", inputs=reference_inputs)
        return pulumi.Output.all(*[r.id for c in components for r in c.resources])

    program()
    registered = kubernetes(mocks)
    rendered = {
        f"{o['kind']}/{o['metadata']['name']}": o for o in all_objects(build_stack("serving", reference_inputs))
    }
    assert registered == rendered
    assert registered["Deployment/qwen3-5-surge-0"]["metadata"]["annotations"][SYNC_WAVE] == "1"
