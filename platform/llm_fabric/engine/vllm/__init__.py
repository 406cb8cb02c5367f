"""The vLLM backend: its `vllm serve` command (`command`) and the check of the generated commands with
vLLM's own parser (`check`).

May import `engine.capacity`, `engine.recipes`, `engine.command`, `engine.loop_guard_config`, hardware
and the foundation; never another backend. Code that runs inside vLLM's process is in `engine.runtime`.
"""
