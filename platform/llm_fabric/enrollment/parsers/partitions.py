"""AMD compute partitions: from the logical GPUs the tools list to the physical GPUs the fabric counts.

In DPX/QPX/CPX mode amd-smi and rocm-smi list every partition as a GPU of its own, each showing the
whole board's VRAM or an odd share of it (ROCm issue #4750): an 8 x MI300X host in CPX mode lists
64 GPUs of 192 GB. The partitions of one physical GPU share its PCI bus and device (the PCI function
carries the partition) and its ASIC serial; they are grouped back into one device that keeps the mode
and how many logical GPUs it was listed as. Current amd-smi no longer prints the partition section in
`static` by default, so a mode nobody reported stays unknown (None), never "not partitioned".
"""

from __future__ import annotations

import re

from llm_fabric.enrollment.inventory import GpuDevice

NOT_SUPPORTED = "none"  # the tool answered N/A for the partition: a GPU without partitioning
UNPARTITIONED = ("SPX", NOT_SUPPORTED)

_BDF = re.compile(r"^(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.[0-7]$")


def partition_mode(value: str | None) -> str | None:
    """`CPX` -> `CPX`, `N/A` -> `none` (not supported), missing -> None (not reported)."""
    if value is None:
        return None
    text = value.strip().upper()
    if text in ("", "N/A", "NA", "NOT SUPPORTED", "[N/A]"):
        return NOT_SUPPORTED
    return text


def physical_gpus(devices: list[GpuDevice]) -> list[GpuDevice]:
    """One device per physical GPU, in listing order: partitions folded into their GPU."""
    groups: dict[str, list[GpuDevice]] = {}
    for device in devices:
        groups.setdefault(_physical_key(device), []).append(device)
    out = []
    for members in groups.values():
        first = members[0]
        modes = sorted({m.partition_mode for m in members if m.partition_mode is not None})
        mode = first.partition_mode or (modes[0] if modes else None)
        count = len(members)
        partitioned = True if count > 1 else (None if mode is None else mode not in UNPARTITIONED)
        out.append(
            first.model_copy(
                update={
                    "logical_gpus": count,
                    "partition_mode": mode,
                    "mig_enabled": partitioned,
                    # a partition's VRAM figure is not the GPU's (#4750): the catalog's is used instead
                    "memory_mib": first.memory_mib if count == 1 else None,
                }
            )
        )
    return out


def _physical_key(device: GpuDevice) -> str:
    bdf = _BDF.match((device.pci_bus_id or "").strip())
    if bdf is not None:
        domain = (bdf.group(1) or "0").lower().lstrip("0") or "0"
        return f"pci:{domain}:{bdf.group(2).lower()}:{bdf.group(3).lower()}"
    if device.uuid:
        return f"uuid:{device.uuid.lower()}"
    return f"index:{device.index}"
