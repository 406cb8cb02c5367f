"""Set-up steps the docs' blocks name in `<!-- doc-setup: python -m tests.docs.setups STEP ARGS -->`.

facts OUT PROFILE SALT       a saved facts bundle of a test host profile (tests/fixtures/factsbundle.py)
crds DIR                     a copy of the CRD snapshots of ../shared/crds beside the checkout
crds-old DIR                 the same, with a Kueue ClusterQueue CRD that predates spec.cohortName
records OUT MONTH COUNT      COUNT synthetic request records of MONTH for the site's deployments and tenants
exports A B MONTH COUNT N    two overlapping gateway exports of COUNT records of MONTH: A the first half;
                             B the last N records of A again, the second half, a bad record and a late 429
hf-cache CACHE REPO REV      the tiny test model in CACHE/hf as REPO at revision REV (tests/fixtures/hf_cache.py)
"""

from __future__ import annotations

import json
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


def records(out: Path, month: str, count: int, site_root: Path = Path("site"), *, request_ids: bool = False) -> None:
    from llm_fabric.ledger.sample_records import generate_records, site_profiles
    from llm_fabric.ledger.store.period import Month
    from llm_fabric.site.loader import load_site

    site = load_site(site_root)
    generate_records(out, Month.parse(month), count, site_profiles(site), sorted(site.tenants), request_ids=request_ids)


def exports(first: Path, second: Path, month: str, count: int, repeat: int) -> None:
    whole = first.with_name(f".{first.name}.whole.jsonl")
    records(whole, month, count, request_ids=True)
    lines = whole.read_text().splitlines()
    whole.unlink()
    half = [line for line in lines if int(json.loads(line)["ts"][8:10]) <= 15]
    rest = lines[len(half) :]
    earliest = json.loads(rest[0])  # the late 429 arrives last but is dated at the start of the second half
    bad = earliest | {"request_id": "bad-1", "prompt_tokens": -3}
    late = earliest | {
        "request_id": "late-429",
        "status": "429",
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "cached_prompt_tokens": 0,
    }
    first.write_text("\n".join(half) + "\n")
    second.write_text("\n".join([*half[-repeat:], *rest, json.dumps(bad), json.dumps(late)]) + "\n")


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
    elif step == "exports":
        exports(Path(args[0]), Path(args[1]), args[2], int(args[3]), int(args[4]))
    elif step == "hf-cache":
        from llm_fabric.engine.local.tiny_model import build_tiny_model
        from tests.fixtures.hf_cache import place_checkpoint

        cache = Path(args[0])
        place_checkpoint(cache / "hf", args[1], args[2], build_tiny_model(cache / "tiny-source"))
    else:
        raise SystemExit(f"unknown set-up step {step!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
