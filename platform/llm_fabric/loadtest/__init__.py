"""Load against an engine or a gateway: configs for a real GPU site made from the plan (`fabric bench`), and the
known burst and agentic sessions that `fabric engine burst` sends to a local engine or gateway.

`inference_perf` mirrors the part of inference-perf's config schema the fabric writes; `from_plan`
fills it in per deployment from the plan and the site repo. May import deploy's layer and below:
gateway, plan, engine, site and the foundation. `burst` (prompt lengths of a p50 and p95, the
requests and their records) and `sessions` import the foundation only.
"""
