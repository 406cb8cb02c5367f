"""The capacity model, the same for every engine: a model's shape (bytes per weight and per token of
KV), the parallel layouts, whether a recipe fits a set of GPUs and how many sessions it carries
(`model`), how fast (`speed`, calibrated on published measurements in `calibration`), and the capacity
of a site's deployments (`site`).

May import the recipe catalog (`engine.recipes`), hardware, site and the foundation; never a backend
(`engine.vllm`, `engine.sglang`): an engine's own adjustments live in its backend and build on this.
"""
