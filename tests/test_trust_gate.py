"""Every delivery path refuses a signed node manifest edited by hand and committed: exit 3, nothing written.

The edit is the one of issue 25: `owner:` of nodes/dgx-b200-01.yaml in the example site changed after
`fabric init` signed it, then committed. Each path (render one site, render every site, each stack alone,
the Pulumi stacks through the SDK, gateway config and run, provision, plan and plan --base) goes through
`load_trusted_site`, whose `TrustedSite` is the only type those paths accept, and the signature verdict
comes before any other problem the edit causes.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pulumi
import pytest

from llm_fabric.cli.main import main
from llm_fabric.deploy.components import deploy_stack
from llm_fabric.errors import PolicyRefusal
from llm_fabric.init import init_site

NODE = "dgx-b200-01"
REFUSED = "untrusted nodes are never planned, rendered or provisioned"
EDITED = "the signature does not match the content: the manifest was changed after it was signed"


def _tampered(tmp_path: Path, owner: str) -> Path:
    root = init_site(tmp_path / "site", "cerit-sc").root
    path = root / "nodes" / f"{NODE}.yaml"
    text = path.read_text()
    assert "\nowner: cerit-sc\n" in text
    path.write_text(text.replace("\nowner: cerit-sc\n", f"\nowner: {owner}\n"))
    subprocess.run(["git", "commit", "-qam", f"{NODE}: owner {owner}"], cwd=root, check=True)
    return root


@pytest.fixture(scope="module")
def tampered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Owner moved to another contributor: the repo is otherwise valid, only the signature fails."""
    return _tampered(tmp_path_factory.mktemp("tampered"), "ceitec-structural")


@pytest.fixture(scope="module")
def tampered_invalid(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Owner moved to a tenant that contributes nothing: the edit also breaks a reference check."""
    return _tampered(tmp_path_factory.mktemp("invalid"), "muni-researchers")


def _refused(capsys: pytest.CaptureFixture[str], code: int) -> str:
    err = capsys.readouterr().err
    assert code == 3, err
    assert REFUSED in err and f"nodes/{NODE}.yaml" in err and f"node `{NODE}`: {EDITED}" in err
    # the hint says what happened, never a command carrying the edited owner
    assert "restore the signed content from git" in err and "ceitec-structural" not in err
    return err


def test_render_one_site_refuses(tampered: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    _refused(capsys, main(["render", "-C", str(tampered), "--site", "brno", "--out", str(out)]))
    assert not out.exists()


def test_render_all_sites_refuses(tampered: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The bypass of issue 25: this loaded the site with plain load_site and exited 0."""
    out = tmp_path / "out"
    args = ["render", "-C", str(tampered), "--all-sites", "--stack", "allocations", "--out", str(out)]
    _refused(capsys, main(args))
    assert not out.exists()
    _refused(capsys, main(["render", "-C", str(tampered), "--all-sites", "--out", str(out)]))
    assert not out.exists()


@pytest.mark.parametrize("stack", ["allocations", "serving", "observability"])
def test_each_stack_alone_refuses(
    stack: str, tampered: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    _refused(capsys, main(["render", "-C", str(tampered), "--site", "brno", "--stack", stack, "--out", str(out)]))
    assert not out.exists()


class _RecordingMocks(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.resources: list[str] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.resources.append(args.name)
        return f"{args.name}-id", args.inputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
        return {}


@pytest.mark.parametrize("stack", ["allocations", "serving", "observability"])
def test_each_pulumi_stack_refuses_through_the_sdk(stack: str, tampered: Path) -> None:
    """The stack program as `pulumi up` runs it (stacks/STACK/__main__.py): config in, nothing registered."""
    project = f"llm-fabric-{stack}"
    mocks = _RecordingMocks()
    pulumi.runtime.set_mocks(mocks, project=project, stack="brno", preview=False)
    pulumi.runtime.set_all_config({f"{project}:siteRepo": str(tampered), f"{project}:site": "brno"})
    try:
        with pytest.raises(PolicyRefusal) as refused:
            deploy_stack(stack, pulumi.Config())
    finally:
        pulumi.runtime.set_all_config({})
    assert REFUSED in refused.value.message
    assert any(f"node `{NODE}`: {EDITED}" in p.message for p in refused.value.problems)
    assert mocks.resources == []


def test_gateway_config_refuses(tampered: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "gw"
    _refused(capsys, main(["gateway", "config", "-C", str(tampered), "--site", "brno", "--out", str(out)]))
    assert not out.exists()


def test_gateway_run_refuses_before_any_proxy(
    tampered: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir, records = tmp_path / "run", tmp_path / "records"
    args = ["gateway", "run", "-C", str(tampered), "--site", "brno", "--endpoint", "qwen3-5=http://127.0.0.1:9/v1"]
    _refused(capsys, main([*args, "--records", str(records), "--run-dir", str(run_dir)]))
    assert not run_dir.exists() and not records.exists()


@pytest.mark.parametrize("node", [NODE, "hgx-h200-ceitec"])
def test_provision_refuses(node: str, tampered: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The edited node and an untouched one: the site is judged whole, before Ansible is started."""
    err = _refused(capsys, main(["provision", node, "-C", str(tampered), "--connection", "local", "--check"]))
    assert "provision.yml" not in err


def test_plan_refuses(tampered: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    written = tmp_path / "plan.json"
    _refused(capsys, main(["plan", "-C", str(tampered), "-o", str(written)]))
    assert not written.exists()
    _refused(capsys, main(["plan", "-C", str(tampered), "--base", "HEAD~1", "-o", str(written)]))
    assert not written.exists()


@pytest.mark.parametrize("command", [["plan"], ["render", "--all-sites", "--out", "OUT"], ["gateway", "config"]])
def test_trust_is_judged_before_what_the_edit_broke(
    command: list[str], tampered_invalid: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The new owner contributes nothing: the signature verdict (exit 3) comes, not the reference error (2)."""
    args = [str(tmp_path / "out") if a == "OUT" else a for a in command]
    if command[0] == "gateway":
        args += ["--site", "brno", "--out", str(tmp_path / "out")]
    code = main([*args, "-C", str(tampered_invalid)])
    err = capsys.readouterr().err
    assert code == 3, err
    assert f"node `{NODE}`: {EDITED}" in err and "is not a contributor" not in err
    assert not (tmp_path / "out").exists()


def test_validate_names_the_edit_and_does_not_repeat_it(tampered: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["validate", "-C", str(tampered)])
    text = "".join(capsys.readouterr())
    assert code == 3, text
    assert f"node `{NODE}`: {EDITED}" in text and "restore the signed content from git" in text
    assert f"git -C {tampered} log -p -- nodes/{NODE}.yaml" in text
    assert "--owner ceitec-structural" not in text


def test_an_edited_enrolled_node_is_not_told_to_re_enroll_with_the_edit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An enrolled node whose owner was edited: the hint re-enrolls the machine's facts, not the edited owner."""
    from tests.fixtures.factsbundle import write_bundle

    root = init_site(tmp_path / "site", "cerit-sc").root
    bundle = write_bundle(tmp_path / "box.facts.json", "h100x8", uuid_salt="edited-owner")
    enrolled = ["enroll", "box", "--facts", str(bundle), "-C", str(root), "--owner", "cerit-sc", "--site", "brno"]
    assert main(enrolled) == 0, capsys.readouterr()
    path = root / "nodes" / "box.yaml"
    path.write_text(path.read_text().replace("\nowner: cerit-sc\n", "\nowner: tuwien-ai\n"))
    capsys.readouterr()
    code = main(["plan", "-C", str(root)])
    err = capsys.readouterr().err
    assert code == 3, err
    assert f"node `box`: {EDITED}" in err and "restore the signed content from git" in err
    assert f"fabric enroll HOST --site-repo {root} --owner OWNER --site SITE --name box" in err
    assert "tuwien-ai" not in err
    # `fabric nodes verify` gives the same hint, not a re-enrolment under the edited owner
    code = main(["nodes", "verify", "-C", str(root)])
    err = capsys.readouterr().err
    assert code == 3, err
    assert "1 of 5 node manifests fail verification" in err and EDITED in err, err
    assert "restore the signed content from git" in err and f"git -C {root} log -p -- nodes/box.yaml" in err
    assert f"fabric enroll HOST --site-repo {root} --owner OWNER --site SITE --name box" in err
    assert "tuwien-ai" not in err


@pytest.mark.parametrize(
    "command",
    [["report", "--month", "2026-11"], ["exporter", "--once"]],
    ids=["report", "exporter"],
)
def test_the_ledger_figures_refuse(
    command: list[str], tampered: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The report and the exporter credit owners with their nodes' GPUs: an edited owner is refused."""
    out = tmp_path / "out"
    args = [*command, "-C", str(tampered)] + (["--out", str(out)] if command[0] == "report" else [])
    _refused(capsys, main(args))
    assert not out.exists()
