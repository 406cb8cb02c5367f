"""Shared printing helpers for commands: JSON, rich tables, problem lists."""

from __future__ import annotations

import json
import re
import sys
import threading
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console, ConsoleOptions, RenderableType
from rich.errors import MarkupError
from rich.markup import escape
from rich.text import Text

from llm_fabric.errors import Problem

if TYPE_CHECKING:
    from rich.status import Status

# the only markup the commands' own templates use; user text with brackets (`[/x]`, `[bold]`) is shown as is
_STYLE_WORDS = r"(bold|dim|italic|red|green|yellow|cyan|blue|magenta)"
_OWN_TAG = re.compile(rf"^\[(/|/?{_STYLE_WORDS}( {_STYLE_WORDS})*)\]$")
_BRACKETS = re.compile(r"\[[^\[\]]*\]")


def plain_markup(text: str) -> str:
    """`text` with every bracket escaped except the fabric's style tags (`[green]`, `[bold red]`, `[/]`)."""
    return _BRACKETS.sub(lambda m: m.group(0) if _OWN_TAG.match(m.group(0)) else escape(m.group(0)), text)


# set by the CLI's SIGINT handler (cli.main): a spinner stops drawing at once, not when the work it shows
# has unwound (an ingest's DuckDB rollback takes seconds after Ctrl-C)
interrupted = threading.Event()


class _UntilInterrupted:
    def __init__(self, spinner: RenderableType) -> None:
        self.spinner = spinner

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[RenderableType]:
        if not interrupted.is_set():
            yield self.spinner


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

    def status(self, status: RenderableType, **kwargs: Any) -> Status:
        """rich's spinner, blank from the moment Ctrl-C is pressed (rich.status imported here: not at start-up)."""
        from rich.status import Status

        class _Status(Status):
            @property
            def renderable(self) -> RenderableType:  # type: ignore[override]  # what Live draws: not a Spinner
                return _UntilInterrupted(super().renderable)

        return _Status(status, console=self, **kwargs)

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
