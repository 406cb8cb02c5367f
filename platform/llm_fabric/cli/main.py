"""Entry point of `fabric`. Errors from the core are shown here, once, with their exit code.

Each command group lives in its own module listed in `COMMAND_MODULES`; a module exposes
`commands: list[click.Command]`.
"""

from __future__ import annotations

import importlib
import sys
import traceback

import click
from rich.console import Console

from llm_fabric import __version__
from llm_fabric.errors import EXIT_INTERNAL, EXIT_USAGE, FabricError

COMMAND_MODULES = [
    "llm_fabric.cli.engine_commands",
    "llm_fabric.cli.site_commands",
    "llm_fabric.cli.plan_commands",
    "llm_fabric.cli.deploy_commands",
    "llm_fabric.cli.ledger_commands",
    "llm_fabric.cli.enroll_commands",
    "llm_fabric.cli.local_engine_commands",
]

err_console = Console(stderr=True, highlight=False, soft_wrap=True)


class FabricGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self.commands)


@click.group(cls=FabricGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "--version", prog_name="fabric")
@click.option("--debug", is_flag=True, envvar="FABRIC_DEBUG", help="Show tracebacks of errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """llm-fabric: pool contributed GPU machines into one sovereign LLM serving fabric.

    \b
    Examples:
      fabric init ./site --example cerit-sc
      fabric validate ./site
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


for _module in COMMAND_MODULES:
    for _command in importlib.import_module(_module).commands:
        cli.add_command(_command)


def main(argv: list[str] | None = None) -> int:
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        result = cli.main(args=argv, prog_name="fabric", standalone_mode=False)
    except click.exceptions.Abort:
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
        err_console.print(f"[bold red]error:[/] {exc.render()}", markup=True, highlight=False)
        return exc.exit_code
    except KeyboardInterrupt:
        err_console.print("interrupted")
        return EXIT_USAGE
    except Exception:  # the one place an unexpected error is turned into exit 1
        if debug:
            traceback.print_exc()
        else:
            err_console.print(
                f"[bold red]internal error:[/] {sys.exc_info()[1]!r} (run with --debug for the traceback)", markup=True
            )
        return EXIT_INTERNAL
    return int(result) if isinstance(result, int) else 0


def run() -> None:
    sys.exit(main())
