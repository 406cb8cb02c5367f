"""`pytest README.md`: the README's `$ fabric ...` blocks run like those of docs/ (docs/conftest.py and
tests/docs/transcripts.py); this file collects only the top-level README.md.

It also says how `make test` spreads the suite over pytest-xdist workers (`-n 2`, with `--dist loadgroup`
from pyproject's addopts): see `pytest_collection_modifyitems` below. Here, in the root conftest, because
`pytest docs -n 2` must group the docs' blocks as much as the whole suite does.
"""

from __future__ import annotations

from collections import Counter

import pytest
from sybil import Sybil
from sybil.parsers.markdown import SkipParser
from tests.docs.transcripts import TranscriptParser, document_namespace

pytest_collect_file = Sybil(
    parsers=[SkipParser(), TranscriptParser()],
    patterns=["README.md"],
    excludes=["*/README.md"],
    setup=document_namespace,
).pytest()

# Session fixtures that start a server worth starting once (the vLLM engine takes a minute of CPU): every
# file that uses one goes to the group of the first it uses, so that one worker starts it for them all.
SHARED_SERVERS = ("tiny_engine", "gateway")


def _file(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the marks into the node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist a file is the unit of work (its module fixtures are set up once; a markdown page's blocks
    run in order and hand set-ups on to the next block), except that files using a shared server travel
    together. The groups go out heaviest first (by their `slow`/`engine`/`netns` tests), so that the
    last one to start is a short one; `--no-loadscope-reorder` (addopts) keeps that order."""
    if not hasattr(config, "workerinput"):  # not an xdist worker: nothing is spread, and only workers collect
        return
    group: dict[str, str] = {}
    for item in items:
        shared = next((name for name in SHARED_SERVERS if name in getattr(item, "fixturenames", ())), None)
        if shared is not None and not group.get(_file(item), "").startswith("server:"):
            group[_file(item)] = f"server:{shared}"
        group.setdefault(_file(item), _file(item))
    weight: Counter[str] = Counter()
    for item in items:
        heavy = any(item.get_closest_marker(name) for name in ("slow", "engine", "netns"))
        weight[group[_file(item)]] += 10 if heavy else 1
    for item in items:
        item.add_marker(pytest.mark.xdist_group(group[_file(item)]))
    first_seen = {name: index for index, name in enumerate(dict.fromkeys(group[_file(item)] for item in items))}
    items.sort(key=lambda item: (-weight[group[_file(item)]], first_seen[group[_file(item)]]))
