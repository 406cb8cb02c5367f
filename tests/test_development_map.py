"""docs/development.md's map of the package cannot drift from the package or from pyproject.toml.

Checked: the layer line (`cli` -> ... -> `errors`) is pyproject's layers contract, the number of
contracts the page names is pyproject's, every package under platform/llm_fabric/ and every
top-level module is named in the map's code block ("The package, one room per concept"), and the map
names no package or module that does not exist. Each failure says what to add or remove.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "platform" / "llm_fabric"
PAGE = REPO / "docs" / "development.md"
MAP_HEADING = "## The package, one room per concept"
NUMBERS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")
ARROW = " → "


def _contracts() -> list[dict[str, object]]:
    contracts: list[dict[str, object]] = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"][
        "contracts"
    ]
    return contracts


def _map_block() -> list[str]:
    text = PAGE.read_text()
    assert MAP_HEADING in text, f"docs/development.md lost its heading {MAP_HEADING!r} (the map these checks read)"
    after = text.split(MAP_HEADING, 1)[1]
    block = after.split("```", 2)[1]
    return block.splitlines()[1:]  # past the fence's own line


def _packages() -> set[str]:
    return {str(p.parent.relative_to(PACKAGE)) for p in PACKAGE.rglob("__init__.py") if p.parent != PACKAGE}


def _modules() -> set[str]:
    return {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _named() -> tuple[dict[str, int], set[str]]:
    """What the map names: packages (path -> line of the block) and top-level modules.

    A top-level entry starts at two spaces (`engine/ ...`, `names ...`, `errors basemodel ...`), a
    subpackage at four (`    capacity/`) or inside its parent's entry (`parsers/,` in enrollment's);
    a `name/` there that is a top-level package is a cross-reference (`trust/` in the ledger's). A
    module's entry starts its line or stands in a column (two spaces after it).
    """
    packages: dict[str, int] = {}
    modules: set[str] = set()
    top_level = {p for p in _packages() if "/" not in p}
    parent = ""
    for number, line in enumerate(_map_block(), start=1):
        first = line.split()[0] if line.strip() else ""
        if _indent(line) == 2:
            if first.endswith("/"):
                parent = first.rstrip("/")
                packages[parent] = number
            else:
                parent = ""
                # `errors basemodel documents ...   foundation: ...`, `init   `fabric init`   validate   ...`
                modules.update(re.split(r"\s{2,}", line.strip())[0].split())
                modules.update(re.findall(r"(?:^|\s)([a-z_]+)\s{2,}", line.strip()))
        elif _indent(line) == 4 and first.endswith("/"):
            packages[f"{parent}/{first.rstrip('/')}"] = number
        rest = line.strip()[len(first) :] if _indent(line) in (2, 4) else line
        for inline in re.findall(r"(?<![\w/.])([a-z_]+)/(?=[\s,;)]|$)", rest):
            if parent and inline not in top_level:
                packages.setdefault(f"{parent}/{inline}", number)
    return packages, modules


def test_the_layer_line_is_pyprojects_layers_contract() -> None:
    layers = next(c for c in _contracts() if c["type"] == "layers" and c.get("containers") == ["llm_fabric"])
    names: list[str] = layers["layers"]  # type: ignore[assignment]
    expected = ARROW.join(f"`{' '.join(layer.split())}`" for layer in names)
    text = " ".join(PAGE.read_text().split())
    found = re.search(r"`cli`(?: → `[^`]+`)+", text)
    assert found, f"docs/development.md has no layer line; add it after the contracts' list: {expected}"
    assert found.group(0) == expected, (
        f"docs/development.md's layer line is not pyproject.toml's layers contract; write it as:\n{expected}\n"
        f"(it says: {found.group(0)})"
    )


def test_the_page_counts_pyprojects_contracts() -> None:
    count = len(_contracts())
    said = re.search(r"(\w+) contracts in `pyproject.toml`", " ".join(PAGE.read_text().split()))
    assert said, f"docs/development.md no longer says how many contracts there are: write '{NUMBERS[count]} contracts'"
    assert said.group(1) == NUMBERS[count], (
        f"docs/development.md says '{said.group(1)} contracts in `pyproject.toml`' but pyproject.toml has {count}: "
        f"write '{NUMBERS[count]} contracts' and name each in the parenthesis after it"
    )


def _add_package(path: str) -> str:
    parent, _, name = path.rpartition("/")
    where = f"under `{parent}/` (a line `    {name}/  ...`)" if parent else f"(a line `  {name}/  ...`)"
    return f"add `{name}/` {where}: platform/llm_fabric/{path}/ is a package"


def test_the_map_names_every_package_and_module_and_no_other() -> None:
    packages, modules = _named()
    add = [_add_package(p) for p in sorted(_packages() - set(packages))]
    add += [
        f"add `{m}` (a line `  {m}  ...`, or beside the foundation's modules): platform/llm_fabric/{m}.py exists"
        for m in sorted(_modules() - modules)
    ]
    remove = [
        f"remove `{p}/` (line {line} of the block): there is no package platform/llm_fabric/{p}/"
        for p, line in sorted(packages.items())
        if p not in _packages()
    ]
    remove += [
        f"remove `{m}` from the map: there is no module platform/llm_fabric/{m}.py"
        for m in sorted(modules - _modules())
    ]
    assert not add + remove, (
        f"docs/development.md's map ({MAP_HEADING!r}) and platform/llm_fabric/ differ:\n" + "\n".join(add + remove)
    )
