"""The kernel matrix: native quantizations per architecture, driver floors."""

from __future__ import annotations

import pytest

from llm_fabric.errors import UsageError
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
