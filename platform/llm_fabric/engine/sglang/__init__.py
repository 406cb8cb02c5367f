"""The SGLang backend: its `sglang.launch_server` command (`command`), the capacity under SGLang's
memory semantics and DP attention (`capacity`) and the check of the generated commands with the pinned
SGLang wheel's parser (`check`), and the loop guard the gateway attaches to each request (`requests`).

May import `engine.capacity`, `engine.recipes`, `engine.command`, `engine.loop_guard_config`, hardware
and the foundation; never another backend. Code that runs inside SGLang's process is in `engine.runtime`.
"""
