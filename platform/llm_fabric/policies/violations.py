"""A policy violation: the rule, the objects it concerns, what is wrong and what would satisfy it."""

from __future__ import annotations

from pathlib import Path

from llm_fabric.basemodel import FabricModel
from llm_fabric.errors import Problem


class Violation(FabricModel):
    rule: str
    objects: list[str]
    message: str
    hint: str
    file: str | None = None
    line: int | None = None
    field: str | None = None

    def to_problem(self) -> Problem:
        return Problem(
            f"[{self.rule}] {self.message}",
            file=Path(self.file) if self.file else None,
            line=self.line,
            field=self.field,
            hint=self.hint,
        )

    def key(self) -> tuple[str, tuple[str, ...], str]:
        """Identity across two revisions of a site repo (line numbers move, the rule and objects do not)."""
        return self.rule, tuple(self.objects), self.message
