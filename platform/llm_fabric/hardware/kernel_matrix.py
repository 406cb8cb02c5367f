"""The kernel matrix (`kernels/matrix.yaml`): per GPU architecture, what runs natively and what it needs.

Admission reads the driver floor from it, placement and the capacity model ask whether a
recipe's quantization is native on a GPU, the engine arguments take its environment.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from llm_fabric.basemodel import FabricModel
from llm_fabric.distribution import data_path
from llm_fabric.documents import load_model, suggest
from llm_fabric.errors import UsageError

QuantizationName = Literal["bf16", "fp8", "nvfp4", "mxfp4", "int4"]

# amdgpu kernel module versions are 6.x (ROCm 7.0's is 6.14.14); AMD's GPU driver *package*
# releases are 30.x and up. A floor in package units would refuse every machine.
_AMD_PACKAGE_RELEASE_MAJOR = 20


class ArchitectureEntry(FabricModel):
    vendor: Literal["nvidia", "amd"]
    generation: str
    min_driver: str = Field(pattern=r"^\d+(\.\d+)*$")
    min_cuda: str | None = Field(None, pattern=r"^\d+\.\d+$")
    min_rocm: str | None = Field(None, pattern=r"^\d+\.\d+$")
    native_quantizations: dict[QuantizationName, str] = Field(description="format -> kernel that runs it")
    weight_only_quantizations: dict[QuantizationName, str] = Field(default_factory=dict)
    kv_cache_dtypes: list[str] = Field(min_length=1)
    attention_backends: list[str] = Field(min_length=1)
    gemm_kernels: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> ArchitectureEntry:
        if self.vendor == "nvidia" and self.min_cuda is None:
            raise ValueError("an NVIDIA architecture needs min_cuda")
        if self.vendor == "amd" and self.min_rocm is None:
            raise ValueError("an AMD architecture needs min_rocm")
        if self.vendor == "amd" and int(self.min_driver.split(".")[0]) >= _AMD_PACKAGE_RELEASE_MAJOR:
            raise ValueError(
                f"min_driver {self.min_driver} looks like an AMD GPU driver package release; the floor is "
                "the amdgpu module version amd-smi and /sys/module/amdgpu/version report (e.g. 6.14.14)"
            )
        both = set(self.native_quantizations) & set(self.weight_only_quantizations)
        if both:
            raise ValueError(f"{', '.join(sorted(both))} cannot be both native and weight-only")
        return self


class KernelMatrixFile(FabricModel):
    version: Literal[1] = 1
    architectures: dict[str, ArchitectureEntry] = Field(min_length=1)


def version_tuple(version: str) -> tuple[int, ...]:
    """`570.158.01` -> (570, 158, 1); non-numeric tails (`12.8.r1`) are ignored."""
    parts: list[int] = []
    for piece in version.strip().split("."):
        match = re.match(r"\d+", piece)
        if match is None:
            break
        parts.append(int(match.group()))
    if not parts:
        raise UsageError(f"`{version}` is not a version number", hint="expected e.g. 570.158.01")
    return tuple(parts)


class KernelMatrix:
    def __init__(self, architectures: dict[str, ArchitectureEntry], source: Path | None = None) -> None:
        self.architectures = architectures
        self.source = source

    def for_architecture(self, arch: str) -> ArchitectureEntry:
        entry = self.architectures.get(arch)
        if entry is None:
            known = sorted(self.architectures)
            guess = suggest(arch, known)
            hint = f"did you mean `{guess}`?" if guess else f"known architectures: {', '.join(known)}"
            raise UsageError(f"architecture `{arch}` is not in the kernel matrix", hint=hint)
        return entry

    def is_native(self, architecture: str, quantization: str) -> tuple[bool, str]:
        """Whether `quantization` runs natively on `architecture`, and why (or why not) in words."""
        entry = self.for_architecture(architecture)
        if quantization in entry.native_quantizations:
            kernel = entry.native_quantizations[quantization]
            return True, f"{quantization} runs natively on {architecture} ({kernel})"
        if quantization in entry.weight_only_quantizations:
            kernel = entry.weight_only_quantizations[quantization]
            return False, (
                f"{quantization} is not native on {architecture} ({entry.generation}): "
                f"vLLM falls back to a weight-only kernel ({kernel})"
            )
        return False, f"{quantization} has no kernel on {architecture} ({entry.generation})"

    def runs(self, architecture: str, quantization: str, *, allow_weight_only: bool = False) -> tuple[bool, str]:
        """Native, or weight-only when the recipe accepts that path; the reason in words either way."""
        native, reason = self.is_native(architecture, quantization)
        if native:
            return True, reason
        entry = self.for_architecture(architecture)
        if allow_weight_only and quantization in entry.weight_only_quantizations:
            return True, reason + "; accepted by the recipe (weight_only_fallback)"
        return False, reason

    def driver_ok(self, architecture: str, driver_version: str) -> tuple[bool, str]:
        entry = self.for_architecture(architecture)
        ok = version_tuple(driver_version) >= version_tuple(entry.min_driver)
        relation = ">=" if ok else "<"
        return ok, f"driver {driver_version} {relation} {entry.min_driver} (floor for {architecture})"

    def runtime_ok(self, architecture: str, version: str) -> tuple[bool, str]:
        """CUDA version (NVIDIA) or ROCm version (AMD) against the architecture's floor."""
        entry = self.for_architecture(architecture)
        floor = entry.min_cuda if entry.vendor == "nvidia" else entry.min_rocm
        name = "CUDA" if entry.vendor == "nvidia" else "ROCm"
        if floor is None:  # excluded by ArchitectureEntry's validator; kept for a hand-built entry
            return True, f"no {name} floor for {architecture}"
        ok = version_tuple(version) >= version_tuple(floor)
        return ok, f"{name} {version} {'>=' if ok else '<'} {floor} (floor for {architecture})"


def load_kernel_matrix(path: Path | None = None) -> KernelMatrix:
    if path is None:
        return _default_matrix()
    return KernelMatrix(load_model(path, KernelMatrixFile).architectures, source=path)


@cache
def _default_matrix() -> KernelMatrix:
    path = data_path("kernels", "matrix.yaml")
    return KernelMatrix(load_model(path, KernelMatrixFile).architectures, source=path)
