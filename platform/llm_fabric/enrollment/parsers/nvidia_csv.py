"""`nvidia-smi --query-gpu=... --format=csv`: a header (with or without units) and one row per GPU."""

from __future__ import annotations

import csv
import io
import re

from llm_fabric.enrollment.inventory import GpuDevice, GpuReport
from llm_fabric.enrollment.parsers import values
from llm_fabric.errors import ParseError

QUERY_FIELDS = (
    "index,name,uuid,pci.bus_id,pci.device_id,memory.total,driver_version,compute_cap,mig.mode.current,ecc.mode.current"
)
COMMAND = f"nvidia-smi --query-gpu={QUERY_FIELDS} --format=csv"

_UNIT = re.compile(r"\s*\[[^\]]*\]\s*$")


def _header(row: list[str]) -> list[str]:
    return [_UNIT.sub("", cell).strip().lower() for cell in row]


def parse_query_gpu(text: str, command: str = COMMAND) -> GpuReport:
    try:
        reader = csv.reader(io.StringIO(text.replace("\x00", ""), newline=""), skipinitialspace=True)
        rows = [r for r in reader if any(c.strip() for c in r)]
    except csv.Error as exc:
        raise ParseError(command, f"not CSV: {exc}") from exc
    if not rows:
        raise ParseError(command, "the output is empty", hint="does `nvidia-smi` work on the host?")
    header = _header(rows[0])
    if "name" not in header:
        raise ParseError(command, f"no `name` column in the header {rows[0][:6]!r}", hint="expected CSV with a header")
    devices: list[GpuDevice] = []
    drivers: set[str] = set()
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise ParseError(command, f"line {number} has {len(row)} fields, the header has {len(header)}")
        cell = dict(zip(header, row, strict=True))
        name = values.present(cell.get("name"))
        if name is None:
            raise ParseError(command, f"line {number} has no GPU name")
        index_text = values.present(cell.get("index"))
        if index_text is not None and not index_text.isdigit():
            raise ParseError(command, f"line {number}: index {index_text!r} is not a number")
        driver = values.version(cell.get("driver_version"))
        if driver:
            drivers.add(driver)
        devices.append(
            GpuDevice(
                index=int(index_text) if index_text is not None else len(devices),
                name=name,
                uuid=values.present(cell.get("uuid")),
                pci_bus_id=values.present(cell.get("pci.bus_id")),
                pci_device_id=values.pci_device_id(cell.get("pci.device_id")),
                memory_mib=values.mib(cell.get("memory.total")),
                compute_capability=_compute_cap(cell.get("compute_cap")),
                mig_enabled=values.enabled(cell.get("mig.mode.current")),
                ecc_enabled=values.enabled(cell.get("ecc.mode.current")),
            )
        )
    if not devices:
        raise ParseError(command, "the header is there but no GPU rows follow")
    return GpuReport(command=command, devices=devices, driver_version=min(drivers) if drivers else None)


def _compute_cap(value: str | None) -> str | None:
    text = values.present(value)
    return text if text is not None and re.fullmatch(r"[0-9]+\.[0-9]+", text) else None
