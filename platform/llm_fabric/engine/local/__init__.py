"""The local CPU engine that `fabric engine run --local` starts: vLLM on this machine (server) with the tiny
random-weight model (tiny_model, `fabric engine tiny-model`) standing in for the recipe's checkpoint.

For a contributor's smoke test, the demo and the tests; nothing here is deployed. May import
`engine.process` and the foundation only (import-linter), and only the CLI imports it.
"""
