"""Issue 39 F3: a weights re-pin after a canary reference was recorded.

The reference is recorded for the plan's configuration fingerprint with the lock at revision A; the lock is
re-pinned to B and every replica answers otherwise than A did. The revision is part of the fingerprint, so
the reference is not compared (the replicas are judged by agreement and pass); and a reference that does
apply to every configuration (one recorded without a fingerprint) cannot take the whole deployment out of
its Service: the replicas stay in rotation and ready, and `fabric_canary_held_in_rotation` says why.
The plans are the real `fabric plan`'s; the answers are given to the real judge (engines are
tests/live/test_canary.py's)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from llm_fabric.engine.recipes import get_recipe
from llm_fabric.live.canary import Answer, CanaryReference, CanaryRun, ReferenceAnswer, judge_deployment
from llm_fabric.live.prober import ProberState, rotation, rotation_exposition
from llm_fabric.observability.canary import rule_groups
from llm_fabric.plan.document import Plan, load_plan
from llm_fabric.site.weights_lock import LockedCheckpoint, LockedFile, WeightsLock
from llm_fabric.weights.lock_file import write_lock
from tests.fixtures.gateway_site import edit_yaml
from tests.live.plans import DEPLOYMENT, plan_of, planned_site

REVISION_A, REVISION_B = "a" * 40, "b" * 40
HELD_METRIC = "fabric_canary_held_in_rotation"


def _pin(repo: Path, checkpoint: str, revision: str) -> None:
    files = [LockedFile(path="model.safetensors", size=10, sha256=revision[0] * 64)]
    write_lock(repo, WeightsLock(checkpoints={checkpoint: LockedCheckpoint(revision=revision, files=files)}))


def _plans(tmp_path: Path) -> tuple[Plan, Plan, Plan]:
    """The unpinned plan, the plan with the lock at A, and at B (two qwen3-5 replicas)."""
    repo = planned_site(tmp_path / "site", replicas=2)
    edit_yaml(repo / "deployments" / "kimi-k2-6.yaml", lambda d: d.update(replicas=0))
    subprocess.run(["git", "commit", "-qam", "two replicas"], cwd=repo, check=True, capture_output=True)
    unpinned = load_plan(plan_of(repo, tmp_path / "plan.json"))
    checkpoint = unpinned.replicas_of(DEPLOYMENT)[0].checkpoint
    _pin(repo, checkpoint, REVISION_A)
    at_a = load_plan(plan_of(repo, tmp_path / "plan-a.json"))
    _pin(repo, checkpoint, REVISION_B)
    return unpinned, at_a, load_plan(plan_of(repo, tmp_path / "plan-b.json"))


def _run(plan: Plan, reference: CanaryReference, text: str) -> tuple[CanaryRun, list[str]]:
    prompts = [p for p in get_recipe("qwen3.5").canary if p.name == "capital"]
    replicas = plan.replicas_of(DEPLOYMENT)
    answers = {r.index: [Answer("capital", text, completion_tokens=2, script="latin")] for r in replicas}
    notes: list[str] = []
    urls = {r.index: f"http://r{r.index}" for r in replicas}
    return CanaryRun(judge_deployment(replicas, answers, urls, prompts, reference, notes), []), notes


def _reference(fingerprint: str | None) -> CanaryReference:
    return CanaryReference(
        deployment=DEPLOYMENT,
        recipe="qwen3.5",
        fingerprint=fingerprint,
        recorded_from=f"{DEPLOYMENT}/0",
        answers={"capital": ReferenceAnswer(text="Paris", completion_tokens=2)},
    )


def test_a_repin_changes_the_fingerprint_of_pinned_replicas_only(tmp_path: Path) -> None:
    unpinned, at_a, at_b = _plans(tmp_path)
    for before, after in zip(at_a.replicas_of(DEPLOYMENT), at_b.replicas_of(DEPLOYMENT), strict=True):
        assert (before.revision, after.revision) == (REVISION_A, REVISION_B)
        assert after.config_fingerprint.fields.revision == REVISION_B
        assert before.config_fingerprint.describe_differences(after.config_fingerprint) == (
            f'revision ("{REVISION_A}" vs "{REVISION_B}")'
        )
    # a replica whose checkpoint no lock pins keeps the fingerprint of its command
    for plain, pinned in zip(unpinned.replicas, at_a.replicas, strict=True):
        if pinned.revision is None:
            assert plain.config_fingerprint == pinned.config_fingerprint
    assert all(r.config_fingerprint.fields.revision is None for r in unpinned.replicas)


def test_a_reference_recorded_for_the_old_revision_leaves_the_deployment_in_service(tmp_path: Path) -> None:
    _, at_a, at_b = _plans(tmp_path)
    recorded = _reference(at_a.replicas_of(DEPLOYMENT)[0].config_fingerprint.sha256)
    assert all(not v.failures for v in _run(at_a, recorded, "Paris")[0].replicas)  # A's answers: the reference's

    run, notes = _run(at_b, recorded, "Lyon")  # every replica of B answers otherwise than A did
    assert [(v.name, v.state, v.reference_agrees) for v in run.replicas] == [
        (f"{DEPLOYMENT}/0", "pass", None),
        (f"{DEPLOYMENT}/1", "pass", None),
    ]
    assert notes == [
        f"{DEPLOYMENT}: the reference in canary/{DEPLOYMENT}.yaml was recorded for another configuration; "
        "judged by agreement only until one is recorded (`fabric canary --record`)"
    ]
    assert all(e.in_rotation for e in rotation(at_b, run, {}))


def test_a_failure_of_every_replica_without_a_matching_reference_is_held_in_and_alerts(tmp_path: Path) -> None:
    _, _, at_b = _plans(tmp_path)
    run, _ = _run(at_b, _reference(None), "Lyon")  # a reference without a fingerprint applies to every one
    assert [v.state for v in run.replicas] == ["fail", "fail"]

    entries = [e for e in rotation(at_b, run, {}) if e.deployment == DEPLOYMENT]
    assert [(e.index, e.in_rotation) for e in entries] == [(0, True), (1, True)]
    why = entries[0].held or ""
    assert why.startswith(f"every replica of {DEPLOYMENT} fails its canary and no reference recorded for its")
    state = ProberState(entries=entries)
    state.update(run, entries, [])
    answer = state.replica(DEPLOYMENT, 0)  # what the readiness probe reads: `fail` would take it out
    assert (answer["state"], answer["in_rotation"], answer["held"]) == ("unknown", True, why)
    site, node = entries[0].site, entries[0].node
    assert f'{HELD_METRIC}{{deployment="{DEPLOYMENT}",node="{node}",replica="0",site="{site}"}} 1.0' in (
        rotation_exposition(entries)
    )
    alerts = {r["alert"]: r for g in rule_groups() for r in g["rules"]}
    assert HELD_METRIC in alerts["FabricCanaryHeldInRotation"]["expr"]

    # with a sibling that passes, the odd one out is taken out as before
    prompts = [p for p in get_recipe("qwen3.5").canary if p.name == "capital"]
    replicas = at_b.replicas_of(DEPLOYMENT)
    texts = {0: "Paris", 1: "Lyon"}
    answers = {i: [Answer("capital", t, completion_tokens=2, script="latin")] for i, t in texts.items()}
    split = CanaryRun(
        judge_deployment(replicas, answers, {0: "http://r0", 1: "http://r1"}, prompts, _reference(None), []), []
    )
    out = {e.index: e for e in rotation(at_b, split, {}) if e.deployment == DEPLOYMENT}
    assert out[0].in_rotation and not out[1].in_rotation and out[1].held is None
    assert out[1].reasons == [
        'canary: capital: answer "Lyon" differs from the reference "Paris" (recorded from qwen3-5/0)'
    ]
