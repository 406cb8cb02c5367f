"""Inputs of the deploy tests: the reference site (read-only) and the seed-000 plan."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from llm_fabric.deploy.build import StackInputs, load_inputs
from llm_fabric.deploy.options import StackOptions
from llm_fabric.distribution import data_path
from llm_fabric.site.loader import load_site
from tests.deploy.planfixture import seed_plan

REFERENCE = data_path("examples", "cerit-sc")


@pytest.fixture
def reference_inputs() -> StackInputs:
    return load_inputs(StackOptions(site_repo=REFERENCE), site=load_site(REFERENCE), plan=seed_plan())


@pytest.fixture
def edited_site(tmp_path: Path) -> Callable[[dict[str, str]], StackInputs]:
    """Factory: a copy of the reference site with files replaced (relative path -> YAML text)."""

    def make(files: dict[str, str]) -> StackInputs:
        root = tmp_path / "site"
        shutil.copytree(REFERENCE, root)
        for rel, text in files.items():
            (root / rel).write_text(text)
        return load_inputs(StackOptions(site_repo=root), site=load_site(root), plan=seed_plan())

    return make
