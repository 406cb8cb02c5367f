"""The Python versions users have: every pinned dependency exists as a binary wheel for 3.12 and 3.13.

`make pycompat` (part of `make test`) has pip resolve `.[dev]` for each version with
`--only-binary=:all:` into `.cache/wheels/VERSION/`; a pin without such a wheel fails that step, and
this test checks that each pin of pyproject.toml was resolved at exactly its pinned version with a wheel
that version of CPython can install. CI itself runs 3.11, the machine's.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.tags import Tag
from packaging.utils import canonicalize_name, parse_wheel_filename

ROOT = Path(__file__).resolve().parents[1]
VERSIONS = ("3.12", "3.13")


def pins() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    out = {}
    for line in [*project["dependencies"], *project["optional-dependencies"]["dev"]]:
        req = Requirement(line)
        [spec] = list(req.specifier)
        assert spec.operator == "==", f"{line}: pin it with =="
        out[canonicalize_name(req.name)] = spec.version
    return out


def installable(tag: Tag, version: str) -> bool:
    major, minor = version.split(".")
    if tag.interpreter.startswith("py"):
        return tag.interpreter in ("py3", f"py{major}{minor}") and tag.abi == "none"
    if tag.abi == "abi3":  # the stable ABI: built for cp3N, installs on every later CPython
        return tag.interpreter.startswith("cp3") and int(tag.interpreter[3:]) <= int(minor)
    return tag.interpreter == f"cp{major}{minor}"


@pytest.mark.parametrize("version", VERSIONS)
def test_every_pin_has_a_binary_wheel_for(version: str) -> None:
    cache = ROOT / ".cache" / "wheels" / version
    if not (cache / ".resolved").exists():
        if os.environ.get("FABRIC_REQUIRE_PYCOMPAT") == "1":
            pytest.fail(f"{cache} was not resolved: run `make pycompat`")
        pytest.skip(f"{cache} was not resolved (`make pycompat`)")
    wheels = {}
    for path in cache.glob("*.whl"):
        name, wheel_version, _, tags = parse_wheel_filename(path.name)
        wheels.setdefault(name, []).append((str(wheel_version), tags))
    missing = []
    for name, pinned in pins().items():
        fits = [v for v, tags in wheels.get(name, []) if v == pinned and any(installable(t, version) for t in tags)]
        if not fits:
            missing.append(f"{name}=={pinned}")
    assert missing == [], f"no Python {version} wheel for: {', '.join(missing)}"
