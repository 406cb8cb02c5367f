"""Typed errors raised by the core and shown once, at the CLI edge.

Each error carries its exit code (the model is click's exceptions): 1 internal error,
2 usage or configuration error, 3 refused by policy. The core never prints and never exits;
it raises one of these, and `llm_fabric.cli.main` formats it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_POLICY = 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a process Ctrl-C stopped


@dataclass(frozen=True)
class Problem:
    """One finding about an input: where it is, what is wrong, and what would fix it."""

    message: str
    file: Path | None = None
    line: int | None = None
    field: str | None = None
    hint: str | None = None

    def location(self) -> str:
        parts: list[str] = []
        if self.file is not None:
            parts.append(str(self.file) + (f":{self.line}" if self.line is not None else ""))
        if self.field:
            parts.append(self.field)
        return ": ".join(parts)

    def __str__(self) -> str:
        where = self.location()
        text = f"{where}: {self.message}" if where else self.message
        if self.hint:
            text += f" ({self.hint})"
        return text

    def as_dict(self) -> dict[str, object]:
        return {
            "file": str(self.file) if self.file is not None else None,
            "line": self.line,
            "field": self.field,
            "message": self.message,
            "hint": self.hint,
        }


class FabricError(Exception):
    """Base of every error the CLI shows without a traceback."""

    exit_code = EXIT_INTERNAL

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def render(self) -> str:
        return f"{self.message}\n  hint: {self.hint}" if self.hint else self.message


class UsageError(FabricError):
    """Bad arguments, missing files, unreachable hosts: the user can fix it and retry."""

    exit_code = EXIT_USAGE


class ConfigError(UsageError):
    """One or more problems in input files, all listed (not only the first)."""

    def __init__(self, problems: Sequence[Problem], *, summary: str | None = None) -> None:
        self.problems = list(problems)
        count = len(self.problems)
        head = summary or f"{count} problem{'s' if count != 1 else ''} found"
        super().__init__(head)

    def render(self) -> str:
        return "\n".join([self.message + ":"] + [f"  {p}" for p in self.problems])


class PolicyRefusal(FabricError):
    """The input is well-formed but a policy refuses it (enrollment rejected, validation failed)."""

    exit_code = EXIT_POLICY

    def __init__(self, message: str, *, problems: Sequence[Problem] = (), hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.problems = list(problems)

    def render(self) -> str:
        lines = [self.message]
        lines += [f"  {p}" for p in self.problems]
        if self.hint:
            lines.append(f"  hint: {self.hint}")
        return "\n".join(lines)


class ParseError(UsageError):
    """A tool's output (nvidia-smi, rocm-smi, ...) could not be understood."""

    def __init__(self, command: str, what: str, *, hint: str | None = None) -> None:
        super().__init__(f"could not parse the output of `{command}`: {what}", hint=hint)
        self.command = command
        self.what = what
