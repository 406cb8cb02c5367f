"""Checks run by SGLang's own code: `python -m llm_fabric.engine.runtime.sglang_probe args WHEEL_DIR < cases.json`.

SGLang cannot run on this machine (its dependencies are CUDA-only), but the argument code of its
pinned wheel imports without them: `make engine` unpacks the wheel (downloaded without
dependencies) into `.cache/sglang/<version>/`, and this module, run by the engine venv's
interpreter (which has torch, msgspec and the other modules `sglang.srt.server_args` imports),
builds SGLang's own parser with `ServerArgs.add_cli_args` - the parser `sglang serve` and
`python -m sglang.launch_server` use - and parses each case with it. The parser registries are
imported first (`FunctionCallParser.ToolCallParserEnum`, `ReasoningParser.DetectorMap`), so the
`--tool-call-parser` / `--reasoning-parser` choices are the registries themselves (server_args
reads them when loaded, else its name lists); `--quantization` and `--kv-cache-dtype` come from its
choice lists.

Why importing, not reading the source with `ast`: the flags are declared as annotated fields spread
over twenty namespaces, plus flags added by hand in `add_cli_args` (the parser choices, deprecated
spellings); only running that code gives the parser SGLang really builds. The one thing skipped
is `sglang/__init__.py`, the frontend language API, which imports IPython and patches
transformers: the `sglang` package is registered with its path and without running it. The
registries import `sglang.utils`, whose notebook helpers import `IPython.display` at load time and
are not used by any parser: when IPython is absent (the engine venv has none), an empty
`IPython.display` module stands in for it.
`ServerArgs.resolve_once` / `check_server_args` are not run: they read the checkpoint and the GPU.

When a case enables custom logit processors, the fabric's SGLang loop guard is also serialized and
loaded through SGLang's `CustomLogitProcessor.to_str` / `from_str`, as the scheduler loads it.
Input: a JSON list of {"label", "args"} (args: what follows `python -m sglang.launch_server`).
Output: a JSON list of {"label", "ok", "problems"}. The fabric's side is `llm_fabric.engine.sglang.check`.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import sys
import types
from pathlib import Path
from typing import Any


class _ArgError(Exception):
    pass


def register_wheel(wheel_dir: Path) -> None:
    """Make `sglang.*` importable from an unpacked wheel without running `sglang/__init__.py`."""
    package = wheel_dir / "sglang"
    if not (package / "srt" / "server_args.py").is_file():
        raise FileNotFoundError(f"{wheel_dir} holds no unpacked SGLang wheel (no sglang/srt/server_args.py)")
    if str(wheel_dir) not in sys.path:
        sys.path.insert(0, str(wheel_dir))
    if "sglang" not in sys.modules:
        stub = types.ModuleType("sglang")
        stub.__path__ = [str(package)]
        sys.modules["sglang"] = stub


def _notebook_display_stand_in() -> None:
    """`sglang.utils` imports `HTML` and `display` from IPython for notebooks; parsers never call them."""
    if importlib.util.find_spec("IPython") is None:
        display = types.ModuleType("IPython.display")
        display.HTML = display.display = None  # type: ignore[attr-defined]
        package = types.ModuleType("IPython")
        package.display = display  # type: ignore[attr-defined]
        sys.modules |= {"IPython": package, "IPython.display": display}


def registries() -> dict[str, set[str]]:
    """SGLang's tool-call and reasoning parser registries (importing them makes them the parser's choices)."""
    _notebook_display_stand_in()
    from sglang.srt.function_call.function_call_parser import FunctionCallParser
    from sglang.srt.parser.reasoning_parser import ReasoningParser

    return {
        "tool_call_parser": {str(name) for name in FunctionCallParser.ToolCallParserEnum},
        "reasoning_parser": {str(name) for name in ReasoningParser.DetectorMap},
    }


def _parser() -> Any:
    from sglang.srt.server_args import ServerArgs

    class Checking(argparse.ArgumentParser):
        def error(self, message: str) -> Any:  # argparse would print usage and exit
            raise _ArgError(message)

    parser = Checking(prog="sglang serve", exit_on_error=False)
    ServerArgs.add_cli_args(parser)
    return parser


def _check_loop_guard() -> list[str]:
    from sglang.srt.sampling.custom_logit_processor import CustomLogitProcessor

    from llm_fabric.engine.runtime.sglang_loop_guard import SglangLoopGuard

    try:
        loaded = CustomLogitProcessor.from_str(SglangLoopGuard.to_str())
    # whatever dill or the import raises, the processor would not load in the scheduler either
    except Exception as exc:  # noqa: BLE001
        return [f"the loop guard does not load through SGLang's CustomLogitProcessor.from_str: {exc}"]
    if not isinstance(loaded, CustomLogitProcessor):
        return [f"the loop guard loads as {type(loaded).__name__}, not a CustomLogitProcessor"]
    return []


def check_case(parser: Any, known: dict[str, set[str]], args: list[str]) -> list[str]:
    from sglang.srt.server_args import ServerArgs

    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            namespace = parser.parse_args(args)
    except (_ArgError, argparse.ArgumentError) as exc:
        return [f"SGLang's parser: {exc}"]
    except SystemExit:
        return [f"SGLang's parser exited: {stderr.getvalue().strip()[-400:]}"]
    problems: list[str] = []
    for attr, names in known.items():
        value = getattr(namespace, attr, None)
        if value not in (None, "auto") and value not in names:
            problems.append(f"--{attr.replace('_', '-')} {value!r} is not registered in this SGLang")
    try:
        ServerArgs.from_cli_args(namespace)
    except (TypeError, ValueError) as exc:
        problems.append(f"SGLang's ServerArgs refused the parsed values: {exc}")
    # what SGLang's check_server_args would log or refuse later, for the flags the fabric sets
    if namespace.schedule_low_priority_values_first and not namespace.enable_priority_scheduling:
        problems.append("--schedule-low-priority-values-first has no effect without --enable-priority-scheduling")
    if namespace.enable_priority_scheduling and namespace.schedule_policy not in ("fcfs", "lof"):
        problems.append(f"priority scheduling needs --schedule-policy fcfs or lof, not {namespace.schedule_policy}")
    if namespace.served_model_name and ":" in namespace.served_model_name:
        problems.append("--served-model-name must not contain ':' (SGLang reserves it for LoRA adapters)")
    if namespace.enable_custom_logit_processor:
        problems += _check_loop_guard()
    return problems


def check_args(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    known = registries()  # before the parser: its parser choices are then the registries
    parser = _parser()
    results = []
    for case in cases:
        problems = check_case(parser, known, list(case["args"]))
        results.append({"label": case["label"], "ok": not problems, "problems": problems})
    return results


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(prog="python -m llm_fabric.engine.runtime.sglang_probe")
    cli.add_argument("check", choices=["args"])
    cli.add_argument("wheel_dir", type=Path)
    options = cli.parse_args(argv)
    answer = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):  # whatever SGLang prints on import stays out of the answer
        register_wheel(options.wheel_dir)
        results = check_args(json.load(sys.stdin))
    json.dump(results, answer)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
