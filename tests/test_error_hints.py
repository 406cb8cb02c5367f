"""Every hint that names a command is tested to work in its situation (issue 21).

Each case provokes an error (or a note) through the real `fabric` CLI in a fresh copy of the reference
federation, checks the hint as printed, runs the command the hint names (taken from the output, its
placeholders DIR, FILE, ... filled in), does what that command's output says where it names the next
step, and shows the situation resolved by running the provoking command, or the one that proves it,
again. The enrolment, key-change and signature hints are audited in tests/enrollment,
tests/test_trust.py and tests/test_signing.py; this table holds the others.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.fixtures.gateway_site import make_gateway_site

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
RECORDS = "python -m tests.docs.setups records req.jsonl 2026-11 2000"
REPORT = "fabric report -C site --month 2026-11 --out rep"
ISSUED_KEY_ID = 'python -c \'import json; print(json.load(open("issued.json"))["key_id"])\''
_COMMAND = re.compile(r"`(fabric [^`]+)`")


@dataclass(frozen=True)
class Case:
    id: str
    provoke: str
    exit_code: int
    hint: str  # as printed; {site} is the site repo's absolute path
    resolved: str  # must exit 0 afterwards
    setup: str = ""
    fills: dict[str, str] | None = field(default=None)  # placeholders of the hinted command; None: run none
    hinted_exit: int = 0
    hinted_shows: str = ""
    then: str = ""  # what the hinted command's output says to do next (or the operator's edit)
    resolved_shows: str = ""


CASES = [
    Case(
        "nodes show: an unknown node",
        "fabric nodes show dgx-b200 -C site",
        2,
        "see `fabric nodes list -C {site}`",
        "fabric nodes show dgx-b200-01 -C site",
        fills={},
        hinted_shows="dgx-b200-01",
    ),
    Case(
        "nodes verify: a manifest that does not load",
        "fabric nodes verify -C site",
        3,
        "fix what `fabric validate -C {site}` reports first",
        "fabric nodes verify -C site",
        setup="echo '{' >> site/nodes/dgx-b200-01.yaml",
        fills={},
        hinted_exit=2,
        hinted_shows="dgx-b200-01.yaml:48: invalid YAML",
        then="git -C site checkout -q nodes/dgx-b200-01.yaml",
        resolved_shows="all 4 node signatures are valid",
    ),
    Case(
        "cordon: a manifest changed after it was signed",
        "fabric nodes cordon hgx-h200-ceitec -C site",
        3,
        "run `fabric nodes verify -C {site}`",
        "fabric nodes cordon hgx-h200-ceitec -C site",
        setup="sed -i 's/^  memory_gb: 2048/  memory_gb: 1024/' site/nodes/hgx-h200-ceitec.yaml",
        fills={},
        hinted_exit=3,
        hinted_shows="have an operator sign it: `fabric nodes sign hgx-h200-ceitec --site-repo {site}`",
        then="fabric nodes sign hgx-h200-ceitec --site-repo site",
        resolved_shows="hgx-h200-ceitec: cordoned",
    ),
    Case(
        "provision: a node that is not enrolled",
        "fabric provision nope -C site",
        2,
        "enroll it first: `fabric enroll HOST --site-repo site --owner GROUP --site SITE --name nope`",
        "fabric nodes show nope -C site",
        setup="python -m tests.docs.setups facts nope.facts.json h100x8 nope",
        fills={"HOST": "nope --facts nope.facts.json", "GROUP": "cerit-sc", "SITE": "brno"},
        hinted_shows="tier: full",
        resolved_shows="signature: valid",
    ),
    Case(
        "retire: kubectl is not there",
        "fabric nodes retire dgx-b300-01 -C site --kubectl ./no-kubectl",
        2,
        "if the machine and its Kubernetes node are already gone, retire it with --no-drain",
        "fabric nodes retire dgx-b300-01 -C site --no-drain",
        resolved_shows="dgx-b300-01: retired",
    ),
    Case(
        "keys retire: the federation's only key",
        "fabric keys retire enrollment.pub -C site",
        2,
        "rotate it first: `fabric keys rotate -C {site}`",
        "fabric keys retire enrollment.pub -C site && fabric nodes verify -C site",
        fills={},
        hinted_shows="4 node(s) re-signed",
        resolved_shows="all 4 node signatures are valid",
    ),
    Case(
        "validate: no site repo there",
        "fabric validate -C fresh",
        2,
        "run `fabric init DIR` first",
        "fabric validate -C fresh",
        fills={"DIR": "fresh"},
        resolved_shows="valid: fresh",
    ),
    Case(
        "cordon: a folder that is no site repo",
        "fabric nodes cordon dgx-b200-01 -C fresh --key site.enrollment.key",
        2,
        "create one with `fabric init DIR`",
        "fabric validate -C fresh",
        setup="mkdir fresh",
        fills={"DIR": "fresh"},
        resolved_shows="valid: fresh",
    ),
    Case(
        "init: the current folder",
        "cd fresh && fabric init .",
        2,
        "run it from the parent: fabric init fresh",
        "fabric validate -C fresh",
        setup="mkdir fresh",
        then="fabric init fresh",
        resolved_shows="valid: fresh",
    ),
    Case(
        "tenants add: the tenant exists",
        "fabric tenants add cerit-sc -C site --display-name CERIT --data-class public",
        2,
        "see `fabric tenants show cerit-sc -C {site}`",
        "fabric tenants add cerit-sc-2 -C site --display-name CERIT --data-class public",
        fills={},
        hinted_shows="CERIT-SC (operator of the fabric)",
    ),
    Case(
        "tenants key revoke: no key named",
        "fabric tenants key revoke cerit-sc -C site",
        2,
        "give KEY_ID (see `fabric tenants key list cerit-sc -C {site}`) or --all",
        "fabric tenants key list cerit-sc -C site",
        setup="fabric tenants key issue cerit-sc -C site --json > issued.json",
        fills={},
        hinted_shows="issued",
        then=f"fabric tenants key revoke cerit-sc -C site $({ISSUED_KEY_ID})",
        resolved_shows="cerit-sc has no key",
    ),
    Case(
        "tenants key issue: the tenant file is not a mapping",
        "fabric tenants key issue cerit-sc -C site",
        2,
        "fix the file (`fabric validate -C {site}` names the problem)",
        "fabric tenants key issue cerit-sc -C site",
        setup="echo '- a list' > site/tenants/cerit-sc.yaml",
        fills={},
        hinted_exit=2,
        hinted_shows="tenants/cerit-sc.yaml",
        then="git -C site checkout -q tenants/cerit-sc.yaml",
    ),
    Case(
        "validate: one key under two tenants",
        "fabric validate -C site",
        2,
        "revoke it from one of them: `fabric tenants key revoke ",
        "fabric validate -C site",
        setup="fabric tenants key issue muni-researchers -C site && "
        "sed -n '/^keys:/,$p' site/tenants/muni-researchers.yaml >> site/tenants/fnusa-clinical.yaml",
        fills={},
    ),
    Case(
        "gateway config: a tenant without a key (a note)",
        "fabric gateway config -C site --site brno --out gw",
        0,
        "tenant `cerit-sc` has no key: `fabric tenants key issue cerit-sc -C site`",
        "fabric gateway config -C site --site brno --out gw | grep -c 'tenant `cerit-sc` has no key' | grep -qx 0",
        fills={},
    ),
    Case(
        "render: the plan is incomplete",
        "fabric render -C site --site brno --out deploy",
        3,
        "run `fabric plan -C DIR` to see the placement and the reasons",
        "fabric render -C site --site brno --out deploy",
        # more replicas than the pool holds (a cordon no longer makes a plan incomplete: it is a shortfall
        # that deploys, docs/pool.md)
        setup="sed -i 's/^replicas: 1$/replicas: 5/' site/deployments/qwen3-5-122b.yaml"
        " && git -C site commit -qam 'five replicas'",
        fills={"DIR": "site"},
        hinted_exit=3,
        hinted_shows="qwen3-5-122b",
        then="sed -i 's/^replicas: 5$/replicas: 1/' site/deployments/qwen3-5-122b.yaml && git -C site commit -qam 1",
        resolved_shows="rendered site brno",
    ),
    Case(
        "render --plan: a plan whose rollout was refused (issue 41 point 6)",
        "fabric render -C site --site brno --plan plan.json --out deploy",
        3,
        "run `fabric plan -C DIR --base main` to see the refused rollout; enrol or free GPUs for a surge replica",
        "fabric plan -C site --base main -o plan.json"
        " && fabric render -C site --site brno --plan plan.json --out deploy",
        setup="git -C site checkout -q -b mistral-context"
        " && sed -i 's/max_model_len: 131072/max_model_len: 65536/' site/deployments/mistral-small-4.yaml"
        " && git -C site commit -qam '64k' && { fabric plan -C site --base main -o plan.json > /dev/null || true; }",
        fills={"DIR": "site"},
        hinted_exit=3,
        hinted_shows="takes every replica of `mistral-small-4` down at once",
        then="printf 'rollout:\\n  accept_outage: a night-time change\\n' >> site/deployments/mistral-small-4.yaml"
        " && git -C site commit -qam accept",
        resolved_shows="rendered site brno",
    ),
    Case(
        "render --plan: not a plan document",
        "fabric render -C site --site brno --plan old.json --out deploy",
        2,
        "write it again with `fabric plan -o FILE` of this fabric version",
        "fabric render -C site --site brno --plan old.json --out deploy",
        setup="echo '{\"replicas\": []}' > old.json",
        fills={"-o": "-C site -o", "FILE": "old.json"},
        resolved_shows="rendered site brno",
    ),
    Case(
        "report: --month and --out missing",
        "fabric report -C site",
        2,
        "see `fabric report --help`",
        f"{REPORT} --requests req.jsonl",
        setup=RECORDS,
        fills={},
        hinted_shows="--month YYYY-MM",
    ),
    Case(
        "report: no usage data",
        REPORT,
        2,
        "ingest records (`fabric ledger ingest -C site FILE`)",
        REPORT,
        setup=RECORDS,
        fills={"FILE": "req.jsonl"},
        hinted_shows="2,000 record(s) added",
    ),
    Case(
        "ledger status: no store yet",
        "fabric ledger status -C site",
        2,
        "ingest records first: `fabric ledger ingest -C DIR FILE`",
        "fabric ledger status -C site",
        setup=RECORDS,
        fills={"DIR": "site", "FILE": "req.jsonl"},
        resolved_shows="2,000 records",
    ),
    Case(
        "report verify: a link, not the report folder",
        "fabric report verify latest",
        2,
        "give the --out folder of `fabric report`",
        "fabric report verify rep -C site",
        setup=f"{RECORDS} && {REPORT} --requests req.jsonl && ln -s rep latest",
        resolved_shows="a trusted key",
    ),
    Case(
        "report verify: the manifest is gone",
        "fabric report verify rep -C site",
        3,
        "the report folder was altered; re-run `fabric report`",
        "fabric report verify rep -C site",
        setup=f"{RECORDS} && {REPORT} --requests req.jsonl && rm rep/manifest.json",
        fills={"report": "report -C site --month 2026-11 --out rep --requests req.jsonl"},
        resolved_shows="a trusted key",
    ),
    Case(
        "report verify: unsigned, trusted keys given",
        "fabric report verify rep -C site",
        3,
        "re-run `fabric report` with `--sign-key FILE`, the federation's private key",
        "fabric report verify rep -C site",
        setup=f"{RECORDS} && mv site.enrollment.key federation.key && {REPORT} --requests req.jsonl",
        fills={"report": "report -C site --month 2026-11 --out rep --requests req.jsonl --sign-key federation.key"},
        resolved_shows="a trusted key",
    ),
    Case(
        "report verify --require-signature: unsigned",
        "fabric report verify rep --require-signature",
        3,
        "re-run `fabric report` with `--sign-key FILE`, the federation's private key",
        "fabric report verify rep --require-signature -C site",
        setup=f"{RECORDS} && mv site.enrollment.key federation.key && {REPORT} --requests req.jsonl",
        fills={"report": "report -C site --month 2026-11 --out rep --requests req.jsonl --sign-key federation.key"},
        resolved_shows="a trusted key",
    ),
    Case(
        "report verify: a site repo without keys",
        "fabric report verify rep -C elsewhere",
        2,
        "or the signer's key with --public-key FILE",
        "fabric report verify rep --public-key site/keys/enrollment.pub",
        setup=f"{RECORDS} && {REPORT} --requests req.jsonl && mkdir elsewhere",
        resolved_shows="a trusted key",
    ),
]


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FABRIC_SITE_REPO", "FABRIC_ENROLLMENT_KEY")}
    return env | {
        "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        "PYTHONPATH": os.pathsep.join([str(REPO / "platform"), str(REPO), env.get("PYTHONPATH", "")]),
        "COLUMNS": "200",
        "NO_COLOR": "1",
    }


def sh(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", script], cwd=cwd, env=environment(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, timeout=300, check=False,
    )  # fmt: skip


def hinted_command(output: str, hint: str, fills: dict[str, str]) -> str:
    """The first `fabric ...` command quoted in the line that holds the hint, placeholders filled in."""
    line = next(line for line in output.splitlines() if hint in line)
    command = _COMMAND.findall(line[line.index(hint) :])[0]
    for placeholder, value in fills.items():
        command = re.sub(rf"(?<![\w-]){re.escape(placeholder)}(?![\w-])", value, command)
    return command


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_hint_names_a_command_that_resolves_the_situation(case: Case, tmp_path: Path) -> None:
    made = sh("fabric init site --example cerit-sc", tmp_path)
    assert made.returncode == 0, made.stdout
    site = str(tmp_path / "site")
    if case.setup:
        ready = sh(f"set -e\n{case.setup}", tmp_path)
        assert ready.returncode == 0, ready.stdout

    provoked = sh(case.provoke, tmp_path)
    assert provoked.returncode == case.exit_code, provoked.stdout
    assert case.hint.format(site=site) in provoked.stdout, provoked.stdout
    assert "Traceback" not in provoked.stdout

    if case.fills is not None:
        command = hinted_command(provoked.stdout, case.hint.format(site=site), case.fills)
        hinted = sh(command, tmp_path)
        assert hinted.returncode == case.hinted_exit, (command, hinted.stdout)
        assert case.hinted_shows.format(site=site) in hinted.stdout, (command, hinted.stdout)
    if case.then:
        step = sh(case.then, tmp_path)
        assert step.returncode == 0, (case.then, step.stdout)

    resolved = sh(case.resolved, tmp_path)
    assert resolved.returncode == 0, (case.resolved, resolved.stdout)
    assert case.resolved_shows in resolved.stdout, resolved.stdout


def test_two_sites_the_hint_names_the_option_that_picks_one(tmp_path: Path) -> None:
    make_gateway_site(tmp_path / "site")  # the reference federation plus a second site, vienna
    provoked = sh("fabric render -C site --out deploy", tmp_path)
    assert provoked.returncode == 2, provoked.stdout
    assert "pass --site brno (or another of them); in a Pulumi stack: pulumi config set site brno" in provoked.stdout
    resolved = sh("fabric render -C site --out deploy --site brno", tmp_path)
    assert resolved.returncode == 0, resolved.stdout
    assert "rendered site brno" in resolved.stdout


def test_a_manifest_that_does_not_load_is_named_once_with_its_line(tmp_path: Path) -> None:
    assert (
        sh("fabric init site --example cerit-sc && echo '{' >> site/nodes/dgx-b200-01.yaml", tmp_path).returncode == 0
    )
    verified = sh("fabric nodes verify -C site", tmp_path)
    assert verified.returncode == 3, verified.stdout
    [problem] = [line for line in verified.stdout.splitlines() if "dgx-b200-01.yaml" in line]
    assert problem.count("dgx-b200-01.yaml") == 1 and re.search(r"dgx-b200-01\.yaml:\d+: invalid YAML", problem), (
        problem
    )
