"""`amd-smi static --json`: both shapes it prints, partitions, the preference over rocm-smi, and garbage."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_fabric.enrollment.admission import decide
from llm_fabric.enrollment.assembly import inventory_from_bundle
from llm_fabric.enrollment.facts import ProbeResult
from llm_fabric.enrollment.parsers import amd, amd_smi
from llm_fabric.errors import ParseError
from tests.fixtures.factsbundle import make_bundle
from tests.fixtures.testhost import FIXTURES

FOLDER = FIXTURES / "mi300x4"
COMMAND = amd_smi.AMD_SMI_STATIC_COMMAND


def fixture() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FOLDER / "amd-smi-static.json").read_text())
    return data


def test_fixture_agrees_with_rocm_smi() -> None:
    report = amd_smi.parse_amd_smi_static((FOLDER / "amd-smi-static.json").read_text())
    rocm = amd.parse_rocm_smi((FOLDER / "rocm-smi-a.txt").read_text())
    assert [d.index for d in report.devices] == [0, 1, 2, 3]
    # the ASIC serial is rocm-smi's Unique ID: the GPU fingerprint does not depend on the tool
    assert [d.uuid for d in report.devices] == [d.uuid for d in rocm.devices]
    assert [d.pci_bus_id for d in report.devices] == [d.pci_bus_id for d in rocm.devices]
    assert {d.pci_device_id for d in report.devices} == {"0x74a1"}
    assert {d.memory_mib for d in report.devices} == {196592}
    assert {d.compute_capability for d in report.devices} == {"gfx942"}
    assert {d.ecc_enabled for d in report.devices} == {True}  # rocm-smi -a does not say
    assert {d.mig_enabled for d in report.devices} == {None}  # partition not reported by default
    assert report.driver_version == rocm.driver_version == "6.10.5"


def test_rocm_6_0_shape_bare_list_and_old_key_names() -> None:
    """ROCm 6.0-6.2: no {"gpu_data": ...} envelope; 6.0/6.1 also named `vram_size_mb` and `driver_version`."""
    gpus = fixture()["gpu_data"]
    for gpu in gpus:
        gpu["vram"] = {"vram_type": "HBM3", "vram_vendor": "HYNIX", "vram_size_mb": 196592}
        gpu["driver"] = {"driver_name": "amdgpu", "driver_version": "6.7.0", "driver_date": "2015/01/01 00:00"}
    report = amd_smi.parse_amd_smi_static(json.dumps(gpus, indent=4))
    assert len(report.devices) == 4 and {d.memory_mib for d in report.devices} == {196592}
    assert report.driver_version == "6.7.0"


def test_warning_before_json_and_na_values() -> None:
    data = fixture()
    first, second = data["gpu_data"][:2]
    first["asic"]["market_name"] = first["board"]["product_name"] = "N/A"  # the catalog still knows the PCI id
    first["vram"]["size"] = "N/A"
    first["ras"] = "N/A"
    second["asic"]["market_name"] = "N/A"
    text = "WARNING: User is missing the following required groups: render, video.\n" + json.dumps(data)
    report = amd_smi.parse_amd_smi_static(text)
    device = report.devices[0]
    assert device.name == "AMD GPU 0x74a1" and device.memory_mib is None and device.ecc_enabled is None
    assert report.devices[1].name == "AMD Instinct MI300X OAM"  # the board's product name


def test_dpx_partitions_are_not_gpus() -> None:
    """In DPX mode each physical GPU is listed twice (partition 0 and 1); only partition 0 is a device."""
    physical = fixture()["gpu_data"]
    listed = []
    for gpu in physical:
        for part in (0, 1):
            entry = copy.deepcopy(gpu)
            entry["gpu"] = len(listed)
            entry["partition"] = {"accelerator_partition": "DPX", "memory_partition": "NPS1", "partition_id": part}
            listed.append(entry)
    report = amd_smi.parse_amd_smi_static(json.dumps({"gpu_data": listed}))
    assert [d.index for d in report.devices] == [0, 2, 4, 6] and all(d.mig_enabled for d in report.devices)
    spx = [dict(g, partition={"compute_partition": "SPX", "partition_id": 0}) for g in physical]
    assert not any(d.mig_enabled for d in amd_smi.parse_amd_smi_static(json.dumps(spx)).devices)


def test_amd_smi_preferred_over_rocm_smi() -> None:
    bundle = make_bundle("mi300x4")
    assert bundle.probes["amd_smi"].rc == 0 and bundle.probes["rocm_smi"].rc == 0
    inventory = inventory_from_bundle(bundle)
    # amd-smi's market name, not rocm-smi's "... OAM"; ECC only amd-smi reports
    assert inventory.gpu_names == ["AMD Instinct MI300X"] and all(g.ecc_enabled for g in inventory.gpus)
    verdict = decide(inventory)
    assert (verdict.tier, verdict.gpus.model, verdict.gpus.count) == ("full", "mi300x", 4)
    assert next(c for c in verdict.checks if c.id == "ecc").status == "pass"
    # without amd-smi (exit 127: not installed) the same machine is read from rocm-smi
    bundle.probes["amd_smi"] = ProbeResult(rc=127)
    fallback = inventory_from_bundle(bundle)
    assert fallback.gpu_names == ["AMD Instinct MI300X OAM"]
    assert [g.uuid for g in fallback.gpus] == [g.uuid for g in inventory.gpus]
    assert decide(fallback).tier == "full"


def test_partitioned_amd_gpus_fail_mig_check_with_amd_advice() -> None:
    data = fixture()
    for gpu in data["gpu_data"]:
        gpu["partition"] = {"accelerator_partition": "CPX", "memory_partition": "NPS1", "partition_id": 0}
    bundle = make_bundle("mi300x4")
    bundle.probes["amd_smi"] = ProbeResult(rc=0, stdout=json.dumps(data))
    check = next(c for c in decide(inventory_from_bundle(bundle)).checks if c.id == "mig_disabled")
    assert check.status == "fail" and "SPX" in check.detail and "nvidia-smi" not in check.detail


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("", "no JSON"),
        ("amd-smi: error while loading shared libraries: libamd_smi.so", "no JSON"),
        ('{"gpu_data": [{"gpu": 0, "asic": {', "invalid JSON at line 1"),
        ('{"error": "AMDSMI_STATUS_INIT_ERROR"}', "expected a list of GPUs"),
        ('{"gpu_data": []}', "the GPU list is empty"),
        ('[{"gpu": 0, "asic": {"market_name": "N/A", "device_id": "N/A"}}]', "neither `asic.market_name`"),
        ('[{"gpu": "zero", "asic": {"market_name": "AMD Instinct MI300X"}}]', "`gpu` is a string"),
        ("[42]", "GPU entry 0 is a number"),
    ],
)
def test_errors_name_the_command_and_the_problem(text: str, what: str) -> None:
    with pytest.raises(ParseError) as caught:
        amd_smi.parse_amd_smi_static(text)
    assert COMMAND in caught.value.message and what in caught.value.message


@settings(max_examples=150, deadline=None)
@given(text=st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=400))
def test_garbage_text_gives_parse_error_naming_the_command(text: str) -> None:
    try:
        amd_smi.parse_amd_smi_static(text)
    except ParseError as exc:
        assert exc.command == COMMAND and COMMAND in exc.message and exc.what


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
KEYS = st.sampled_from(
    [
        "gpu",
        "asic",
        "market_name",
        "device_id",
        "asic_serial",
        "vram",
        "size",
        "value",
        "unit",
        "driver",
        "version",
        "partition",
        "partition_id",
        "accelerator_partition",
        "ras",
        "ecc_block_state",
        "UMC",
        "bus",
        "bdf",
        "board",
        "product_name",
    ]
)


@settings(max_examples=150, deadline=None)
@given(
    data=st.data(),
    value=st.recursive(JSON, lambda inner: st.dictionaries(KEYS, inner, max_size=5) | st.lists(inner, max_size=3)),
)
def test_any_json_returns_devices_or_parse_error(data: st.DataObject, value: Any) -> None:
    """Well-formed JSON of the wrong shape, with amd-smi's own key names: a report or a ParseError, nothing else."""
    wrapped = data.draw(st.sampled_from([value, [value], {"gpu_data": value}, {"gpu_data": [value]}]))
    try:
        report = amd_smi.parse_amd_smi_static(json.dumps(wrapped))
    except ParseError as exc:
        assert COMMAND in exc.message
        return
    assert report.devices and all(d.name for d in report.devices)
