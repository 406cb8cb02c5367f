"""`llm_fabric.playbook_runner`: the one way enrolment, provisioning and draining run Ansible (real ansible-runner)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from llm_fabric.errors import UsageError
from llm_fabric.playbook_runner import Target, ansible_env, control_machine, inventory, run_playbook


def test_inventory_from_targets_and_duplicates() -> None:
    ssh = Target("gpu7", "10.0.0.7", user="root", port=2222, key=Path("/k"), extra_vars={"fabric_x": "1"})
    local = Target("here", "localhost", "local")
    assert inventory([ssh, local]) == {
        "gpu7": {
            "ansible_host": "10.0.0.7",
            "ansible_ssh_use_tty": False,
            "ansible_user": "root",
            "ansible_port": 2222,
            "ansible_ssh_private_key_file": "/k",
            "fabric_x": "1",
        },
        "here": {"ansible_connection": "local"},
    }
    with pytest.raises(UsageError, match="listed twice"):
        inventory([ssh, ssh])


def test_env_finds_this_pythons_ansible(tmp_path: Path) -> None:
    env = ansible_env(tmp_path)
    assert env["PATH"].split(":")[0] == str(Path(sys.executable).parent)
    assert (tmp_path / "cp").is_dir() and env["ANSIBLE_SSH_CONTROL_PATH_DIR"] == str(tmp_path / "cp")


@pytest.mark.slow
def test_a_failed_task_is_reported_and_events_are_seen() -> None:
    events: list[dict[str, Any]] = []
    # drain.yml refuses to run without fabric_drain_node: its assert fails on the control machine
    result = run_playbook(
        "drain.yml", {"localhost": control_machine()}, extravars={"fabric_drain_status": "gone"}, on_event=events.append
    )
    assert not result.succeeded and result.status == "failed"
    assert result.failures == [
        "localhost: Check the inputs: set fabric_drain_node (and fabric_drain_status: cordoned or retired)"
    ]
    assert result.stats["localhost"]["failures"] == 1
    assert any(e.get("event") == "playbook_on_stats" for e in events)
