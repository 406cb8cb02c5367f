"""Set-up steps for tests that prepare a sandbox as the docs' blocks do (`python -m tests.docs.setups STEP ARGS`).

The docs' own blocks show their steps as `$` lines with the fabric's commands (`fabric facts --sample`,
`fabric ledger sample`, `fabric weights mirror --serve`): a set-up never makes a file a block reads.

facts OUT PROFILE SALT       a saved facts bundle of a test host profile (tests/fixtures/factsbundle.py)
records OUT MONTH COUNT      COUNT synthetic request records of MONTH for the site's deployments and tenants
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.fixtures.factsbundle import write_bundle


def records(out: Path, month: str, count: int, site_root: Path = Path("site"), *, request_ids: bool = False) -> None:
    from llm_fabric.ledger.sample_records import generate_records, site_profiles
    from llm_fabric.ledger.store.period import Month
    from llm_fabric.site.loader import load_site

    site = load_site(site_root)
    generate_records(out, Month.parse(month), count, site_profiles(site), sorted(site.tenants), request_ids=request_ids)


def main(argv: list[str]) -> None:
    step, *args = argv
    if step == "facts":
        write_bundle(Path(args[0]), args[1], uuid_salt=args[2] if len(args) > 2 else None)
    elif step == "records":
        records(Path(args[0]), args[1], int(args[2]))
    else:
        raise SystemExit(f"unknown set-up step {step!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
