"""Shared test set-up: fixture modules live in tests/fixtures/ and are registered here."""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS.parent))  # so that `tests.fixtures...` imports work from any cwd

pytest_plugins = [
    "tests.fixtures.siterepo",
    "tests.fixtures.prometheus",
    "tests.fixtures.testhost",
    "tests.fixtures.engine",
]
