"""AMD tools: `rocm-smi -a` (GPU[i] : key: value), `rocm-smi` concise table, `rocminfo` agents.

`rocm-smi -a` has named things differently over the releases (rocm_smi.py, showId/showProduct):
ROCm 5.x `GPU ID` and `Card series`; 6.0-6.1 `Device ID` and `Card series`; 6.2 and later
`Device Name`, `Device ID`, `Card Series`, plus `Compute Partition`. Any of the names gives the
product, any of the ids the PCI device id. The concise table (plain `rocm-smi`) has three layouts:
5.x `GPU Temp AvgPwr ...` (no name, no id), 6.0-6.1 `Device [Model : Revision] ...` with the name on
the next line, 6.2+ `Device Node IDs (DID, GUID) ...`. Partitions listed as GPUs are folded into their
physical GPU (`partitions.physical_gpus`).

The product name differs by tool ("AMD Instinct MI300X OAM" from rocm-smi, "AMD Instinct
MI300X" from rocminfo); the catalog knows both, and the PCI device id decides when in doubt.
"""

from __future__ import annotations

import re

from llm_fabric.enrollment.inventory import GpuDevice, GpuReport
from llm_fabric.enrollment.parsers import values
from llm_fabric.enrollment.parsers.partitions import UNPARTITIONED, partition_mode, physical_gpus
from llm_fabric.errors import ParseError

ROCM_SMI_COMMAND = "rocm-smi -a"
ROCMINFO_COMMAND = "rocminfo"

_SMI_LINE = re.compile(r"^GPU\[([0-9]+)\]\s*:\s*(.+?):\s*(.*)$")
_SMI_DRIVER = re.compile(r"^Driver version:\s*(\S+)", re.MULTILINE)
# a kernel release (6.8.0-45-generic): rocm-smi prints it as the driver version for the in-kernel amdgpu
_KERNEL_RELEASE = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+-[0-9A-Za-z._+-]*[A-Za-z][0-9A-Za-z._+-]*$")
_NAME_KEYS = ("Card Series", "Card series", "Device Name")
_ID_KEYS = ("Device ID", "GPU ID")
_CONCISE_ROW_6_0 = re.compile(r"^([0-9]+)\s+\[(0x[0-9a-fA-F]+)\s*:\s*0x[0-9a-fA-F]+\]")
_CONCISE_ROW_6_2 = re.compile(r"^([0-9]+)\s+([0-9]+)\s+(0x[0-9a-fA-F]+),\s+\S+\s")
_CONCISE_ROW_5 = re.compile(r"^([0-9]+)\s+(?:N/A|[0-9.]+\S*)\s")
# Partitions column: "NPS1, SPX" (6.0-6.1) or "NPS1, CPX, 3" (6.2+: the partition id last)
_CONCISE_PARTITIONS = re.compile(r"\bNPS[0-9]+,\s*([A-Z]+)\b(?:,\s*([0-9]+))?")


def amd_name(name: str | None, device_id: str | None) -> str | None:
    """The GPU's name as the tool printed it, else `AMD GPU <PCI device id>`: the catalog still matches it by the id."""
    if name:
        return name
    return f"AMD GPU {device_id}" if device_id else None


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
        name = next((n for n in (values.present(facts.get(k)) for k in _NAME_KEYS) if n), None)
        device_id = next((i for i in (values.pci_device_id(facts.get(k)) for k in _ID_KEYS) if i), None)
        name = amd_name(name, device_id)
        if name is None:
            raise ParseError(
                command,
                f"GPU[{index}] has no `Card Series`, `Device Name`, `Device ID` or `GPU ID`",
                hint="run `rocm-smi -a` (all sections)",
            )
        vram = values.present(facts.get("VRAM Total Memory (B)"))
        partition = facts.get("Compute Partition")
        devices.append(
            GpuDevice(
                index=index,
                name=name,
                vendor="amd",
                uuid=values.present(facts.get("Unique ID")),
                pci_bus_id=values.present(facts.get("PCI Bus")),
                pci_device_id=device_id,
                memory_mib=int(vram) // (1024 * 1024) if vram is not None and vram.isdigit() else None,
                partition_mode=partition_mode(partition) if partition is not None else None,
            )
        )
    driver_match = _SMI_DRIVER.search(text)
    driver = driver_match.group(1) if driver_match else None
    in_kernel = driver is not None and _KERNEL_RELEASE.match(driver) is not None
    return GpuReport(
        command=command,
        devices=physical_gpus(devices),
        driver_version=None if in_kernel or driver is None else values.version(driver),
        in_kernel_driver=in_kernel,
    )


def _parse_concise(text: str, command: str) -> GpuReport:
    """The three concise layouts, told apart by their header line."""
    lines = text.splitlines()
    header = next((line.split() for line in lines if line.startswith(("Device", "GPU "))), [])
    devices: list[GpuDevice] = []
    for number, line in enumerate(lines):
        partitions = _CONCISE_PARTITIONS.search(line)
        mode = partition_mode(partitions.group(1)) if partitions else None
        if header[:2] == ["Device", "[Model"] and (row := _CONCISE_ROW_6_0.match(line)):
            # 6.0-6.1: the name (20 characters at most) is on the next line
            name = lines[number + 1].strip().split("  ")[0] if number + 1 < len(lines) else ""
            device_id = values.pci_device_id(row.group(2))
        elif header[:2] == ["Device", "Node"] and (row := _CONCISE_ROW_6_2.match(line)):
            name, device_id = "", values.pci_device_id(row.group(3))
        elif header[:1] == ["GPU"] and (row := _CONCISE_ROW_5.match(line)):
            name, device_id = "", None  # 5.x: neither name nor id; the GPUs are counted, not identified
        else:
            continue
        if partitions and partitions.group(2) not in (None, "0") and devices:
            # partition 1.. of the physical GPU in the row above
            devices[-1] = devices[-1].model_copy(update={"logical_gpus": devices[-1].logical_gpus + 1})
            continue
        name = amd_name(name, device_id) or "unknown AMD GPU"
        devices.append(
            GpuDevice(index=int(row.group(1)), name=name, vendor="amd", pci_device_id=device_id, partition_mode=mode)
        )
    if not devices:
        raise ParseError(command, "no `GPU[i] : key: value` lines and no concise table rows")
    partitioned = [
        d.model_copy(
            update={"mig_enabled": None if d.partition_mode is None else d.partition_mode not in UNPARTITIONED}
        )
        for d in devices
    ]
    return GpuReport(command=command, devices=partitioned)


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
                pci_bus_id=_bdf(facts.get("BDFID")),
                pci_device_id=values.pci_device_id(chip.group(1)) if chip else None,
                compute_capability=values.present(facts.get("Name")),
            )
        )
    if not devices:
        raise ParseError(command, "no agent of `Device Type: GPU`")
    runtime = re.search(r"^Runtime Version:\s*(\S+)", text, re.MULTILINE)
    # agents of one partitioned GPU share its PCI bus and device: folded like amd-smi's listing
    return GpuReport(
        command=command, devices=physical_gpus(devices), driver_version=runtime.group(1) if runtime else None
    )


def _bdf(value: str | None) -> str | None:
    """rocminfo's `BDFID` (bus << 8 | device << 3 | function, decimal) as a PCI address; 0 = none."""
    text = (value or "").strip()
    if not text.isdigit() or int(text) == 0 or int(text) > 0xFFFF:
        return None
    number = int(text)
    return f"0000:{number >> 8:02x}:{(number >> 3) & 0x1F:02x}.{number & 0x7}"
