"""From a `FactsBundle` (raw probe outputs) to an `Inventory`.

NVIDIA: the `--query-gpu` CSV is the primary source (it alone has the compute capability);
the `-q -x` XML adds what the CSV lacks (CUDA version) and stands in when an old driver
refuses the CSV fields. `topo -m` gives the interconnect. AMD: `amd-smi static --json` (names,
VRAM, serials, driver, ECC), joined with `amd-smi static --partition --json` and `amd-smi list --json`
(partition modes, PCI addresses) and folded into physical GPUs, else the older `rocm-smi -a`, merged
with `rocminfo` (gfx target) by index. The AMD driver version is the amdgpu module's own
(`/sys/module/amdgpu/version`, `modinfo`), the unit of the kernel matrix's floors; without one the
driver is the in-kernel amdgpu and says so. The ROCm version is `amd-smi version`'s or
`/opt/rocm/.info/version`. A tool that is missing (exit 127) is a note, not an error; a tool that ran
and printed something unparseable is a `ParseError`.
"""

from __future__ import annotations

import re

from llm_fabric.enrollment.facts import FactsBundle, ProbeResult
from llm_fabric.enrollment.inventory import GpuDevice, GpuReport, HostFacts, Inventory
from llm_fabric.enrollment.parsers import (
    amd,
    amd_smi,
    nvidia_csv,
    nvidia_text,
    nvidia_topo,
    nvidia_xml,
    rdma,
    storage_read,
    values,
)
from llm_fabric.errors import ParseError

NOT_FOUND = 127


def _ran(probe: ProbeResult | None) -> bool:
    return probe is not None and probe.rc == 0


def _merge(primary: GpuReport, extra: GpuReport) -> list[GpuDevice]:
    """Fill the primary report's missing fields from the other one (matched by UUID, else by index)."""
    by_uuid = {d.uuid: d for d in extra.devices if d.uuid}
    by_index = {d.index: d for d in extra.devices}
    out = []
    for device in primary.devices:
        other = by_uuid.get(device.uuid or "") or by_index.get(device.index)
        if other is None:
            out.append(device)
            continue
        filled = {k: v for k, v in other.model_dump().items() if getattr(device, k) is None and v is not None}
        out.append(device.model_copy(update=filled))
    return out


def _nvidia_query(bundle: FactsBundle) -> GpuReport | None:
    """`nvidia-smi -q -x`, else the same query as text (`-q`): drivers whose XML writer is broken still answer it."""
    xml_probe, text_probe = bundle.probes.get("nvidia_xml"), bundle.probes.get("nvidia_text")
    if xml_probe is not None and _ran(xml_probe):
        return nvidia_xml.parse_query_xml(xml_probe.stdout)
    if text_probe is not None and _ran(text_probe):
        return nvidia_text.parse_query_text(text_probe.stdout)
    return None


def _nvidia(bundle: FactsBundle, inventory: Inventory) -> bool:
    csv_probe = bundle.probes.get("nvidia_csv")
    csv = nvidia_csv.parse_query_gpu(csv_probe.stdout) if csv_probe is not None and _ran(csv_probe) else None
    xml = _nvidia_query(bundle)
    if csv is None and xml is None:
        return False
    if csv is not None:
        report = csv
        devices = _merge(report, xml) if xml is not None else report.devices
    else:
        assert xml is not None
        report, devices = xml, xml.devices
        inventory.notes.append("`nvidia-smi --query-gpu` failed; compute capability taken from the GPU catalog")
    inventory.vendor = "nvidia"
    inventory.gpus = devices
    inventory.driver_version = report.driver_version or (xml.driver_version if xml else None)
    inventory.driver_source = "tool" if inventory.driver_version else None
    inventory.cuda_version = xml.cuda_version if xml else None
    topo = bundle.probes.get("nvidia_topo")
    if topo is not None and _ran(topo):
        inventory.interconnect = nvidia_topo.parse_topology(topo.stdout).interconnect()
    else:
        inventory.notes.append("`nvidia-smi topo -m` failed; interconnect taken from the GPU catalog")
    return True


def _amd_smi_report(bundle: FactsBundle) -> GpuReport | None:
    """amd-smi when it answered (rocm-smi's successor: it also reports ECC and partitions), else rocm-smi."""
    static, smi = bundle.probes.get("amd_smi"), bundle.probes.get("rocm_smi")
    if static is not None and _ran(static):
        partition, listing = bundle.probes.get("amd_smi_partition"), bundle.probes.get("amd_smi_list")
        return amd_smi.parse_amd_smi_static(
            static.stdout,
            partitions=amd_smi.parse_amd_smi_partition(partition.stdout) if _ran(partition) and partition else None,
            listing=amd_smi.parse_amd_smi_list(listing.stdout) if _ran(listing) and listing else None,
        )
    if smi is not None and _ran(smi):
        return amd.parse_rocm_smi(smi.stdout)
    return None


_AMD_SMI_ROCM = re.compile(r"ROCm version:\s*([0-9][0-9.]*)")
_AMD_SMI_BANNER = re.compile(r"amdgpu version:\s*linux\s*version", re.IGNORECASE)
_AMD_SMI_AMDGPU = re.compile(r"amdgpu version:\s*([0-9][0-9.]*)\s*(?:\||$)", re.MULTILINE)


def _module_version(bundle: FactsBundle) -> tuple[str | None, bool]:
    """(the amdgpu module's version, whether the module is known to have none: the in-kernel driver)."""
    for probe_id in ("amdgpu_module", "amdgpu_modinfo"):
        version = values.version(_value(bundle.probes.get(probe_id)))
        if version is not None and re.fullmatch(r"[0-9]+\.[0-9]+(\.[0-9]+)*", version):
            return version, False
    version_text = _value(bundle.probes.get("amd_smi_version")) or ""
    reported = _AMD_SMI_AMDGPU.search(version_text)
    if reported is not None:
        return reported.group(1), False
    if _AMD_SMI_BANNER.search(version_text):
        return None, True  # amd-smi 7.x prints the kernel's banner as the amdgpu version: no DKMS module
    modinfo = bundle.probes.get("amdgpu_modinfo")
    # modinfo finds the module but it carries no version: the amdgpu of the kernel tree, not amdgpu-dkms
    return None, modinfo is not None and modinfo.rc == 0 and not modinfo.stdout.strip()


def _rocm_version(bundle: FactsBundle) -> str | None:
    reported = _AMD_SMI_ROCM.search(_value(bundle.probes.get("amd_smi_version")) or "")
    if reported is not None:
        return reported.group(1).rstrip(".")
    return values.version(_value(bundle.probes.get("rocm_version")))


def _amd_driver(bundle: FactsBundle, smi_report: GpuReport | None, inventory: Inventory) -> None:
    module, no_module = _module_version(bundle)
    kernel = f"Linux {inventory.host.kernel}" if inventory.host.kernel else "the running kernel"
    if module is not None:
        inventory.driver_version, inventory.driver_source = module, "amdgpu module"
    elif (smi_report is not None and smi_report.in_kernel_driver) or no_module:
        inventory.driver_version, inventory.driver_source = None, "in-kernel"
        inventory.notes.append(f"amdgpu is the driver built into {kernel}: it has no module version")
    elif smi_report is not None and smi_report.driver_version is not None:
        inventory.driver_version, inventory.driver_source = smi_report.driver_version, "tool"


def _amd(bundle: FactsBundle, inventory: Inventory) -> bool:
    info = bundle.probes.get("rocminfo")
    smi_report = _amd_smi_report(bundle)
    if smi_report is None and not _ran(info):
        return False
    info_report = amd.parse_rocminfo(info.stdout) if info is not None and _ran(info) else None
    primary = smi_report or info_report
    assert primary is not None
    devices = _merge(primary, info_report) if smi_report and info_report else primary.devices
    inventory.vendor = "amd"
    inventory.gpus = devices
    _amd_driver(bundle, smi_report, inventory)
    # rocminfo's `Runtime Version` is the HSA runtime's (1.x), not ROCm's: never used as the ROCm version
    inventory.rocm_version = _rocm_version(bundle)
    return True


def inventory_from_bundle(bundle: FactsBundle) -> Inventory:
    inventory = Inventory(host=host_facts(bundle))
    if not _nvidia(bundle, inventory) and not _amd(bundle, inventory):
        tools = ("nvidia_csv", "amd_smi", "rocm_smi", "rocminfo")
        tried = {k: bundle.probes[k].rc for k in tools if k in bundle.probes}
        missing = [k for k, rc in tried.items() if rc == NOT_FOUND]
        inventory.notes.append(
            "no GPU tool answered"
            + (f" ({', '.join(missing)}: command not found)" if missing else f" (exit statuses {tried})")
        )
    return inventory


def _value(probe: ProbeResult | None) -> str | None:
    if probe is None or probe.rc != 0 or not probe.stdout.strip():
        return None
    return probe.stdout.strip()


def host_facts(bundle: FactsBundle) -> HostFacts:
    """CPU, RAM, disks, NICs, OS: informational, so a strange line is skipped rather than refused."""
    p = bundle.probes
    facts = HostFacts(hostname=_value(p.get("hostname")), kernel=_value(p.get("kernel")))
    os_release = _value(p.get("os_release")) or ""
    pretty = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', os_release, re.MULTILINE)
    facts.os = pretty.group(1) if pretty else None
    mem = re.search(r"^MemTotal:\s+([0-9]+) kB", _value(p.get("meminfo")) or "", re.MULTILINE)
    facts.memory_gb = round(int(mem.group(1)) * 1024 / 1e9, 1) if mem else None
    cpu = _value(p.get("cpuinfo")) or ""
    model = re.search(r"^Model name:\s*(.+)$", cpu, re.MULTILINE)
    cores = re.search(r"^CPU\(s\):\s*([0-9]+)\s*$", cpu, re.MULTILINE)
    facts.cpu_model = model.group(1).strip() if model else None
    facts.cpu_cores = int(cores.group(1)) if cores else None
    for line in (_value(p.get("disks")) or "").splitlines():
        parts = line.split(None, 3)
        if len(parts) >= 3 and parts[1].isdigit() and parts[2] == "disk":
            model_name = parts[3].strip() if len(parts) > 3 else ""
            facts.disks.append(f"{parts[0]} {int(parts[1]) / 1e9:.0f} GB {model_name}".strip())
    facts.nics = [n for n in (_value(p.get("nics")) or "").split() if n != "lo"]
    sysfs, ibstat = _value(p.get("rdma_ports")), _value(p.get("ibstat"))
    facts.rdma = (rdma.parse_rdma_sysfs(sysfs) if sysfs else []) or (rdma.parse_ibstat(ibstat) if ibstat else [])
    _storage_read(p.get("storage_read"), facts)
    return facts


def _storage_read(probe: ProbeResult | None, facts: HostFacts) -> None:
    if probe is None:
        # a bundle from a fabric without the probe, or a sample machine: nothing was measured
        facts.storage_read_detail = "not measured: the facts have no read probe"
        return
    speed = storage_read.parse_read_probe(probe.rc, probe.stdout)
    facts.storage_read_mb_s = speed.mb_s
    facts.storage_read_method = speed.method
    facts.storage_read_detail = speed.detail


__all__ = ["ParseError", "host_facts", "inventory_from_bundle"]
