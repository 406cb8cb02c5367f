"""The GPU catalog (`enrollment/gpus.yaml`): what the fabric knows about each GPU model.

Admission matches what a machine's tools print (product name, PCI device id) to a catalog entry;
the kernel matrix is looked up by its `architecture`; the capacity model reads memory, bandwidth
and compute from it. Every entry says where its figures come from (`sources`, keys of the file's
`references`), so a figure that was estimated is marked as such.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import Field, computed_field, field_validator, model_validator

from llm_fabric.basemodel import FabricModel
from llm_fabric.distribution import data_path
from llm_fabric.documents import load_model, suggest
from llm_fabric.errors import UsageError

MIB = 1024 * 1024

Interconnect = Literal["nvswitch", "nvlink", "xgmi", "pcie"]

_PCI_VENDOR_SUFFIXES = ("10de", "1002")  # NVIDIA, AMD: nvidia-smi prints device+vendor (0x233010DE)


def normalize_pci_device_id(value: str) -> str:
    """`0x233010DE`, `233010de`, `0x2330`, `2330` -> `0x2330` (device id only, lower case)."""
    text = value.strip().lower()
    text = text[2:] if text.startswith("0x") else text
    if len(text) == 8 and text.endswith(_PCI_VENDOR_SUFFIXES):
        text = text[:4]
    if not re.fullmatch(r"[0-9a-f]{1,4}", text):
        raise ValueError(f"`{value}` is not a PCI device id (expected e.g. 0x2330 or 0x233010DE)")
    return "0x" + text.rjust(4, "0")


def normalize_product_name(value: str) -> str:
    """Case- and whitespace-insensitive form of a product name (rocm-smi pads with tabs)."""
    return " ".join(value.split()).casefold()


SAMPLE_PREFIX = "sample:"


class FigureSources(FabricModel):
    """Where an entry's figures come from: a key of the catalog's `references`, or `sample:FILE`
    (a capture in ../shared/hardware-samples)."""

    ids: str = Field(description="product_names and pci_device_ids")
    memory_mib: str
    figures: str = Field(description="nominal memory, bandwidth, bf16/fp8 TFLOPS")

    def cited(self) -> list[str]:
        return [self.ids, self.memory_mib, self.figures]


class GpuSpec(FabricModel):
    """One GPU model. Figures are per GPU; compute is dense (no sparsity)."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    vendor: Literal["nvidia", "amd"]
    product_names: list[str] = Field(min_length=1, description="names the tools print")
    pci_device_ids: list[str] = Field(default_factory=list, description="e.g. 0x2330")
    architecture: str = Field(pattern=r"^(sm_\d+|gfx\d+[a-z]?)$", description="kernel matrix key: sm_90, gfx942")
    compute_capability: str = Field(description="NVIDIA major.minor (9.0); AMD the gfx id")
    memory_mib: int = Field(gt=0, description="total memory as the driver reports it (MiB)")
    nominal_memory_gb: float = Field(gt=0, description="datasheet capacity")
    memory_bandwidth_tbs: float = Field(gt=0)
    memory_type: str
    bf16_tflops: float = Field(gt=0)
    fp8_tflops: float | None = Field(None, gt=0)
    fp8: bool = Field(description="FP8 tensor cores in hardware")
    fp4: bool = Field(description="FP4 (NVFP4/MXFP4) tensor cores in hardware")
    interconnect: Interconnect
    per_host: list[int] = Field(
        default_factory=lambda: [8], min_length=1, description="GPUs per machine in the usual builds (docs' tier table)"
    )
    sources: FigureSources

    @field_validator("pci_device_ids")
    @classmethod
    def _normalize_pci(cls, values: list[str]) -> list[str]:
        return [normalize_pci_device_id(v) for v in values]

    @model_validator(mode="after")
    def _consistent(self) -> GpuSpec:
        if self.fp8 != (self.fp8_tflops is not None):
            raise ValueError("fp8_tflops must be given exactly when fp8 is true")
        if self.vendor == "nvidia" and not re.fullmatch(r"\d+\.\d+", self.compute_capability):
            raise ValueError(f"NVIDIA compute_capability `{self.compute_capability}` must look like 9.0")
        return self

    @computed_field  # type: ignore[prop-decorator]
    @property
    def memory_gb(self) -> float:
        """Decimal GB per GPU, from what the driver reports (500 GB tier thresholds are decimal)."""
        return round(self.memory_mib * MIB / 1e9, 2)

    @property
    def gpus_per_node(self) -> int:
        """GPUs one node of this kind holds: the largest usual build (8 on HGX/OAM boards, 4 for GB200); the
        capacity model keeps a tensor-parallel group inside one node of this size."""
        return max(self.per_host)

    @property
    def memory_bytes(self) -> int:
        return self.memory_mib * MIB

    def peak_tflops(self, compute_dtype: Literal["bf16", "fp8"]) -> float:
        """Dense tensor throughput for the dtype the GEMMs run in; bf16 where FP8 is not in hardware."""
        if compute_dtype == "fp8" and self.fp8_tflops is not None:
            return self.fp8_tflops
        return self.bf16_tflops


class GpuCatalogFile(FabricModel):
    version: Literal[1] = 1
    references: dict[str, str] = Field(default_factory=dict, description="source key -> what the source is")
    gpus: list[GpuSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> GpuCatalogFile:
        ids: set[str] = set()
        names: dict[str, str] = {}
        for gpu in self.gpus:
            if gpu.id in ids:
                raise ValueError(f"GPU id `{gpu.id}` is listed twice")
            ids.add(gpu.id)
            for name in gpu.product_names:
                owner = names.setdefault(normalize_product_name(name), gpu.id)
                if owner != gpu.id:
                    # a PCI id shared by two entries is told apart by the name: names must be unique
                    raise ValueError(f"product name `{name}` is claimed by both `{owner}` and `{gpu.id}`")
            unknown = [k for k in gpu.sources.cited() if not k.startswith(SAMPLE_PREFIX) and k not in self.references]
            if unknown:
                raise ValueError(f"`{gpu.id}`: source `{unknown[0]}` is not a key of `references`")
        return self


class GpuCatalog:
    """Lookup over the catalog: by id, by what the tools print."""

    def __init__(self, gpus: list[GpuSpec], source: Path | None = None) -> None:
        self.source = source
        self._by_id = {g.id: g for g in gpus}
        self._by_pci: dict[str, list[GpuSpec]] = {}
        for gpu in gpus:
            for pci in gpu.pci_device_ids:
                self._by_pci.setdefault(pci, []).append(gpu)
        self._by_name = {normalize_product_name(n): g for g in gpus for n in g.product_names}

    def ids(self) -> list[str]:
        return list(self._by_id)

    def all(self) -> list[GpuSpec]:
        return list(self._by_id.values())

    def __contains__(self, gpu_id: object) -> bool:
        return gpu_id in self._by_id

    def get(self, gpu_id: str) -> GpuSpec:
        try:
            return self._by_id[gpu_id]
        except KeyError:
            guess = suggest(gpu_id, self.ids())
            hint = f"did you mean `{guess}`?" if guess else f"known GPUs: {', '.join(self.ids())}"
            raise UsageError(f"unknown GPU `{gpu_id}` (not in the GPU catalog)", hint=hint) from None

    def match(self, product_name: str, pci_device_id: str | None = None) -> GpuSpec | None:
        """The catalog entry for a GPU as its tools describe it.

        The PCI id decides whenever the tool reported one: an id in no entry is an unknown GPU, even
        when the board's name is a known one (a renamed or new board must not borrow another GPU's
        memory and FLOPS). An id several entries share (GH200 480GB/120GB, A2/A16, MI250X/MI250) is
        settled by the name among those entries. Only a tool that printed no PCI id is matched by name.
        """
        by_name = self._by_name.get(normalize_product_name(product_name))
        if not pci_device_id:
            return by_name
        try:
            claimants = self._by_pci.get(normalize_pci_device_id(pci_device_id), [])
        except ValueError:
            return None  # the tool printed something that is not a PCI id: the name alone is not enough
        if len(claimants) == 1:
            return claimants[0]
        return by_name if by_name in claimants else None


def load_gpu_catalog(path: Path | None = None) -> GpuCatalog:
    """The distribution's catalog (cached), or the one at `path`; ConfigError with file:line on a bad file."""
    if path is None:
        return _default_catalog()
    return GpuCatalog(load_model(path, GpuCatalogFile).gpus, source=path)


@cache
def _default_catalog() -> GpuCatalog:
    path = data_path("enrollment", "gpus.yaml")
    return GpuCatalog(load_model(path, GpuCatalogFile).gpus, source=path)
