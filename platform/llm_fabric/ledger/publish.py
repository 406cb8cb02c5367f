"""Write a report folder: report.md, report.html, report.json, CSV tables and the signed manifest."""

from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from llm_fabric.atomicio import write_atomic
from llm_fabric.ledger.manifest import MANIFEST, write_manifest
from llm_fabric.ledger.month_report import MonthReport
from llm_fabric.ledger.render import render_csvs, render_html, render_json, render_markdown


def write_report(out: Path, report: MonthReport, key: Ed25519PrivateKey | None) -> list[str]:
    """Every file of the report under `out` (files of an earlier run that we would not write are removed)."""
    files = {
        "report.md": render_markdown(report),
        "report.html": render_html(report),
        "report.json": render_json(report),
        **render_csvs(report),
    }
    out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        write_atomic(out / name, text)
    for stale in out.iterdir():
        # a re-run into the same folder must not leave a file the new manifest does not list
        if stale.is_file() and stale.name not in files and stale.name != MANIFEST and stale.suffix in (".csv", ".md"):
            stale.unlink()
    write_manifest(out, sorted(files), key)
    return sorted([*files, MANIFEST])
