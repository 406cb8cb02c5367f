"""Inputs of the deploy tests: the reference site (as `fabric init` makes it: nodes signed) and the seed-000 plan.

The example's nodes are declared and signed at `fabric init`; the serving stack holds the tenant gateway,
which routes only to signed nodes, so the tests read an initialised copy, not the example folder itself.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from llm_fabric.deploy.build import StackInputs, load_inputs
from llm_fabric.distribution import data_path
from llm_fabric.kube.options import StackOptions
from llm_fabric.trust.sites import load_trusted_site
from tests.deploy.planfixture import seed_plan
from tests.fixtures.siterepo import site_copy

REFERENCE = data_path("examples", "cerit-sc")


@pytest.fixture
def reference_inputs(tmp_path_factory: pytest.TempPathFactory) -> StackInputs:
    # outside the test's tmp_path: tests list and read everything a render writes there
    root = site_copy(tmp_path_factory.mktemp("reference") / "site")
    return load_inputs(StackOptions(site_repo=root, site="brno"), site=load_trusted_site(root), plan=seed_plan())


@pytest.fixture
def edited_site(tmp_path_factory: pytest.TempPathFactory) -> Callable[[dict[str, str]], StackInputs]:
    """Factory: a copy of the reference site with files replaced (relative path -> YAML text)."""

    def make(files: dict[str, str]) -> StackInputs:
        root = site_copy(tmp_path_factory.mktemp("edited") / "site")
        for rel, text in files.items():
            (root / rel).write_text(text)
        return load_inputs(StackOptions(site_repo=root, site="brno"), site=load_trusted_site(root), plan=seed_plan())

    return make
