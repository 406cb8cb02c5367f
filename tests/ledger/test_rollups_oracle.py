"""Reports from rollups are byte-identical to reports computed from the raw records.

Hypothesis generates a month of records (ids or none, repeats, late records, records outside the
month, some bad), splits them into files and those into ingests at random, and feeds a real store
(a DuckDB file beside the site repo) one ingest at a time. The report drawn from its rollups must
equal, byte for byte, the report computed from the records of all files ingested at once without
any rollup (`from_records`: grouping sets, quantile_disc, per-minute sums). Every rollup table, the
ones a report does not read included, must also equal that of one ingest of all the files.
"""

from __future__ import annotations

import itertools
import json
import os
from datetime import timedelta
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_fabric.ledger.report.build import ReportInputs, build_report
from llm_fabric.ledger.report.month_report import MonthReport, Sources
from llm_fabric.ledger.report.render import render_csvs, render_json
from llm_fabric.ledger.store.database import LedgerStore
from llm_fabric.ledger.store.period import Month
from llm_fabric.site.loader import load_site

NOV = Month.parse("2026-11")
ROLLUPS = ("daily_usage", "daily_lengths", "minute_tokens", "month_lengths", "month_percentiles")
NOW = NOV.end + timedelta(days=2)

_record = st.fixed_dictionaries(
    {
        "minute": st.integers(-120, 30 * 1440 + 120),  # a few records just outside November
        "second": st.integers(0, 59),
        "model": st.sampled_from(["qwen3-5", "glm-5-1", "unpriced-model"]),
        "tenant": st.sampled_from(["muni-researchers", "cerit-sc", "ceitec-structural"]),
        "site": st.sampled_from([None, "brno", "prague"]),
        "prompt": st.one_of(st.none(), st.integers(0, 40), st.integers(0, 300_000)),
        "completion": st.integers(0, 5000),
        "cached": st.one_of(st.none(), st.integers(0, 100)),
        "ttft": st.one_of(st.none(), st.floats(0, 10_000, allow_nan=False).map(lambda x: round(x, 3))),
        "status": st.sampled_from(["ok", "200", "429", "error", "success"]),
        "id": st.one_of(st.none(), st.integers(0, 60).map(lambda i: f"req-{i}")),
        "bad": st.sampled_from([False] * 12 + [True]),
    }
)


def _line(r: dict[str, object]) -> str:
    if r["bad"]:
        return '{"ts": "not a time", "model": "x"'
    ts = NOV.start + timedelta(minutes=int(r["minute"]), seconds=int(r["second"]))  # type: ignore[call-overload]
    body = {
        "ts": f"{ts:%Y-%m-%dT%H:%M:%SZ}",
        "model": r["model"],
        "tenant": r["tenant"],
        "prompt_tokens": r["prompt"],
        "completion_tokens": r["completion"],
        "status": r["status"],
    }
    for key, name in (("site", "site"), ("cached", "cached_prompt_tokens"), ("ttft", "ttft_ms"), ("id", "request_id")):
        if r[key] is not None:
            body[name] = r[key]
    return json.dumps(body)


def _good(r: dict[str, object]) -> bool:
    """Whether the store takes the record (its bad ones: the `bad` flag, more cached than prompt tokens)."""
    cached, prompt = r["cached"], r["prompt"]
    return not r["bad"] and not (isinstance(cached, int) and isinstance(prompt, int) and cached > prompt)


def _books(report: MonthReport) -> tuple[str, dict[str, str]]:
    """report.json and every CSV, less what names the origin: `sources` (the store or the files) and the
    data gaps only a report of given files states (their bad records and records outside the month)."""
    gaps = [g for g in report.data_gaps if "bad record" not in g and "outside" not in g]
    kept = report.model_copy(update={"sources": Sources(records=None, prometheus=None), "data_gaps": gaps})
    csvs = render_csvs(report)
    del csvs["merged_duplicates.csv"]  # what each ingest merged: its files, the origin again
    return render_json(kept), csvs


@settings(
    max_examples=int(os.environ.get("LEDGER_ORACLE_EXAMPLES", "30")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    records=st.lists(_record, min_size=1, max_size=120),
    cuts=st.lists(st.integers(0, 120), max_size=5),
    ingests=st.lists(st.integers(1, 3), min_size=1, max_size=6),
    again=st.booleans(),
    data=st.data(),
)
def test_rollups_give_the_books_of_the_raw_records(
    site_repo: Path,
    tmp_path_factory: object,
    records: list[dict[str, object]],
    cuts: list[int],
    ingests: list[int],
    again: bool,
    data: st.DataObject,
) -> None:
    work: Path = tmp_path_factory.mktemp("oracle")  # type: ignore[attr-defined]
    # a request id is one request: its records elsewhere (overlapping exports) repeat its content
    first: dict[object, dict[str, object]] = {}
    records = [first.setdefault(r["id"], r) if r["id"] is not None and not r["bad"] else r for r in records]
    bounds = sorted({0, len(records), *(c for c in cuts if c < len(records))})
    files = []
    for i, (a, b) in enumerate(itertools.pairwise(bounds)):
        if not any(_good(r) for r in records[a:b]):
            continue  # a file of bad records only is refused (tests/ledger/test_store.py), not ingested
        path = work / f"part-{i}.jsonl"
        path.write_text("".join(_line(r) + "\n" for r in records[a:b]))
        files.append(path)
    if not files:
        return
    # files shuffled into ingests of 1-3 files; with `again`, one file is ingested a second time
    order = data.draw(st.permutations(files))
    batches: list[list[Path]] = []
    while order:
        size = ingests[len(batches) % len(ingests)]
        batches.append(list(order[:size]))
        order = order[size:]
    if again:
        batches.append([data.draw(st.sampled_from(files))])
    store_path = work / "store.duckdb"
    with LedgerStore(store_path) as store:
        for batch in batches:
            store.ingest(batch)
        batched = {t: store.con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in ROLLUPS}
    # the rollups that later ingests summed into are those one ingest of every file builds
    with LedgerStore(None) as at_once:
        at_once.ingest(files)
        assert batched == {t: at_once.con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in ROLLUPS}
    site = load_site(site_repo)
    from_rollups = build_report(site, ReportInputs(NOV, [], store=store_path, now=NOW))
    from_raw = build_report(site, ReportInputs(NOV, files, from_records=True, now=NOW))
    assert _books(from_rollups) == _books(from_raw)
    rollups_records, raw_records = from_rollups.sources.records, from_raw.sources.records
    assert rollups_records is not None and raw_records is not None
    assert rollups_records.records_in_month == raw_records.records_in_month
    assert rollups_records.records_outside_month == raw_records.records_outside_month
