"""`fabric` start-up: importing the CLI must not import the core's heavy libraries.

Every `fabric` command imports `llm_fabric.cli.main`; the command group imports a command's module
only when that command runs, and the modules import the core inside the commands, so that a command
pays only for its own libraries (0.3 s vs 1-3 s on the shared machine, `bench/cli_startup.py`). Run in
a fresh interpreter, so that what this test process already imported does not hide anything.
"""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest

from llm_fabric.cli import deploy_commands, engine_commands
from llm_fabric.cli.local_engine_commands import check_args_command
from llm_fabric.deploy.build import STACK_ORDER
from llm_fabric.engine.backends import BACKENDS
from llm_fabric.engine.capacity.model import DEFAULT_CONTEXT_TOKENS

# what only some commands need: site models, recipes, Ansible, DuckDB, schemas, templates, the deploy stack
HEAVY = [
    "ansible_runner",
    "duckdb",
    "pyarrow",
    "jsonschema",
    "kubernetes_validate",
    "jinja2",
    "pulumi",
    "ortools",
    "prometheus_client",
    "ruamel.yaml",
    "llm_fabric.site.models",
    "llm_fabric.site.loader",
    "llm_fabric.engine.recipes",
    "llm_fabric.hardware.catalog",
    "llm_fabric.deploy.build",
    "llm_fabric.ledger.report.build",
]


def modules_after(code: str) -> set[str]:
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    return set(json.loads(out))


def test_cli_import_loads_no_heavy_library() -> None:
    loaded = modules_after("import llm_fabric.cli.main")
    assert "llm_fabric.cli.enroll_commands" not in loaded  # command modules load on first use
    assert [m for m in HEAVY if m in loaded] == []


def test_the_command_table_names_every_command_of_every_module() -> None:
    import importlib
    import pkgutil

    import llm_fabric.cli
    from llm_fabric.cli.main import COMMANDS

    found = {}
    for info in pkgutil.iter_modules(llm_fabric.cli.__path__):
        if info.name.endswith("_commands"):
            for command in importlib.import_module(f"llm_fabric.cli.{info.name}").commands:
                found[command.name] = info.name
    assert found == COMMANDS


SITE = ["llm_fabric.init", "llm_fabric.site.models", "ruamel.yaml"]


@pytest.mark.parametrize(
    ("argv", "needs"),
    [
        (["validate", "--help"], []),
        (["enroll", "--help"], []),
        (["init", "--help"], SITE),  # its help lists the shipped examples, read by llm_fabric.init
    ],
)
def test_help_stays_light(argv: list[str], needs: list[str]) -> None:
    code = (
        "import sys\nfrom llm_fabric.cli.main import main\n"
        f"import contextlib, io\nwith contextlib.redirect_stdout(io.StringIO()): main({argv!r})"
    )
    loaded = modules_after(code)
    assert all(m in loaded for m in needs)
    assert [m for m in HEAVY if m in loaded and m not in needs] == []


def test_spelled_out_constants_agree_with_the_core() -> None:
    """Values the command modules spell out to keep core imports out of start-up."""
    stack = next(p for p in deploy_commands.render_command.params if p.name == "stacks")
    assert isinstance(stack.type, click.Choice) and tuple(stack.type.choices) == STACK_ORDER
    assert engine_commands.DEFAULT_CONTEXT_TOKENS == DEFAULT_CONTEXT_TOKENS
    assert list(BACKENDS) == engine_commands.ENGINE_NAMES
    engine_choices = [
        list(param.type.choices)
        for command in (engine_commands.capacity_command, engine_commands.engine_args_command, check_args_command)
        for param in command.params
        if param.name == "engine" and isinstance(param.type, click.Choice)
    ]
    assert engine_choices == [list(BACKENDS)] * 3  # every --engine offers exactly the registry's engines
