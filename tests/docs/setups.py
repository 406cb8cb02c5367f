"""Set-up steps the docs' blocks name in `<!-- doc-setup: python -m tests.docs.setups STEP ARGS -->`.

facts OUT PROFILE SALT       a saved facts bundle of a test host profile (tests/fixtures/factsbundle.py)
crds DIR                     a copy of the CRD snapshots of ../shared/crds beside the checkout
crds-old DIR                 the same, with a Kueue ClusterQueue CRD that predates spec.cohortName
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import yaml

from tests.fixtures.factsbundle import write_bundle

SHARED_CRDS = Path(__file__).resolve().parents[2].parent / "shared" / "crds"
KUEUE_CQ = "kueue/kueue.x-k8s.io_clusterqueues.yaml"


def crds(out: Path, *, without_cohort_name: bool = False) -> None:
    shutil.copytree(SHARED_CRDS, out)
    if without_cohort_name:
        crd = yaml.safe_load((out / KUEUE_CQ).read_text())
        for version in crd["spec"]["versions"]:
            version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"].pop("cohortName", None)
        (out / KUEUE_CQ).write_text(yaml.safe_dump(crd))


def records(out: Path, month: str, count: int, site_root: Path = Path("site")) -> None:
    from llm_fabric.ledger.period import Month
    from llm_fabric.site.loader import load_site
    from tests.fixtures.ledger_synthetic import generate_records

    site = load_site(site_root)
    profiles = {n: (d.context.p50, d.context.p95) for n, d in site.deployments.items() if d.context}
    generate_records(out, Month.parse(month), count, profiles, sorted(site.tenants))


def main(argv: list[str]) -> None:
    step, *args = argv
    if step == "facts":
        write_bundle(Path(args[0]), args[1], uuid_salt=args[2] if len(args) > 2 else None)
    elif step == "crds":
        crds(Path(args[0]))
    elif step == "crds-old":
        crds(Path(args[0]), without_cohort_name=True)
    elif step == "records":
        records(Path(args[0]), args[1], int(args[2]))
    else:
        raise SystemExit(f"unknown set-up step {step!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
