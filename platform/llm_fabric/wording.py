"""Counted nouns in messages: "1 GPU", "2 GPUs", so that no message says "1 problems".

Foundation: imports nothing of the fabric, so the gateway's runtime and the engine's may use it too.
"""

from __future__ import annotations


def count(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and the noun, singular for exactly one: count(1, "GPU") == "1 GPU", count(3, "entry", "entries")."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"
