# The gateway image: upstream LiteLLM (pinned as in pyproject's `gateway` extra) plus llm-fabric's hooks.
# The generated config loads `llm_fabric.gateway.runtime.hooks` (custom_auth and callbacks), so a stock LiteLLM
# image would refuse to start. The hooks need only pydantic and fastapi, which LiteLLM ships, hence
# `--no-deps`; prometheus_client serves the gateway's /metrics, redis (pinned as in the `gateway` extra) talks to the
# counter store (docs/gateway.md, "Limits across pods").
#
# Build from the repository root (see docs/gateway.md, "In the cluster"):
#   python -m pip wheel --no-deps -w dist .
#   docker build -f engine/images/gateway.Dockerfile -t REGISTRY/llm-fabric/litellm:v1.108.7-fabric0.1.0 .
# then set `gateway.image` in fabric.yaml to what you pushed.
ARG LITELLM_IMAGE=ghcr.io/berriai/litellm:v1.108.7
FROM ${LITELLM_IMAGE}
COPY dist/llm_fabric-*.whl /tmp/
RUN python3 -m pip install --no-deps --no-cache-dir /tmp/llm_fabric-*.whl prometheus-client==0.26.0 redis==8.1.0 \
 && rm /tmp/llm_fabric-*.whl \
 && LITELLM_LOCAL_MODEL_COST_MAP=True python3 -c "import llm_fabric.gateway.runtime.hooks"
