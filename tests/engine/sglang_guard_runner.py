"""Drive the fabric's SGLang loop guard the way SGLang's sampler does, with SGLang's own processor interface.

Run by the engine venv's interpreter: `python sglang_guard_runner.py WHEEL_DIR < processor-string`.
SGLang's sampler (`layers/sampler.apply_custom_logit_processor`) and its `Req` need CUDA-only
packages, so the call is reproduced: the processor comes from SGLang's `CustomLogitProcessor.from_str`
(the string the gateway sends), gets the logits of its rows and, per row, the request's
`custom_params` plus `__req__`, a `weakref.proxy` of the request with `output_ids` (array 'q') and
`eos_token_ids`, as `Req.__init__` builds it. Each step the scripted next token gets the top logit;
the sampled token (argmax after the processor) is appended to the request's output. Prints JSON.
"""

from __future__ import annotations

import json
import random
import sys
import weakref
from array import array
from pathlib import Path

from llm_fabric.engine.runtime.sglang_probe import register_wheel

EOS, VOCAB = 2, 64


class Req:
    """The attributes of SGLang's Req the guard reads (no __slots__, as SGLang's)."""

    def __init__(self, rid: str) -> None:
        self.rid = rid
        self.output_ids = array("q")
        self.eos_token_ids = {EOS}


def main() -> None:
    register_wheel(Path(sys.argv[1]))
    import torch
    from sglang.srt.sampling.custom_logit_processor import CustomLogitProcessor

    from llm_fabric.engine.runtime import sglang_loop_guard
    from llm_fabric.engine.runtime.loop_detect import LoopDetector, LoopGuardSettings

    sent = sys.stdin.read()
    result: dict[str, object] = {"to_str_matches": sent == sglang_loop_guard.SglangLoopGuard.to_str()}
    processor = CustomLogitProcessor.from_str(sent)
    result["loaded"] = type(processor).__module__ + ":" + type(processor).__name__
    result["is_custom_logit_processor"] = isinstance(processor, CustomLogitProcessor)

    loop = [5, 6, 7, 8] * 40
    rng = random.Random(0)
    prose = [rng.randrange(10, VOCAB) for _ in range(160)]
    scripts = {"looping": loop, "prose": prose, "opted_out": loop, "tuned": loop}
    params = {"looping": {}, "prose": {}, "opted_out": {"loop_guard": False}, "tuned": {"loop_guard_min_span": 128}}
    reqs = {name: Req(name) for name in scripts}
    ended: dict[str, int | None] = dict.fromkeys(scripts)
    for step in range(160):
        live = [n for n in scripts if ended[n] is None]
        if not live:
            break
        logits = torch.zeros(len(live), VOCAB)
        for row, name in enumerate(live):
            logits[row, scripts[name][step]] = 10.0
        # SGLang adds the weak proxy to each request's custom params (Req.__init__)
        custom = [params[n] | {"__req__": weakref.proxy(reqs[n])} for n in live]
        out = processor(logits, custom)
        assert out.shape == logits.shape
        for row, name in enumerate(live):
            token = int(out[row].argmax())
            reqs[name].output_ids.append(token)
            if token == EOS:
                ended[name] = step
    expected = LoopDetector(LoopGuardSettings())
    first = next(i for i, t in enumerate(loop) if expected.feed(t))
    result["ended"] = ended
    result["detector_loops_at"] = first
    result["stops"] = sum(
        s.value for m in sglang_loop_guard.STOPS.collect() for s in m.samples if s.name.endswith("_total")
    )
    # the state lives on the request: when SGLang drops the request, nothing of it is left behind
    probe = weakref.ref(reqs["looping"])
    del reqs["looping"]
    result["request_freed"] = probe() is None
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
