"""`nvidia-smi topo -m`: the GPU-to-GPU link matrix.

Only the GPU x GPU block is read. NIC columns, CPU/NUMA affinity (ranges, comma lists or
empty) and the legends vary by driver and are ignored; pasted matrices whose NIC cells ran
together (`SYSSYS`) still give a clean GPU block. TTY captures carry ANSI escapes: stripped.
nvidia-smi separates cells with tabs; a matrix pasted into a hand-edited facts file often has spaces
instead, so a line without tabs is split on runs of whitespace (the GPU columns come first either way).
"""

from __future__ import annotations

import re

from llm_fabric.enrollment.inventory import Topology
from llm_fabric.errors import ParseError

COMMAND = "nvidia-smi topo -m"

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_GPU = re.compile(r"^GPU[0-9]+$")
_LINK = re.compile(r"^(X|SYS|NODE|PHB|PXB|PIX|NV[0-9]+|SOC|PCI)$")


def _cells(line: str) -> list[str]:
    """Tab-separated cells as nvidia-smi prints them; whitespace-separated when the tabs were lost."""
    if "\t" in line:
        return [c.strip() for c in line.split("\t")]
    return line.split()


def parse_topology(text: str, command: str = COMMAND) -> Topology:
    lines = [_ANSI.sub("", line).rstrip("\r\n") for line in text.splitlines()]
    header_at = next((i for i, line in enumerate(lines) if "GPU0" in _cells(line)), None)
    if header_at is None:
        raise ParseError(
            command, "no matrix header with a GPU0 column", hint="expected the output of `nvidia-smi topo -m`"
        )
    gpus = [c for c in _cells(lines[header_at]) if _GPU.match(c)]
    rows = {}
    for line in lines[header_at + 1 :]:
        cells = _cells(line)
        if cells and _GPU.match(cells[0]):
            rows[cells[0]] = cells[1:]
    if sorted(rows) != sorted(gpus):
        raise ParseError(command, f"the header names {len(gpus)} GPUs but {len(rows)} GPU rows follow")
    links: dict[str, str] = {}
    for i, gpu in enumerate(gpus):
        cells = rows[gpu]
        if len(cells) < len(gpus):
            raise ParseError(command, f"row {gpu} has {len(cells)} cells, fewer than the {len(gpus)} GPU columns")
        for j in range(len(gpus)):
            cell = cells[j]
            if not _LINK.match(cell):
                raise ParseError(command, f"row {gpu}, column {gpus[j]}: unknown link kind {cell[:20]!r}")
            if (i == j) != (cell == "X"):
                raise ParseError(command, f"row {gpu}, column {gpus[j]}: `X` belongs on the diagonal only")
            if i < j:
                links[f"{i}-{j}"] = cell
    return Topology(gpus=gpus, links=links, nvlink_legend=any("NV#" in line for line in lines))
