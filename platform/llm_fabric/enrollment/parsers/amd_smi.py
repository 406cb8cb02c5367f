"""`amd-smi static --json`: AMD's successor of rocm-smi, one JSON object per GPU.

Shapes it prints (amdsmi CLI, `amdsmi_commands.py` / `amdsmi_logger.py`):
- ROCm 6.0-6.2: a bare list `[{"gpu": 0, "asic": {...}, ...}, ...]`;
- ROCm 6.3 and later: the same list wrapped as `{"gpu_data": [...]}`.
Per GPU: `asic` (`market_name`, `device_id` "0x74a1", `asic_serial` "0x%016X",
`target_graphics_version` "gfx942"), `bus.bdf`, `driver` (`name`/`version`; older releases
`driver_name`/`driver_version`), `vram.size` (`{"value": 196592, "unit": "MB"}`; older releases
`vram_size_mb`), `ras.ecc_block_state` (`UMC`: ENABLED/DISABLED) and, when asked for or on older
releases, `partition` (`accelerator_partition`/`compute_partition` SPX|DPX|CPX..., `partition_id`).
A value it could not read is the string "N/A".

The GPU's identity is its ASIC serial, lower-cased: the same string rocm-smi prints as `Unique ID`,
so a machine enrolled with either tool keeps its GPU fingerprint.
"""

from __future__ import annotations

import json
import re
from typing import Any

from llm_fabric.enrollment.inventory import GpuDevice, GpuReport
from llm_fabric.enrollment.parsers import values
from llm_fabric.errors import ParseError

AMD_SMI_STATIC_COMMAND = "amd-smi static --json"
_HINT = "run `amd-smi static --json` on the machine and check that it prints a JSON list of GPUs"
_JSON_START = re.compile(r"^\s*([\[{])", re.MULTILINE)
_UNIFIED = ("SPX", "N/A")  # a partition mode that keeps one logical GPU per physical GPU


def parse_amd_smi_static(text: str, command: str = AMD_SMI_STATIC_COMMAND) -> GpuReport:
    entries = _gpu_entries(_load(text, command), command)
    devices: list[GpuDevice] = []
    driver: str | None = None
    for position, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ParseError(command, f"GPU entry {position} is {_kind(entry)}, not an object", hint=_HINT)
        if _secondary_partition(entry):
            continue  # DPX/CPX: partitions 1.. of a physical GPU are listed as GPUs of their own
        devices.append(_device(entry, position, command))
        driver = driver or _driver_version(entry.get("driver"))
    if not devices:
        raise ParseError(command, "the GPU list is empty", hint="is the amdgpu driver loaded (`amd-smi list`)?")
    return GpuReport(command=command, devices=devices, driver_version=driver)


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
    index = entry.get("gpu", position)
    if not isinstance(index, int) or isinstance(index, bool):
        raise ParseError(command, f"GPU entry {position}: `gpu` is {_kind(index)}, not an index", hint=_HINT)
    device_id = values.pci_device_id(_text(asic, "device_id"))
    name = _text(asic, "market_name") or _text(board, "product_name")
    if name is None and device_id is not None:
        name = f"AMD GPU {device_id}"  # the catalog still matches it by PCI device id
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
        mig_enabled=_partitioned(entry.get("partition")),
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


def _driver_version(driver: Any) -> str | None:
    return values.version(_text(driver, "version", "driver_version"))


def _partition_mode(partition: Any) -> str | None:
    mode = _text(partition, "accelerator_partition", "compute_partition")
    return mode.upper() if mode else None


def _partitioned(partition: Any) -> bool | None:
    mode = _partition_mode(partition)
    return None if mode is None else mode not in _UNIFIED


def _secondary_partition(entry: dict[str, Any]) -> bool:
    partition = entry.get("partition")
    part_id = _text(partition, "partition_id")
    return bool(_partitioned(partition)) and part_id is not None and part_id != "0"


def _ecc(ras: Any) -> bool | None:
    """HBM ECC is the memory controller's (UMC) RAS feature."""
    states = ras.get("ecc_block_state") if isinstance(ras, dict) else None
    return values.enabled(_text(states, "UMC", "umc"))
