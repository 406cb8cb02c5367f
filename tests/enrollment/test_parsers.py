"""Parsers over every captured tool output in ../shared/hardware-samples, our fixtures, and garbage."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_fabric.enrollment.inventory import GpuReport, Topology
from llm_fabric.enrollment.parsers import amd, amd_smi, nvidia_csv, nvidia_text, nvidia_topo, nvidia_xml
from llm_fabric.errors import ParseError

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "hardware-samples"
FIXTURES = Path(__file__).resolve().parent / "fixtures"

Parser = Callable[[str], GpuReport | Topology]


def parser_for(name: str) -> Parser | None:
    rules: list[tuple[str, Parser]] = [
        (r"\.xml$", nvidia_xml.parse_query_xml),
        (r"query-gpu-csv", nvidia_csv.parse_query_gpu),
        (r"topo-m", nvidia_topo.parse_topology),
        (r"nvidia-smi-[qa]__", nvidia_text.parse_query_text),
        (r"nvidia-smi-table", nvidia_text.parse_table),
        (r"nvlink-status", nvidia_text.parse_gpu_list),
        (r"rocm-smi", amd.parse_rocm_smi),
        (r"rocminfo", amd.parse_rocminfo),
        (r"amd-smi-static", amd_smi.parse_amd_smi_static),
    ]
    return next((p for pattern, p in rules if re.search(pattern, name)), None)


def expected_count(name: str) -> int | None:
    match = re.search(r"__([0-9]+)x", name)
    return int(match.group(1)) if match else None


def sample_files() -> list[Path]:
    return sorted(p for p in SAMPLES.iterdir() if p.name != "INDEX.md") if SAMPLES.is_dir() else []


@pytest.mark.skipif(not SAMPLES.is_dir(), reason=f"{SAMPLES} is not there (it sits beside the checkout in CI)")
@pytest.mark.parametrize("path", sample_files(), ids=lambda p: p.name[:70])
def test_every_shared_sample_parses(path: Path) -> None:
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.name.startswith("nvgpuexp_capture"):
        return check_capture(text, path.name)
    parser = parser_for(path.name)
    assert parser is not None, f"no parser for {path.name}"
    result = parser(text)
    count = expected_count(path.name)
    if isinstance(result, Topology):
        assert len(result.gpus) == count
        if "topo-mp" in path.name:
            assert result.interconnect() == "pcie" and not result.nvlink_legend
        else:
            assert result.interconnect() == "nvswitch"  # every sample matrix is an 8-GPU HGX
        return
    assert result.devices and all(d.name for d in result.devices)
    if count is not None:
        assert len(result.devices) == count
    if "mig" in path.name and path.suffix == ".xml":
        assert result.devices[0].mig_enabled is True  # MIG slices are not counted as GPUs
    if "table" not in path.name and "nvlink" not in path.name and "rocm" not in path.name:
        assert result.driver_version and re.fullmatch(r"[0-9][0-9.]*", result.driver_version)


def check_capture(text: str, name: str) -> None:
    """nvgpuexp captures: one `# $ command` section per command; parse the ones we read."""
    sections = re.split(r"^# \$ (.*)\n#{20,}\n", text, flags=re.MULTILINE)
    parsed = 0
    for command, body in zip(sections[1::2], sections[2::2], strict=True):
        body = body.split("\n####")[0]
        failed = re.search(r"# \(exit code: ([1-9][0-9]*)\)", body)
        if failed:  # the tool itself failed when captured (Windows has no `topo -m`): an error, not a crash
            with pytest.raises(ParseError):
                nvidia_topo.parse_topology(body, command) if "topo" in command else nvidia_csv.parse_query_gpu(
                    body, command
                )
            continue
        if command.startswith("nvidia-smi --query-gpu="):
            report = nvidia_csv.parse_query_gpu(body, command)
            assert len(report.devices) == 1 and report.devices[0].memory_mib
            assert report.devices[0].compute_capability and report.driver_version
            parsed += 1
        elif command.strip() == "nvidia-smi -q":
            report = nvidia_text.parse_query_text(body, command)
            assert len(report.devices) == 1 and report.driver_version
            if "610" in name:
                assert report.driver_version == name.rsplit("__", 1)[1].removesuffix(".txt")
            parsed += 1
        elif command.strip() == "nvidia-smi topo -m":
            assert nvidia_topo.parse_topology(body, command).gpus == ["GPU0"]
            parsed += 1
        elif command.strip() == "nvidia-smi -L":
            assert len(nvidia_text.parse_gpu_list(body, command).devices) == 1
            parsed += 1
    assert parsed >= 4, f"only {parsed} sections of {name} were recognised"


@pytest.mark.parametrize("profile", ["h100x8", "h100x4", "h200x4", "a100x4", "l40sx8"])
def test_fixture_formats_agree(profile: str) -> None:
    folder = FIXTURES / profile
    csv = nvidia_csv.parse_query_gpu((folder / "nvidia-smi-query-gpu.csv").read_text())
    xml = nvidia_xml.parse_query_xml((folder / "nvidia-smi-q-x.xml").read_text())
    topo = nvidia_topo.parse_topology((folder / "nvidia-smi-topo-m.txt").read_text())
    assert [d.uuid for d in csv.devices] == [d.uuid for d in xml.devices]
    assert [d.memory_mib for d in csv.devices] == [d.memory_mib for d in xml.devices]
    assert len(topo.gpus) == len(csv.devices) == int(re.search(r"x([0-9]+)", profile).group(1))  # type: ignore[union-attr]


def test_610_driver_line_is_not_taken_literally() -> None:
    text = (
        "Driver Version : 610.57.04 [Deprecated; use KMD Version]\nKMD Version : 610.57.04\n\n"
        "GPU 00000000:0C:00.0\n    Product Name : X\n"
    )
    assert nvidia_text.parse_query_text(text).driver_version == "610.57.04"


ALL_PARSERS = [
    nvidia_csv.parse_query_gpu,
    nvidia_xml.parse_query_xml,
    nvidia_topo.parse_topology,
    nvidia_text.parse_query_text,
    nvidia_text.parse_table,
    nvidia_text.parse_gpu_list,
    amd.parse_rocm_smi,
    amd.parse_rocminfo,
    amd_smi.parse_amd_smi_static,
]


@pytest.mark.parametrize("parser", ALL_PARSERS, ids=lambda p: p.__module__.rsplit(".", 1)[1] + "." + p.__name__)
@settings(max_examples=150, deadline=None)
@given(text=st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=400))
def test_garbage_gives_parse_error_naming_the_command(parser: Parser, text: str) -> None:
    try:
        parser(text)
    except ParseError as exc:
        assert exc.command in exc.message and exc.what


@pytest.mark.parametrize("parser", ALL_PARSERS, ids=lambda p: p.__name__)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_mutated_real_output_never_crashes(parser: Parser, data: st.DataObject) -> None:
    """Cut and splice a fixture: a parser returns or raises ParseError, nothing else."""
    source = (FIXTURES / "h100x8" / "nvidia-smi-q-x.xml").read_text() + (
        FIXTURES / "h100x8" / "nvidia-smi-topo-m.txt"
    ).read_text()
    start = data.draw(st.integers(0, len(source)))
    end = data.draw(st.integers(start, len(source)))
    junk = data.draw(st.text(max_size=20))
    with contextlib.suppress(ParseError):
        parser(source[:start] + junk + source[end:])


@pytest.mark.skipif(not SAMPLES.is_dir(), reason=f"{SAMPLES} is not there (it sits beside the checkout in CI)")
def test_the_text_query_stands_in_when_the_xml_query_fails() -> None:
    """`nvidia-smi -q` (probe nvidia_text) is read when `-q -x` fails: a driver's XML writer can break alone."""
    from llm_fabric.enrollment.assembly import inventory_from_bundle
    from llm_fabric.enrollment.facts import ProbeResult
    from tests.fixtures.factsbundle import make_bundle

    bundle = make_bundle("h100x8")
    text = (SAMPLES / "gpud__nvidia-smi-q__8xH100-SXM__535.161.08.txt").read_text()
    probes = {
        **bundle.probes,
        "nvidia_xml": ProbeResult(rc=9, stderr="Unable to write XML"),
        "nvidia_text": ProbeResult(rc=0, stdout=text),
    }
    with_csv = inventory_from_bundle(bundle.model_copy(update={"probes": probes}))
    assert len(with_csv.gpus) == 8 and with_csv.driver_version

    probes["nvidia_csv"] = ProbeResult(rc=9)
    text_only = inventory_from_bundle(bundle.model_copy(update={"probes": probes}))
    assert text_only.vendor == "nvidia" and len(text_only.gpus) == 8
    assert text_only.driver_version == "535.161.08"
    assert all(d.memory_mib and d.memory_mib > 80_000 for d in text_only.gpus)
