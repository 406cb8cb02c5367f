"""Shared test set-up: fixture modules live in tests/fixtures/ and are registered here."""

from __future__ import annotations

import sys
from collections.abc import Generator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS.parent))  # so that `tests.fixtures...` imports work from any cwd

pytest_plugins = [
    "tests.fixtures.siterepo",
    "tests.fixtures.prometheus",
    "tests.fixtures.testhost",
    "tests.fixtures.engine",
]

from tests.fixtures.required import allowed, install_step, required  # noqa: E402 (after sys.path)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, None, None]:
    """Under FABRIC_REQUIRE_ALL=1 (make test) a skip not in tests/fixtures/required.ALLOWED_SKIPS fails."""
    outcome = yield
    report = outcome.get_result()
    if not (required() and report.skipped) or hasattr(report, "wasxfail"):
        return
    reason = str(report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr)
    if allowed(reason):
        return
    report.outcome = "failed"
    report.longrepr = (
        f"FABRIC_REQUIRE_ALL=1 (make test) requires every component the suite uses, but this test skipped: "
        f"{reason}\n  install: {install_step(reason)}"
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    """The markers gate: `netns` needs root, sshd and network namespaces; `engine` the vLLM engine venv."""
    from tests.fixtures.required import missing
    from tests.fixtures.testhost import namespaces_available

    if item.get_closest_marker("netns") and not namespaces_available():
        missing("network namespaces with sshd (root)", "run the suite as root with openssh-server and iproute2")
    if item.get_closest_marker("engine"):
        from tests.fixtures.engine import require_engine

        require_engine()
