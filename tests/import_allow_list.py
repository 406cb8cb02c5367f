"""An import-linter contract that lists what a package MAY import, not what it may not.

import-linter's own types are deny-lists (`forbidden`) or guard the imported side (`protected`):
a deny-list for the code that runs inside another program's process (the engine's pod, LiteLLM's
proxy) silently allows every package added after it was written. This contract names the source
packages and the only modules they may reach; everything else they import, directly or through an
allowed module (an allowed foundation module that starts importing `site` drags `site` into the
pod too), breaks it. Third-party imports are checked too: the standard library is always allowed,
any other top-level package only when `allowed_third_party` names it (this needs
`include_external_packages = true`, so that the graph holds them).

Registered in pyproject.toml's [tool.importlinter] `contract_types` as `allow_list`; it lives in
tests/ because only the checks use it (the wheel does not ship it). lint-imports finds it because it
puts the current folder on sys.path: run it from the repository root, as the Makefile does.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import cast

import grimp
from importlinter import Contract, ContractCheck, fields, output
from importlinter.domain.imports import Module


@dataclass(frozen=True)
class Breach:
    importer: str
    imported: str
    lines: tuple[int, ...]
    via: tuple[str, ...]  # the allowed modules from a source module down to the importer


def _within(module: str, packages: set[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


class AllowListContract(Contract):
    """source_modules may import only themselves, allowed_modules, the stdlib and allowed_third_party."""

    type_name = "allow_list"

    source_modules = fields.ListField(subfield=fields.ModuleField())
    allowed_modules = fields.ListField(subfield=fields.ModuleField(), required=False)
    allowed_third_party = fields.ListField(subfield=fields.StringField(), required=False)

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        roots = set(self.session_options.get("root_packages") or [self.session_options["root_package"]])
        # The fields hold the parsed options on the instance (import-linter's own contracts read them so).
        sources = {m.name for m in cast("list[Module]", self.source_modules)}
        allowed = sources | {m.name for m in cast("list[Module] | None", self.allowed_modules) or []}
        third_party = set(cast("list[str] | None", self.allowed_third_party) or [])
        if third_party and self.session_options.get("include_external_packages") not in ("True", "true"):
            raise ValueError(
                f"contract {self.name!r}: allowed_third_party needs include_external_packages = true "
                "in [tool.importlinter], else the graph holds no third-party imports to check"
            )
        missing = sorted(m for m in allowed if m not in graph.modules)
        if missing:
            raise ValueError(f"contract {self.name!r}: no such module(s): {', '.join(missing)}")

        # Walk from every module of the sources through the allowed modules only, so that a
        # breach is reported once, at the import that leaves the allow-list.
        via: dict[str, tuple[str, ...]] = {}
        for source in sorted(sources):
            for module in sorted({source} | graph.find_descendants(source)):
                via[module] = ()
        queue = sorted(via)
        breaches: list[Breach] = []
        while queue:
            importer = queue.pop(0)
            for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                top = imported.split(".")[0]
                if top in roots:
                    if not _within(imported, allowed):
                        breaches.append(self._breach(graph, importer, imported, via[importer]))
                    elif imported not in via:
                        via[imported] = (*via[importer], importer)
                        queue.append(imported)
                elif top not in sys.stdlib_module_names and top not in third_party:
                    breaches.append(self._breach(graph, importer, imported, via[importer]))
        return ContractCheck(kept=not breaches, metadata={"breaches": breaches})

    @staticmethod
    def _breach(graph: grimp.ImportGraph, importer: str, imported: str, via: tuple[str, ...]) -> Breach:
        details = graph.get_import_details(importer=importer, imported=imported)
        return Breach(importer, imported, tuple(sorted(d["line_number"] for d in details)), via)

    def render_broken_contract(self, check: ContractCheck) -> None:
        for breach in check.metadata["breaches"]:
            lines = ", ".join(map(str, breach.lines))
            reached = f" (reached through {' -> '.join(breach.via)})" if breach.via else ""
            output.print_error(
                f"- {breach.importer} -> {breach.imported} (l.{lines}): {breach.imported} is not "
                f"on this contract's allow-list{reached}",
                bold=False,
            )
            output.new_line()
        output.print_error(
            "Either import something on the list, or, if the process this code runs in really has "
            "it, add it to allowed_modules / allowed_third_party in pyproject.toml.",
            bold=False,
        )
        output.new_line()
