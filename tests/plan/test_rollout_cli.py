"""`fabric plan --base` on a real git site repo: a refused rollout is counted in the exit-3 message beside the
plan's other problems, and `rollout.accept_outage` in the deployment's file lets the same change through."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_fabric.cli.main import main
from llm_fabric.site.gitrepo import commit_paths


def _edit(site: Path, name: str, old: str, new: str) -> Path:
    path = site / "deployments" / f"{name}.yaml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    return path


def test_a_refused_rollout_is_counted_with_the_other_problems(
    site_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mistral = _edit(site_repo, "mistral-small-4", "max_model_len: 131072", "max_model_len: 65536")
    kimi = _edit(site_repo, "kimi-k2-6", "replicas: 1", "replicas: 3")  # a shortfall: no room for two more
    assert commit_paths(site_repo, [mistral, kimi], "mistral: 64k context; kimi: 3 replicas") is not None
    capsys.readouterr()
    assert main(["plan", str(site_repo), "--base", "HEAD~1"]) == 3
    out, err = capsys.readouterr()
    assert err.endswith("\nerror: the plan for `cerit-sc` is incomplete (1 problem, 1 refused rollout, listed above)\n")
    assert "mistral-small-4: every replica down at once, an outage of about 7 minutes: REFUSED" in out


def test_accept_outage_in_the_deployment_lets_the_change_through(
    site_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mistral = _edit(site_repo, "mistral-small-4", "max_model_len: 131072", "max_model_len: 65536")
    mistral.write_text(mistral.read_text() + "rollout:\n  accept_outage: restart in the Sunday maintenance window\n")
    assert commit_paths(site_repo, [mistral], "mistral: 64k context, restarted in the maintenance window") is not None
    capsys.readouterr()
    assert main(["plan", str(site_repo), "--base", "HEAD~1", "--format", "markdown"]) == 0
    out, _ = capsys.readouterr()
    assert (
        "_mistral-small-4: every replica down at once, an outage of about 7 minutes: accepted "
        "(restart in the Sunday maintenance window)_" in out
    )


def test_restarts_at_two_sites_can_overlap_and_are_an_outage_when_they_can_take_every_replica(
    site_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # gpt-oss-120b: one replica at brno, one at vienna. Each site's controller orders its own waves and waits for
    # no other cluster, so the two restarts can overlap whatever the wave numbers say
    gpt = _edit(site_repo, "gpt-oss-120b", "max_model_len: 131072", "max_model_len: 65536")
    assert commit_paths(site_repo, [gpt], "gpt-oss-120b: 64k context") is not None
    capsys.readouterr()
    assert main(["plan", str(site_repo), "--base", "HEAD~1"]) == 3
    out, err = capsys.readouterr()
    assert (
        "gpt-oss-120b: every replica can be down at once (its restarts at brno and vienna are ordered within each "
        "site only), an outage of about 5 minutes: REFUSED (`rollout.accept_outage` not set)"
    ) in out
    assert "its replicas at brno and vienna restart under controllers that do not wait for each other" in err

    # a third replica makes it a partial overlap: served throughout, and the review says how many can be down
    _edit(site_repo, "gpt-oss-120b", "replicas: 2", "replicas: 3")
    assert commit_paths(site_repo, [gpt], "gpt-oss-120b: a third replica") is not None
    capsys.readouterr()
    rc = main(["plan", str(site_repo), "--base", "HEAD~2"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "gpt-oss-120b: up to 2 replicas down at once, more than max_unavailable 1: its restarts at brno and " in out
