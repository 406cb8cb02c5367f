"""The thin commands hand their options to a request dataclass by name: each option a field, each field an option."""

from __future__ import annotations

import dataclasses

import click
import pytest

from llm_fabric.cli import canary_commands, deploy_commands, engine_commands
from llm_fabric.engine.queries import CapacityRequest, EngineArgsRequest
from llm_fabric.live.canary_command import CanaryRequest
from llm_fabric.nodes.provision_command import ProvisionRequest

# the options a command keeps for itself (what it prints, where the site repo is)
CASES = [
    (engine_commands.capacity_command, CapacityRequest, {"site_dir", "legacy_site_dir", "as_json"}),
    (engine_commands.engine_args_command, EngineArgsRequest, {"as_json"}),
    (canary_commands.canary_command, CanaryRequest, {"as_json"}),
    (deploy_commands.provision_command, ProvisionRequest, {"as_json"}),
]


@pytest.mark.parametrize(("command", "request_type", "own"), CASES, ids=lambda c: getattr(c, "name", ""))
def test_every_option_is_a_field_of_the_request(command: click.Command, request_type: type, own: set[str]) -> None:
    options = {p.name for p in command.params if p.name and p.name not in own}
    fields = {f.name for f in dataclasses.fields(request_type)}
    assert options == fields, f"{command.name}: options only {options - fields}, fields only {fields - options}"
