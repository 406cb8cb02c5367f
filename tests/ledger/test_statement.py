"""The contributor's statement and `fabric report --owner`: real commands chained end to end.

A month of sample records (`fabric ledger sample`, `fabric ledger ingest`), the engines' `up` series
backfilled into a real Prometheus (`promtool tsdb create-blocks-from openmetrics`), and a cordon and
an uncordon of the contributed H200 node committed by `fabric nodes cordon|uncordon` in the real
site repo, dated inside the month through git's own GIT_COMMITTER_DATE. The expected figures are
computed here from the records file and the series as written, not from the report's code.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

from tests.fixtures.cli import FABRIC, fabric, git
from tests.fixtures.prometheus import PrometheusServer

MONTH = "2026-11"
START = datetime(2026, 11, 1, tzinfo=UTC)
END = datetime(2026, 12, 1, tzinfo=UTC)
NODE, OWNER = "hgx-h200-ceitec", "ceitec-structural"
CORDON, UNCORDON = datetime(2026, 11, 10, tzinfo=UTC), datetime(2026, 11, 11, 6, tzinfo=UTC)  # 30 h
ZERO = (datetime(2026, 11, 20, tzinfo=UTC), datetime(2026, 11, 21, tzinfo=UTC))  # up == 0: 24 h
GAP = (datetime(2026, 11, 25, tzinfo=UTC), datetime(2026, 11, 25, 6, tzinfo=UTC))  # no sample: 6 h
STEP = 300  # a sample every 5 minutes: each answers until the next (Prometheus's 5-minute lookback)

# (deployment, replica, node, owner): qwen3-5-122b only on the H200; gpt-oss-120b on the H200 and the H100
REPLICAS = [
    ("qwen3-5-122b", "0", NODE, OWNER),
    ("gpt-oss-120b", "1", NODE, OWNER),
    ("gpt-oss-120b", "0", "hgx-h100-tuwien", "tuwien-ai"),
    ("qwen3-5", "0", "dgx-b300-01", "cerit-sc"),
]


def _fabric_at(when: datetime, *args: str) -> subprocess.CompletedProcess[str]:
    """`fabric ARGS` whose git commits carry `when` as their author and committer date."""
    stamp = f"{when:%Y-%m-%dT%H:%M:%S+00:00}"
    env = {**os.environ, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
    return subprocess.run([FABRIC, *args], capture_output=True, text=True, env=env, timeout=300, check=False)


def _up(node: str, at: datetime) -> int | None:
    """The backfilled `up` value of an engine on `node` at `at`; None: no sample (the H200's gap)."""
    if node != NODE:
        return 1
    if GAP[0] <= at < GAP[1]:
        return None
    return 0 if ZERO[0] <= at < ZERO[1] else 1


def _up_history() -> str:
    lines = ["# TYPE up gauge"]
    at = START
    while at < END:
        for deployment, replica, node, owner in REPLICAS:
            value = _up(node, at)
            if value is not None:
                labels = f'deployment="{deployment}",job="engines",node="{node}",owner="{owner}",replica="{replica}"'
                lines.append(f'up{{{labels},site="brno"}} {value} {int(at.timestamp())}')
        at += timedelta(seconds=STEP)
    return "\n".join(lines) + "\n# EOF\n"


def _usage(records: Path) -> dict[tuple[str, str], dict[str, int]]:
    """(deployment, tenant) -> requests and token sums, straight from the records file."""
    out: dict[tuple[str, str], dict[str, int]] = {}
    for line in records.read_text().splitlines():
        rec = json.loads(line)
        row = out.setdefault(
            (rec["model"], rec["tenant"]),
            {"requests": 0, "input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0},
        )
        row["requests"] += 1
        row["input_tokens"] += rec["prompt_tokens"] or 0
        row["cached_input_tokens"] += rec.get("cached_prompt_tokens") or 0
        row["output_tokens"] += rec["completion_tokens"] or 0
    return out


def _price(row: dict[str, int], prices: tuple[str, str, str]) -> Decimal:
    input_, cached, output = (Decimal(p) for p in prices)
    uncached = row["input_tokens"] - row["cached_input_tokens"]
    return (uncached * input_ + row["cached_input_tokens"] * cached + row["output_tokens"] * output) / 1_000_000


def _month(tmp_path: Path, site_repo: Path, prometheus_factory: Callable[..., PrometheusServer]) -> tuple[Path, str]:
    records = tmp_path / "requests.jsonl"
    sampled = fabric("ledger", "sample", "-C", str(site_repo), "--month", MONTH, "--count", "4000", "-o", str(records))
    assert sampled.returncode == 0, sampled.stderr
    ingested = fabric("ledger", "ingest", "-C", str(site_repo), str(records))
    assert ingested.returncode == 0 and "4,000 record(s) added" in ingested.stdout, ingested.stdout + ingested.stderr
    for when, verb in ((CORDON, "cordon"), (UNCORDON, "uncordon")):
        done = _fabric_at(when, "nodes", verb, NODE, "-C", str(site_repo))
        assert done.returncode == 0, done.stderr
        assert git(site_repo, "log", "-1", "--format=%s %cI").strip() == f"{verb} {NODE} {when:%Y-%m-%dT%H:%M:%S+00:00}"
    prom = prometheus_factory(backfill=[_up_history()])
    return records, prom.url


def _report(site_repo: Path, url: str, out: Path, *extra: str) -> tuple[dict[str, Any], str]:
    """`fabric report` of the month into `out`: its report.json and what it printed."""
    done = fabric("report", "-C", str(site_repo), "--month", MONTH, "--prometheus", url, "--out", str(out), *extra)
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(json.loads((out / "report.json").read_text())), done.stdout


def _minutes(hours: float) -> int:
    return round(hours * 60)


def test_statement_hours_gpu_hours_and_lending(
    tmp_path: Path, site_repo: Path, prometheus_factory: Callable[..., PrometheusServer]
) -> None:
    records, url = _month(tmp_path, site_repo, prometheus_factory)
    report, _ = _report(site_repo, url, tmp_path / "report")
    rows = {row["node"]: row for row in report["statement"]}
    assert sorted(rows) == ["dgx-b200-01", "dgx-b300-01", "hgx-h100-tuwien", NODE]  # every contributed node

    month_minutes = 30 * 24 * 60
    for row in rows.values():
        parts = ("service_hours", "down_hours", "cordoned_hours", "retired_hours", "not_enrolled_hours")
        assert sum(_minutes(row[p]) for p in parts) == _minutes(row["month_hours"]) == month_minutes, row["node"]
    h200 = rows[NODE]
    assert h200["cordoned_hours"] == 30
    # down: the 24 h of up == 0 and the 6 h without a sample; the cordoned 30 h are not down (the
    # engine kept serving: nothing is drained), nor in service
    assert h200["down_hours"] == 30 and h200["service_hours"] == 720 - 60
    assert [(c["status"], c["at"]) for c in h200["status_changes"]] == [
        ("active", "2026-10-01T09:00:00Z"),
        ("cordoned", "2026-11-10T00:00:00Z"),
        ("active", "2026-11-11T06:00:00Z"),
    ]
    assert h200["status_changes"][1]["commit"] == git(site_repo, "rev-parse", "HEAD~1").strip()
    up_hours = 720 - 30  # every minute but the down ones, cordoned included
    deployments = {d["deployment"]: d for d in h200["deployments"]}
    assert deployments["qwen3-5-122b"]["gpu_hours"] == up_hours * 2  # tensor_parallel_size 2
    assert deployments["gpt-oss-120b"]["gpu_hours"] == up_hours * 1
    assert deployments["qwen3-5-122b"]["dedicated_for_owner"] and not deployments["gpt-oss-120b"]["dedicated_for_owner"]
    assert h200["serving_gpu_hours"] == up_hours * 3
    assert h200["idle_gpu_hours"] == (720 - 60) * 1  # 4 GPUs, 3 held by up replicas, over the service hours
    assert rows["dgx-b300-01"]["service_hours"] == 720 and rows["dgx-b300-01"]["down_hours"] == 0
    assert rows["dgx-b200-01"]["service_hours"] == 0 and rows["dgx-b200-01"]["down_hours"] == 720  # no engine up

    # what was lent equals the pool's use of the node: every other tenant's use of qwen3-5-122b (on
    # this node only) and of gpt-oss-120b by this node's share of its replicas' up-time
    usage = _usage(records)
    share = Fraction(up_hours, up_hours + 720)
    prices = {"qwen3-5-122b": ("0.20", "0.04", "1.20"), "gpt-oss-120b": ("0.10", "0.05", "0.50")}
    expected: dict[str, dict[str, int]] = {}
    value = Decimal(0)
    for (deployment, tenant), row in sorted(usage.items()):
        if tenant == OWNER or deployment not in prices:
            continue
        part = row if deployment == "qwen3-5-122b" else {k: round(v * share) for k, v in row.items()}
        mine = expected.setdefault(tenant, dict.fromkeys(part, 0))
        for key, count in part.items():
            mine[key] += count
        value += _price(part, prices[deployment])
    assert {t: {k: r[k] for k in expected[t]} for t, r in h200["lent_to"].items()} == expected
    assert h200["lent"]["input_tokens"] == sum(r["input_tokens"] for r in expected.values())
    assert h200["lent_value"] == float(value.quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN))
    own = usage[("qwen3-5-122b", OWNER)]
    assert h200["owner_usage"]["input_tokens"] == own["input_tokens"] + round(
        usage[("gpt-oss-120b", OWNER)]["input_tokens"] * share
    )
    # the H100 lends the rest of gpt-oss-120b: the two nodes' shares add up to the deployment's use
    for (deployment, user), row in usage.items():
        if deployment == "gpt-oss-120b" and user not in (OWNER, "tuwien-ai"):
            here = h200["lent_to"][user]["output_tokens"] - usage[("qwen3-5-122b", user)]["output_tokens"]
            there = rows["hgx-h100-tuwien"]["lent_to"][user]["output_tokens"]
            assert abs(here + there - row["output_tokens"]) <= 1  # each node's part rounded to whole tokens

    # in every format, and covered by the signed manifest
    md = (tmp_path / "report" / "report.md").read_text()
    assert "## Contributor's statement" in md
    assert f"| {NODE} | {OWNER} | 4 | 690.00 | 660.00 | 30.00 | 30.00 | 0.00 | 0.00 |" in md
    assert "cordoned from 2026-11-10T00:00:00Z (commit" in md
    assert "<h2>Contributor's statement</h2>" in (tmp_path / "report" / "report.html").read_text()
    csv_row = f"{NODE},brno,{OWNER},h200,4,720.0,660.0,30.0,690.0,30.0,"
    assert csv_row in (tmp_path / "report" / "statement.csv").read_text()
    lent_csv = (tmp_path / "report" / "statement_lent.csv").read_text()
    assert f"{NODE},{OWNER},muni-researchers,{expected['muni-researchers']['requests']}," in lent_csv
    verified = fabric("report", "verify", str(tmp_path / "report"), "-C", str(site_repo))
    assert verified.returncode == 0 and "15 files match the manifest" in verified.stdout, verified.stdout
    (tmp_path / "report" / "statement.csv").write_text("edited\n")
    tampered = fabric("report", "verify", str(tmp_path / "report"), "-C", str(site_repo))
    assert tampered.returncode == 3 and "statement.csv" in tampered.stdout + tampered.stderr


def test_owner_view_is_signed_and_holds_only_its_nodes(
    tmp_path: Path, site_repo: Path, prometheus_factory: Callable[..., PrometheusServer]
) -> None:
    _records, url = _month(tmp_path, site_repo, prometheus_factory)
    federation, _ = _report(site_repo, url, tmp_path / "report")
    out = tmp_path / "own"
    view, printed = _report(site_repo, url, out, "--owner", OWNER)
    assert [row["node"] for row in view["statement"]] == [NODE]
    assert view["statement"] == [row for row in federation["statement"] if row["node"] == NODE]
    assert view["owner"] == OWNER and view["dedicated_gpus"] == 2
    assert view["lent_to"].keys() == view["statement"][0]["lent_to"].keys()
    assert "usage_by_tenant" not in view and "books" not in view
    for name in ("report.md", "report.html", "report.json", "statement.csv", "statement_lent.csv"):
        text = (out / name).read_text()
        for other in ("dgx-b300-01", "hgx-h100-tuwien", "dgx-b200-01", "kimi-k2-6", 'qwen3-5"'):
            assert other not in text, (name, other)
    verified = fabric("report", "verify", str(out), "-C", str(site_repo))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "6 files match the manifest" in verified.stdout and "a trusted key (from" in verified.stdout
    summary = f"{NODE}: 660.00 h in service, 30.00 h down, 30.00 h cordoned of 720.00 h; 2,070.00 GPU-h serving; lent "
    assert printed.splitlines()[2].startswith(summary), printed


def test_unknown_owner_is_refused_with_the_known_groups(site_repo: Path, tmp_path: Path) -> None:
    done = fabric("report", "-C", str(site_repo), "--month", MONTH, "--owner", "ceitec", "--out", str(tmp_path / "o"))
    assert done.returncode == 2
    assert "error: --owner `ceitec` is not a contributing group of" in done.stderr
    assert "did you mean `ceitec-structural`? the contributing groups: ceitec-structural, cerit-sc, tuwien-ai" in (
        done.stderr
    )
    assert not (tmp_path / "o").exists()


def test_owner_view_lists_the_plan_shortfalls_that_concern_it(site_repo: Path, tmp_path: Path) -> None:
    # more dedicated replicas than the contributor's H200 holds: the planner writes the plan with a shortfall
    deployment = site_repo / "deployments" / "qwen3-5-122b.yaml"
    deployment.write_text(deployment.read_text().replace("\nreplicas: 1\n", "\nreplicas: 5\n"))
    plan = tmp_path / "plan.json"
    planned = fabric("plan", "-C", str(site_repo), "-o", str(plan))
    assert planned.returncode == 3 and plan.is_file(), planned.stdout + planned.stderr
    records = tmp_path / "requests.jsonl"
    assert fabric("ledger", "sample", "-C", str(site_repo), "--month", MONTH, "-o", str(records)).returncode == 0
    shortfalls = {}
    for owner in (OWNER, "tuwien-ai"):
        out = tmp_path / owner
        done = fabric(
            "report", "-C", str(site_repo), "--month", MONTH, "--requests", str(records),
            "--plan", str(plan), "--owner", owner, "--out", str(out),
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        shortfalls[owner] = json.loads((out / "report.json").read_text())["plan_shortfalls"]
    assert len(shortfalls[OWNER]) == 1  # qwen3-5-122b is dedicated to it
    assert shortfalls[OWNER][0].startswith("deployment `qwen3-5-122b`: planned 1 of 5 replicas: ")
    assert f"{NODE} (4 GPUs): 4 in use by" in shortfalls[OWNER][0]
    assert shortfalls["tuwien-ai"] == []  # neither its deployment nor its node
    assert "- deployment `qwen3-5-122b`: planned 1 of 5 replicas" in (tmp_path / OWNER / "report.md").read_text()


def test_without_git_history_the_current_status_is_taken_and_said(site_repo: Path, tmp_path: Path) -> None:
    copy = tmp_path / "exported"
    shutil.copytree(site_repo, copy, ignore=shutil.ignore_patterns(".git"))
    shutil.copy(site_repo.parent / "site.enrollment.key", tmp_path / "exported.enrollment.key")
    records = tmp_path / "requests.jsonl"
    assert fabric("ledger", "sample", "-C", str(copy), "--month", MONTH, "-o", str(records)).returncode == 0
    out = tmp_path / "own"
    done = fabric(
        "report", "-C", str(copy), "--month", MONTH, "--requests", str(records),
        "--owner", "tuwien-ai", "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    note = (
        "`hgx-h100-tuwien`: no committed history of nodes/hgx-h100-tuwien.yaml: its current status (active) "
        "is taken for the whole time since its enrolled_at"
    )
    assert f"note: {note}" in done.stdout
    view = json.loads((out / "report.json").read_text())
    assert note in view["data_gaps"]
    (row,) = view["statement"]
    assert (row["active_hours"], row["not_enrolled_hours"], row["service_hours"]) == (720, 0, None)  # no Prometheus
