"""What a machine has, as the parsers understood it from its own tools' outputs.

`GpuDevice` is one physical GPU (MIG slices and AMD compute partitions are never devices);
`GpuReport` is what one tool said (devices plus driver facts); `Inventory` is the merged picture of
a host that admission judges. Missing facts stay `None`: a tool that prints `[N/A]` does not become
a zero, and a partition state nobody reported is unknown, not "not partitioned".
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from llm_fabric.basemodel import FabricModel
from llm_fabric.site.models import HostInventory

Vendor = Literal["nvidia", "amd"]
Interconnect = Literal["nvswitch", "nvlink", "xgmi", "pcie"]
# where Inventory.driver_version comes from: the GPU tool itself, the amdgpu kernel module's own
# version (sysfs/modinfo), or nowhere because amdgpu is the one built into the Linux kernel
DriverSource = Literal["tool", "amdgpu module", "in-kernel"]
# how the read speed probe kept the page cache out (enrollment/parsers/storage_read.py)
ReadMethod = Literal["direct", "nocache", "cached"]


class GpuDevice(FabricModel):
    index: int
    name: str
    vendor: Vendor = "nvidia"
    uuid: str | None = None
    pci_bus_id: str | None = None
    pci_device_id: str | None = Field(None, description="e.g. 0x2330 (NVIDIA) or 0x74a1 (AMD), lower case")
    memory_mib: int | None = None
    compute_capability: str | None = None
    mig_enabled: bool | None = Field(None, description="MIG on (NVIDIA) or a compute partition other than SPX (AMD)")
    ecc_enabled: bool | None = None
    partition_mode: str | None = Field(
        None, description="AMD compute partition: SPX, DPX, QPX, CPX...; `none` = not supported; None = not reported"
    )
    logical_gpus: int = Field(1, ge=1, description="GPUs the tools listed for this physical GPU (its partitions)")


class GpuReport(FabricModel):
    """What one tool output said about the GPUs of one host."""

    command: str
    devices: list[GpuDevice] = Field(default_factory=list)
    driver_version: str | None = None
    cuda_version: str | None = None
    in_kernel_driver: bool = Field(
        False, description="the driver version the tool printed is the Linux kernel's (amdgpu built into the kernel)"
    )


class Topology(FabricModel):
    """`nvidia-smi topo -m`: the link kind between each pair of GPUs (NV18, SYS, PIX, ...)."""

    gpus: list[str]
    links: dict[str, str] = Field(default_factory=dict, description="'i-j' (i<j) -> link kind")
    nvlink_legend: bool = True

    def interconnect(self) -> Interconnect | None:
        if len(self.gpus) < 2:
            return None
        pairs = [self.links.get(f"{i}-{j}", "") for i in range(len(self.gpus)) for j in range(i + 1, len(self.gpus))]
        nvlinked = [p for p in pairs if p.startswith("NV")]
        if nvlinked and len(nvlinked) == len(pairs):
            # every pair one NVLink hop apart: with 8+ GPUs only an NVSwitch can do that (HGX 8-GPU);
            # 4-GPU boards wire NVLink directly
            return "nvswitch" if len(self.gpus) >= 8 else "nvlink"
        return "nvlink" if nvlinked else "pcie"


class HostFacts(HostInventory):
    """The manifest's host summary plus what admission reads but the manifest does not keep."""

    disks: list[str] = Field(default_factory=list, description="NAME SIZE_GB MODEL")
    nics: list[str] = Field(default_factory=list)
    storage_read_method: ReadMethod | None = Field(
        None, description="how the page cache was kept out of storage_read_mb_s (parsers/storage_read.py)"
    )
    storage_read_detail: str = Field("", description="the read probe's outcome in words, or why there is no speed")


class Inventory(FabricModel):
    vendor: Vendor | None = None
    gpus: list[GpuDevice] = Field(default_factory=list)
    driver_version: str | None = Field(None, description="in the unit of the kernel matrix's min_driver")
    driver_source: DriverSource | None = None
    cuda_version: str | None = None
    rocm_version: str | None = Field(None, description="ROCm user space (/opt/rocm/.info/version, amd-smi version)")
    interconnect: Interconnect | None = Field(None, description="measured (topo -m); None when not measurable")
    host: HostFacts = Field(default_factory=HostFacts)
    notes: list[str] = Field(default_factory=list, description="facts we could not gather, in words")

    @property
    def gpu_names(self) -> list[str]:
        return sorted({g.name for g in self.gpus})
