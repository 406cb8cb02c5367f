"""The vocabulary of `fabric validate`: a check's findings (config problems, exit 2; policy
violations, exit 3; warnings, shown and exit 0) and the report. The checks themselves live in the
feature packages and are run by `llm_fabric.validate`, so the site layer imports no feature package.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from llm_fabric.errors import EXIT_OK, EXIT_POLICY, EXIT_USAGE, Problem
from llm_fabric.site.loader import SiteRepo

Severity = Literal["config", "policy", "warning"]


@dataclass(frozen=True)
class Finding:
    severity: Severity
    problem: Problem


@dataclass
class ValidationReport:
    root: Path
    problems: list[Problem] = field(default_factory=list)
    violations: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)  # worth knowing, not wrong: the exit code ignores them
    summary: dict[str, int] = field(default_factory=dict)
    # with --base: every key added, replaced or removed, in words (always listed, accepted or not)
    key_changes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        if self.problems:
            return EXIT_USAGE
        if self.violations:
            return EXIT_POLICY
        return EXIT_OK

    def as_dict(self) -> dict[str, object]:
        return {
            "site_repo": str(self.root),
            "valid": self.exit_code == EXIT_OK,
            "exit_code": self.exit_code,
            "summary": self.summary,
            "problems": [p.as_dict() for p in self.problems],
            "violations": [p.as_dict() for p in self.violations],
            "warnings": [p.as_dict() for p in self.warnings],
            "key_changes": self.key_changes,
        }


SiteCheck = Callable[[SiteRepo], list[Finding]]
