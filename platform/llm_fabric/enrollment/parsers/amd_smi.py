"""`amd-smi static --json` (plus `static --partition --json`, `list --json`): rocm-smi's successor.

Shapes it prints (amdsmi CLI, `amdsmi_commands.py` / `amdsmi_logger.py`):
- ROCm 6.0-6.2: a bare list `[{"gpu": 0, "asic": {...}, ...}, ...]`;
- ROCm 6.3 and later: the same list wrapped as `{"gpu_data": [...]}`.
Per GPU: `asic` (`market_name`, `device_id` "0x74a1", `asic_serial` "0x%016X",
`target_graphics_version` "gfx942"), `bus.bdf`, `driver` (`name`/`version`; older releases
`driver_name`/`driver_version`), `vram.size` (`{"value": 196592, "unit": "MB"}`; older releases
`vram_size_mb`), `ras.ecc_block_state` (`UMC`: ENABLED/DISABLED) and, when asked for or on older
releases, `partition` (`accelerator_partition`/`compute_partition` SPX|DPX|CPX..., `partition_id`).
A value it could not read is the string "N/A". From ROCm 6.4 `static` leaves the partition section
out unless asked, so the probes also run `amd-smi static --partition --json` (the same envelope, one
`partition` section per listed GPU) and `amd-smi list --json` (`gpu`, `bdf`, `uuid`, `kfd_id`,
`node_id`, `partition_id` per listed GPU); both are joined to `static` by the `gpu` index. Partitions
are folded into their physical GPU (`partitions.physical_gpus`).

The driver version is the amdgpu module's (6.x) with amdgpu-dkms; with the amdgpu built into the
Linux kernel, amd-smi prints the kernel's banner instead (`Linuxversion6.14.0-24-generic(...)`): that
is reported as `in_kernel_driver`, never read as a driver version.

The GPU's identity is its ASIC serial, lower-cased: the same string rocm-smi prints as `Unique ID`,
so a machine enrolled with either tool keeps its GPU fingerprint.
"""

from __future__ import annotations

import json
import re
from typing import Any

from llm_fabric.enrollment.inventory import GpuDevice, GpuReport
from llm_fabric.enrollment.parsers import values
from llm_fabric.enrollment.parsers.amd import amd_name
from llm_fabric.enrollment.parsers.partitions import partition_mode, physical_gpus
from llm_fabric.errors import ParseError

AMD_SMI_STATIC_COMMAND = "amd-smi static --json"
AMD_SMI_PARTITION_COMMAND = "amd-smi static --partition --json"
AMD_SMI_LIST_COMMAND = "amd-smi list --json"
_HINT = "run `amd-smi static --json` on the machine and check that it prints a JSON list of GPUs"
_JSON_START = re.compile(r"^\s*([\[{])", re.MULTILINE)
_KERNEL_BANNER = re.compile(r"^\s*linux\s*version", re.IGNORECASE)


def parse_amd_smi_static(
    text: str,
    command: str = AMD_SMI_STATIC_COMMAND,
    *,
    partitions: dict[int, str | None] | None = None,
    listing: dict[int, str] | None = None,
) -> GpuReport:
    """`partitions` (gpu -> mode, `parse_amd_smi_partition`) and `listing` (gpu -> bdf,
    `parse_amd_smi_list`) fill in what `static` left out."""
    entries = _gpu_entries(_load(text, command), command)
    devices: list[GpuDevice] = []
    driver: str | None = None
    in_kernel = False
    for position, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ParseError(command, f"GPU entry {position} is {_kind(entry)}, not an object", hint=_HINT)
        device = _device(entry, position, command)
        update: dict[str, Any] = {}
        if device.partition_mode is None and partitions is not None and device.index in partitions:
            update["partition_mode"] = partitions[device.index]
        if device.pci_bus_id is None and listing is not None and device.index in listing:
            update["pci_bus_id"] = listing[device.index]
        devices.append(device.model_copy(update=update) if update else device)
        raw_driver = _text(entry.get("driver"), "version", "driver_version")
        if raw_driver is not None and _KERNEL_BANNER.match(raw_driver):
            in_kernel = True
        elif driver is None:
            driver = values.version(raw_driver)
    if not devices:
        raise ParseError(command, "the GPU list is empty", hint="is the amdgpu driver loaded (`amd-smi list`)?")
    return GpuReport(
        command=command,
        devices=physical_gpus(devices),
        driver_version=None if in_kernel else driver,
        in_kernel_driver=in_kernel,
    )


def parse_amd_smi_partition(text: str, command: str = AMD_SMI_PARTITION_COMMAND) -> dict[int, str | None]:
    """gpu index -> compute partition mode (SPX, CPX..., `none` when the GPU has no partitioning)."""
    modes: dict[int, str | None] = {}
    for position, entry in enumerate(_gpu_entries(_load(text, command), command)):
        if not isinstance(entry, dict):
            raise ParseError(command, f"GPU entry {position} is {_kind(entry)}, not an object")
        modes[_index(entry, position, command)] = _partition_mode(entry.get("partition"))
    return modes


def parse_amd_smi_list(text: str, command: str = AMD_SMI_LIST_COMMAND) -> dict[int, str]:
    """gpu index -> PCI address (`bdf`); the function number of a partition's address is its partition."""
    buses: dict[int, str] = {}
    for position, entry in enumerate(_gpu_entries(_load(text, command), command)):
        if not isinstance(entry, dict):
            raise ParseError(command, f"GPU entry {position} is {_kind(entry)}, not an object")
        bdf = _text(entry, "bdf", "gpu_bdf")
        if bdf is not None:
            buses[_index(entry, position, command)] = bdf
    return buses


def _index(entry: dict[str, Any], position: int, command: str) -> int:
    index = entry.get("gpu", position)
    if not isinstance(index, int) or isinstance(index, bool):
        raise ParseError(command, f"GPU entry {position}: `gpu` is {_kind(index)}, not an index", hint=_HINT)
    return index


def _load(text: str, command: str) -> Any:
    # amd-smi may print a warning line (e.g. missing render/video group membership) before the JSON
    start = _JSON_START.search(text)
    if start is None:
        raise ParseError(command, "no JSON in the output (no line starts with `[` or `{`)", hint=_HINT)
    try:
        data, _end = json.JSONDecoder().raw_decode(text, start.start(1))
    except json.JSONDecodeError as exc:
        raise ParseError(
            command, f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", hint=_HINT
        ) from exc
    except RecursionError as exc:
        raise ParseError(command, "JSON nested too deeply", hint=_HINT) from exc
    return data


def _gpu_entries(data: Any, command: str) -> list[Any]:
    if isinstance(data, dict) and "gpu_data" in data:
        data = data["gpu_data"]
    if not isinstance(data, list):
        raise ParseError(command, f'expected a list of GPUs (or {{"gpu_data": [...]}}), got {_kind(data)}', hint=_HINT)
    return data


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def _text(section: Any, *keys: str) -> str | None:
    """The first of `keys` in a section that holds a real value (not "N/A", not missing)."""
    if not isinstance(section, dict):
        return None
    for key in keys:
        value = section.get(key)
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            text = values.present(str(value))
            if text is not None:
                return text
    return None


def _device(entry: dict[str, Any], position: int, command: str) -> GpuDevice:
    asic, board = entry.get("asic"), entry.get("board")
    index = _index(entry, position, command)
    device_id = values.pci_device_id(_text(asic, "device_id"))
    name = amd_name(_text(asic, "market_name") or _text(board, "product_name"), device_id)
    if name is None:
        raise ParseError(
            command,
            f"GPU {index} has neither `asic.market_name` nor `asic.device_id`",
            hint="the `asic` section is missing: run `amd-smi static --json` without section options",
        )
    serial = _text(asic, "asic_serial")
    return GpuDevice(
        index=index,
        name=name,
        vendor="amd",
        uuid=serial.lower() if serial else None,
        pci_bus_id=_text(entry.get("bus"), "bdf"),
        pci_device_id=device_id,
        memory_mib=_vram_mib(entry.get("vram")),
        compute_capability=_text(asic, "target_graphics_version"),
        partition_mode=_partition_mode(entry.get("partition")),
        ecc_enabled=_ecc(entry.get("ras")),
    )


def _vram_mib(vram: Any) -> int | None:
    if not isinstance(vram, dict):
        return None
    size = vram.get("size")
    if isinstance(size, dict):
        number, unit = _text(size, "value"), _text(size, "unit") or "MB"
        return values.mib(f"{number} {unit}") if number is not None else None
    if isinstance(size, str):  # human-readable form, "196592 MB"
        return values.mib(size)
    legacy = _text(vram, "vram_size_mb")  # ROCm 6.0/6.1 named it by its unit
    return values.mib(f"{legacy} MB") if legacy is not None else None


def _partition_mode(partition: Any) -> str | None:
    """The section's mode; `none` when it says N/A (no partitioning), None when it says nothing."""
    if not isinstance(partition, dict):
        return None
    for key in ("accelerator_partition", "compute_partition"):
        value = partition.get(key)
        if isinstance(value, str):
            return partition_mode(value)
    return None


def _ecc(ras: Any) -> bool | None:
    """HBM ECC is the memory controller's (UMC) RAS feature."""
    states = ras.get("ecc_block_state") if isinstance(ras, dict) else None
    return values.enabled(_text(states, "UMC", "umc"))
