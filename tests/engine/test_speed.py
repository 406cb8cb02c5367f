"""The speed model against the published measurements it is calibrated on (engine/calibration/)."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest

from llm_fabric.engine.capacity import calibration
from llm_fabric.engine.capacity.calibration import evaluate_all, fit, measurements, table, with_error
from llm_fabric.engine.capacity.model import estimate
from llm_fabric.engine.capacity.speed import fitted_constants
from llm_fabric.engine.recipes import get_recipe
from llm_fabric.hardware.catalog import load_gpu_catalog

DOC = Path(__file__).resolve().parents[2] / "docs" / "capacity.md"


def test_the_cases_cover_three_generations_dense_and_moe_single_stream_and_loaded() -> None:
    doc = measurements()
    catalog = load_gpu_catalog()
    generations = {catalog.get(c.gpu).architecture for c in doc.cases}
    assert {"sm_80", "sm_90", "sm_100"} <= generations  # Ampere, Hopper, Blackwell
    moe = {
        c.id
        for c in doc.cases
        if (doc.models[c.model].architecture if c.model in doc.models else get_recipe(c.model).architecture).experts
        is not None
    }
    assert moe and len(moe) < len(doc.cases)
    small = {c.id for c in doc.cases if isinstance(c.users, int) and c.users <= 8}
    loaded = {c.id for c in doc.cases if c.users == "max" or (isinstance(c.users, int) and c.users >= 50)}
    assert small & moe and loaded & moe and small - moe and loaded - moe
    assert {c.metric for c in doc.cases} == {
        "output_tokens_per_s_total",
        "output_tokens_per_s_per_user",
        "itl_ms",
        "ttft_ms",
    }
    assert all(c.source in doc.sources for c in doc.cases)


def test_fit_yaml_holds_the_error_of_the_current_cases() -> None:
    consts = fitted_constants()
    rows = evaluate_all(consts)
    errors = [abs(r.error) for r in rows]
    assert consts.cases == len(rows)
    assert consts.median_error == pytest.approx(statistics.median(errors), abs=5e-4)
    assert consts.worst_error == pytest.approx(max(errors), abs=5e-4)
    assert with_error(consts).error_band == consts.error_band
    low, high = consts.error_band
    assert low <= 1.0 <= high
    assert consts.median_error < 0.15 and consts.worst_error < 0.5


def test_the_constants_are_the_fit_of_the_cases() -> None:
    """Refitting from fit.yaml does not find a better fit: nobody edited a constant by hand."""
    consts = fitted_constants()
    refit = fit(consts)
    assert calibration._loss(refit) >= calibration._loss(consts) * 0.99


def test_expected_never_beats_the_ceiling() -> None:
    for row in evaluate_all(fitted_constants()):
        if row.case.metric in ("itl_ms", "ttft_ms"):
            assert row.value >= row.ceiling_value, row.case.id
        else:
            assert row.value <= row.ceiling_value, row.case.id


def test_docs_show_the_calibration_table_as_computed() -> None:
    text = DOC.read_text()
    for line in table(fitted_constants()).splitlines():
        if line.startswith("| ") and not line.startswith("| case"):
            assert line in text, f"docs/capacity.md's calibration table is stale: {line}"
    consts = fitted_constants()
    assert f"median error {consts.median_error:.1%}" in text and f"worst {consts.worst_error:.1%}" in text


def test_single_stream_deepseek_on_8_b200_is_a_fraction_of_the_roofline() -> None:
    """The issue's first example: the ceiling says ~1,450 tok/s, engines deliver a fraction of it."""
    est = estimate(
        get_recipe("deepseek-v3"),
        load_gpu_catalog().get("b200"),
        8,
        input_tokens=1000,
        output_tokens=1000,
        users=1,
        parallelism="tp",
    )
    assert est.ceiling is not None and est.expected is not None
    assert est.ceiling.output_tokens_per_s_per_user > 1000
    assert est.expected.output_tokens_per_s_per_user < 0.25 * est.ceiling.output_tokens_per_s_per_user
    assert est.expected.itl_ms > est.ceiling.itl_ms and est.expected.ttft_ms > est.ceiling.ttft_ms


def test_every_speed_figure_says_what_it_is() -> None:
    est = estimate(
        get_recipe("llama-3.3-70b"),
        load_gpu_catalog().get("h200"),
        1,
        input_tokens=1000,
        output_tokens=1000,
        users="max",
    )
    data = est.as_dict()
    keys = {"output_tokens_per_s_total", "output_tokens_per_s_per_user", "itl_ms", "ttft_ms"}
    assert keys <= set(data["ceiling"]) and keys <= set(data["expected"])  # type: ignore[arg-type]
    band = data["expected"]["error_band"]  # type: ignore[index]
    assert band["low"] < 1 < band["high"] and re.search("percentile", band["basis"])
    assert "error_band" not in data["ceiling"]  # type: ignore[operator]
