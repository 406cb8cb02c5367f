"""Code that runs inside the engine's process (vLLM and SGLang plugins, argument probes), shipped in the images.

Imports nothing of llm_fabric outside this package: the engine's environment has none of the
fabric's dependencies.
"""
