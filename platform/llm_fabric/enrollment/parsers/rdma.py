"""RDMA ports for multi-node serving: `ibstat` and the `/sys/class/infiniband` probe of enroll.yml.

`ibstat` prints one `CA 'mlx5_0'` block per device with `Port N:` sections (`State: Active`,
`Physical state: LinkUp`, `Rate: 400`, `Link layer: InfiniBand` or `Ethernet`, i.e. RoCE). The sysfs
probe prints one tab-separated line per port: device, port, link_layer, rate (`400 Gb/sec (4X NDR)`),
state (`4: ACTIVE`), phys_state (`5: LinkUp`) and the device's network interfaces. sysfs is preferred
(it needs no infiniband-diags); both give the same `RdmaPort`s. Host facts are informational, so a
line that does not fit is skipped, never an error.
"""

from __future__ import annotations

import re
from typing import Literal

from llm_fabric.site.models import RdmaPort

# ibstat spells states in words; sysfs as `4: ACTIVE`: both become the sysfs word
_IBSTAT_STATES = {"active": "ACTIVE", "down": "DOWN", "initializing": "INIT", "init": "INIT", "armed": "ARMED"}
_CA = re.compile(r"^CA '([^']+)'")
_PORT = re.compile(r"^\s+Port ([0-9]+):\s*$")
_FIELD = re.compile(r"^\s+([A-Za-z ]+):\s*(.*?)\s*$")
_RATE = re.compile(r"([0-9]+(?:\.[0-9]+)?)")


def _link_layer(value: str) -> Literal["InfiniBand", "Ethernet"] | None:
    text = value.strip().lower()
    if text == "infiniband":
        return "InfiniBand"
    if text == "ethernet":
        return "Ethernet"
    return None


def _rate(value: str) -> float | None:
    match = _RATE.search(value)
    return float(match.group(1)) if match else None


def parse_ibstat(text: str) -> list[RdmaPort]:
    ports: list[RdmaPort] = []
    device: str | None = None
    current: dict[str, str] | None = None

    def close() -> None:
        if device is not None and current is not None and int(current["port"]) >= 1:
            ports.append(
                RdmaPort(
                    device=device,
                    port=int(current["port"]),
                    link_layer=_link_layer(current.get("Link layer", "")),
                    rate_gbps=_rate(current.get("Rate", "")),
                    state=_IBSTAT_STATES.get(current.get("State", "").lower()) or current.get("State") or None,
                    physical_state=current.get("Physical state") or None,
                )
            )

    for line in text.splitlines():
        if ca := _CA.match(line):
            close()
            device, current = ca.group(1), None
        elif port := _PORT.match(line):
            close()
            current = {"port": port.group(1)}
        elif current is not None and (field := _FIELD.match(line)):
            current.setdefault(field.group(1).strip(), field.group(2))
    close()
    return ports


def parse_rdma_sysfs(text: str) -> list[RdmaPort]:
    ports: list[RdmaPort] = []
    for line in text.splitlines():
        cells = line.split("\t")
        if len(cells) < 6 or not cells[1].strip().isdigit() or int(cells[1]) < 1:
            continue
        state = cells[4].split(":")[-1].strip()
        physical = cells[5].split(":")[-1].strip()
        ports.append(
            RdmaPort(
                device=cells[0].strip(),
                port=int(cells[1]),
                link_layer=_link_layer(cells[2]),
                rate_gbps=_rate(cells[3]),
                state=state or None,
                physical_state=physical or None,
                netdevs=cells[6].split() if len(cells) > 6 else [],
            )
        )
    return ports
