"""Run recorded model outputs through the installed vLLM's parsers the way its chat serving layer does.

Run by the engine venv's interpreter (it imports vLLM): JSON families and cases on stdin, one JSON
result per case into the file named by the first argument (vLLM logs to stdout). For each family
it builds the parser class with
`ParserManager.get_parser(tool, reasoning, enable_auto_tools=True, is_harmony=..., tokenizer=...)`,
applies `adjust_request` on a throw-away instance (as the renderer does), and then, with fresh
instances, calls `set_prompt_token_ids` + `parse(text, request, enable_auto_tools=True,
model_output_token_ids=ids)` (non-streaming) and `parse_delta(delta_text, [id], request,
prompt_token_ids, finished=...)` once per generated token (streaming), as
`vllm/entrypoints/openai/chat_completion/serving.py` does.

The tokenizer is built here: byte-level BPE without merges (each byte one token) plus the family's
marker tokens as single added tokens, not special, so they are in the detokenized text like the
real checkpoints' `<think>`/`<tool_call>`. The text of a streamed step is what an incremental
detokenizer releases: a step that ends inside a multi-byte character releases nothing. Harmony
(gpt-oss) outputs are token ids of the real o200k_harmony encoding (`openai_harmony`, which
carries its vocabulary), since the Harmony parser reads token ids, not text.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from llm_fabric.engine.local.tiny_model import BOS, EOS, tokenizer_json


def build_tokenizer(folder: Path, markers: list[str]) -> Any:
    from vllm.tokenizers import get_tokenizer

    spec = tokenizer_json(markers)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tokenizer.json").write_text(json.dumps(spec))
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": BOS,
                "eos_token": EOS,
                "add_bos_token": False,
                "model_max_length": 1 << 20,
            }
        )
    )
    return get_tokenizer(str(folder))


def make_request(tools: list[dict[str, Any]], chat_kwargs: dict[str, Any]) -> Any:
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    return ChatCompletionRequest(
        model="m",
        messages=[{"role": "user", "content": "What is the weather in Brno?"}],
        tools=tools or None,
        tool_choice="auto" if tools else None,
        chat_template_kwargs=chat_kwargs or None,
    )


class Codec:
    """Text <-> token ids: the family's byte-level tokenizer, or the Harmony encoding for gpt-oss."""

    def __init__(self, tokenizer: Any, harmony: bool) -> None:
        self.tokenizer, self.harmony = tokenizer, None
        self.prompt = f"{BOS}user\nWhat is the weather in Brno?{EOS}\n{BOS}assistant\n"
        if harmony:
            from openai_harmony import HarmonyEncodingName, load_harmony_encoding

            self.harmony = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
            self.prompt = "<|start|>user<|message|>What is the weather in Brno?<|end|><|start|>assistant"

    def encode(self, text: str) -> list[int]:
        if self.harmony is not None:
            return list(self.harmony.encode(text, allowed_special="all"))
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: list[int], skip_special: bool) -> str:
        if self.harmony is not None:
            return str(self.harmony.decode(ids))
        return str(self.tokenizer.decode(ids, skip_special_tokens=skip_special))


def stream_texts(codec: Codec, ids: list[int], skip_special: bool) -> list[str]:
    """The text each generated token releases, as an incremental detokenizer would."""
    released, out = "", []
    for end in range(1, len(ids) + 1):
        text = codec.decode(ids[:end], skip_special)
        if text.endswith("\ufffd") or not text.startswith(released):
            out.append("")
            continue
        out.append(text[len(released) :])
        released = text
    return out


def stream(
    parser: Any, request: Any, ids: list[int], deltas: list[str], prompt_ids: list[int], step: int
) -> dict[str, Any]:
    """`parse_delta` over the output, `step` tokens per delta (several with speculative decoding or
    --stream-interval); the deltas assembled as a client would."""
    streamed: dict[str, Any] = {"reasoning": "", "content": "", "tool_calls": {}}
    for start in range(0, len(ids), step):
        delta = parser.parse_delta(
            "".join(deltas[start : start + step]),
            ids[start : start + step],
            request,
            prompt_token_ids=prompt_ids,
            finished=start + step >= len(ids),
        )
        if delta is None:
            continue
        streamed["reasoning"] += delta.reasoning or ""
        streamed["content"] += delta.content or ""
        for call in delta.tool_calls or []:
            slot = streamed["tool_calls"].setdefault(call.index, {"name": "", "arguments": ""})
            if call.function is not None:
                slot["name"] += call.function.name or ""
                slot["arguments"] += call.function.arguments or ""
    streamed["tool_calls"] = [streamed["tool_calls"][i] for i in sorted(streamed["tool_calls"])]
    return streamed


def _calls(calls: Any) -> list[dict[str, Any]]:
    return [{"name": c.name, "arguments": c.arguments} for c in calls or []]


def run_case(parser_cls: Any, tokenizer: Any, family: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
    chat_kwargs = family.get("chat_template_kwargs") or {}
    request = make_request(case.get("tools") or family["tools"], chat_kwargs)
    request = parser_cls(tokenizer, request.tools, chat_template_kwargs=chat_kwargs).adjust_request(request)
    codec = Codec(tokenizer, bool(family.get("harmony")))
    prompt_ids = codec.encode(codec.prompt)
    ids = codec.encode(case["output"])
    skip = bool(getattr(request, "skip_special_tokens", True))
    text = codec.decode(ids, skip)

    parser = parser_cls(tokenizer, request.tools, chat_template_kwargs=chat_kwargs)
    parser.set_prompt_token_ids(prompt_ids)
    reasoning, content, calls = parser.parse(text, request, enable_auto_tools=True, model_output_token_ids=ids)
    nonstream = {"reasoning": reasoning, "content": content, "tool_calls": _calls(calls)}

    deltas = stream_texts(codec, ids, skip)
    streams = {
        mode: stream(
            parser_cls(tokenizer, request.tools, chat_template_kwargs=chat_kwargs),
            request,
            ids,
            deltas,
            prompt_ids,
            step,
        )
        for mode, step in (("stream", 1), ("stream_chunked", 5))
    }
    return {
        "nonstream": nonstream,
        **streams,
        "tokens": len(ids),
        "markers_in_text": [m for m in family["markers"] if m in text],
    }


def run_family(family: dict[str, Any], folder: Path) -> list[dict[str, Any]]:
    from vllm.parser.parser_manager import ParserManager

    tokenizer = build_tokenizer(folder / family["id"], family["markers"])
    results = []
    try:
        parser_cls = ParserManager.get_parser(
            tool_parser_name=family["tool_parser"],
            reasoning_parser_name=family["reasoning_parser"],
            enable_auto_tools=True,
            model_name=family["id"],
            is_harmony=bool(family.get("harmony")),
            tokenizer=tokenizer,
        )
    # a parser that cannot even be built is a finding for every case of the family, whatever it raises
    except Exception as exc:  # noqa: BLE001
        failure = f"{type(exc).__name__}: {exc}"
        return [{"family": family["id"], "case": c["id"], "setup_error": failure} for c in family["cases"]]
    for case in family["cases"]:
        named = next(c for c in parser_cls.__mro__ if not c.__name__.startswith("_"))  # past get_parser's wrapper
        result: dict[str, Any] = {"family": family["id"], "case": case["id"], "parser": named.__name__}
        try:
            result |= run_case(parser_cls, tokenizer, family, case)
        # a parser crashing on an output is a finding to report, not a reason to stop the suite
        except Exception as exc:  # noqa: BLE001
            result["error"] = f"{type(exc).__name__}: {exc}"
        results.append(result)
    return results


def message_fields() -> dict[str, Any]:
    """The field names of the messages the chat API sends (gateways map reasoning by name)."""
    from vllm.entrypoints.generate.base.protocol import DeltaMessage
    from vllm.entrypoints.openai.chat_completion.protocol import ChatMessage

    return {
        "family": "_api",
        "case": "message_fields",
        "ChatMessage": sorted(ChatMessage.model_fields),
        "DeltaMessage": sorted(DeltaMessage.model_fields),
    }


def main() -> None:
    families = json.load(sys.stdin)
    with tempfile.TemporaryDirectory() as tmp:
        results = [r for family in families for r in run_family(family, Path(tmp))]
    results.append(message_fields())
    Path(sys.argv[1]).write_text(json.dumps(results))


if __name__ == "__main__":
    main()
