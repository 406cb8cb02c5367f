"""Code that runs inside the engine's process (vLLM plugins and probes), shipped in the engine image.

Imports nothing of llm_fabric outside this package: the engine's environment has none of the
fabric's dependencies.
"""
