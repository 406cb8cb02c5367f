"""`fabric canary`: the plan and references read, the prompts sent once, `--record`'s commit, `--serve`'s prober."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from llm_fabric.atomicio import write_atomic
from llm_fabric.errors import PolicyRefusal, UsageError
from llm_fabric.live import canary as core
from llm_fabric.live.canary import CANARY_DIR, CanaryRun, reference_from, reference_text
from llm_fabric.live.drift import endpoint_pairs, endpoints_of
from llm_fabric.live.prober import RotationEntry, prometheus_nodes_out, rotation, rotation_exposition, serve
from llm_fabric.plan.document import Plan, load_plan
from llm_fabric.site import gitrepo
from llm_fabric.site.loader import load_site

# a line for the person running it (stderr at the CLI)
Say = Callable[[str], None]


@dataclass(frozen=True)
class CanaryRequest:
    """What `fabric canary` was asked: the site repo and plan, the replicas to ask, and what to do with the answers."""

    site_repo: Path
    plan_file: Path
    endpoints: tuple[str, ...]
    prompts: tuple[str, ...]
    timeout: float
    metrics_file: Path | None
    record: bool
    branch: str | None
    serve_at: str | None
    every: float
    prometheus_url: str | None
    write_token: Path | None
    references_dir: Path | None


@dataclass(frozen=True)
class Canary:
    """A request with its plan read, the replicas' URLs, the references' folder (`root`: the site repo, if read)."""

    request: CanaryRequest
    plan: Plan
    root: Path | None
    folder: Path
    urls: dict[tuple[str, int], str]

    def once(self) -> CanaryRun:
        """The prompts sent to every replica once, the answers judged."""
        # --record judges by agreement and signals only: the reference is what it replaces
        refs = {} if self.request.record else core.load_references(self.folder, sorted(self.plan.deployments))
        only = list(self.request.prompts) or None
        return core.run_canary(self.plan, self.urls, refs, timeout=self.request.timeout, only=only)

    def run(self) -> CanaryRun:
        """`once`, its verdicts also written as Prometheus text when the request asks."""
        run = self.once()
        if self.request.metrics_file is not None:
            write_atomic(self.request.metrics_file, core.exposition(run))
        return run


def open_canary(request: CanaryRequest) -> Canary:
    """`request` checked, its plan read (and the site repo, unless the references come from their own folder)."""
    if request.branch is not None and not request.record:
        raise UsageError("--branch goes with --record", hint="add --record, or leave --branch out")
    if request.record and (request.serve_at is not None or request.references_dir is not None):
        raise UsageError("--record writes the site repo's canary/", hint="leave out --serve and --references")
    plan = load_plan(request.plan_file)
    # the rendered prober has the plan and the references, not the site repo
    root: Path | None = None
    if request.references_dir is None:
        site = load_site(request.site_repo)
        root = site.root
        if plan.federation != site.config.federation.name:
            raise UsageError(
                f"{request.plan_file} is a plan of `{plan.federation}`, "
                f"not of `{site.config.federation.name}` ({request.site_repo})",
                hint=f"plan this site repo: `fabric plan -C {request.site_repo} -o FILE`",
            )
    folder = request.references_dir if request.references_dir is not None else core.references_dir(site.root)
    urls = endpoints_of(plan, endpoint_pairs(request.endpoints))
    return Canary(request, plan, root, folder, urls)


def refuse_failing(run: CanaryRun) -> None:
    """PolicyRefusal naming the replicas that fail the canary, if any."""
    if run.failing:
        first = run.failing[0]
        raise PolicyRefusal(
            f"{len(run.failing)} replica(s) fail the canary: "
            + "; ".join(f"{v.name} ({v.failures[0]})" for v in run.failing),
            hint=f"the prober (`fabric canary --serve`) keeps {first.name} out of the gateway while it fails; "
            "redeploy it, or after a deliberate change record the new answers (`fabric canary --record`)",
        )


def record_answers(canary: Canary, run: CanaryRun, say: Say) -> None:
    """Each asked deployment's answers committed as its reference, to the checkout or to the request's branch."""
    assert canary.root is not None  # --record without --references
    root = canary.root.resolve()  # git runs in the repo: its paths must not be relative
    branch = canary.request.branch
    deployments = sorted({v.deployment for v in run.replicas})
    if not deployments:
        raise UsageError("--record: no replica was asked", hint="pass --endpoint DEPLOYMENT/INDEX=URL")
    files = {f"{CANARY_DIR}/{d}.yaml": reference_text(reference_from(run, canary.plan, d)) for d in deployments}
    message = f"canary: reference answers of {', '.join(deployments)}\n\nRecorded by `fabric canary --record` from " + (
        ", ".join(v.name for v in run.replicas)
    )
    with gitrepo.write_lock(root, [CANARY_DIR]):
        if branch is not None:
            commit = gitrepo.commit_to_branch(root, branch, files, message)
        else:
            paths = [root / rel for rel in files]
            with gitrepo.rolled_back_on_error(root, paths):
                for rel, text in files.items():
                    write_atomic(root / rel, text)
                commit = gitrepo.commit_paths(root, paths, message)
    where = f"branch {branch}" if branch else "the checkout"
    if commit is None:
        say(f"reference of {', '.join(deployments)} unchanged: nothing to commit")
    else:
        say(f"recorded {', '.join(files)} on {where} ({commit[:12]}): review and merge it like any change")


def _address(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise UsageError(f"--serve `{value}` is not HOST:PORT", hint="e.g. --serve 0.0.0.0:9400")
    return host or "0.0.0.0", int(port)


def serve_canary(canary: Canary, say: Say) -> None:
    """The prober: the canary every `request.every` seconds, its verdicts and the rotation served, forever."""
    request, plan, root = canary.request, canary.plan, canary.root
    assert request.serve_at is not None
    address = _address(request.serve_at)

    def cordoned(at: Path | None = root) -> dict[str, str]:
        if at is None:
            return {}
        return {
            n.name: "node cordoned in the site repo" for n in load_site(at).nodes.values() if n.status == "cordoned"
        }

    def cycle() -> tuple[CanaryRun, list[RotationEntry], list[str]]:
        run = canary.once()
        notes = list(run.notes)
        # the site repo's cordons as they are now (a cordon commit lands before the re-plan is deployed)
        nodes_out = cordoned()
        if request.prometheus_url:
            found, error = prometheus_nodes_out(request.prometheus_url)
            nodes_out |= found
            if error:
                notes.append(error)
        return run, rotation(plan, run, nodes_out), notes

    def report(run: CanaryRun, entries: list[RotationEntry], notes: list[str]) -> None:
        out = [e for e in entries if not e.in_rotation]
        line = f"canary: {len(run.replicas)} replica(s) asked, {len(run.failing)} failing; out of rotation: " + (
            ", ".join(f"{e.deployment}/{e.index}" for e in out) or "none"
        )
        say(line)
        if request.metrics_file is not None:
            write_atomic(request.metrics_file, core.exposition(run) + rotation_exposition(entries))

    # every replica of the plan, in and unknown, until the first run: a drain notice may come before it
    replicas = rotation(plan, CanaryRun([], []), {})
    say(f"canary prober on http://{address[0]}:{address[1]} (every {request.every:g}s)")
    if request.write_token is None:
        say("warning: no --write-token-file: drain notices (POST) are refused (401)")
    serve(address, cycle, request.every, on_cycle=report, replicas=replicas, write_token=request.write_token)
