"""Entry point of `fabric`. Errors from the core are shown here, once, with their exit code.

Commands live in `llm_fabric.cli.<topic>_commands` modules, each exposing `commands: list[click.Command]`.
`COMMANDS` maps every top-level command to its module, and the group imports a module only when one
of its commands runs (or `--help` lists them), so `fabric validate` does not pay for OR-tools,
Pulumi or DuckDB. A new command adds its name here; `tests/cli/test_startup.py` checks the table.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import traceback
from types import FrameType

import click
from rich.text import Text

from llm_fabric import __version__
from llm_fabric.cli.output import err_console, interrupted
from llm_fabric.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, FabricError

COMMANDS: dict[str, str] = {
    "bench": "bench_commands",
    "capacity": "engine_commands",
    "engine-args": "engine_commands",
    "init": "site_commands",
    "validate": "site_commands",
    "schema": "site_commands",
    "plan": "plan_commands",
    "render": "deploy_commands",
    "provision": "deploy_commands",
    "report": "ledger_commands",
    "exporter": "ledger_commands",
    "ledger": "ledger_commands",
    "enroll": "enroll_commands",
    "facts": "enroll_commands",
    "keys": "keys_commands",
    "nodes": "nodes_commands",
    "engine": "local_engine_commands",
    "gateway": "gateway_commands",
    "tenants": "tenant_commands",
    "gpus": "hardware_commands",
    "models": "engine_commands",
    "check": "check_commands",
    "canary": "canary_commands",
    "weights": "weights_commands",
}


class ClosedPipe(Exception):
    """The reader of stdout went away (`fabric plan | head -1` had what it wanted): not fabric's error.

    Raised instead of the BrokenPipeError, which click would turn into exit 1 before `main` sees it."""


# SIGINT seen: libraries may turn the KeyboardInterrupt into an error of their own (see main)
_sigint = interrupted  # spinners read it too (cli.output)


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    _sigint.set()
    raise KeyboardInterrupt


class FabricGroup(click.Group):
    """A group that imports a command's module on first use (see `COMMANDS`)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand as exc:  # the lazy group has no `commands` for click to suggest from
            raise click.exceptions.NoSuchCommand(exc.command_name, possibilities=COMMANDS, ctx=ctx) from None

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except BrokenPipeError as exc:
            raise ClosedPipe from exc

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMANDS.get(cmd_name)
        if module is None:
            return None
        commands: list[click.Command] = importlib.import_module(f"llm_fabric.cli.{module}").commands
        return next(c for c in commands if c.name == cmd_name)


@click.group(cls=FabricGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "--version", prog_name="fabric")
@click.option("--debug", is_flag=True, envvar="FABRIC_DEBUG", help="Show tracebacks of errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """llm-fabric: pool contributed GPU machines into one sovereign LLM serving fabric.

    \b
    Examples:
      fabric init ./site --example cerit-sc
      fabric validate -C ./site
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def main(argv: list[str] | None = None) -> int:
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        result = cli.main(args=argv, prog_name="fabric", standalone_mode=False)
        sys.stdout.flush()  # here, not at exit: a reader that went away is seen while it can be handled
    except (ClosedPipe, BrokenPipeError):
        _silence_stdout()
        return EXIT_OK
    except click.exceptions.Abort as exc:
        if isinstance(exc.__cause__, KeyboardInterrupt):  # click turns Ctrl-C into Abort
            return _interrupted()
        err_console.print("aborted")
        return EXIT_USAGE
    except click.exceptions.ClickException as exc:
        exc.show()
        return EXIT_USAGE
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except FabricError as exc:
        if debug:
            traceback.print_exc()
        # the message holds user text (names, paths, values): printed as it is, never as markup
        err_console.print(Text.assemble(("error:", "bold red"), " ", exc.render()), highlight=False)
        return exc.exit_code
    except KeyboardInterrupt:
        return _interrupted()
    except Exception:  # the one place an unexpected error is turned into exit 1
        # after a Ctrl-C, libraries may raise their own error instead of the KeyboardInterrupt: DuckDB's
        # RuntimeError('Query interrupted') (its transaction was rolled back), pydantic-core's SchemaError
        if _sigint.is_set():
            return _interrupted()
        return _internal_error(debug)
    return int(result) if isinstance(result, int) else EXIT_OK


def _interrupted() -> int:
    err_console.print("interrupted")
    return EXIT_INTERRUPTED


def _internal_error(debug: bool) -> int:
    if debug:
        traceback.print_exc()
    else:
        err_console.print(
            Text.assemble(
                ("internal error:", "bold red"), f" {sys.exc_info()[1]!r} (run with --debug for the traceback)"
            )
        )
    return EXIT_INTERNAL


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush does not fail on the closed pipe again
    (what Python's signal docs recommend for SIGPIPE); in-process callers (click's CliRunner) have no fd."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        return


def run() -> None:
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not where SIGINT is ignored (nohup, &)
        signal.signal(signal.SIGINT, _on_sigint)
    sys.exit(main())
