"""Checks that run INSIDE the vLLM environment: `python -m llm_fabric.engine.runtime.vllm_probe args < cases.json`.

vLLM's argument parser rejects unknown flags and bad types but accepts any quantization,
tool-parser, reasoning-parser or load-format name; those are checked here against vLLM's own registries
(`QUANTIZATION_METHODS`, `ToolParserManager`, `ReasoningParserManager`, the model loaders) and logits processors
are loaded by their class name. Input: a JSON list of {"label", "args"} (args: what follows
`vllm serve`, model first). Output: a JSON list of {"label", "ok", "problems"}.
The fabric's side of this (building the cases, running this module) is `llm_fabric.engine.vllm.check`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from typing import Any


class _ArgError(Exception):
    pass


def _parser() -> Any:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    class Checking(FlexibleArgumentParser):  # type: ignore[misc]
        def error(self, message: str) -> Any:  # argparse would print usage and exit
            raise _ArgError(message)

    return make_arg_parser(Checking())


def _registries() -> dict[str, set[str]]:
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS
    from vllm.model_executor.model_loader import _LOAD_FORMAT_TO_MODEL_LOADER
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager

    return {
        "quantization": set(QUANTIZATION_METHODS),
        "tool_call_parser": set(ToolParserManager.list_registered()),
        "reasoning_parser": set(ReasoningParserManager.list_registered()),
        # `--load-format runai_streamer` on pinned replicas (serving/weights.py); no public list in 0.32
        "load_format": set(_LOAD_FORMAT_TO_MODEL_LOADER),
    }


def _check_logits_processors(names: list[str]) -> list[str]:
    from vllm.v1.sample.logits_processor import _load_logitsprocs_by_fqcns

    try:
        _load_logitsprocs_by_fqcns(names)
    except (RuntimeError, ValueError, AttributeError) as exc:
        return [f"--logits-processors: {exc} ({exc.__cause__})" if exc.__cause__ else f"--logits-processors: {exc}"]
    return []


def check_case(parser: Any, registries: dict[str, set[str]], args: list[str]) -> list[str]:
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            namespace = parser.parse_args(args)
    except _ArgError as exc:
        return [f"vLLM's parser: {exc}"]
    except SystemExit:
        return [f"vLLM's parser exited: {stderr.getvalue().strip()[-400:]}"]
    problems = []
    for attr, known in registries.items():
        value = getattr(namespace, attr, None)
        if value not in (None, "") and value not in known:  # '' is vLLM's 'none'
            flag = "--" + attr.replace("_", "-")
            problems.append(f"{flag} {value!r} is not registered in this vLLM (known: {', '.join(sorted(known))})")
    if getattr(namespace, "logits_processors", None):
        problems += _check_logits_processors(list(namespace.logits_processors))
    return problems


def check_args(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    parser, registries = _parser(), _registries()
    results = []
    for case in cases:
        problems = check_case(parser, registries, list(case["args"]))
        results.append({"label": case["label"], "ok": not problems, "problems": problems})
    return results


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(prog="python -m llm_fabric.engine.runtime.vllm_probe")
    cli.add_argument("check", choices=["args"])
    cli.parse_args(argv)
    cases = json.load(sys.stdin)
    json.dump(check_args(cases), sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
