"""The plan: which replica runs on which node and GPUs, with what engine args and capacity.

`document` is the versioned plan document every reader loads; `planning` makes it from a site repo
(policies, node classes, sizing, the solver in `solver/`); `figures`, `shortfalls`, `diff`, `report`
and `revision` explain it. May import policies, engine, hardware, site and the foundation.
"""
