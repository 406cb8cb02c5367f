"""AMD tools: `rocm-smi -a` (GPU[i] : key: value), `rocm-smi` concise table, `rocminfo` agents.

The product name differs by tool ("AMD Instinct MI300X OAM" from rocm-smi, "AMD Instinct
MI300X" from rocminfo); the catalog knows both, and the PCI device id decides when in doubt.
"""

from __future__ import annotations

import re

from llm_fabric.enrollment.inventory import GpuDevice, GpuReport
from llm_fabric.enrollment.parsers import values
from llm_fabric.errors import ParseError

ROCM_SMI_COMMAND = "rocm-smi -a"
ROCMINFO_COMMAND = "rocminfo"

_SMI_LINE = re.compile(r"^GPU\[([0-9]+)\]\s*:\s*(.+?):\s*(.*)$")
_SMI_DRIVER = re.compile(r"^Driver version:\s*(\S+)", re.MULTILINE)
_CONCISE_ROW = re.compile(r"^([0-9]+)\s+\[(0x[0-9a-fA-F]+)\s*:\s*0x[0-9a-fA-F]+\]")


def parse_rocm_smi(text: str, command: str = ROCM_SMI_COMMAND) -> GpuReport:
    per_gpu: dict[int, dict[str, str]] = {}
    for line in text.splitlines():
        match = _SMI_LINE.match(line.strip())
        if match:
            per_gpu.setdefault(int(match.group(1)), {}).setdefault(match.group(2).strip(), match.group(3).strip())
    if not per_gpu:
        return _parse_concise(text, command)
    devices = []
    for index, facts in sorted(per_gpu.items()):
        name = values.present(facts.get("Card series")) or values.present(facts.get("Card Series"))
        if name is None:
            raise ParseError(command, f"GPU[{index}] has no `Card series`", hint="run `rocm-smi -a` (all sections)")
        vram = values.present(facts.get("VRAM Total Memory (B)"))
        devices.append(
            GpuDevice(
                index=index,
                name=name,
                vendor="amd",
                uuid=values.present(facts.get("Unique ID")),
                pci_bus_id=values.present(facts.get("PCI Bus")),
                pci_device_id=values.pci_device_id(facts.get("Device ID")),
                memory_mib=int(vram) // (1024 * 1024) if vram is not None and vram.isdigit() else None,
            )
        )
    driver = _SMI_DRIVER.search(text)
    return GpuReport(
        command=command, devices=devices, driver_version=values.version(driver.group(1)) if driver else None
    )


def _parse_concise(text: str, command: str) -> GpuReport:
    lines = text.splitlines()
    devices = []
    for number, line in enumerate(lines):
        row = _CONCISE_ROW.match(line)
        if row is None:
            continue
        name = lines[number + 1].strip().split("  ")[0] if number + 1 < len(lines) else ""
        devices.append(
            GpuDevice(
                index=int(row.group(1)),
                name=name or "unknown AMD GPU",
                vendor="amd",
                pci_device_id=values.pci_device_id(row.group(2)),
            )
        )
    if not devices:
        raise ParseError(command, "no `GPU[i] : key: value` lines and no concise table rows")
    return GpuReport(command=command, devices=devices)


_AGENT = re.compile(r"^\*+\s*\nAgent [0-9]+\s*\n\*+\s*$", re.MULTILINE)
_CHIP = re.compile(r"\((0x[0-9a-fA-F]+)\)")


def parse_rocminfo(text: str, command: str = ROCMINFO_COMMAND) -> GpuReport:
    blocks = re.split(r"^Agent [0-9]+\s*$", text, flags=re.MULTILINE)
    if len(blocks) < 2:
        raise ParseError(command, "no `Agent N` blocks", hint="is the ROCm runtime installed (`rocminfo`)?")
    devices: list[GpuDevice] = []
    for block in blocks[1:]:
        facts: dict[str, str] = {}
        for line in block.splitlines():
            # agent-level keys are indented by two spaces; deeper ones belong to caches and pools
            if line.startswith("  ") and not line.startswith("   "):
                key, sep, value = line.strip().partition(":")
                if sep:
                    facts.setdefault(key.strip(), value.strip())
        if facts.get("Device Type") != "GPU":
            continue
        chip = _CHIP.search(facts.get("Chip ID", ""))
        devices.append(
            GpuDevice(
                index=len(devices),
                name=values.present(facts.get("Marketing Name")) or facts.get("Name", "unknown AMD GPU"),
                vendor="amd",
                uuid=values.present(facts.get("Uuid")),
                pci_device_id=values.pci_device_id(chip.group(1)) if chip else None,
                compute_capability=values.present(facts.get("Name")),
            )
        )
    if not devices:
        raise ParseError(command, "no agent of `Device Type: GPU`")
    runtime = re.search(r"^Runtime Version:\s*(\S+)", text, re.MULTILINE)
    return GpuReport(command=command, devices=devices, driver_version=runtime.group(1) if runtime else None)
