"""The tenant gateway: LiteLLM's proxy configured from the site repo and the plan, with the fabric's hooks.

Config-time code: `config` generates LiteLLM's config and the hook settings; `keys` issues and revokes
tenant keys; `run` starts the proxy locally; `site_checks` validates the gateway part of a site repo.
These may import deploy's layer below: plan, policies, engine, site and the foundation.
`runtime/` runs inside the proxy's own process and imports only the foundation.
"""
