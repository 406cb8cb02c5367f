"""Sample machines shipped with the distribution (`fabric facts --sample NAME`): facts bundles for a tour
without a GPU machine.

Each sample is a folder `enrollment/samples/NAME/` holding what the enrolment probes' tools print on
such a machine (file names in PROBE_FILES; formats of real captures: `nvidia-smi --query-gpu` CSV,
`-q -x` XML, `topo -m`, `amd-smi --json`, `ibstat`). The GPU UUIDs are derived from the host name given,
so two machines made from one sample enrol side by side without a duplicate-GPU refusal.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime

from llm_fabric.distribution import data_path
from llm_fabric.enrollment.facts import FactsBundle, ProbeResult
from llm_fabric.errors import UsageError

# probe id in playbooks/enroll.yml -> the file holding its tool's output
PROBE_FILES = {
    "nvidia_csv": "nvidia-smi-query-gpu.csv",
    "nvidia_xml": "nvidia-smi-q-x.xml",
    "nvidia_text": "nvidia-smi-q.txt",
    "nvidia_topo": "nvidia-smi-topo-m.txt",
    "rocm_smi": "rocm-smi-a.txt",
    "amd_smi": "amd-smi-static.json",
    "amd_smi_partition": "amd-smi-partition.json",
    "amd_smi_list": "amd-smi-list.json",
    "amd_smi_version": "amd-smi-version.txt",
    "rocminfo": "rocminfo.txt",
    "amdgpu_modinfo": "modinfo-amdgpu.txt",
    "ibstat": "ibstat.txt",
    "meminfo": "meminfo.txt",
}
NOT_FOUND = 127  # a tool the machine lacks answers as a missing command does
_GPU_UUID = re.compile(r"GPU-[0-9a-f-]{36}")


def sample_names() -> list[str]:
    return sorted(p.name for p in data_path("enrollment", "samples").iterdir() if p.is_dir())


def sample_bundle(name: str, host: str) -> FactsBundle:
    """The facts bundle of sample machine `name`, as gathered from a host called `host`."""
    folder = data_path("enrollment", "samples", name)
    if not folder.is_dir():
        raise UsageError(f"no sample machine {name!r}", hint=f"samples: {', '.join(sample_names())}")
    probes = {}
    for probe, filename in PROBE_FILES.items():
        path = folder / filename
        if not path.is_file():
            probes[probe] = ProbeResult(rc=NOT_FOUND)
            continue
        text = _GPU_UUID.sub(
            lambda m: "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_URL, f"{host}/{m.group(0)}")), path.read_text()
        )
        probes[probe] = ProbeResult(rc=0, stdout=text)
    probes["hostname"] = ProbeResult(rc=0, stdout=host)
    return FactsBundle(
        host=host, connection="local", collected_at=datetime.now(UTC).replace(microsecond=0), probes=probes
    )
