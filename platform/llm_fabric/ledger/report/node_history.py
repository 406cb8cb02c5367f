"""A node's status over time, from the site repo's git history of its manifest.

`fabric nodes cordon`, `uncordon` and `retire` each commit the re-signed manifest with its new
`status` (llm_fabric.nodes.cordon, .retire), so the manifest's history is the node's: the first
version holds from its `enrolled_at`, every later commit that changes `status` from its commit
time (the committer date). Commits are read in topological order and their times taken as they
are; a status change is what the manifest says, not the commit message.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import yaml

from llm_fabric.site import gitrepo

# `absent`: before the node's enrolment (or while its manifest is deleted)
NodeStatus = Literal["active", "cordoned", "retired", "absent"]
_KNOWN: tuple[NodeStatus, ...] = ("active", "cordoned", "retired")


@dataclass(frozen=True)
class StatusChange:
    at: datetime
    status: NodeStatus
    commit: str | None  # None: the first version, from its enrolled_at


def _version(text: str | None) -> tuple[NodeStatus, datetime | None]:
    if text is None:
        return "absent", None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return "absent", None
    if not isinstance(data, dict):
        return "absent", None
    status = data.get("status", "active")
    enrolled = data.get("enrolled_at")
    when = enrolled if isinstance(enrolled, datetime) else None
    if when is not None and when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (status if status in _KNOWN else "absent"), when


def status_history(root: Path, manifest: Path) -> list[StatusChange]:
    """The manifest's status changes, oldest first; [] when the repo holds no committed version of it."""
    rel = manifest.relative_to(root).as_posix()
    log = gitrepo.git(root, "log", "--topo-order", "--reverse", "--format=%H %ct", "--", rel, check=False)
    changes: list[StatusChange] = []
    for line in log.splitlines():
        commit, _, seconds = line.partition(" ")
        status, enrolled = _version(gitrepo.show_file(root, commit, rel))
        if not changes:
            start = enrolled if enrolled is not None else datetime.fromtimestamp(int(seconds), UTC)
            changes.append(StatusChange(start, status, None))
        elif status != changes[-1].status:
            changes.append(StatusChange(datetime.fromtimestamp(int(seconds), UTC), status, commit))
    return changes


def status_at(changes: list[StatusChange], when: datetime) -> NodeStatus:
    """The status in force at `when`: the latest change at or before it."""
    current: NodeStatus = "absent"
    for change in sorted(changes, key=lambda c: c.at):
        if change.at > when:
            break
        current = change.status
    return current
