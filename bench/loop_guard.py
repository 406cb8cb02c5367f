"""Cost of the loop guard per generated token (target: < 5 µs per token).

Runs the detector that the vLLM logits-processor plugin runs for every token of every request,
with the default settings, on: Zipf-distributed "text" (the common case), "code" (a few very
frequent indentation/newline tokens), and requests that turn into a loop after 256 tokens of text:
a seed-000 style 8-token loop, and a "!!!" run of one token (the guard ends each such request when
it fires; a fresh detector starts, as a new request would). The target is met when the worst median
of those is < 5 µs per token. Two degenerate lines are printed for information, not judged: requests
that are nothing but a 1-token run (64 tokens until the guard fires, up to 64 matching periods per
token) and a 1-token run under a guard that never fires.

    .venv/bin/python bench/loop_guard.py [--tokens 200000] [--runs 7]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from llm_fabric.engine.runtime.loop_detect import LoopDetector, LoopGuardSettings

TARGET_US = 5.0


def streams(n: int) -> dict[str, list[int]]:
    rng = random.Random(0)
    vocab = list(range(150_000))
    weights = [1.0 / (k + 1) for k in vocab]
    text = rng.choices(vocab, weights, k=n)

    def turning(loop: list[int]) -> list[int]:
        out: list[int] = []
        while len(out) < n:  # 256 tokens of text, then the loop for longer than the guard lets it run
            out += rng.choices(vocab, weights, k=256) + loop * (256 // len(loop))
        return out[:n]

    loop8 = turning([rng.randrange(150_000) for _ in range(8)])
    bangs = turning([0])
    code: list[int] = []
    while len(code) < n:  # a line: newline, indentation of 0-12 space tokens, then 3-12 Zipf tokens
        indent = [220] * rng.choice((0, 4, 8, 12))
        code += [10, *indent, *rng.choices(vocab[:5000], weights[:5000], k=rng.randint(3, 12))]
    return {"zipf text": text, "code": code[:n], "text, 8-token loop": loop8, "text, '!!!' run": bangs}


def per_token_us(tokens: list[int], settings: LoopGuardSettings, chunk: int) -> float:
    """A fresh detector every `chunk` tokens and whenever it fires: a looping request is ended there."""
    start = time.perf_counter()
    for offset in range(0, len(tokens), chunk):
        detector = LoopDetector(settings)
        for token in tokens[offset : offset + chunk]:
            if detector.feed(token):
                detector = LoopDetector(settings)
    return (time.perf_counter() - start) / len(tokens) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    worst = 0.0
    data = streams(args.tokens)
    for name, tokens in data.items():
        samples = [per_token_us(tokens, LoopGuardSettings(), chunk=4096) for _ in range(args.runs)]
        median = statistics.median(samples)
        worst = max(worst, median)
        print(f"{name:>20}: median {median:.2f} µs/token over {args.runs} runs of {len(tokens)} tokens")
    ones = [42] * args.tokens
    only = statistics.median(per_token_us(ones, LoopGuardSettings(), chunk=4096) for _ in range(args.runs))
    print(f"(information) requests of only a 1-token run: median {only:.2f} µs/token")
    never = LoopGuardSettings(min_repeats=10**6, min_span=10**6)
    patho = statistics.median(per_token_us(ones, never, chunk=4096) for _ in range(args.runs))
    print(f"(information) 1-token run, guard never firing: median {patho:.2f} µs/token")
    verdict = "met" if worst < TARGET_US else "MISSED"
    print(f"worst median {worst:.2f} µs/token; target < {TARGET_US} µs/token: {verdict}")
    return 0 if worst < TARGET_US else 1


if __name__ == "__main__":
    raise SystemExit(main())
