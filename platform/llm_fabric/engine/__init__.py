"""Serving engines (vLLM, SGLang): recipes (engine/models/*.yaml), capacity, engine arguments and their check.

`runtime/` is code that runs inside the engine's own process (loop guard, argument probe) and
imports nothing of the fabric's core; `local/` runs the CPU engine for tests and the demo. May
import hardware, site and the foundation.
"""
