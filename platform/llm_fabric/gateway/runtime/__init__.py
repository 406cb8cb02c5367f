"""The gateway's code that runs inside LiteLLM's proxy process and venv.

`hooks` (auth and callbacks LiteLLM loads by module path from the rendered config) with `settings`
(the hook settings file and env), `policy` (routing and data-class checks), `admission` (per-tenant
limits) and `meter` (request records). May import only the foundation (basemodel, errors and the
request-record schema): the gateway venv holds LiteLLM and llm-fabric without its dependencies, so
import-linter forbids everything else.
"""
