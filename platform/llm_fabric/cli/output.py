"""Shared printing helpers for commands: JSON, rich tables, problem lists."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable

import click
from rich.console import Console

from llm_fabric.errors import Problem

# piped output (CI logs, PR comments) would otherwise be squeezed to 80 columns and wrap tables cell by cell
console = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 200)


def print_json(data: object) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


def print_problems(title: str, problems: Iterable[Problem], style: str = "red") -> None:
    items = list(problems)
    if not items:
        return
    console.print(f"[bold {style}]{title} ({len(items)}):[/]")
    for p in items:
        console.print(f"  {p}", markup=False)
