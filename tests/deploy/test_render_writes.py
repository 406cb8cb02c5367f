"""The cheaper render path writes the same bytes: the fast YAML dumper, batched atomic writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from llm_fabric.atomicio import AtomicBatch
from llm_fabric.deploy.build import STACK_ORDER, StackInputs, build_stack
from llm_fabric.deploy.render import dump_yaml, render_stacks
from llm_fabric.errors import UsageError
from llm_fabric.kube.manifests import all_objects

ODD_SCALARS: dict[str, Any] = {
    "strings": ["yes", "on", "No", "1", "1.5", "0x1f", "1e3", "~", "", "null", "2024-01-01", "12:30", "a: b", "- x"],
    "more": ["#c", "multi\nline", " lead", "trail ", "'q'", '"d"', "é", "*a", "&b", "!t", "%p", "@x", "`y"],
    "other": [3, -2, 2.5, float("inf"), True, False, None, {}, [], {"nested": [{"k": "v"}]}],
}


class _Reference(yaml.SafeDumper):
    """PyYAML's pure-Python SafeDumper without anchors: the output the fast dumper must match."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _reference(data: Any) -> str:
    return yaml.dump(data, Dumper=_Reference, sort_keys=False, default_flow_style=False, width=1 << 16)


def test_fast_dumper_writes_what_safe_dumper_writes(reference_inputs: StackInputs) -> None:
    objects = [o for stack in STACK_ORDER for o in all_objects(build_stack(stack, reference_inputs))]
    assert len(objects) > 30
    for obj in [*objects, ODD_SCALARS]:
        assert dump_yaml(obj) == _reference(obj)


def test_batch_replaces_every_file_or_none(tmp_path: Path) -> None:
    old = tmp_path / "a.yaml"
    old.write_text("old\n")
    with AtomicBatch() as batch:
        batch.write(old, "new\n")
        batch.write(tmp_path / "sub" / "b.yaml", "b\n", mode=0o600)
        assert old.read_text() == "old\n"  # nothing is visible before the commit
    assert old.read_text() == "new\n" and (tmp_path / "sub" / "b.yaml").stat().st_mode & 0o777 == 0o600
    with pytest.raises(RuntimeError), AtomicBatch() as batch:
        batch.write(old, "newer\n")
        raise RuntimeError("the render failed half way")
    assert old.read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a.yaml", "b.yaml", "sub"]  # no temporary files left


def test_a_failed_render_writes_nothing(reference_inputs: StackInputs, tmp_path: Path) -> None:
    plan = reference_inputs.the_plan()
    # two replicas with one index would be written to one file, which is refused once the allocations
    # stack and most of the serving stack are rendered: none of them may land
    twin = plan.replicas[-1].model_copy()
    reference_inputs.plan = plan.model_copy(update={"replicas": [*plan.replicas, twin]})
    with pytest.raises(UsageError, match="two resources would be written"):
        render_stacks(reference_inputs, tmp_path)
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []
