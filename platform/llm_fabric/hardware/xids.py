"""The Xid classes table (`enrollment/xid-classes.yaml`): which NVIDIA Xids take a node out, which a replica,
and which are the workload's own fault. Sourced from NVIDIA's Xid catalog; the alert rules are generated from it."""

from __future__ import annotations

from collections import Counter
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from llm_fabric.basemodel import FabricModel
from llm_fabric.distribution import data_path
from llm_fabric.documents import load_model

XidKind = Literal["node-fatal", "replica-fatal", "application"]
KINDS: tuple[XidKind, ...] = ("node-fatal", "replica-fatal", "application")


class XidClass(FabricModel):
    xid: int = Field(ge=1, le=1000, description="the Xid number the driver logs and DCGM reports")
    kind: XidKind
    meaning: str = Field(min_length=1, description="what NVIDIA's catalog says it is")


class XidTable(FabricModel):
    source: str = Field(pattern=r"^https://", description="the catalog the classes were taken from")
    xids: list[XidClass] = Field(min_length=1)

    @model_validator(mode="after")
    def _each_xid_once(self) -> XidTable:
        counts = Counter(x.xid for x in self.xids)
        twice = sorted(xid for xid, n in counts.items() if n > 1)
        if twice:
            raise ValueError(f"Xid {', '.join(map(str, twice))} listed more than once: give each Xid one class")
        return self

    def of_kind(self, kind: XidKind) -> list[int]:
        return sorted(x.xid for x in self.xids if x.kind == kind)

    def classify(self, xid: int) -> XidKind | None:
        return next((x.kind for x in self.xids if x.xid == xid), None)


def load_xid_table(path: Path | None = None) -> XidTable:
    """The distribution's table (cached), or the one at `path`; ConfigError with file:line on a bad file."""
    return _shipped() if path is None else load_model(path, XidTable)


@cache
def _shipped() -> XidTable:
    return load_model(data_path("enrollment", "xid-classes.yaml"), XidTable)
