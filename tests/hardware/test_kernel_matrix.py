"""The kernel matrix: native quantizations per architecture, driver floors."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_fabric.errors import ConfigError, UsageError
from llm_fabric.hardware.catalog import load_gpu_catalog
from llm_fabric.hardware.kernel_matrix import load_kernel_matrix


def test_every_catalog_architecture_has_an_entry() -> None:
    matrix = load_kernel_matrix()
    for gpu in load_gpu_catalog().all():
        entry = matrix.for_architecture(gpu.architecture)
        assert entry.vendor == gpu.vendor
        # FP8 W8A8 runs natively exactly where the catalog says FP8 is in hardware
        assert ("fp8" in entry.native_quantizations) == gpu.fp8, gpu.id


@pytest.mark.parametrize(
    ("arch", "quant", "native"),
    [
        ("sm_80", "fp8", False),
        ("sm_89", "fp8", True),
        ("sm_90", "nvfp4", False),
        ("sm_100", "nvfp4", True),
        ("sm_103", "mxfp4", True),
        ("sm_90", "mxfp4", False),
        ("gfx942", "fp8", True),
        ("gfx942", "nvfp4", False),
    ],
)
def test_is_native(arch: str, quant: str, native: bool) -> None:
    ok, reason = load_kernel_matrix().is_native(arch, quant)
    assert ok is native
    assert arch in reason


def test_weight_only_is_refused_unless_accepted() -> None:
    matrix = load_kernel_matrix()
    assert matrix.runs("sm_90", "mxfp4")[0] is False
    ok, reason = matrix.runs("sm_90", "mxfp4", allow_weight_only=True)
    assert ok and "weight-only" in reason
    assert matrix.runs("gfx942", "nvfp4", allow_weight_only=True)[0] is False  # no kernel at all


def test_driver_floor() -> None:
    matrix = load_kernel_matrix()
    assert matrix.driver_ok("sm_103", "580.82.07")[0]
    assert not matrix.driver_ok("sm_100", "535.161.08")[0]
    assert matrix.driver_ok("sm_90", "535.161.08")[0]
    assert matrix.runtime_ok("sm_100", "12.8")[0] and not matrix.runtime_ok("sm_103", "12.8")[0]


def test_unknown_architecture_suggests() -> None:
    with pytest.raises(UsageError) as err:
        load_kernel_matrix().for_architecture("sm_91")
    assert "did you mean" in (err.value.hint or "")


@pytest.mark.parametrize(
    ("arch", "reported", "ok"),
    [
        ("gfx950", "6.18.3", True),  # amd-smi on a real MI350X host
        ("gfx950", "6.14.14", True),  # ROCm 7.0's amdgpu-dkms module
        ("gfx950", "6.12.12", False),  # ROCm 6.4's: no CDNA4
        ("gfx942", "6.10.5", True),  # ROCm 6.3's
        ("gfx942", "6.8.5", False),
        ("sm_100", "580.95.05", True),  # R580
        ("sm_90", "570.172.08", True),  # R570
        ("sm_70", "570.172.08", True),
    ],
)
def test_floors_take_the_version_strings_the_tools_print(arch: str, reported: str, ok: bool) -> None:
    assert load_kernel_matrix().driver_ok(arch, reported)[0] is ok


def test_an_amd_floor_in_package_units_is_refused(tmp_path: Path) -> None:
    text = (Path(__file__).resolve().parents[2] / "kernels" / "matrix.yaml").read_text()
    path = tmp_path / "matrix.yaml"
    path.write_text(text.replace('min_driver: "6.14.14"', 'min_driver: "30.10"'))
    with pytest.raises(ConfigError) as err:
        load_kernel_matrix(path)
    rendered = err.value.render()
    assert f"{path}:" in rendered and "looks like an AMD GPU driver package release" in rendered
