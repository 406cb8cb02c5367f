"""Wall time of enrolment: 1 host, and 20 hosts gathered in one Ansible run (forks=20).

Each host is an sshd in its own network namespace (tests/fixtures/testhost.py) replaying an
8 x H100 capture with distinct GPU UUIDs. Timed: the Ansible run, parsing, admission, signing,
the atomic write and the git commit of each manifest. Targets: 1 host < 10 s, 20 hosts < 60 s.

    .venv/bin/python bench/enroll.py [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fixtures.testhost import TestHostFactory

from llm_fabric.enrollment.admission import decide
from llm_fabric.enrollment.assembly import inventory_from_bundle
from llm_fabric.enrollment.enroll import EnrollRequest, build_manifest
from llm_fabric.enrollment.facts import ReadProbe, gather
from llm_fabric.enrollment.registry import register
from llm_fabric.init import init_site
from llm_fabric.site.loader import load_site
from llm_fabric.trust.signatures import load_private_key


def enroll_many(count: int, work: Path) -> float:
    site_root = init_site(work / "site", "cerit-sc").root
    site = load_site(site_root)
    private = load_private_key(work / "site.enrollment.key")
    factory = TestHostFactory(work / "hosts")
    try:
        hosts = [factory.make("h100x8", uuid_salt=f"bench-{i}", name=f"h{i}") for i in range(count)]
        start = time.perf_counter()
        # every test host shares this machine's disk: a small read probe each, in the hosts' own folder
        probe = ReadProbe(str(work / "hosts"), size_mib=8)
        result = gather([h.target() for h in hosts], forks=count, read_probe=probe)
        for host in hosts:
            inventory = inventory_from_bundle(result.bundles[host.name])
            verdict = decide(inventory)
            request = EnrollRequest(host.address, site_root, "cerit-sc", "brno", name=f"bench-{host.name}")
            register(site_root, build_manifest(request.name or host.name, request, site, inventory, verdict), private)
        return time.perf_counter() - start
    finally:
        factory.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for count, target in ((1, 10.0), (20, 60.0)):
        times = []
        for run in range(args.runs):
            with tempfile.TemporaryDirectory() as tmp:
                times.append(enroll_many(count, Path(tmp) / f"r{run}"))
        median = statistics.median(times)
        print(
            f"{count:>2} host(s): median {median:.2f} s over {args.runs} runs "
            f"({', '.join(f'{t:.2f}' for t in times)}); target < {target:.0f} s, ratio {median / target:.2f}"
        )


if __name__ == "__main__":
    main()
