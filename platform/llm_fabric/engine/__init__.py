"""Serving engines: the recipe catalog (engine/models/*.yaml), the capacity model, and one backend per
engine (vLLM, SGLang) behind one protocol, registered in one place.

`recipes` is the catalog; `capacity/` the model every engine shares; `backend` the protocol and
`backends` the registry (name -> backend); `command` what every builder takes (`ServingArgs`) and gives
(`EngineCommand`); `vllm/` and `sglang/` the backends (command, own capacity, argument check). `runtime/`
is code that runs inside the engine's own process (loop guard, argument probes) and imports nothing of
the fabric's core; `local/` runs the CPU engine for tests and the demo. May import hardware, site and
the foundation.
"""
