"""Load-test configurations for a real GPU site, made from the plan: inference-perf's (`fabric bench`).

`inference_perf` mirrors the part of inference-perf's config schema the fabric writes; `from_plan`
fills it in per deployment from the plan and the site repo. May import deploy's layer and below:
gateway, plan, engine, site and the foundation.
"""
