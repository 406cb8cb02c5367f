"""Options that several commands share, defined once.

The site repo is named the way a git user expects: a command run inside a site repo, or in any folder
of one, needs no flag (the nearest folder above with a fabric.yaml, as git finds .git); `-C DIR` /
`--site-repo DIR` (or `$FABRIC_SITE_REPO`) names another one. Commands that took the site
repo as a positional `DIRECTORY` still accept it for one release, with a deprecation note.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from llm_fabric.errors import UsageError
from llm_fabric.site.root import SITE_REPO_ENV, find_site_root

F = TypeVar("F", bound=Callable[..., Any])


def site_repo_option(
    *, positional: bool = False, absolute: bool = False, optional_help: str | None = None
) -> Callable[[F], F]:
    """Add `-C/--site-repo DIR` (and, with `positional`, the deprecated `[DIRECTORY]`); the command
    function receives `site_repo: Path` (made absolute with `absolute`, for code that runs git inside it).

    With `optional_help` the repo is optional: without -C or $FABRIC_SITE_REPO the command receives None
    (not the current folder) and the option's help is that text."""

    def decorate(f: F) -> F:
        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            legacy: Path | None = kwargs.pop("legacy_directory", None)
            flag: Path | None = kwargs.pop("site_repo")
            if legacy is not None and _from_environment("site_repo"):
                flag = None  # a folder named on the command line beats $FABRIC_SITE_REPO
            if optional_help is not None and flag is None:
                kwargs["site_repo"] = None
                return f(*args, **kwargs)
            chosen = resolve_site_repo(flag, legacy)
            kwargs["site_repo"] = chosen.resolve() if absolute else chosen
            return f(*args, **kwargs)

        decorated: Any = click.option(
            "-C",
            "--site-repo",
            "site_repo",
            type=click.Path(file_okay=False, path_type=Path),
            default=None,
            envvar=SITE_REPO_ENV,
            show_envvar=True,
            metavar="DIR",
            help=optional_help or "The site repo (default: the current folder).",
        )(wrapper)
        if positional:
            decorated = click.argument(
                "legacy_directory",
                required=False,
                metavar="[DIRECTORY]",
                type=click.Path(file_okay=False, path_type=Path),
            )(decorated)
        return decorated  # type: ignore[no-any-return]

    return decorate


def resolve_site_repo(flag: Path | None, legacy: Path | None) -> Path:
    if legacy is not None:
        if flag is not None and flag.resolve() != legacy.resolve():
            raise UsageError(
                f"two site repos given: {legacy} (positional) and {flag} (-C/--site-repo)",
                hint=f"pass one: -C {flag}",
            )
        click.echo(
            f"note: the positional site repo is deprecated and goes in the next release; use `-C {legacy}`",
            err=True,
        )
        return legacy
    return flag if flag is not None else find_site_repo(Path.cwd())


def find_site_repo(cwd: Path) -> Path:
    """`.` inside the site repo's top folder, the repo's folder from a subfolder of it; `.` outside any
    (the loader then says that `.` is no site repo and how to name one; `ledger status --store FILE`
    needs none)."""
    root = find_site_root(cwd)
    return root if root is not None and root != cwd else Path(".")


def _from_environment(param: str) -> bool:
    ctx = click.get_current_context(silent=True)
    return ctx is not None and ctx.get_parameter_source(param) is click.core.ParameterSource.ENVIRONMENT


keyring_option = click.option(
    "--keyring",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help="Trust root outside the repo: a folder of the federation's *.pub keys (keys/ is judged by it).",
)

key_option = click.option(
    "--key",
    "key_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Enrollment private key (default: $FABRIC_ENROLLMENT_KEY, else SITE_REPO.enrollment.key beside the repo).",
)


# The options below are spelled once: the flag, the parameter it fills, its type and metavar. Their help says
# what the option means to each command, so a command passes its own where the default does not fit.


def json_option(help: str = "Print the result as JSON.") -> Callable[[F], F]:
    """`--json` -> `as_json: bool`."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def plan_option(
    help: str = "Plan from `fabric plan -o` (default: plan the site repo now).",
    *,
    required: bool = False,
    must_exist: bool = True,
) -> Callable[[F], F]:
    """`--plan FILE` -> `plan_file: Path | None` (a plan document, `fabric plan -o FILE`)."""
    return click.option(
        "--plan",
        "plan_file",
        type=click.Path(exists=must_exist, dir_okay=False, path_type=Path),
        required=required,
        help=help,
    )


def site_option(help: str, *, required: bool = False) -> Callable[[F], F]:
    """`--site SITE` -> `site_name: str | None` (a site of fabric.yaml)."""
    return click.option("--site", "site_name", metavar="SITE", required=required, help=help)


def out_option(help: str, *, required: bool = True, folder: bool = True, short: bool = False) -> Callable[[F], F]:
    """`--out` (with `short`, also `-o`) -> `out: Path`: a folder to write, or with `folder=False` a file."""
    flags = ("-o", "--out") if short else ("--out",)
    kind = click.Path(file_okay=False, path_type=Path) if folder else click.Path(dir_okay=False, path_type=Path)
    return click.option(*flags, "out", type=kind, required=required, help=help)


def prometheus_option(help: str, *, required: bool = False) -> Callable[[F], F]:
    """`--prometheus URL` -> `prometheus_url: str | None` (a Prometheus HTTP API's base URL)."""
    return click.option("--prometheus", "prometheus_url", metavar="URL", required=required, help=help)


store_option = click.option(
    "--store",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The ledger store (default: ledger.yaml's `store:`, else <site repo>.ledger.duckdb beside the repo).",
)
