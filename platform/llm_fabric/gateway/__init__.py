"""The tenant gateway: LiteLLM's proxy configured from the site repo and the plan, with the fabric's hooks.

`config` generates; `hooks` (auth, policy, admission, meter) runs inside the proxy; `run` starts it
locally; `keys` issues and revokes tenant keys. docs/gateway.md tells the whole request path.
"""
