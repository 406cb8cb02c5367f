"""Admission: judge an `Inventory` against `enrollment/profiles.yaml`, the GPU catalog and the kernel matrix.

The verdict lists every check with its measured value, threshold and status (pass/warn/fail)
and the tier: `full`, `limited` (FP8 but less memory: small models only) or `rejected`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import Field

from llm_fabric import wording
from llm_fabric.basemodel import FabricModel
from llm_fabric.distribution import data_path
from llm_fabric.documents import load_model
from llm_fabric.enrollment.inventory import Inventory
from llm_fabric.errors import UsageError
from llm_fabric.hardware.catalog import GpuCatalog, GpuSpec, load_gpu_catalog
from llm_fabric.hardware.kernel_matrix import KernelMatrix, load_kernel_matrix
from llm_fabric.site.models import CheckResult

Tier = Literal["full", "limited", "rejected"]
CHECK_IDS = (
    "fp8_hardware",
    "aggregate_memory",
    "h100_class",
    "gpu_count",
    "homogeneous",
    "interconnect",
    "driver_floor",
    "mig_disabled",
    "ecc",
    "storage_read",
)


class CheckPolicy(FabricModel):
    on_miss: Literal["warn", "fail"]
    threshold: float | int | list[str] | None = None
    description: str = ""


class AdmissionProfile(FabricModel):
    version: Literal[1] = 1
    checks: dict[Literal[CHECK_IDS], CheckPolicy]  # type: ignore[valid-type]


def load_profile(path: Path | None = None) -> AdmissionProfile:
    return _default_profile() if path is None else load_model(path, AdmissionProfile)


@cache
def _default_profile() -> AdmissionProfile:
    return load_model(data_path("enrollment", "profiles.yaml"), AdmissionProfile)


class GpuSummary(FabricModel):
    model: str | None = Field(description="GPU catalog id, None when the GPU is not in the catalog")
    product: str | None
    count: int
    memory_gb_total: float
    compute_capability: str | None


class Verdict(FabricModel):
    tier: Tier
    checks: list[CheckResult]
    gpus: GpuSummary

    @property
    def admitted(self) -> bool:
        return self.tier != "rejected"

    def check(self, check_id: str) -> CheckResult:
        return next(c for c in self.checks if c.id == check_id)


@dataclass
class _Context:
    inventory: Inventory
    specs: list[GpuSpec | None]
    profile: AdmissionProfile
    matrix: KernelMatrix

    @property
    def spec(self) -> GpuSpec | None:
        known = [s for s in self.specs if s is not None]
        return known[0] if known and len(known) == len(self.specs) else None

    def threshold(self, check_id: str) -> float | int | list[str] | None:
        policy = self.profile.checks.get(check_id)
        return policy.threshold if policy is not None else None

    def memory_gb(self) -> float:
        total_mib = 0
        for gpu, spec in zip(self.inventory.gpus, self.specs, strict=True):
            total_mib += gpu.memory_mib or (spec.memory_mib if spec is not None else 0)
        return round(total_mib * 1024 * 1024 / 1e9, 1)


_Outcome = tuple[bool | None, object, str]  # (passed; None = cannot tell -> warn), value, detail


def _fp8(ctx: _Context) -> _Outcome:
    unknown = sorted(
        {
            g.name + (f" (PCI {g.pci_device_id})" if g.pci_device_id else "")
            for g, s in zip(ctx.inventory.gpus, ctx.specs, strict=True)
            if s is None
        }
    )
    if unknown:
        return False, None, f"not in the GPU catalog: {', '.join(unknown)}; FP8 support cannot be established"
    spec = ctx.spec
    assert spec is not None
    where = f"{spec.id} ({spec.architecture}, compute capability {spec.compute_capability})"
    return spec.fp8, spec.fp8, f"{where} {'has' if spec.fp8 else 'has no'} FP8 in hardware"


def _memory(ctx: _Context) -> _Outcome:
    total, floor = ctx.memory_gb(), ctx.threshold("aggregate_memory")
    ok = isinstance(floor, int | float) and total >= floor
    tier = "full tier" if ok else "limited tier: small models only"
    return ok, total, f"{wording.count(len(ctx.inventory.gpus), 'GPU')}, {total} GB in all ({tier})"


def _bandwidth(ctx: _Context) -> _Outcome:
    spec, floor = ctx.spec, ctx.threshold("h100_class")
    if spec is None:
        return None, None, "unknown GPU: bandwidth not in the catalog"
    ok = isinstance(floor, int | float) and spec.memory_bandwidth_tbs >= floor
    return ok, spec.memory_bandwidth_tbs, f"{spec.memory_type}, {spec.memory_bandwidth_tbs} TB/s per GPU"


def _count(ctx: _Context) -> _Outcome:
    n, floor = len(ctx.inventory.gpus), ctx.threshold("gpu_count")
    return isinstance(floor, int | float) and n >= floor, n, wording.count(n, "GPU")


def _homogeneous(ctx: _Context) -> _Outcome:
    kinds = sorted({s.id if s is not None else g.name for g, s in zip(ctx.inventory.gpus, ctx.specs, strict=True)})
    return len(kinds) == 1, ", ".join(kinds), "one GPU model" if len(kinds) == 1 else f"mixed: {', '.join(kinds)}"


def _interconnect(ctx: _Context) -> _Outcome:
    accepted = ctx.threshold("interconnect")
    if len(ctx.inventory.gpus) == 1:
        return True, "none", "a single GPU needs no GPU-to-GPU links"
    measured = ctx.inventory.interconnect
    value = measured or (ctx.spec.interconnect if ctx.spec is not None else None)
    source = "measured (topo -m)" if measured else "from the GPU catalog"
    if value is None:
        return None, None, "unknown"
    return isinstance(accepted, list) and value in accepted, value, f"{value}, {source}"


def _driver(ctx: _Context) -> _Outcome:
    spec, inventory = ctx.spec, ctx.inventory
    if spec is None:
        return None, inventory.driver_version, "GPU architecture unknown"
    try:
        if spec.vendor == "amd" and inventory.driver_source == "in-kernel":
            return _in_kernel_driver(ctx, spec)
        driver = inventory.driver_version
        if driver is None:
            return None, None, "driver version not reported"
        ok, reason = ctx.matrix.driver_ok(spec.architecture, driver)
        if inventory.driver_source == "amdgpu module":
            reason = "amdgpu module " + reason.removeprefix("driver ")
        runtime = inventory.cuda_version if spec.vendor == "nvidia" else inventory.rocm_version
        if ok and runtime is not None:
            ok, more = ctx.matrix.runtime_ok(spec.architecture, runtime)
            reason += f"; {more}"
    except UsageError as exc:
        return None, inventory.driver_version, exc.message
    return ok, driver, reason


def _in_kernel_driver(ctx: _Context, spec: GpuSpec) -> _Outcome:
    """The amdgpu built into the Linux kernel has no module version to hold against an amdgpu-dkms floor.

    Decision: such a machine is not refused for its driver (many distributions ship a current amdgpu
    in the kernel) but warned about; the ROCm user space is still held against min_rocm when the
    machine reports it, and a ROCm below the floor is refused.
    """
    entry = ctx.matrix.for_architecture(spec.architecture)
    kernel = f"Linux {ctx.inventory.host.kernel}" if ctx.inventory.host.kernel else "the running kernel"
    value = f"in-kernel ({kernel})"
    detail = (
        f"in-kernel amdgpu driver of {kernel}: no module version to compare with the floor "
        f"{entry.min_driver} (amdgpu-dkms of ROCm {entry.min_rocm}); install amdgpu-dkms for a checked driver"
    )
    if ctx.inventory.rocm_version is None:
        return None, value, detail + "; ROCm version not reported"
    ok, more = ctx.matrix.runtime_ok(spec.architecture, ctx.inventory.rocm_version)
    return (None if ok else False), value, f"{detail}; {more}"


def _mig(ctx: _Context) -> _Outcome:
    if ctx.inventory.vendor == "amd":
        return _amd_partitions(ctx)
    on = [g.index for g in ctx.inventory.gpus if g.mig_enabled]
    if on:
        return False, True, f"MIG enabled on GPU {', '.join(map(str, on))}: disable it (nvidia-smi -mig 0)"
    return True, False, "MIG off or not supported"


def _amd_partitions(ctx: _Context) -> _Outcome:
    """A DPX/CPX GPU is several logical GPUs that vLLM, the device plugin and the capacity model would
    each take for a whole one: refused, with the physical count the machine really has."""
    gpus = ctx.inventory.gpus
    split = [g for g in gpus if g.mig_enabled]
    if split:
        modes = sorted({g.partition_mode or "partitioned" for g in split})
        logical = sum(g.logical_gpus for g in gpus)
        model = ctx.spec.id if ctx.spec is not None else gpus[0].name
        return (
            False,
            True,
            (
                f"{len(gpus)} physical {model} GPUs in {'/'.join(modes)} mode, listed as {logical} GPUs: "
                "the fabric schedules whole GPUs; set the compute partition to SPX (amd-smi set) and enroll again"
            ),
        )
    if any(g.mig_enabled is None for g in gpus):
        return None, None, "compute partition not reported (amd-smi static --partition): unknown, not assumed SPX"
    modes = sorted({g.partition_mode or "none" for g in gpus})
    return True, False, "not partitioned (" + ", ".join("SPX" if m == "SPX" else "no partitioning" for m in modes) + ")"


def _ecc(ctx: _Context) -> _Outcome:
    states = [g.ecc_enabled for g in ctx.inventory.gpus]
    if all(s is True for s in states):
        return True, True, "ECC on for every GPU"
    if any(s is False for s in states):
        return (
            False,
            False,
            f"ECC off on GPU {', '.join(str(g.index) for g in ctx.inventory.gpus if g.ecc_enabled is False)}",
        )
    return None, None, "ECC state not reported"


def _storage_read(ctx: _Context) -> _Outcome:
    """Informational: a slow model cache makes every cold start slow, it never makes a machine unfit.

    Not measured (no probe, a failed probe, a read that only reached the page cache) warns, like every
    check that cannot tell.
    """
    host, floor = ctx.inventory.host, ctx.threshold("storage_read")
    if host.storage_read_mb_s is None:
        return None, None, host.storage_read_detail or "not measured"
    ok = isinstance(floor, int | float) and host.storage_read_mb_s >= floor
    return ok, host.storage_read_mb_s, host.storage_read_detail


_CHECKS: dict[str, Callable[[_Context], _Outcome]] = {
    "fp8_hardware": _fp8,
    "aggregate_memory": _memory,
    "h100_class": _bandwidth,
    "gpu_count": _count,
    "homogeneous": _homogeneous,
    "interconnect": _interconnect,
    "driver_floor": _driver,
    "mig_disabled": _mig,
    "ecc": _ecc,
    "storage_read": _storage_read,
}


def _threshold_text(value: float | int | list[str] | str | bool | None) -> str | int | float | bool | None:
    return " | ".join(value) if isinstance(value, list) else value


def decide(
    inventory: Inventory,
    *,
    profile: AdmissionProfile | None = None,
    catalog: GpuCatalog | None = None,
    matrix: KernelMatrix | None = None,
) -> Verdict:
    profile = profile or load_profile()
    catalog = catalog or load_gpu_catalog()
    specs = [catalog.match(g.name, g.pci_device_id) for g in inventory.gpus]
    ctx = _Context(inventory, specs, profile, matrix or load_kernel_matrix())
    if not inventory.gpus:
        detail = "; ".join(inventory.notes) or "no GPU found"
        checks = [CheckResult(id="fp8_hardware", status="fail", value=None, threshold=True, detail=detail)]
        return Verdict(
            tier="rejected",
            checks=checks,
            gpus=GpuSummary(model=None, product=None, count=0, memory_gb_total=0, compute_capability=None),
        )
    checks = []
    for check_id, policy in profile.checks.items():
        passed, value, detail = _CHECKS[check_id](ctx)
        status = "pass" if passed else ("warn" if passed is None else policy.on_miss)
        threshold: float | int | list[str] | str | bool | None = (
            True if check_id in ("fp8_hardware", "homogeneous", "mig_disabled", "ecc") else policy.threshold
        )
        if check_id == "driver_floor" and ctx.spec is not None:
            threshold = _floor(ctx)
        shown = value if isinstance(value, str | int | float | bool) or value is None else str(value)
        checks.append(
            CheckResult(id=check_id, status=status, value=shown, threshold=_threshold_text(threshold), detail=detail)
        )
    tier = _tier(checks)
    spec = ctx.spec
    first = inventory.gpus[0]
    summary = GpuSummary(
        model=spec.id if spec is not None else None,
        product=first.name,
        count=len(inventory.gpus),
        memory_gb_total=ctx.memory_gb(),
        compute_capability=first.compute_capability or (spec.compute_capability if spec is not None else None),
    )
    return Verdict(tier=tier, checks=checks, gpus=summary)


def _floor(ctx: _Context) -> str | None:
    assert ctx.spec is not None
    try:
        return ctx.matrix.for_architecture(ctx.spec.architecture).min_driver
    except UsageError:
        return None


def _tier(checks: list[CheckResult]) -> Tier:
    if any(c.status == "fail" for c in checks):
        return "rejected"
    memory = next((c for c in checks if c.id == "aggregate_memory"), None)
    return "full" if memory is not None and memory.status == "pass" else "limited"
