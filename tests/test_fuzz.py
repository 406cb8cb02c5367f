"""Every input surface fuzzed through the real commands: the exit code is 0, 2 or 3, never 1 (a traceback).

Surfaces: site repo YAML (values at the limits, dates, tags, depth, aliases, encodings, deleted and
repeated lines) through `fabric validate` and, when it accepts, `fabric plan`; facts bundles through
`fabric enroll --dry-run`; plan files through `fabric render --plan`; report folders through
`fabric report verify` (any change to the tree: exit 3).

Bounded so that `make test` stays fast: FABRIC_FUZZ_EXAMPLES examples per surface (default 40) and a
per-example deadline; a longer campaign sets FABRIC_FUZZ_EXAMPLES=2000 (docs/security.md records one).
Memory is bounded by the loaders' own limits (llm_fabric.documents: size, depth, alias expansion).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_fabric.cli.main import main
from llm_fabric.init import init_site
from llm_fabric.ledger.store.period import Month
from tests.deploy.planfixture import seed_plan
from tests.fixtures.factsbundle import make_bundle
from tests.fixtures.ledger_synthetic import generate_records

EXAMPLES = int(os.environ.get("FABRIC_FUZZ_EXAMPLES", "40"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=timedelta(seconds=20),
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=os.environ.get("FABRIC_FUZZ_RANDOM") is None,
)
ALLOWED = {0, 2, 3}

NASTY = [
    "",
    "~",
    "null",
    "-1",
    "0",
    "1e400",
    "-.inf",
    ".nan",
    str(2**63),
    str(-(2**64)),
    "2147483647",
    "0x7fffffffffffffff",
    "2025-02-30",
    "2025-01-01T00:00:00+25:00",
    "9999-12-31T23:59:60Z",
    "!!omap [a: 1]",
    "!!binary aGVsbG8=",
    "!!set {a}",
    "!custom {x: 1}",
    "&a [*a]",
    "*nowhere",
    "[/x]",
    "'[bold]x[/]'",
    "{a: [b, {c: d}]}",
    "[" * 100 + "]" * 100,
    "'\u202e\u0000'",
    "|\n  block",
    "yes",
    "'../../etc/passwd'",
    "'a' * 1000",
]


@st.composite
def line_edits(draw: st.DrawFn, lines: int) -> tuple[int, str, str]:
    """(line index, kind, text): what to do to one line of a file."""
    index = draw(st.integers(0, max(0, lines - 1)))
    kind = draw(st.sampled_from(["value", "value", "value", "insert", "delete", "repeat", "bytes"]))
    scalar = draw(
        st.one_of(
            st.sampled_from(NASTY),
            st.integers(-(2**70), 2**70).map(str),
            st.floats(allow_nan=True, allow_infinity=True).map(repr),
            st.text(max_size=30).map(json.dumps),
        )
    )
    return index, kind, scalar


def _mutate(data: bytes, edit: tuple[int, str, str]) -> bytes:
    index, kind, scalar = edit
    lines = data.split(b"\n")
    index = min(index, len(lines) - 1)
    line = lines[index]
    if kind == "value" and b":" in line:
        key = line.split(b":", 1)[0]
        lines[index] = key + b": " + scalar.encode("utf-8", "surrogatepass")
    elif kind == "insert":
        indent = line[: len(line) - len(line.lstrip())]
        lines.insert(index, indent + b"extra_" + str(index).encode() + b": " + scalar.encode("utf-8", "surrogatepass"))
    elif kind == "delete":
        del lines[index]
    elif kind == "repeat":
        lines.insert(index, line)
    else:
        lines[index] = line[: len(line) // 2] + bytes([0xFF, 0xFE, 0x00, 0x80]) + line[len(line) // 2 :]
    return b"\n".join(lines)


def _exit(*argv: str) -> int:
    return main(list(argv))


@pytest.fixture(scope="module")
def fuzz_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One signed example site repo for the module; each example restores what it changed."""
    yield init_site(tmp_path_factory.mktemp("fuzz") / "site", "cerit-sc").root


SITE_FILES = [
    "fabric.yaml",
    "ledger.yaml",
    "nodes/dgx-b200-01.yaml",
    "tenants/cerit-sc.yaml",
    "deployments/deepseek-v3-2.yaml",
    "deployments/gpt-oss-120b.yaml",
    "policies/sovereignty.yaml",
]


@FUZZ
@given(file=st.sampled_from(SITE_FILES), edits=st.lists(line_edits(60), min_size=1, max_size=3))
def test_fuzzed_site_yaml_never_crashes_validate_or_plan(
    fuzz_site: Path, file: str, edits: list[tuple[int, str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    path = fuzz_site / file
    original = path.read_bytes()
    data = original
    for edit in edits:
        data = _mutate(data, edit)
    try:
        path.write_bytes(data)
        code = _exit("validate", "-C", str(fuzz_site))
        out = capsys.readouterr()
        assert code in ALLOWED, out.err
        if code == 2 and data != original:
            assert file.split("/")[-1] in out.out + out.err or "keys" in out.out + out.err
        if code == 0:
            code = _exit("plan", "-C", str(fuzz_site), "--time-limit", "2")
            assert code in ALLOWED, capsys.readouterr().err
    finally:
        path.write_bytes(original)
        capsys.readouterr()


@pytest.fixture(scope="module")
def bundle_bytes() -> bytes:
    return make_bundle("h100x8", uuid_salt="fuzz").model_dump_json().encode()


@FUZZ
@given(
    edits=st.lists(
        st.tuples(st.integers(0, 10**6), st.binary(min_size=0, max_size=8), st.integers(0, 8)), min_size=1, max_size=4
    )
)
def test_fuzzed_facts_bundles_never_crash_enroll(
    fuzz_site: Path,
    bundle_bytes: bytes,
    tmp_path_factory: pytest.TempPathFactory,
    edits: list[tuple[int, bytes, int]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    # edits inside the probes' text: parse the bundle, change bytes of one probe's output, save it again
    data = json.loads(bundle_bytes)
    probes = data["probes"]
    names = sorted(probes)
    for offset, insert, cut in edits:
        name = names[offset % len(names)]
        stdout = probes[name].get("stdout") or ""
        at = offset % (len(stdout) + 1)
        probes[name]["stdout"] = stdout[:at] + insert.decode("latin-1") + stdout[at + cut :]
    path = tmp_path_factory.mktemp("bundle") / "b.facts.json"
    path.write_text(json.dumps(data))
    code = _exit(
        "enroll", "fz", "--facts", str(path), "-C", str(fuzz_site), "--owner", "cerit-sc", "--site", "brno",
        "--name", "fuzz-box", "--dry-run",
    )  # fmt: skip
    assert code in ALLOWED, capsys.readouterr().err
    capsys.readouterr()


@pytest.fixture(scope="module")
def plan_text() -> str:
    return seed_plan().model_dump_json(indent=1)


@FUZZ
@given(edits=st.lists(line_edits(400), min_size=1, max_size=3))
def test_fuzzed_plan_files_never_crash_render(
    fuzz_site: Path,
    plan_text: str,
    tmp_path_factory: pytest.TempPathFactory,
    edits: list[tuple[int, str, str]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = plan_text.encode()
    for edit in edits:
        data = _mutate(data, edit)
    folder = tmp_path_factory.mktemp("plan")
    (folder / "plan.json").write_bytes(data)
    code = _exit(
        "render",
        "--site",
        "brno",
        "-C",
        str(fuzz_site),
        "--plan",
        str(folder / "plan.json"),
        "--out",
        str(folder / "out"),
    )
    assert code in ALLOWED, capsys.readouterr().err
    capsys.readouterr()


@pytest.fixture(scope="module")
def report_folder(fuzz_site: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("report")
    records = folder / "records.jsonl"
    generate_records(records, Month.parse("2026-10"), 300, {"qwen3-5": (1100, 33958)}, ["muni-researchers"])
    out = folder / "out"
    argv = ["report", "-C", str(fuzz_site), "--month", "2026-10", "--requests", str(records), "--out", str(out)]
    assert main(argv) == 0
    return out


@FUZZ
@given(
    action=st.sampled_from(["flip", "append", "add", "add-nested", "remove", "manifest-field", "link", "truncate"]),
    pick=st.integers(0, 10**6),
    payload=st.binary(min_size=1, max_size=16),
)
def test_any_change_to_a_report_folder_is_refused(
    report_folder: Path, tmp_path_factory: pytest.TempPathFactory, action: str, pick: int, payload: bytes
) -> None:
    out = tmp_path_factory.mktemp("tampered") / "report"
    shutil.copytree(report_folder, out, symlinks=True)
    files = sorted(p for p in out.rglob("*") if p.is_file())
    target = files[pick % len(files)]
    if action in ("flip", "truncate") and target.stat().st_size == 0:
        action = "append"  # an empty file (a CSV with no rows) can only change by growing
    if action == "flip":
        data = bytearray(target.read_bytes())
        at = pick % len(data)
        data[at] ^= payload[0] or 1
        target.write_bytes(bytes(data))
    elif action == "append":
        target.write_bytes(target.read_bytes() + payload)
    elif action == "add":
        (out / f"added-{pick % 97}.csv").write_bytes(payload)
    elif action == "add-nested":
        (out / "sub" / "deeper").mkdir(parents=True)
        (out / "sub" / "deeper" / "x.md").write_bytes(payload)
    elif action == "remove":
        target.unlink()
    elif action == "manifest-field":
        manifest = json.loads((out / "manifest.json").read_text())
        signature = manifest.get("signature") or {}
        key = sorted(["version", "files", *signature])[pick % (2 + len(signature))]
        if key in ("version", "files"):
            manifest[key] = {"version": 3, "files": {}}[key]
        else:
            signature[key] = payload.hex()
        (out / "manifest.json").write_text(json.dumps(manifest))
    elif action == "link":
        target.unlink()
        target.symlink_to(report_folder / target.relative_to(out))
    else:
        target.write_bytes(target.read_bytes()[: pick % max(1, target.stat().st_size)])
    assert main(["report", "verify", str(out)]) == 3
