"""Issue 18, parser by parser: real output shapes that used to be misread.

AMD partitions (amd-smi of ROCm 6.4/7.x leaves them out of `static`), the in-kernel amdgpu's banner,
the rocm-smi layouts of ROCm 5.x, 6.0-6.1 and 6.2+ (formats from rocm_smi.py's printLog/showId/
showProduct/showAllConcise), `topo -m` pasted with spaces, RDMA ports (ibstat, sysfs).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_fabric.documents import load_model
from llm_fabric.enrollment.admission import decide
from llm_fabric.enrollment.assembly import inventory_from_bundle
from llm_fabric.enrollment.facts import ProbeResult
from llm_fabric.enrollment.parsers import amd, amd_smi, nvidia_topo, rdma
from llm_fabric.errors import ParseError
from llm_fabric.hardware.catalog import load_gpu_catalog
from llm_fabric.site.models import NodeManifest
from llm_fabric.trust.signatures import canonical_bytes
from tests.fixtures.factsbundle import make_bundle
from tests.fixtures.testhost import FIXTURES

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "hardware-samples"
CPX = FIXTURES / "mi300x8cpx"


# ------------------------------------------------------------------ AMD partitions


def test_cpx_host_is_eight_physical_gpus_from_static_alone() -> None:
    """ROCm 6.4+ `static --json` without the partition section lists 64 GPUs of 192 GB: the shared
    PCI bus/device and ASIC serial fold them back into 8, even before the partition probe is read."""
    report = amd_smi.parse_amd_smi_static((CPX / "amd-smi-static.json").read_text())
    assert len(report.devices) == 8 and {d.logical_gpus for d in report.devices} == {8}
    assert all(d.mig_enabled for d in report.devices)  # 8 logical GPUs per physical one: partitioned
    assert {d.partition_mode for d in report.devices} == {None}  # the mode itself was not reported
    assert {d.memory_mib for d in report.devices} == {None}  # a partition's VRAM is not the GPU's (#4750)


def test_partition_probe_and_listing_name_the_mode_and_the_physical_gpus() -> None:
    modes = amd_smi.parse_amd_smi_partition((CPX / "amd-smi-partition.json").read_text())
    buses = amd_smi.parse_amd_smi_list((CPX / "amd-smi-list.json").read_text())
    assert len(modes) == 64 and set(modes.values()) == {"CPX"}
    assert buses[9] == "0000:25:00.1"  # physical GPU 1, partition 1: the partition is the PCI function
    # a static report with neither serial nor address (fields amd-smi could not read) relies on the listing
    data = json.loads((CPX / "amd-smi-static.json").read_text())
    for gpu in data["gpu_data"]:
        gpu["asic"]["asic_serial"] = "N/A"
        del gpu["bus"]
    report = amd_smi.parse_amd_smi_static(json.dumps(data), partitions=modes, listing=buses)
    assert [d.index for d in report.devices] == list(range(0, 64, 8))
    assert {(d.partition_mode, d.logical_gpus) for d in report.devices} == {("CPX", 8)}


def test_missing_partition_information_is_unknown_not_unpartitioned() -> None:
    bundle = make_bundle("mi355x8")
    bundle.probes["amd_smi_partition"] = ProbeResult(rc=2, stderr="amd-smi: unrecognized arguments: --partition")
    verdict = decide(inventory_from_bundle(bundle))
    partition = verdict.check("mig_disabled")
    assert partition.status == "warn" and "unknown, not assumed SPX" in partition.detail
    assert verdict.tier == "full"


def test_gpus_without_partitioning_answer_na_and_pass() -> None:
    data = {"gpu_data": [{"gpu": i, "partition": {"compute_partition": "N/A", "partition_id": "N/A"}} for i in (0, 1)]}
    assert amd_smi.parse_amd_smi_partition(json.dumps(data)) == {0: "none", 1: "none"}


def test_cpx_refusal_names_the_physical_count_and_the_fix() -> None:
    verdict = decide(inventory_from_bundle(make_bundle("mi300x8cpx")))
    assert (verdict.tier, verdict.gpus.count) == ("rejected", 8)
    detail = verdict.check("mig_disabled").detail
    assert "8 physical mi300x GPUs in CPX mode, listed as 64 GPUs" in detail and "SPX" in detail


# ------------------------------------------------------------------ driver versions and floors


def test_in_kernel_banner_is_never_a_driver_version() -> None:
    report = amd_smi.parse_amd_smi_static((FIXTURES / "mi355x8inkernel" / "amd-smi-static.json").read_text())
    assert report.in_kernel_driver and report.driver_version is None  # not 6.17.0 read off the banner
    inventory = inventory_from_bundle(make_bundle("mi355x8inkernel"))
    assert (inventory.driver_version, inventory.driver_source, inventory.rocm_version) == (None, "in-kernel", "7.0.2")


def test_in_kernel_driver_with_an_old_rocm_is_refused() -> None:
    bundle = make_bundle("mi355x8inkernel")
    version = bundle.probes["amd_smi_version"]
    bundle.probes["amd_smi_version"] = ProbeResult(
        rc=0, stdout=version.stdout.replace("ROCm version: 7.0.2", "ROCm version: 6.4.1")
    )
    driver = decide(inventory_from_bundle(bundle)).check("driver_floor")
    assert driver.status == "fail" and "ROCm 6.4.1 < 7.0 (floor for gfx950)" in driver.detail


def test_module_version_from_sysfs_beats_the_tool() -> None:
    bundle = make_bundle("mi355x8")
    bundle.probes["amdgpu_module"] = ProbeResult(rc=0, stdout="6.18.3\n")  # a real MI350X host's module
    inventory = inventory_from_bundle(bundle)
    assert (inventory.driver_version, inventory.driver_source) == ("6.18.3", "amdgpu module")
    driver = decide(inventory).check("driver_floor")
    assert driver.status == "pass" and "amdgpu module 6.18.3 >= 6.14.14" in driver.detail


def test_rocm_6_4_module_is_below_the_cdna4_floor() -> None:
    bundle = make_bundle("mi355x8")
    bundle.probes["amd_smi_version"] = ProbeResult(
        rc=0, stdout="AMDSMI Tool: 25.4.2+aca1f5b | AMDSMI Library version: 25.4.2 | ROCm version: 6.4.1 | "
        "amdgpu version: 6.12.12 | amd_hsmp version: N/A\n"
    )  # fmt: skip
    bundle.probes["amdgpu_modinfo"] = ProbeResult(rc=0, stdout="6.12.12\n")
    verdict = decide(inventory_from_bundle(bundle))
    assert verdict.tier == "rejected" and "6.12.12 < 6.14.14" in verdict.check("driver_floor").detail


# ------------------------------------------------------------------ rocm-smi layouts


def _rocm_smi_a(lines: dict[str, str], count: int, driver: str = "6.10.5") -> str:
    """`rocm-smi -a` as printLog writes it: `GPU[i]\\t\\t: key: value`."""
    out = ["=" * 20 + " ROCm System Management Interface " + "=" * 20, f"Driver version: {driver}"]
    for i in range(count):
        out += [f"GPU[{i}]\t\t: {key}: {value.format(i=i)}" for key, value in lines.items()]
    return "\n".join(out) + "\n"


@pytest.mark.parametrize(
    ("release", "lines", "name"),
    [
        # ROCm 5.x: `GPU ID`, `Card series` from pci.ids (the PCI id decides)
        ("5.7", {"GPU ID": "0x740f", "Card series": "\t\tAldebaran/MI200 [Instinct MI210]",
                 "Unique ID": "0x5a1b{i}", "PCI Bus": "0000:{i}3:00.0"}, "Aldebaran/MI200 [Instinct MI210]"),
        # ROCm 6.0-6.1: `Device ID`, `Card series`
        ("6.1", {"Device ID": "0x74a1", "Card series": "\t\tAMD Instinct MI300X OAM"}, "AMD Instinct MI300X OAM"),
        # ROCm 6.2+: showId's `Device Name`, `Device ID`; showProduct's `Card Series`, `Card Model`
        ("6.2", {"Device Name": "\t\tAMD Instinct MI300X", "Device ID": "\t\t0x74a1", "GUID": "\t\t2885{i}",
                 "Compute Partition": "SPX"}, "AMD Instinct MI300X"),
    ],
)  # fmt: skip
def test_rocm_smi_a_layouts(release: str, lines: dict[str, str], name: str) -> None:
    report = amd.parse_rocm_smi(_rocm_smi_a(lines, 4))
    assert [d.name for d in report.devices] == [name] * 4, release
    expected = "mi210" if release == "5.7" else "mi300x"
    assert {load_gpu_catalog().match(d.name, d.pci_device_id).id for d in report.devices} == {expected}  # type: ignore[union-attr]


def test_rocm_smi_6_2_device_name_only() -> None:
    """Only the ID section (`rocm-smi --showid`): no Card Series at all."""
    report = amd.parse_rocm_smi(_rocm_smi_a({"Device Name": "\t\tAMD Instinct MI325X", "Device ID": "\t\t0x74a5"}, 8))
    assert len(report.devices) == 8 and {d.pci_device_id for d in report.devices} == {"0x74a5"}


def test_rocm_smi_cpx_partitions_fold_by_pci_address() -> None:
    lines = {"Device Name": "\t\tAMD Instinct MI300X", "Device ID": "\t\t0x74a1", "Compute Partition": "CPX"}
    text = "\n".join(
        f"GPU[{g * 8 + p}]\t\t: {k}: {v}" for g in range(2) for p in range(8)
        for k, v in [*lines.items(), ("PCI Bus", f"0000:{0x05 + 0x20 * g:02X}:00.{p}")]
    )  # fmt: skip
    report = amd.parse_rocm_smi(text)
    assert [(d.index, d.partition_mode, d.logical_gpus, d.mig_enabled) for d in report.devices] == [
        (0, "CPX", 8, True),
        (8, "CPX", 8, True),
    ]


def test_rocm_smi_in_kernel_driver_prints_the_kernel_release() -> None:
    report = amd.parse_rocm_smi(_rocm_smi_a({"Device ID": "0x74a1"}, 1, driver="6.8.0-45-generic"))
    assert report.in_kernel_driver and report.driver_version is None


CONCISE_5 = """\
======================= ROCm System Management Interface =======================
================================= Concise Info =================================
GPU  Temp (DieEdge)  AvgPwr  SCLK    MCLK     Fan  Perf  PwrCap  VRAM%  GPU%
0    35.0c           42.0W   800Mhz  1600Mhz  0%   auto  300.0W    0%   0%
1    34.0c           40.0W   800Mhz  1600Mhz  0%   auto  300.0W    0%   0%
================================================================================
============================= End of ROCm SMI Log ==============================
"""
CONCISE_6_2 = """\
========================================== ROCm System Management Interface ==========================================
==================================================== Concise Info ====================================================
Device  Node  IDs              Temp        Power     Partitions          SCLK    MCLK    Fan  Perf  PwrCap  VRAM%  GPU%
              (DID,     GUID)  (Junction)  (Socket)  (Mem, Compute, ID)
======================================================================================================================
0       2     0x74a1,   28851  37.0°C      131.0W    NPS1, CPX, 0        132Mhz  900Mhz  0%   auto  750.0W  0%     0%
1       3     0x74a1,   28852  37.0°C      131.0W    NPS1, CPX, 1        132Mhz  900Mhz  0%   auto  750.0W  0%     0%
2       4     0x74a1,   51966  36.0°C      129.0W    NPS1, CPX, 0        131Mhz  900Mhz  0%   auto  750.0W  0%     0%
3       5     0x74a1,   51967  36.0°C      129.0W    NPS1, CPX, 1        131Mhz  900Mhz  0%   auto  750.0W  0%     0%
======================================================================================================================
================================================ End of ROCm SMI Log =================================================
"""


def test_rocm_smi_concise_layouts() -> None:
    five = amd.parse_rocm_smi(CONCISE_5)
    assert [d.name for d in five.devices] == ["unknown AMD GPU"] * 2  # 5.x prints neither name nor id
    six_two = amd.parse_rocm_smi(CONCISE_6_2)
    assert [(d.pci_device_id, d.partition_mode, d.logical_gpus, d.mig_enabled) for d in six_two.devices] == [
        ("0x74a1", "CPX", 2, True),
        ("0x74a1", "CPX", 2, True),
    ]
    six_zero = amd.parse_rocm_smi((SAMPLES / "thamada__rocm-smi-concise__4xMI300X-VF.txt").read_text())
    assert {(d.name, d.partition_mode, d.mig_enabled) for d in six_zero.devices} == {
        ("AMD Instinct MI300X", "SPX", False)
    }


# ------------------------------------------------------------------ catalog matching


def test_an_unknown_pci_id_never_borrows_a_known_name() -> None:
    bundle = make_bundle("mi325x8")
    data = json.loads(bundle.probes["amd_smi"].stdout)
    for gpu in data["gpu_data"]:
        gpu["asic"]["market_name"], gpu["asic"]["device_id"] = "AMD Instinct MI300X", "0x74ff"
    bundle.probes["amd_smi"] = ProbeResult(rc=0, stdout=json.dumps(data))
    verdict = decide(inventory_from_bundle(bundle))
    assert verdict.tier == "rejected" and verdict.gpus.model is None
    assert "not in the GPU catalog: AMD Instinct MI300X (PCI 0x74ff)" in verdict.check("fp8_hardware").detail


# ------------------------------------------------------------------ nvidia-smi topo -m pasted with spaces


@pytest.mark.skipif(not SAMPLES.is_dir(), reason="../shared/hardware-samples not present")
@pytest.mark.parametrize("sample", ["doc__topo-m__8xH200-HGX-8NIC__570.211.01.txt",
                                    "doc__topo-m__8xH100-SXM-6NIC-emptyCPUaff__545.23.08.txt"])  # fmt: skip
def test_topo_pasted_with_spaces_reads_like_the_tabs(sample: str) -> None:
    text = (SAMPLES / sample).read_text()
    spaced = re.sub(r"\t+", "    ", text)
    assert "\t" not in spaced
    assert nvidia_topo.parse_topology(spaced) == nvidia_topo.parse_topology(text)
    assert nvidia_topo.parse_topology(spaced).interconnect() == "nvswitch"


# ------------------------------------------------------------------ RDMA ports

SYSFS = (
    "mlx5_0\t1\tInfiniBand\t400 Gb/sec (4X NDR)\t4: ACTIVE\t5: LinkUp\tibp12s0 \n"
    "mlx5_1\t1\tEthernet\t200 Gb/sec (4X HDR)\t1: DOWN\t3: Disabled\tens1f0np0 ens1f1np1 \n"
    "mlx5_2\t0\tInfiniBand\t400\tACTIVE\tLinkUp\t\n"  # port 0 does not exist: skipped
)


def test_rdma_ports_from_sysfs_and_ibstat_agree() -> None:
    ports = rdma.parse_rdma_sysfs(SYSFS)
    assert [(p.device, p.link_layer, p.rate_gbps, p.state, p.physical_state, p.netdevs) for p in ports] == [
        ("mlx5_0", "InfiniBand", 400.0, "ACTIVE", "LinkUp", ["ibp12s0"]),
        ("mlx5_1", "Ethernet", 200.0, "DOWN", "Disabled", ["ens1f0np0", "ens1f1np1"]),
    ]
    from_ibstat = rdma.parse_ibstat((FIXTURES / "mi355x8" / "ibstat.txt").read_text())
    assert [(p.device, p.port, p.link_layer, p.rate_gbps, p.state) for p in from_ibstat][:1] == [
        ("mlx5_0", 1, "InfiniBand", 400.0, "ACTIVE")
    ]
    assert from_ibstat[-1].state == "DOWN" and not from_ibstat[-1].usable


def test_sysfs_preferred_and_garbage_skipped() -> None:
    bundle = make_bundle("mi355x8")
    bundle.probes["rdma_ports"] = ProbeResult(rc=0, stdout=SYSFS + "not\ta port line\n")
    assert [p.device for p in inventory_from_bundle(bundle).host.rdma] == ["mlx5_0", "mlx5_1"]
    assert rdma.parse_ibstat("CA 'x'\n\tPort zero:\n") == []


def test_manifests_signed_before_rdma_existed_still_verify() -> None:
    """An empty `host.rdma` is left out of the signed content: old signatures keep holding."""
    site = Path(__file__).resolve().parents[2] / "examples" / "cerit-sc" / "nodes"
    manifests = sorted(site.glob("*.yaml"))
    assert manifests
    node = load_model(manifests[0], NodeManifest)
    assert node.host.rdma == [] and b"rdma" not in canonical_bytes(node)
    with_ports = node.model_copy(update={"host": node.host.model_copy(update={"rdma": rdma.parse_rdma_sysfs(SYSFS)})})
    assert b'"rdma":[{' in canonical_bytes(with_ports)


# ------------------------------------------------------------------ garbage


@settings(max_examples=150, deadline=None)
@given(text=st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300))
def test_new_parsers_take_any_text(text: str) -> None:
    """Host facts never stop enrolment; the amd-smi probes answer with a result or a ParseError naming them."""
    assert isinstance(rdma.parse_ibstat(text), list) and isinstance(rdma.parse_rdma_sysfs(text), list)
    for parse, command in (
        (amd_smi.parse_amd_smi_partition, amd_smi.AMD_SMI_PARTITION_COMMAND),
        (amd_smi.parse_amd_smi_list, amd_smi.AMD_SMI_LIST_COMMAND),
    ):
        try:
            parse(text)
        except ParseError as exc:
            assert command in exc.message


def test_the_playbooks_sysfs_probe_feeds_the_parser(tmp_path: Path) -> None:
    """enroll.yml's RDMA probe, run by sh over a tree laid out like /sys/class/infiniband."""
    playbook = yaml.safe_load((Path(__file__).resolve().parents[2] / "playbooks" / "enroll.yml").read_text())
    probe = next(p for p in playbook[0]["vars"]["fabric_probes"] if p["id"] == "rdma_ports")
    root = tmp_path / "infiniband"
    for device, layer, rate, state, phys, nets in (
        ("mlx5_0", "InfiniBand", "400 Gb/sec (4X NDR)", "4: ACTIVE", "5: LinkUp", ["ibp12s0"]),
        ("mlx5_1", "Ethernet", "200 Gb/sec (4X HDR)", "1: DOWN", "3: Disabled", ["ens1f0np0"]),
    ):
        port = root / device / "ports" / "1"
        port.mkdir(parents=True)
        for name, value in (("link_layer", layer), ("rate", rate), ("state", state), ("phys_state", phys)):
            (port / name).write_text(value + "\n")
        for net in nets:
            (root / device / "device" / "net" / net).mkdir(parents=True)
    command = probe["cmd"].replace("/sys/class/infiniband", str(root))
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True).stdout
    assert [
        (p.device, p.link_layer, p.rate_gbps, p.state, p.physical_state, p.netdevs) for p in rdma.parse_rdma_sysfs(out)
    ] == [
        ("mlx5_0", "InfiniBand", 400.0, "ACTIVE", "LinkUp", ["ibp12s0"]),
        ("mlx5_1", "Ethernet", 200.0, "DOWN", "Disabled", ["ens1f0np0"]),
    ]
    # a host without RDMA: no line, exit 0
    empty = subprocess.run(["sh", "-c", probe["cmd"].replace("/sys/class/infiniband", str(tmp_path / "none"))],
                           capture_output=True, text=True)  # fmt: skip
    assert (empty.returncode, empty.stdout) == (0, "")


@pytest.mark.skipif(not SAMPLES.is_dir(), reason="../shared/hardware-samples not present")
def test_rocminfo_bdfid_is_the_pci_address_rocm_smi_prints() -> None:
    info = amd.parse_rocminfo((SAMPLES / "thamada__rocminfo__4xMI300X-VF.txt").read_text())
    smi = amd.parse_rocm_smi((SAMPLES / "thamada__rocm-smi-a__4xMI300X-VF.txt").read_text())
    assert (
        [d.pci_bus_id for d in info.devices]
        == [d.pci_bus_id for d in smi.devices]
        == [
            "0000:26:00.0",
            "0000:46:00.0",
            "0000:65:00.0",
            "0000:85:00.0",
        ]
    )


def test_rocminfo_alone_folds_partition_agents() -> None:
    """A host with only rocminfo: CPX agents of one GPU share its bus and device (BDFID), so 16 agents are 2 GPUs."""
    agents = []
    for n, (gpu, part) in enumerate((g, p) for g in range(2) for p in range(8)):
        bdfid = ((0x05 + 0x20 * gpu) << 8) | part
        agents += [
            "*******", f"Agent {n + 2}", "*******",
            "  Name:                    gfx942",
            f"  Uuid:                    GPU-{gpu:02x}{part:014x}",
            "  Marketing Name:          AMD Instinct MI300X",
            "  Device Type:             GPU",
            "  Chip ID:                 29857(0x74a1)",
            f"  BDFID:                   {bdfid}",
        ]  # fmt: skip
    report = amd.parse_rocminfo("\n".join(["Runtime Version:         1.15", *agents]) + "\n")
    assert [(d.pci_bus_id, d.logical_gpus, d.mig_enabled) for d in report.devices] == [
        ("0000:05:00.0", 8, True),
        ("0000:25:00.0", 8, True),
    ]
