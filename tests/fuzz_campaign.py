"""A longer fuzzing campaign than the suite's, counting instead of stopping: cases, exit codes, hangs.

    PYTHONPATH=platform:. python -m tests.fuzz_campaign --cases 2000 --seed 1

The mutations are the suite's (tests/test_fuzz.py); each case runs the real command in-process with an
alarm (a case past --hang-after seconds counts as a hang). docs/security.md records the last campaign.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import shutil
import signal
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from llm_fabric.cli.main import main
from llm_fabric.init import init_site
from tests.deploy.planfixture import seed_plan
from tests.fixtures.factsbundle import make_bundle
from tests.test_fuzz import NASTY, SITE_FILES, _mutate


class Hang(Exception):
    pass


HUNG: list[bool] = []


def _alarm(_signum: int, _frame: FrameType | None) -> None:
    HUNG.append(True)  # main() turns the exception into exit 1: the flag tells a hang from a crash
    raise Hang


FAILURES: list[dict[str, str]] = []


def _run(argv: list[str], hang_after: int) -> int | str:
    signal.alarm(hang_after)
    HUNG.clear()
    err = io.StringIO()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code: int | str = main(["--debug", *argv])
    except Hang:
        code = "hang"
    finally:
        signal.alarm(0)
    if HUNG:
        code = "hang"
    if code in (1, "hang"):
        FAILURES.append({"argv": " ".join(argv), "code": str(code), "stderr": err.getvalue()[-3000:]})
    return code


def _edit(rng: random.Random) -> tuple[int, str, str]:
    kind = rng.choice(["value", "value", "value", "insert", "delete", "repeat", "bytes"])
    scalar = rng.choice(
        [
            rng.choice(NASTY),
            str(rng.randint(-(2**70), 2**70)),
            repr(rng.choice([0.0, -0.0, 1e308, float("inf"), float("nan"), rng.random()])),
            json.dumps("".join(chr(rng.randint(0, 0x2FFF)) for _ in range(rng.randint(0, 20)))),
        ]
    )
    return rng.randint(0, 400), kind, scalar


def site_case(site: Path, rng: random.Random, hang_after: int) -> list[int | str]:
    path = site / rng.choice(SITE_FILES)
    original = path.read_bytes()
    data = original
    for _ in range(rng.randint(1, 3)):
        data = _mutate(data, _edit(rng))
    try:
        path.write_bytes(data)
        codes = [_run(["validate", "-C", str(site)], hang_after)]
        if FAILURES and "file" not in FAILURES[-1]:
            FAILURES[-1]["file"] = f"{path.name}: {data!r}"
        if codes[0] == 0:
            codes.append(_run(["plan", "-C", str(site), "--time-limit", "2"], hang_after))
        return codes
    finally:
        path.write_bytes(original)


def facts_case(site: Path, rng: random.Random, hang_after: int, work: Path) -> list[int | str]:
    data = json.loads(make_bundle("h100x8", uuid_salt="campaign").model_dump_json())
    names = sorted(data["probes"])
    for _ in range(rng.randint(1, 4)):
        probe = data["probes"][rng.choice(names)]
        text = probe.get("stdout") or ""
        at = rng.randint(0, len(text))
        noise = "".join(chr(rng.randint(0, 255)) for _ in range(rng.randint(0, 8)))
        probe["stdout"] = text[:at] + noise + text[at + rng.randint(0, 8) :]
    path = work / "b.facts.json"
    path.write_text(json.dumps(data))
    argv = ["enroll", "fz", "--facts", str(path), "-C", str(site), "--owner", "cerit-sc", "--site", "brno"]
    return [_run([*argv, "--name", "fuzz-box", "--dry-run"], hang_after)]


def plan_case(site: Path, rng: random.Random, hang_after: int, work: Path) -> list[int | str]:
    data = seed_plan().model_dump_json(indent=1).encode()
    for _ in range(rng.randint(1, 3)):
        data = _mutate(data, _edit(rng))
    (work / "plan.json").write_bytes(data)
    shutil.rmtree(work / "out", ignore_errors=True)
    return [
        _run(
            [
                "render",
                "--site",
                "brno",
                "-C",
                str(site),
                "--plan",
                str(work / "plan.json"),
                "--out",
                str(work / "out"),
            ],
            hang_after,
        )
    ]


RECORD_VALUES = [-1, 0, 2**63, 2**64, 1.5, "12", None, "x[/y]", float("inf"), "2025-02-30T00:00:00Z", "", True]


def records_case(site: Path, rng: random.Random, hang_after: int, work: Path) -> list[int | str]:
    """A JSONL request log with fields replaced (negative, huge, wrong types, cached above prompt, bad times)."""
    rows = [
        {"ts": f"2026-10-0{1 + i % 9}T00:00:00Z", "model": "qwen3-5", "tenant": "muni-researchers",
         "prompt_tokens": 100 + i, "completion_tokens": 10, "cached_prompt_tokens": 50, "ttft_ms": 300.0,
         "status": "ok"}
        for i in range(20)
    ]  # fmt: skip
    for _ in range(rng.randint(1, 3)):
        row = rng.choice(rows)
        field = rng.choice(sorted(row))
        above = row["prompt_tokens"] + 1 if isinstance(row["prompt_tokens"], int) else 10**6  # cached above prompt
        row[field] = rng.choice([*RECORD_VALUES, above if field == "cached_prompt_tokens" else -5])
    (work / "records.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    shutil.rmtree(work / "report", ignore_errors=True)
    argv = ["report", "-C", str(site), "--month", "2026-10", "--requests", str(work / "records.jsonl")]
    return [_run([*argv, "--out", str(work / "report")], hang_after)]


def main_campaign() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=500, help="cases per surface")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--hang-after", type=int, default=60)
    parser.add_argument("--surfaces", default="site,facts,plan")
    args = parser.parse_args()
    signal.signal(signal.SIGALRM, _alarm)
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        site = init_site(work / "site", "cerit-sc").root
        surfaces: dict[str, Callable[[], list[int | str]]] = {
            "site": lambda: site_case(site, rng, args.hang_after),
            "facts": lambda: facts_case(site, rng, args.hang_after, work),
            "plan": lambda: plan_case(site, rng, args.hang_after, work),
            "records": lambda: records_case(site, rng, args.hang_after, work),
        }
        for name in args.surfaces.split(","):
            counts: Counter[str] = Counter()
            started = time.monotonic()
            for _ in range(args.cases):
                for code in surfaces[name]():
                    counts[str(code)] += 1
            seconds = time.monotonic() - started
            row = {"surface": name, "cases": args.cases, "exit_codes": dict(counts), "seconds": round(seconds)}
            print(json.dumps(row), flush=True)
        for failure in FAILURES:  # the cases that gave exit 1 or hung, with their --debug traceback
            print(json.dumps(failure), flush=True)


if __name__ == "__main__":
    main_campaign()
