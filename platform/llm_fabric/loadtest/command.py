"""`fabric bench --emit inference-perf`: the site and plan read, a config written per deployment, what to print."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from llm_fabric.kube.sites import resolve_site
from llm_fabric.loadtest.from_plan import LoadTest, Via, load_tests, write_load_tests
from llm_fabric.plan.document import load_plan
from llm_fabric.site.loader import load_site


@dataclass(frozen=True)
class BenchRequest:
    """What `fabric bench` was asked: the site repo, its plan and site, and how the load is sent."""

    site_repo: Path
    plan_file: Path
    site_name: str | None
    deployments: tuple[str, ...]
    via: Via
    api: Literal["chat", "completion"]
    data: Literal["shared_prefix", "synthetic"]
    stage_seconds: int
    prometheus_url: str
    out: Path


@dataclass(frozen=True)
class BenchWritten:
    """Each deployment's load test and the file it was written to."""

    written: list[tuple[LoadTest, Path]]

    def as_json(self) -> list[dict[str, Any]]:
        return [
            {
                "deployment": t.deployment,
                "file": str(path),
                "requests_per_s": t.capacity_rps,
                "output_tokens_per_s": t.tokens_per_s,
                "source": t.tokens_source,
                "output_tokens": t.output_tokens,
            }
            for t, path in self.written
        ]

    def lines(self) -> list[str]:
        out = []
        for test, path in self.written:
            server = test.config.server
            rates = ", ".join(f"{s.rate:g}" for s in test.config.load.stages)
            out.append(
                f"{path}: {server.type} `{server.model_name}` at {server.base_url}, "
                f"{test.config.data.type}, stages {rates} req/s ({test.capacity_rps:g} planned)"
            )
        return out


def write_bench(request: BenchRequest) -> BenchWritten:
    """The load-test configs of `request`'s site, written into `request.out`."""
    # plain load_site: load-test configs from a plan `fabric plan` made through the trust gate; no node is read
    site = load_site(request.site_repo)
    site_id = resolve_site(site, request.site_name)
    tests = load_tests(
        site,
        load_plan(request.plan_file),
        site_id,
        prometheus_url=request.prometheus_url,
        via=request.via,
        api=request.api,
        data=request.data,
        stage_seconds=request.stage_seconds,
        deployments=request.deployments,
    )
    written = write_load_tests(tests, request.out)
    return BenchWritten(list(zip(tests, written, strict=True)))
