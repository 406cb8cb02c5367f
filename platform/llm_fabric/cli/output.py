"""Shared printing helpers for commands: JSON, rich tables, problem lists."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable
from typing import Any

import click
from rich.console import Console
from rich.errors import MarkupError
from rich.markup import escape
from rich.text import Text

from llm_fabric.errors import Problem

# the only markup the commands' own templates use; user text with brackets (`[/x]`, `[bold]`) is shown as is
_STYLE_WORDS = r"(bold|dim|italic|red|green|yellow|cyan|blue|magenta)"
_OWN_TAG = re.compile(rf"^\[(/|/?{_STYLE_WORDS}( {_STYLE_WORDS})*)\]$")
_BRACKETS = re.compile(r"\[[^\[\]]*\]")


def plain_markup(text: str) -> str:
    """`text` with every bracket escaped except the fabric's style tags (`[green]`, `[bold red]`, `[/]`)."""
    return _BRACKETS.sub(lambda m: m.group(0) if _OWN_TAG.match(m.group(0)) else escape(m.group(0)), text)


class FabricConsole(Console):
    """A rich console on which names, paths and values from user files never act as markup.

    Commands interpolate user text into their templates (`f"[green]valid[/]: {path}"`): a site called
    `x[/y]` would make rich raise, and `[link=...]` would be obeyed. Only the style tags the templates
    use are kept; any text that still does not parse is printed without markup.
    """

    def render_str(self, text: str, **kwargs: Any) -> Text:
        if kwargs.get("markup") is False or not self._markup:
            return super().render_str(text, **kwargs)
        try:
            return super().render_str(plain_markup(text), **kwargs)
        except MarkupError:
            return super().render_str(text, **{**kwargs, "markup": False})

    def on_broken_pipe(self) -> None:
        """The reader went away: on to the CLI's edge, which ends quietly (rich itself would exit 1)."""
        self.quiet = True
        raise BrokenPipeError


# piped output (CI logs, PR comments) would otherwise be squeezed to 80 columns and wrap tables cell by cell
console = FabricConsole(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 200)
err_console = FabricConsole(stderr=True, highlight=False, soft_wrap=True)


def print_json(data: object) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


def print_problems(title: str, problems: Iterable[Problem], style: str = "red") -> None:
    items = list(problems)
    if not items:
        return
    console.print(f"[bold {style}]{title} ({len(items)}):[/]")
    for p in items:
        console.print(f"  {p}", markup=False)
