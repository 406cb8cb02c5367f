"""Executed documentation: the `$ fabric ...` blocks of docs/*.md, run by Sybil with this parser.

A fenced block whose first line starts with `$ ` is a transcript: each `$ COMMAND` line is run by
bash (one session per block, so `echo $?` and variables work), and the lines under it are what it
prints. A line `(exit N)` says the command's exit code (0 when absent). Each block runs in a fresh
sandbox: a folder holding `site`, the reference federation made by `fabric init site --example
cerit-sc`, with `$SITE` set to `site`. Markers, as HTML comments just before a block:

    <!-- skip: next "needs a Kubernetes cluster" -->   Sybil's own: the block is reported skipped, with the reason
    <!-- doc-setup: SHELL COMMANDS -->                   run in the sandbox before the next block, output unchecked;
                                                         it may change what a reader already has (a commit, an edit
                                                         of site/), never create a file the block names: that
                                                         block fails (the reader typing it has no such file)

Comparison, after masking what changes from run to run (commit ids, key ids, signatures, times,
the sandbox's path, `/tmp/...` paths of the run the docs were written from):
- every line the docs show appears in the output, in order; the output may hold more (the docs
  abridge: tables cut after a few rows, long lists); runs of spaces compare equal (table padding);
- `...` inside a line matches any text; a line that is only `...` says lines were left out.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from sybil import Document, Example, Region
from sybil.parsers.markdown.lexers import DirectiveInHTMLCommentLexer, RawFencedCodeBlockLexer

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
_RC = "__DOC_RC__"
_SETUP_DONE = "__DOC_SETUP_DONE__"
_LISTING = "find . -path ./site/.git -prune -o -mindepth 1 -print"
_EXIT = re.compile(r"^\(exit (\d+)(;.*)?\)$")
_MASKS = [
    (re.compile(r"\b[0-9a-f]{40}\b"), "<commit>"),
    (re.compile(r"\b[0-9a-f]{7,12}\.\.\.(?=\W)"), "<commit>"),
    (re.compile(r"\b[0-9a-f]{16}\b"), "<key-id>"),
    (re.compile(r"\b[0-9a-f]{12}\b"), "<short-id>"),
    (re.compile(r"\bfk-[A-Za-z0-9_-]{20,}"), "<api-key>"),
    (re.compile(r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)?"), "<time>"),
    (re.compile(r"[A-Za-z0-9+/]{80,}={0,2}"), "<base64>"),
    (re.compile(r"(?:/tmp|/var/tmp)(?:/[\w.+-]+)+?/(?=(?:site|report[\w-]*|deploy|out)\b)"), ""),
    (re.compile(r"(?<![\w.])\d+(\.\d+)? ?(s|ms)\b"), "<duration>"),
]


@dataclass
class Command:
    line: str
    expected: list[str]
    exit_code: int


def parse_transcript(source: str) -> list[Command]:
    commands: list[Command] = []
    for raw in source.splitlines():
        line = raw.rstrip()
        if line.startswith("$ "):
            commands.append(Command(line[2:], [], 0))
        elif commands:
            match = _EXIT.match(line.strip())
            if match:
                commands[-1].exit_code = int(match.group(1))
            else:
                commands[-1].expected.append(line)
    # `$ echo $?` and the number under it state the previous command's exit code
    for previous, command in itertools.pairwise(commands):
        said = [line.strip() for line in command.expected if line.strip()]
        if command.line.strip() == "echo $?" and len(said) == 1 and said[0].isdigit():
            previous.exit_code = int(said[0])
    return commands


def mask(text: str, sandbox: Path) -> str:
    text = text.replace(f"{sandbox}/", "").replace(str(sandbox), ".")
    for pattern, replacement in _MASKS:
        text = pattern.sub(replacement, text)
    return text


def _line_matches(expected: str, actual: str) -> bool:
    # table cells are padded to the widest value: runs of spaces compare equal
    expected, actual = " ".join(expected.split()), " ".join(actual.split())
    if "..." not in expected:
        return expected == actual
    parts = [re.escape(p) for p in expected.split("...")]
    return re.fullmatch(".*".join(parts), actual) is not None


def missing_lines(expected: list[str], actual: list[str]) -> list[str]:
    """The expected lines (in order) not found in `actual`; [] when every one appears in order."""
    position = 0
    missing = []
    for want in expected:
        if not want.strip() or want.strip() == "...":
            continue
        for index in range(position, len(actual)):
            if _line_matches(want.strip(), actual[index].strip()):
                position = index + 1
                break
        else:
            missing.append(want)
    return missing


_TEMPLATE: list[Path] = []  # the session's one `fabric init` result, copied for each block


def sandbox() -> Path:
    """A fresh folder with `site`, the reference federation (its private key beside it).

    `fabric init site --example cerit-sc` runs once per test process and each block gets a copy of what it
    made: hundreds of blocks, each a second or two of `init`, were minutes of the suite. The copies share a
    key and commit ids, which the comparison masks, and no block sees another's changes.
    """
    if not _TEMPLATE:
        template = Path(tempfile.mkdtemp(prefix="fabric-doc-template-"))
        subprocess.run(
            [str(BIN / "fabric"), "init", "site", "--example", "cerit-sc"], cwd=template, env=environment(template),
            capture_output=True, check=True, timeout=120,
        )  # fmt: skip
        _TEMPLATE.append(template)
    root = Path(tempfile.mkdtemp(prefix="fabric-doc-"))
    shutil.copytree(_TEMPLATE[0], root, symlinks=True, dirs_exist_ok=True)
    return root


def environment(root: Path) -> dict[str, str]:
    # the sandbox's repo and key, not the caller's
    env = {
        k: v for k, v in os.environ.items() if k not in ("FABRIC_SITE_REPO", "FABRIC_ENROLLMENT_KEY", "FABRIC_DEBUG")
    }
    return env | {
        "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        "SITE": "site",
        "REPO": str(REPO),
        "PYTHONPATH": os.pathsep.join([str(REPO / "platform"), str(REPO), env.get("PYTHONPATH", "")]),
        "COLUMNS": "200",
        "NO_COLOR": "1",
    }


def _listing(root: Path) -> set[str]:
    proc = subprocess.run(["bash", "-c", _LISTING], cwd=root, capture_output=True, text=True, check=True)
    return {line.removeprefix("./") for line in proc.stdout.splitlines()}


def hidden_inputs(created: set[str], commands: list[Command]) -> list[str]:
    """What a hidden set-up created that the block's commands name: the outermost new path of each (a new
    folder, not every file in it), named as a whole word of a command line."""
    outermost = sorted(p for p in created if not any(p.startswith(f"{q}/") for q in created))
    text = "\n".join(c.line for c in commands)
    return [p for p in outermost if re.search(rf"(?<![\w./-]){re.escape(p)}(?![\w-])", text)]


def run_block(commands: list[Command], root: Path, setup: str) -> list[tuple[Command, str, int]]:
    # a set-up that fails stops the block: its commands would fail for the wrong reason
    before = _listing(root) if setup else set()
    listing = f'echo "{_SETUP_DONE}-FILES"; (cd "{root}" && {_LISTING})' if setup else ":"  # a set-up may cd
    script = ["set +e", f"{{ {setup or ':'}\n}} || exit 97", listing, f'echo "{_SETUP_DONE}"']
    for number, command in enumerate(commands):
        script += [command.line, f'__rc=$?; echo "{_RC} {number} $__rc"; (exit $__rc)']
    proc = subprocess.run(
        ["bash", "-c", "\n".join(script)], cwd=root, env=environment(root), capture_output=False,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600, check=False,
    )  # fmt: skip
    results = []
    setup_output, _, transcript = proc.stdout.partition(f"{_SETUP_DONE}\n")
    if proc.returncode == 97 and _SETUP_DONE not in proc.stdout:
        raise AssertionError(f"the block's set-up failed:\n{proc.stdout}")
    if setup:
        # a reader types the block as shown: a file it reads that only a hidden set-up made fails for them
        after = {line.removeprefix("./") for line in setup_output.partition(f"{_SETUP_DONE}-FILES\n")[2].splitlines()}
        hidden = hidden_inputs(after - before, commands)
        if hidden:
            raise AssertionError(
                f"the block reads {', '.join(hidden)}, which only its hidden `doc-setup` creates: a reader typing "
                "the block has no such file; show the step that makes it as a `$` line of the page"
            )
    # every parsed command must have run: a syntax error, an `exit` or a set-up that stops the shell runs
    # none (or not all) of them, and a block whose commands did not run checks nothing
    ran = len(re.findall(rf"^{_RC} \d+ \d+$", transcript, flags=re.M))
    if ran < len(commands):
        raise AssertionError(
            f"only {ran} of the block's {len(commands)} commands ran (bash stopped: a syntax error, an exit, "
            f"or the set-up):\n{setup_output}{transcript}"
        )
    chunks = re.split(rf"^{_RC} (\d+) (\d+)$\n?", transcript, flags=re.M)
    outputs = chunks[0::3]
    for index, rc in zip(chunks[1::3], chunks[2::3], strict=True):
        results.append((commands[int(index)], outputs[int(index)], int(rc)))
    return results


def document_namespace(namespace: dict[str, object]) -> None:
    """What `skip: next if(...)` conditions may name.

    `sglang_wheel`: the wheel `make engine` unpacks is there. Under FABRIC_REQUIRE_ENGINE=1 (`make test`,
    hence CI, which runs `make engine` first) it counts as there, so a missing wheel fails the block
    instead of skipping it, as the engine tests do (tests/fixtures/engine.py).
    """
    from llm_fabric.engine.sglang.check import wheel_dir
    from llm_fabric.errors import UsageError

    try:
        namespace["sglang_wheel"] = wheel_dir().is_dir()
    except UsageError:
        namespace["sglang_wheel"] = os.environ.get("FABRIC_REQUIRE_ENGINE") == "1"


class TranscriptParser:
    """Sybil parser: `doc-setup` comments and `$ ` transcript blocks."""

    def __init__(self) -> None:
        self.blocks = RawFencedCodeBlockLexer(
            info_pattern=re.compile(r"(?P<language>[a-z]*)\n(?=\$ )"), mapping={"source": "source"}
        )
        self.setups = DirectiveInHTMLCommentLexer(directive="doc-setup", arguments=".+?")

    def __call__(self, document: Document) -> Iterable[Region]:
        for region in self.setups(document):
            region.parsed = region.lexemes["arguments"]
            region.evaluator = self.evaluate_setup
            yield region
        for region in self.blocks(document):
            region.parsed = parse_transcript(str(region.lexemes["source"]))
            region.evaluator = self.evaluate
            yield region

    @staticmethod
    def evaluate_setup(example: Example) -> None:
        example.namespace["doc_setup"] = str(example.parsed)

    @staticmethod
    def evaluate(example: Example) -> str | None:
        setup = example.namespace.pop("doc_setup", "")
        root = sandbox()
        problems = []
        for command, output, rc in run_block(example.parsed, root, setup):
            actual = mask(output, root).splitlines()
            expected = [mask(line, root) for line in command.expected]
            missing = missing_lines(expected, actual)
            if rc != command.exit_code or missing:
                problems.append(
                    f"$ {command.line}\n  exit {rc}, the docs say {command.exit_code}\n"
                    + "".join(f"  not printed: {m}\n" for m in missing)
                    + "  printed:\n"
                    + "".join(f"    {a}\n" for a in actual[:40])
                )
        return "\n".join(problems) or None
