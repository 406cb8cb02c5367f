# The fabric image: llm-fabric with its dependencies, for what runs `fabric` in the cluster (the canary
# prober, deploy/resources/canary.py). The engine and gateway images carry llm-fabric without them.
#
# Build from the repository root (see docs/canary.md):
#   python -m pip wheel --no-deps -w dist .
#   docker build -f engine/images/fabric.Dockerfile -t REGISTRY/llm-fabric/fabric:0.1.0 .
ARG PYTHON_IMAGE=python:3.11-slim
FROM ${PYTHON_IMAGE}
COPY dist/llm_fabric-*.whl /tmp/
RUN python3 -m pip install --no-cache-dir /tmp/llm_fabric-*.whl \
 && rm /tmp/llm_fabric-*.whl \
 && fabric canary --help > /dev/null
USER 65534
ENTRYPOINT ["fabric"]
