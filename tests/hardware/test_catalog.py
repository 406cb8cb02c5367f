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
    # issue 18: every data-centre GPU of the last generations, and the older ones without FP8
    "gh200",
    "gh200-144gb",
    "h200-nvl",
    "h800",
    "gb300",
    "l40",
    "l20",
    "rtx-6000-ada",
    "rtx-5880-ada",
    "mi300a",
    "mi308x",
    "mi350x",
    "v100-sxm2-32gb",
    "v100s-pcie-32gb",
    "tesla-t4",
    "a30",
    "a40",
    "a16",
    "a2",
    "rtx-a6000",
    "mi100",
    "mi210",
    "mi250",
    "mi250x",
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
        ("NVIDIA GH200 480GB", "0x234210DE", "gh200"),
        ("NVIDIA GH200 120GB", "0x234210DE", "gh200"),  # same GPU, another Grace memory size
        ("NVIDIA GH200 144G HBM3e", "0x234810DE", "gh200-144gb"),
        ("NVIDIA A2", "0x25B610DE", "a2"),  # 0x25b6 is shared: the name decides
        ("NVIDIA A16", "0x25B610DE", "a16"),
        ("AMD Instinct MI250X / MI250", "0x740c", "mi250x"),
        ("AMD Instinct MI250", "0x740c", "mi250"),
        ("Aldebaran/MI200 [Instinct MI210]", "0x740f", "mi210"),  # ROCm 5.x rocm-smi prints pci.ids names
        ("Tesla V100-SXM2-32GB", "0x1DB510DE", "v100-sxm2-32gb"),
        ("AMD Instinct MI355X", "0x75a3", "mi355x"),
        ("AMD Instinct MI350X", "0x75a0", "mi350x"),
    ],
)
def test_match_names_and_pci_ids(name: str, pci: str | None, expected: str) -> None:
    gpu = load_gpu_catalog().match(name, pci)
    assert gpu is not None and gpu.id == expected


def test_an_unknown_pci_id_never_borrows_another_gpus_figures() -> None:
    catalog = load_gpu_catalog()
    assert catalog.match("AMD Instinct MI300X", "0x74ff") is None  # a known board name, an unknown device
    assert catalog.match("NVIDIA H100 80GB HBM3", "0x2399") is None
    assert catalog.match("NVIDIA A2", "0x2236").id == "a10"  # type: ignore[union-attr]  # the id decides
    assert catalog.match("some board", "0x25b6") is None  # a shared id with no name to settle it
    assert catalog.match("NVIDIA H100 80GB HBM3", None).id == "h100-sxm"  # type: ignore[union-attr]


def test_every_figure_has_a_source_and_samples_exist() -> None:
    path = Path(__file__).resolve().parents[2] / "enrollment" / "gpus.yaml"
    from llm_fabric.documents import load_model
    from llm_fabric.hardware.catalog import SAMPLE_PREFIX, GpuCatalogFile

    catalog = load_model(path, GpuCatalogFile)
    for gpu in catalog.gpus:
        for key in gpu.sources.cited():
            if key.startswith(SAMPLE_PREFIX) and SAMPLES.is_dir():
                assert (SAMPLES / key.removeprefix(SAMPLE_PREFIX)).is_file(), (gpu.id, key)
            else:
                assert key.startswith(SAMPLE_PREFIX) or catalog.references[key], (gpu.id, key)


def test_a_source_must_be_a_reference(tmp_path: Path) -> None:
    text = (Path(__file__).resolve().parents[2] / "enrollment" / "gpus.yaml").read_text()
    path = tmp_path / "gpus.yaml"
    path.write_text(text.replace("figures: amd-datasheet}", "figures: amd-datashet}", 1))
    with pytest.raises(ConfigError) as err:
        load_gpu_catalog(path)
    assert "source `amd-datashet` is not a key of `references`" in err.value.render()


def test_old_gpus_are_known_without_fp8() -> None:
    catalog = load_gpu_catalog()
    for gpu_id in ("v100-sxm2-32gb", "v100s-pcie-32gb", "tesla-t4", "a30", "a40", "a10", "a16", "rtx-a6000",
                   "mi100", "mi210", "mi250x"):  # fmt: skip
        assert catalog.get(gpu_id).fp8 is False


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
