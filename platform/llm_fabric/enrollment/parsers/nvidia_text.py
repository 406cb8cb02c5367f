"""Text outputs of nvidia-smi: `-q`/`-a` (indented key : value), the default table, `-L`, `nvlink -s`.

The `-q` label column widened in 590 (42 -> 55 characters), so lines are split on the first
`: `, never on a column. From 610 `Driver Version` carries a bracketed deprecation remark and
`KMD Version` is the real driver version; both spellings are read.
"""

from __future__ import annotations

import re

from llm_fabric.enrollment.inventory import GpuDevice, GpuReport
from llm_fabric.enrollment.parsers import values
from llm_fabric.errors import ParseError

QUERY_COMMAND = "nvidia-smi -q"
TABLE_COMMAND = "nvidia-smi"
LIST_COMMAND = "nvidia-smi -L"

_GPU_SECTION = re.compile(r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]$")


def _entries(text: str) -> list[tuple[int, str, str | None]]:
    """(indent, key, value or None for a section heading) per meaningful line."""
    out = []
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip() or line.lstrip().startswith("="):
            continue
        indent = len(line) - len(line.lstrip(" \t"))
        key, sep, value = line.strip().partition(": ")
        if not sep and line.strip().endswith(":"):
            key, value, sep = line.strip()[:-1], "", ":"
        out.append((indent, key.strip(), value if sep else None))
    return out


def parse_query_text(text: str, command: str = QUERY_COMMAND) -> GpuReport:
    top: dict[str, str] = {}
    gpus: list[dict[str, str]] = []
    stack: list[tuple[int, str]] = []
    for indent, key, value in _entries(text):
        if indent == 0 and _GPU_SECTION.match(key):
            gpus.append({"bus": key[4:]})
            stack = []
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if value is None:
            stack.append((indent, key))
            continue
        path = "/".join([s for _, s in stack] + [key])
        target = gpus[-1] if gpus and indent > 0 else top
        target.setdefault(path, value)
    if not gpus:
        raise ParseError(command, "no `GPU <bus id>` section found", hint="expected the output of `nvidia-smi -q`")
    devices = []
    for index, gpu in enumerate(gpus):
        name = values.present(gpu.get("Product Name"))
        if name is None:
            raise ParseError(command, f"GPU {gpu['bus']} has no `Product Name`")
        devices.append(
            GpuDevice(
                index=index,
                name=name,
                uuid=values.present(gpu.get("GPU UUID")),
                pci_bus_id=gpu["bus"],
                pci_device_id=values.pci_device_id(gpu.get("PCI/Device Id")),
                memory_mib=values.mib(gpu.get("FB Memory Usage/Total")),
                mig_enabled=values.enabled(gpu.get("MIG Mode/Current")),
                ecc_enabled=values.enabled(gpu.get("ECC Mode/Current")),
            )
        )
    driver = values.version(top.get("KMD Version")) or values.version(top.get("Driver Version"))
    cuda = values.version(top.get("CUDA UMD Version")) or values.version(top.get("CUDA Version"))
    return GpuReport(command=command, devices=devices, driver_version=driver, cuda_version=cuda)


_BANNER_DRIVER = re.compile(r"(?:Driver|KMD) Version:\s*([0-9][0-9.]*)")
_BANNER_CUDA = re.compile(r"CUDA (?:UMD )?Version:\s*([0-9][0-9.]*)")
_TABLE_ROW = re.compile(r"^\|\s+([0-9]+)\s+(.+?)\s+(On|Off|WDDM|TCC)\s*\|\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f:.]+)")
_TABLE_MEMORY = re.compile(r"([0-9]+)MiB\s*/\s*([0-9]+)MiB")


def parse_table(text: str, command: str = TABLE_COMMAND) -> GpuReport:
    """The default table. Names may be truncated (`NVIDIA RTX 6000 Ada Gene...`): good for counts and versions."""
    lines = text.splitlines()
    driver = next((m.group(1) for m in map(_BANNER_DRIVER.search, lines) if m), None)
    if driver is None:
        raise ParseError(command, "no `Driver Version:` (or `KMD Version:`) in the banner")
    cuda = next((m.group(1) for m in map(_BANNER_CUDA.search, lines) if m), None)
    devices = []
    for number, line in enumerate(lines):
        if line.lstrip("|").strip().startswith(("Processes", "MIG devices")):
            break
        row = _TABLE_ROW.match(line)
        if row is None:
            continue
        following = lines[number + 1] if number + 1 < len(lines) else ""
        memory = _TABLE_MEMORY.search(following)
        devices.append(
            GpuDevice(
                index=int(row.group(1)),
                name=row.group(2).strip(),
                pci_bus_id=row.group(4),
                memory_mib=int(memory.group(2)) if memory else None,
            )
        )
    return GpuReport(command=command, devices=devices, driver_version=driver, cuda_version=cuda)


_LIST_LINE = re.compile(r"^GPU ([0-9]+): (.+?) \(UUID: ([^)]+)\)\s*$")


def parse_gpu_list(text: str, command: str = LIST_COMMAND) -> GpuReport:
    """`nvidia-smi -L` and `nvidia-smi nvlink -s`: one `GPU i: NAME (UUID: ...)` line per GPU.

    Indented `MIG ... Device` lines and `Link k:` lines belong to the GPU above; they are not GPUs.
    """
    devices = []
    for line in text.splitlines():
        match = _LIST_LINE.match(line)
        if match:
            devices.append(GpuDevice(index=int(match.group(1)), name=match.group(2), uuid=match.group(3)))
    if not devices:
        raise ParseError(command, "no `GPU i: NAME (UUID: ...)` line found")
    return GpuReport(command=command, devices=devices)
