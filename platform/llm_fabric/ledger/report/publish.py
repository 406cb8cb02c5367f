"""Write a report folder: report.md, report.html, report.json, CSV tables and the signed manifest."""

from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from llm_fabric.atomicio import write_atomic
from llm_fabric.ledger.report.manifest import MANIFEST, listed_files, write_manifest
from llm_fabric.ledger.report.month_report import MonthReport, OwnerReport
from llm_fabric.ledger.report.render import (
    render_csvs,
    render_html,
    render_json,
    render_markdown,
    render_owner_html,
    render_owner_markdown,
    statement_csvs,
)
from llm_fabric.outdir import MARKER, claim_folder


def write_report(out: Path, report: MonthReport, key: Ed25519PrivateKey | None) -> list[str]:
    """Every file of the federation's report under `out` (`write_folder`)."""
    files = {
        "report.md": render_markdown(report),
        "report.html": render_html(report),
        "report.json": render_json(report),
        **render_csvs(report),
    }
    return write_folder(out, files, key)


def write_owner_report(out: Path, report: OwnerReport, key: Ed25519PrivateKey | None) -> list[str]:
    """Every file of a contributor's own report under `out`, signed as the federation's is (`write_folder`)."""
    files = {
        "report.md": render_owner_markdown(report),
        "report.html": render_owner_html(report),
        "report.json": render_json(report),
        **statement_csvs(report.statement),
    }
    return write_folder(out, files, key)


def write_folder(out: Path, files: dict[str, str], key: Ed25519PrivateKey | None) -> list[str]:
    """`files` (name -> text) under `out` and their signed manifest; files an earlier run listed that this
    one does not write are removed.

    `out` must be new, empty or an earlier report folder (llm_fabric.outdir); nothing else in it is touched.
    The manifest is written last: a run killed before it leaves a folder that fails `report verify`
    until a re-run completes it.
    """
    claim_folder(out, "report")
    earlier = listed_files(out)
    (out / MANIFEST).unlink(missing_ok=True)  # the folder is not a finished report until the new manifest is written
    for name, text in files.items():
        write_atomic(out / name, text)
    for name in earlier:
        # a re-run into the same folder must not leave a file the new manifest does not list
        stale = out / name
        if name not in files and name != MARKER and stale.is_file() and not stale.is_symlink():
            stale.unlink()
    names = sorted([*files, MARKER])
    write_manifest(out, names, key)
    return sorted([*names, MANIFEST])
