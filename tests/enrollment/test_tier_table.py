"""docs/enroll.md's GPU table is what admission decides on the catalog; `fabric gpus` regenerates it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from llm_fabric.enrollment.tier_table import BEGIN, END, render_markdown, table_in, tier_rows
from llm_fabric.hardware.catalog import load_gpu_catalog

DOC = Path(__file__).resolve().parents[2] / "docs" / "enroll.md"
FABRIC = str(Path(sys.executable).parent / "fabric")


def test_the_doc_table_is_the_catalogs() -> None:
    assert table_in(DOC.read_text()) == render_markdown(tier_rows()), (
        "docs/enroll.md's GPU table is stale: run `fabric gpus --update-doc docs/enroll.md`"
    )


def test_issue_18_configurations() -> None:
    tiers = {(r.gpu.id, r.count): (r.verdict.tier, r.reason) for r in tier_rows()}
    assert tiers[("mi355x", 8)][0] == "full" and tiers[("mi325x", 8)][0] == "full"
    assert tiers[("gh200", 1)][0] == "limited"
    assert tiers[("v100-sxm2-32gb", 8)] == (
        "rejected",
        "v100-sxm2-32gb (sm_70, compute capability 7.0) has no FP8 in hardware",
    )
    # every catalog GPU has a row, and no row of an FP8 GPU is refused at the floors
    rows = tier_rows()
    assert {r.gpu.id for r in rows} == set(load_gpu_catalog().ids())
    assert all(r.verdict.tier != "rejected" for r in rows if r.gpu.fp8)


def test_fabric_gpus_rewrites_only_the_generated_block(tmp_path: Path) -> None:
    doc = tmp_path / "enroll.md"
    stale = f"# intro\n{BEGIN}\n| old | table |\n{END}\nafter\n"
    doc.write_text(stale)
    proc = subprocess.run([FABRIC, "gpus", "--update-doc", str(doc)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "updated" in proc.stdout, proc.stderr
    text = doc.read_text()
    assert text.startswith("# intro\n") and text.endswith(f"{END}\nafter\n") and "| old |" not in text
    again = subprocess.run([FABRIC, "gpus", "--update-doc", str(doc)], capture_output=True, text=True, timeout=60)
    assert "already current" in again.stdout
    # what --markdown prints is that block; --json the same rows
    markdown = subprocess.run([FABRIC, "gpus", "--markdown"], capture_output=True, text=True, timeout=60).stdout
    assert table_in(text) == markdown
    rows = json.loads(subprocess.run([FABRIC, "gpus", "--json"], capture_output=True, text=True, timeout=60).stdout)
    assert len(rows) == markdown.count("\n") - 2


def test_a_document_without_markers_is_a_usage_error(tmp_path: Path) -> None:
    doc = tmp_path / "plain.md"
    doc.write_text("# no table here\n")
    proc = subprocess.run([FABRIC, "gpus", "--update-doc", str(doc)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "no GPU table markers" in proc.stderr and "Traceback" not in proc.stderr
    assert doc.read_text() == "# no table here\n"
