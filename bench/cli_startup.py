"""CLI start-up: wall time of `import llm_fabric.cli.main` and of `fabric --help` in fresh processes.

Every `fabric` command pays the import of `llm_fabric.cli.main` (which imports no command module);
`fabric --help` imports every command module to list them. Runs interleave the two measurements (a
loaded machine drifts) and report medians; the heaviest modules come from `python -X importtime`.

    .venv/bin/python bench/cli_startup.py [--runs 7] [--top 12] [--baseline DIR]

--baseline DIR interleaves the same measurements of another copy of the package (DIR holds
`llm_fabric/`, put first on PYTHONPATH; e.g. `git archive COMMIT platform/llm_fabric | tar -x -C /tmp/b`
then DIR=/tmp/b/platform, with `llm_fabric/_data/` linking the checkout's data folders) and prints
the ratio of the medians.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

FABRIC = str(Path(sys.executable).parent / "fabric")
IMPORT = [sys.executable, "-c", "import llm_fabric.cli.main"]
HEAVY = ("pulumi", "ortools", "duckdb", "pyarrow", "ansible_runner", "kubernetes_validate", "jsonschema", "jinja2")


def wall(cmd: list[str], pythonpath: str | None = None) -> float:
    env = {**os.environ, "PYTHONPATH": pythonpath} if pythonpath else None
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=env)
    return time.perf_counter() - start


def import_profile(top: int) -> tuple[list[tuple[int, str]], list[str]]:
    """(cumulative us, module) of the top-level imports under cli.main, and which heavy libraries load."""
    err = subprocess.run([sys.executable, "-X", "importtime", *IMPORT[1:]], capture_output=True, text=True).stderr
    rows = []
    for line in err.splitlines():
        match = re.match(r"import time:\s+[0-9]+ \|\s+([0-9]+) \|( *)(\S+)", line)
        if match and len(match.group(2)) == 3:  # direct imports of llm_fabric.cli.main
            rows.append((int(match.group(1)), match.group(3)))
    loaded = sorted({h for h in HEAVY if re.search(rf"\| +{h}(\.|$)", err, re.MULTILINE)})
    return sorted(rows, reverse=True)[:top], loaded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--baseline", metavar="DIR", help="PYTHONPATH of the package to compare with")
    args = parser.parse_args()
    times: dict[str, list[float]] = {}
    for _ in range(args.runs):
        for label, path in [("", None)] + ([("baseline ", args.baseline)] if args.baseline else []):
            times.setdefault(label + "import llm_fabric.cli.main", []).append(wall(IMPORT, path))
            times.setdefault(label + "fabric --help", []).append(wall([FABRIC, "--help"], path))
    medians = {what: statistics.median(runs) for what, runs in times.items()}
    for what, runs in times.items():
        print(f"{what:36} median {medians[what]:.3f} s  runs {', '.join(f'{r:.3f}' for r in sorted(runs))}")
    if args.baseline:
        for what in ("import llm_fabric.cli.main", "fabric --help"):
            print(f"ratio baseline / now, {what}: {medians['baseline ' + what] / medians[what]:.1f}x")
    rows, loaded = import_profile(args.top)
    print("heavy libraries imported at start-up:", ", ".join(loaded) or "none")
    print("largest direct imports of llm_fabric.cli.main (cumulative, one -X importtime run):")
    for micros, module in rows:
        print(f"  {micros / 1e6:7.3f} s  {module}")


if __name__ == "__main__":
    main()
