"""The tenant gateway: LiteLLM's proxy configured from the site repo and the plan, with the fabric's hooks.

`config` generates LiteLLM's config and the hook settings; `keys` issues and revokes tenant keys;
`run` starts the proxy locally. `hooks` (with `settings`, `policy`, `admission`, `meter`) runs inside
the proxy's own process and venv and imports only those and the foundation (import-linter keeps it
so). May import deploy's layer below: plan, policies, engine, site and the foundation.
"""
