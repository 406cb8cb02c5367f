"""The GPU catalog: every id admission needs, name/PCI matching on what real tools print."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from llm_fabric.errors import ConfigError, UsageError
from llm_fabric.hardware.catalog import load_gpu_catalog, normalize_pci_device_id

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "hardware-samples"
REQUIRED = [
    "h100-sxm",
    "h100-pcie",
    "h100-nvl",
    "h200",
    "h20",
    "b200",
    "b300",
    "gb200",
    "a100-80gb",
    "a100-40gb",
    "l40s",
    "l4",
    "a10",
    "rtx-4090",
    "rtx-5090",
    "rtx-pro-6000",
    "mi300x",
    "mi325x",
    "mi355x",
]


def test_every_required_id_is_in_the_catalog() -> None:
    assert set(REQUIRED) <= set(load_gpu_catalog().ids())


@pytest.mark.parametrize(
    ("name", "pci", "expected"),
    [
        ("NVIDIA H100 80GB HBM3", "0x233010DE", "h100-sxm"),
        ("NVIDIA H200", None, "h200"),
        ("NVIDIA L40S", "0x26B910DE", "l40s"),
        ("NVIDIA A100-SXM4-80GB", None, "a100-80gb"),
        ("AMD Instinct MI300X", None, "mi300x"),
        ("AMD Instinct  MI300X\tOAM", "0x74a1", "mi300x"),  # rocm-smi pads with tabs
        ("NVIDIA H100 NVL", "0x232110DE", "h100-nvl"),
        ("some renamed board", "0x2335", "h200"),  # the PCI id decides when the name is unknown
    ],
)
def test_match_names_and_pci_ids(name: str, pci: str | None, expected: str) -> None:
    gpu = load_gpu_catalog().match(name, pci)
    assert gpu is not None and gpu.id == expected


def test_unknown_gpu_is_none_and_unknown_id_suggests() -> None:
    catalog = load_gpu_catalog()
    assert catalog.match("NVIDIA GeForce RTX 2080 SUPER") is None
    with pytest.raises(UsageError) as err:
        catalog.get("h2000")
    assert "h200" in (err.value.hint or "")


def test_fp8_in_hardware_follows_the_architecture() -> None:
    for gpu in load_gpu_catalog().all():
        if gpu.vendor == "nvidia":
            major, minor = (int(x) for x in gpu.compute_capability.split("."))
            assert gpu.fp8 == ((major, minor) >= (8, 9)), gpu.id
        else:
            assert gpu.fp8 == (gpu.architecture in ("gfx942", "gfx950")), gpu.id


def test_memory_gb_is_decimal_from_the_driver_mib() -> None:
    h200 = load_gpu_catalog().get("h200")
    assert h200.memory_mib == 143771
    assert h200.memory_gb == pytest.approx(143771 * 1024 * 1024 / 1e9, abs=0.01)
    assert 4 * h200.memory_gb >= 500  # 4 x H200 is full tier (DESIGN.md)


def test_pci_id_forms() -> None:
    assert normalize_pci_device_id("0x233010DE") == "0x2330"
    assert normalize_pci_device_id("2330") == "0x2330"
    with pytest.raises(ValueError):
        normalize_pci_device_id("0xZZZZ")


@pytest.mark.skipif(not SAMPLES.is_dir(), reason="../shared/hardware-samples not present")
def test_captured_product_names_of_catalog_gpus_match() -> None:
    """Every datacenter GPU in the captures whose name the catalog lists resolves, with its PCI id."""
    catalog = load_gpu_catalog()
    seen = 0
    for path in sorted(SAMPLES.glob("*.txt")):
        text = path.read_text(errors="replace")
        names = re.findall(r"Product Name\s*:\s*(.+)", text)
        pcis = re.findall(r"Device Id\s*:\s*(0x[0-9A-Fa-f]+)", text)
        for name, pci in zip(names, pcis, strict=False):
            by_name = catalog.match(name.strip())
            if by_name is not None:
                seen += 1
                assert catalog.match(name.strip(), pci) == by_name, (path.name, name, pci)
    assert seen >= 5


def test_a_bad_catalog_file_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "gpus.yaml"
    path.write_text("version: 1\ngpus:\n  - id: x1\n    vendr: nvidia\n")
    with pytest.raises(ConfigError) as err:
        load_gpu_catalog(path)
    text = err.value.render()
    assert f"{path}:4" in text and "did you mean `vendor`" in text
