"""Issue 27's "done when", through the real commands: a single-replica change of the reference federation
is refused with its outage estimate (`fabric plan --base main`, exit 3), and accepted with a surge replica
once a node with room is enrolled with `fabric enroll` (SSH into a network-namespace test host) on main."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from llm_fabric.plan.document import Plan
from tests.fixtures.cli import git
from tests.fixtures.testhost import TestHost

FABRIC = str(Path(sys.executable).parent / "fabric")
pytestmark = [pytest.mark.netns, pytest.mark.slow]


def fabric(*args: str, host: TestHost | None = None) -> subprocess.CompletedProcess[str]:
    env = host.env() if host is not None and host.connection == "local" else None
    return subprocess.run([FABRIC, *args], capture_output=True, text=True, env=env, timeout=300, check=False)


def _review(site: Path) -> tuple[subprocess.CompletedProcess[str], Plan]:
    text = fabric("plan", "-C", str(site), "--base", "main")
    as_json = fabric("plan", "-C", str(site), "--base", "main", "--json")
    assert as_json.returncode == text.returncode, as_json.stderr
    return text, Plan.model_validate(json.loads(as_json.stdout))


def test_a_single_replica_change_is_refused_then_surges_onto_an_enrolled_node(
    site_repo: Path, make_test_host: Callable[..., TestHost]
) -> None:
    git(site_repo, "checkout", "-q", "-b", "mistral-context")
    dep = site_repo / "deployments" / "mistral-small-4.yaml"
    dep.write_text(dep.read_text().replace("max_model_len: 131072", "max_model_len: 65536"))
    git(site_repo, "commit", "-qam", "mistral-small-4: a 64k context")

    refused, plan = _review(site_repo)
    assert plan.rollout is not None
    [mistral] = plan.rollout.deployments
    assert mistral.outage_s is not None and mistral.surges == []
    minutes = round(mistral.outage_s / 60)
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert (
        f"the change to `cerit-sc` is refused: the change takes every replica of `mistral-small-4` down at once: "
        f"an outage of about {minutes} minutes" in refused.stderr
    )
    assert "set `rollout.accept_outage`" in refused.stderr
    assert "configuration changed" in refused.stdout  # the restart and why, in the review
    assert f"mistral-small-4: every replica down at once, an outage of about {minutes} minutes: REFUSED" in (
        refused.stdout
    )

    # a node with room is enrolled on main (four H200s), and the change is rebased onto it
    git(site_repo, "checkout", "-q", "main")
    host = make_test_host("h200x4", uuid_salt="rollout")
    enrolled = fabric(
        "enroll", *host.cli_args(), "--site-repo", str(site_repo), "--owner", "cerit-sc", "--site", "brno",
        "--name", "gpu9", host=host,
    )  # fmt: skip
    assert enrolled.returncode == 0, enrolled.stdout + enrolled.stderr
    assert git(site_repo, "log", "-1", "--format=%s").startswith("enroll gpu9")
    git(site_repo, "checkout", "-q", "mistral-context")
    git(site_repo, "rebase", "-q", "main")

    accepted, plan = _review(site_repo)
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert plan.rollout is not None and plan.deployable
    [mistral] = plan.rollout.deployments
    [surge] = mistral.surges
    assert (surge.replaces, surge.source, surge.placement.node) == (0, "free", "gpu9")
    assert mistral.outage_s is None
    assert [(w.wave, w.surges, w.restarts, w.serving) for w in mistral.waves] == [(1, [0], [], 1), (2, [], [0], 1)]
    gpus = ",".join(map(str, surge.placement.gpu_indices))
    assert "Rollout against main: surge replicas" in accepted.stdout
    assert f"gpu9 GPUs {gpus} (1xh200)" in accepted.stdout
    assert "never every replica down at once (max_unavailable 1)" in accepted.stdout
