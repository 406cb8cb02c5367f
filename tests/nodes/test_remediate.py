"""`fabric nodes remediate`: a firing GPU fault alert becomes a review branch with a signed cordon.

Real components throughout: the real Prometheus server scrapes a test exporter on 127.0.0.1 that serves
`DCGM_FI_DEV_XID_ERRORS` as dcgm-exporter does (the `node` label is the target's, as the rendered
ServiceMonitor sets it), with the alert rules `fabric render --stack observability` wrote loaded; the
branch is judged by the real `fabric validate --base` and `fabric plan --base` in a git worktree of it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fixtures.cli import FABRIC, fabric, git
from tests.fixtures.prometheus import PrometheusServer, free_port, scrape_job


def uuid_of(site: Path, node: str, index: int) -> str:
    """The UUID NODE's signed manifest lists for GPU INDEX: what dcgm-exporter reports for that GPU."""
    return str(yaml.safe_load((site / "nodes" / f"{node}.yaml").read_text())["gpus"]["uuids"][index])


def remediate(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`fabric nodes remediate` with the key it signs with given explicitly, as it must be."""
    return fabric(
        "nodes", "remediate", "-C", str(site), "--key", str(site.parent / f"{site.name}.enrollment.key"), *args
    )


class XidExporter:
    """Serves DCGM_FI_DEV_XID_ERRORS for the GPUs in `values` ((node, gpu index, UUID) -> last Xid)."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, int, str], int] = {}
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                node = self.path.rsplit("/", 1)[-1]
                lines = ["# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.",
                         "# TYPE DCGM_FI_DEV_XID_ERRORS gauge"]  # fmt: skip
                for (n, gpu, uuid), xid in sorted(exporter.values.items()):
                    if n == node:
                        labels = f'gpu="{gpu}",UUID="{uuid}",device="nvidia{gpu}",Hostname="{n}"'
                        lines.append(f"DCGM_FI_DEV_XID_ERRORS{{{labels}}} {xid}")
                body = ("\n".join(lines) + "\n").encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def job(self, node: str) -> dict[str, Any]:
        """The scrape job of one node's exporter pod; `node` is a target label, as the ServiceMonitor relabels it."""
        job = scrape_job(f"dcgm-{node}", [f"127.0.0.1:{self.port}"], metrics_path=f"/metrics/{node}")
        job["static_configs"][0]["labels"] = {"node": node}
        return job


@pytest.fixture
def exporter() -> Iterator[XidExporter]:
    served = XidExporter()
    yield served
    served.server.shutdown()
    served.server.server_close()


def rendered_rules(site: Path, out: Path) -> Path:
    """The alert rules of the site's rendered PrometheusRule, as a rule file for the test server."""
    done = fabric("render", "-C", str(site), "--site", "brno", "--stack", "observability", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    rule = yaml.safe_load((out / "brno" / "observability" / "prometheusrule-llm-fabric.yaml").read_text())
    path = out.parent / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    return path


def watched_by_prometheus(
    prometheus_factory: Callable[..., PrometheusServer], exporter: XidExporter, site: Path, tmp_path: Path,
    nodes: list[str], alert: str,
) -> PrometheusServer:  # fmt: skip
    prom = prometheus_factory(
        scrape_configs=[exporter.job(n) for n in nodes], rule_files=[rendered_rules(site, tmp_path / "render")]
    )
    prom.wait_for(f'ALERTS{{alertname="{alert}",alertstate="firing"}}', timeout=30)
    return prom


def refs(site: Path) -> str:
    return git(site, "for-each-ref", "--format=%(refname) %(objectname)")


def enroll_second_h100(site: Path, tmp_path: Path) -> None:
    """A second 8 x H100 machine in Vienna (the sample machine, through `fabric facts` and `fabric enroll`)."""
    facts = tmp_path / "gpu7.facts.json"
    assert fabric("facts", "gpu7", "--sample", "h100x8", "-o", str(facts)).returncode == 0
    done = fabric("enroll", "gpu7", "--facts", str(facts), "-C", str(site), "--owner", "tuwien-ai", "--site", "vienna")
    assert done.returncode == 0, done.stdout + done.stderr


def placement(site: Path, *extra: str) -> dict[str, Any]:
    done = fabric("plan", "-C", str(site), "--json", *extra)
    assert done.returncode in (0, 3), done.stderr
    return dict(json.loads(done.stdout))


@pytest.fixture
def review(tmp_path: Path) -> Iterator[Callable[[Path, str], Path]]:
    """`review(site, branch)`: a git worktree of the branch, as a reviewer (or CI) checks it out."""
    made: list[tuple[Path, Path]] = []

    def checkout(site: Path, branch: str) -> Path:
        tree = tmp_path / f"review-{len(made)}"
        git(site, "worktree", "add", "-q", "--detach", str(tree), branch)
        made.append((site, tree))
        return tree

    yield checkout
    for site, tree in made:
        git(site, "worktree", "remove", "--force", str(tree))


def test_a_firing_node_fatal_xid_becomes_a_signed_cordon_on_a_branch_that_moves_the_replica(
    site_repo: Path, tmp_path: Path, exporter: XidExporter, prometheus_factory: Callable[..., PrometheusServer],
    review: Callable[[Path, str], Path],
) -> None:  # fmt: skip
    enroll_second_h100(site_repo, tmp_path)
    before = {(r["deployment"], r["index"]): r["node"] for r in placement(site_repo)["replicas"]}
    assert before[("gpt-oss-120b", 0)] == "gpu7"  # the replica the fault must move
    gpu7_uuid = uuid_of(site_repo, "gpu7", 0)
    exporter.values[("gpu7", 0, gpu7_uuid)] = 79
    exporter.values[("hgx-h100-tuwien", 0, uuid_of(site_repo, "hgx-h100-tuwien", 0))] = 0
    prom = watched_by_prometheus(
        prometheus_factory, exporter, site_repo, tmp_path, ["gpu7", "hgx-h100-tuwien"], "FabricGpuXidNodeFatal"
    )
    head, status = git(site_repo, "rev-parse", "HEAD"), git(site_repo, "status", "--porcelain")

    done = remediate(site_repo, "--prometheus", prom.url)

    assert done.returncode == 0, done.stdout + done.stderr
    branch = "remediate/gpu7-xid79"
    assert f"node-fatal Xid 79 (GPU has fallen off the bus) on gpu7 (GPU 0 ({gpu7_uuid})): cordoned `gpu7` " in (
        done.stdout
    )
    assert f"on branch {branch}" in done.stdout and "review and merge it into main" in done.stdout
    # the pull request's Markdown: the fault, the plan's diff with the move, the validate verdict
    assert "## Remediation: cordon `gpu7` (node-fatal Xid 79)" in done.stdout
    assert "| gpu7 | vienna | cordoned | active, 8x h100-sxm, vienna, owner tuwien-ai |" in done.stdout
    assert "| gpt-oss-120b | 0 | moved | gpu7 GPUs 0 (1xh100-sxm) | hgx-h100-tuwien GPUs" in done.stdout
    assert "### fabric validate --base main: valid" in done.stdout
    # the checkout is untouched: same commit, same (clean) working tree, gpu7 still active there
    assert git(site_repo, "rev-parse", "HEAD") == head and git(site_repo, "status", "--porcelain") == status == ""
    assert "status: active" in (site_repo / "nodes" / "gpu7.yaml").read_text()
    # one commit on the branch, the fault as its reason
    assert git(site_repo, "rev-list", "--count", f"main..{branch}").strip() == "1"
    message = git(site_repo, "log", "-1", "--format=%B", branch)
    assert message.startswith("cordon gpu7: node-fatal Xid 79 (GPU has fallen off the bus)\n")
    assert f"GPU 0 ({gpu7_uuid}); source: FabricGpuXidNodeFatal" in message
    assert git(site_repo, "diff", "--name-only", f"main..{branch}").split() == ["nodes/gpu7.yaml"]

    # the branch as a reviewer checks it out: signed, valid against main's keys, the replica moved
    tree = review(site_repo, branch)
    verified = fabric("nodes", "verify", "-C", str(tree))
    assert verified.returncode == 0 and "all 5 node signatures are valid" in verified.stdout
    valid = fabric("validate", "-C", str(tree), "--base", "main")
    assert valid.returncode == 0 and "valid: " in valid.stdout, valid.stdout
    after = {(r["deployment"], r["index"]): r["node"] for r in placement(tree, "--base", "main")["replicas"]}
    assert after[("gpt-oss-120b", 0)] == "hgx-h100-tuwien"
    assert "gpu7" not in after.values()
    assert {k: v for k, v in after.items() if k != ("gpt-oss-120b", 0)} == {
        k: v for k, v in before.items() if k != ("gpt-oss-120b", 0)
    }

    # the alert still fires (the gauge holds the last Xid): a second run changes nothing, and says so
    branches = refs(site_repo)
    again = remediate(site_repo, "--prometheus", prom.url)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"the cordon is already on the review branch {branch}; nothing changed" in again.stdout
    assert "## Remediation" not in again.stdout
    assert refs(site_repo) == branches and git(site_repo, "status", "--porcelain") == ""

    # another node-fatal Xid of the same node while the branch waits for review: still one branch
    exporter.values[("gpu7", 1, uuid_of(site_repo, "gpu7", 1))] = 48
    prom.wait_for('ALERTS{alertname="FabricGpuXidNodeFatal",alertstate="firing",gpu="1"}')
    third = remediate(site_repo, "--prometheus", prom.url)
    assert third.returncode == 0, third.stdout + third.stderr
    assert f"`gpu7` is already cordoned on the review branch {branch}; nothing changed" in third.stdout
    assert refs(site_repo) == branches


def test_an_application_xid_pages_nobody_and_writes_nothing(
    site_repo: Path, tmp_path: Path, exporter: XidExporter, prometheus_factory: Callable[..., PrometheusServer]
) -> None:
    gpu2 = uuid_of(site_repo, "hgx-h100-tuwien", 2)
    exporter.values[("hgx-h100-tuwien", 2, gpu2)] = 13
    prom = watched_by_prometheus(
        prometheus_factory, exporter, site_repo, tmp_path, ["hgx-h100-tuwien"], "FabricGpuXidApplication"
    )
    (alert,) = prom.query('ALERTS{alertstate="firing",alertname=~"FabricGpuXid.*"}')
    assert alert["metric"]["severity"] == "info"  # the route to no receiver: nobody is paged
    branches = refs(site_repo)

    done = remediate(site_repo, "--prometheus", prom.url)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "application Xid 13 (Graphics Engine Exception" in done.stdout
    assert f"on hgx-h100-tuwien (GPU 2 ({gpu2})): the workload's own fault, counted, pages nobody; nothing written" in (
        done.stdout
    )
    assert refs(site_repo) == branches and git(site_repo, "status", "--porcelain") == ""


def test_watch_acts_on_each_fault_when_it_starts_firing_and_stops_on_ctrl_c(
    site_repo: Path, tmp_path: Path, exporter: XidExporter, prometheus_factory: Callable[..., PrometheusServer]
) -> None:
    prom = prometheus_factory(
        scrape_configs=[exporter.job("hgx-h100-tuwien")], rule_files=[rendered_rules(site_repo, tmp_path / "r")]
    )
    watch = subprocess.Popen(
        [FABRIC, "nodes", "remediate", "-C", str(site_repo), "--key", str(tmp_path / "site.enrollment.key"),
         "--prometheus", prom.url, "--watch", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    lines: list[str] = []
    stdout = watch.stdout
    assert stdout is not None
    reader = threading.Thread(target=lambda: lines.extend(iter(stdout.readline, "")), daemon=True)
    reader.start()

    def printed(text: str, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in lines):
            assert time.monotonic() < deadline and watch.poll() is None, f"`{text}` not printed: {lines}"
            time.sleep(0.2)

    gpu0 = uuid_of(site_repo, "hgx-h100-tuwien", 0)
    restart = (
        "replica-fatal Xid 109 (Context switch timeout: the engine's context is wedged) on hgx-h100-tuwien "
        f"(GPU 0 ({gpu0})): restart gpt-oss-120b/0 (kubectl delete pod --all-namespaces -l "
        "'fabric.llm/replica=gpt-oss-120b-0'); no cordon, nothing written"
    )
    try:
        printed(f"watching {prom.url} every 1 s (Ctrl-C stops)")
        time.sleep(2)  # a quiet poll or two first: nothing fires yet
        assert "remediate/" not in refs(site_repo)
        exporter.values[("hgx-h100-tuwien", 5, uuid_of(site_repo, "hgx-h100-tuwien", 5))] = 74
        printed("### fabric validate --base main: valid")  # the branch, then its review
        assert "refs/heads/remediate/hgx-h100-tuwien-xid74" in refs(site_repo)
        exporter.values[("hgx-h100-tuwien", 0, gpu0)] = 109  # gpt-oss-120b/0's GPU
        printed(restart)
        time.sleep(3)  # polls while both still fire print nothing
    finally:
        os.kill(watch.pid, signal.SIGINT)
        watch.wait(timeout=30)
        reader.join(timeout=10)
    out = "".join(lines)
    assert watch.returncode == 130, out
    assert out.count("cordoned `hgx-h100-tuwien` on branch remediate/hgx-h100-tuwien-xid74") == 1, out
    assert out.count(restart) == 1, out
    assert "nothing changed" not in out


def test_a_named_replica_fatal_xid_says_restart_and_writes_nothing(site_repo: Path) -> None:
    branches = refs(site_repo)
    done = remediate(site_repo, "--node", "hgx-h200-ceitec", "--xid", "109")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "replica-fatal Xid 109 (Context switch timeout: the engine's context is wedged) on hgx-h200-ceitec:" in (
        done.stdout
    )
    # named without its GPU: every replica the plan runs on the node
    assert (
        "restart gpt-oss-120b/1, mistral-small-4/0, qwen3-5-122b/0 (kubectl delete pod --all-namespaces -l "
        "'fabric.llm/replica in (gpt-oss-120b-1,mistral-small-4-0,qwen3-5-122b-0)'); no cordon, nothing written"
    ) in done.stdout
    assert refs(site_repo) == branches


def _hint_commands(stderr: str) -> tuple[str, str]:
    """The hint's two ways out: the commands that commit, and those that undo."""
    hint = stderr.split("hint: commit them first (", 1)[1]
    keep, _, rest = hint.partition("), or undo them (")
    return keep, rest.partition("); nothing was written")[0]


@pytest.mark.parametrize("way", ["commit", "undo"])
def test_over_a_render_in_the_repo_the_hint_followed_works(site_repo: Path, way: str) -> None:
    # issue 41 point 5: `fabric render --out site/deploy` as docs/deploy.md does, then remediate
    plan = site_repo.parent / "plan.json"
    assert fabric("plan", "-C", str(site_repo), "-o", str(plan)).returncode == 0
    out = site_repo / "deploy"
    rendered = fabric("render", "-C", str(site_repo), "--plan", str(plan), "--out", str(out), "--site", "brno")
    assert rendered.returncode == 0, rendered.stdout + rendered.stderr
    key = str(site_repo.parent / f"{site_repo.name}.enrollment.key")
    args = ["nodes", "remediate", "-C", str(site_repo), "--key", key, "--node", "hgx-h100-tuwien", "--xid", "79"]
    refused = fabric(*args)
    assert refused.returncode == 2
    assert "`fabric nodes remediate` depends on uncommitted changes: deploy/" in refused.stderr
    keep, undo = _hint_commands(refused.stderr)
    if way == "commit":
        followed = subprocess.run(keep, shell=True, capture_output=True, text=True, check=False)
    else:  # "move deploy/ out of the repo (PATH)": as a reader would
        assert undo.startswith("move deploy/ out of the repo ("), undo
        followed = subprocess.run(["mv", undo.split("(", 1)[1].rstrip(")"), str(site_repo.parent / "deploy-out")])
    assert followed.returncode == 0, keep
    done = fabric(*args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "cordon" in done.stdout


def test_over_an_edited_file_the_hint_followed_works(site_repo: Path) -> None:
    tenant = site_repo / "tenants" / "tuwien-ai.yaml"
    tenant.write_text(tenant.read_text() + "# an edit in progress\n")
    key = str(site_repo.parent / f"{site_repo.name}.enrollment.key")
    args = ["nodes", "remediate", "-C", str(site_repo), "--key", key, "--node", "hgx-h100-tuwien", "--xid", "79"]
    keep, undo = _hint_commands(fabric(*args).stderr)
    assert subprocess.run(undo, shell=True, check=False).returncode == 0, undo
    assert fabric(*args).returncode == 0
    tenant.write_text(tenant.read_text() + "# another edit\n")
    keep, undo = _hint_commands(fabric(*args).stderr)
    assert subprocess.run(keep, shell=True, check=False).returncode == 0, keep
    assert "# another edit" in git(site_repo, "show", "HEAD:tenants/tuwien-ai.yaml")


def test_refused_over_an_uncommitted_site_repo_and_for_an_unknown_node(site_repo: Path) -> None:
    tenant = site_repo / "tenants" / "tuwien-ai.yaml"
    tenant.write_text(tenant.read_text() + "# an edit in progress\n")
    branches = refs(site_repo)
    done = remediate(site_repo, "--node", "hgx-h100-tuwien", "--xid", "79")
    assert done.returncode == 2
    assert "error: `fabric nodes remediate` depends on uncommitted changes: tenants/tuwien-ai.yaml" in done.stderr
    assert "nothing was written" in done.stderr
    assert refs(site_repo) == branches
    git(site_repo, "checkout", "--", "tenants/tuwien-ai.yaml")

    unknown = remediate(site_repo, "--node", "gpu99", "--xid", "79")
    assert unknown.returncode == 2
    assert "`gpu99` is no node of this site repo (nodes/ on main); nothing written" in unknown.stderr
    assert refs(site_repo) == branches


def test_a_prometheus_without_the_gpu_rules_or_unreachable_is_a_clear_error(
    site_repo: Path, prometheus_factory: Callable[..., PrometheusServer]
) -> None:
    bare = prometheus_factory()
    done = remediate(site_repo, "--prometheus", bare.url)
    assert done.returncode == 2
    assert f"Prometheus at {bare.url} has no FabricGpuXid* alert rules loaded" in done.stderr
    assert "fabric render --stack observability" in done.stderr
    nobody = f"http://127.0.0.1:{free_port()}"
    gone = remediate(site_repo, "--prometheus", nobody)
    assert gone.returncode == 2 and f"Prometheus at {nobody} is unreachable" in gone.stderr


def test_done_when_a_node_fatal_xid_on_the_b200_node_leads_to_a_reviewed_branch_that_names_its_shortfalls(
    site_repo: Path, tmp_path: Path, exporter: XidExporter, prometheus_factory: Callable[..., PrometheusServer],
    review: Callable[[Path, str], Path],
) -> None:  # fmt: skip
    before = placement(site_repo)
    on_b200 = {r["deployment"] for r in before["replicas"] if r["node"] == "dgx-b200-01"}
    assert on_b200 == {"deepseek-v3-2"}  # it asks for b200 GPUs, and this is the only b200 node
    exporter.values[("dgx-b200-01", 3, "GPU-bd7c57af-a004-57bb-b622-10032293b82f")] = 79
    prom = watched_by_prometheus(
        prometheus_factory, exporter, site_repo, tmp_path, ["dgx-b200-01"], "FabricGpuXidNodeFatal"
    )

    done = remediate(site_repo, "--prometheus", prom.url)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "### fabric validate --base main: valid" in done.stdout
    tree = review(site_repo, "remediate/dgx-b200-01-xid79")
    assert fabric("validate", "-C", str(tree), "--base", "main").returncode == 0
    after = placement(tree, "--base", "main")
    placed: dict[str, int] = {}
    for r in after["replicas"]:
        assert r["node"] != "dgx-b200-01"
        placed[r["deployment"]] = placed.get(r["deployment"], 0) + 1
    short = {s["deployment"] for s in after["shortfalls"]}
    assert "deepseek-v3-2" in short and "deepseek-v3-2" in done.stdout
    for r in before["replicas"]:  # every other deployment is still served as before
        if r["deployment"] not in short:
            assert placed.get(r["deployment"], 0) >= sum(
                1 for b in before["replicas"] if b["deployment"] == r["deployment"]
            )
