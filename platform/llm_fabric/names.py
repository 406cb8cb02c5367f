"""Names and numbers that cross processes: defined once here, read by the builders that render them and by
the runtimes (in the engine pod, in LiteLLM's proxy, in the prober) that act on them.

Standard library only and importing nothing of the fabric, so every runtime may import it. The engines'
own metric names are not here: each engine's backend says them (`engine.backend.EngineMetrics`).
"""

from __future__ import annotations

# The gateway re-reads the prober's rotation this often; a replica's preStop waits one period longer,
# so no new request is routed to it once it drains (serving.probes, gateway.runtime.rotation).
ROTATION_REFRESH_S = 5.0

# -- the canary prober (live.prober serves it, observability.canary renders it; the engine pod's probes,
# the gateway's rotation and the dashboards read it; docs/canary.md)
CANARY_SERVICE = "fabric-canary"
CANARY_PORT = 9400
CANARY_PROBER_LABELS = {"app.kubernetes.io/name": CANARY_SERVICE, "app.kubernetes.io/component": "canary"}
# its HTTP paths' segments: GET /replicas/DEPLOYMENT/INDEX (the verdict), POST /replicas/DEPLOYMENT/INDEX/drain
# (the preStop's notice), GET /rotation (what the gateway reads), GET /metrics, GET /healthz
CANARY_REPLICAS = "replicas"
CANARY_DRAIN = "drain"
CANARY_ROTATION = "rotation"
CANARY_METRICS = "metrics"
CANARY_HEALTH = "healthz"
# the rotation document's keys: {"replicas": [{"replica": "D/I", "deployment", "site", "in_rotation", ...}]}
ROTATION_REPLICAS = "replicas"
ROTATION_REPLICA = "replica"
ROTATION_DEPLOYMENT = "deployment"
ROTATION_SITE = "site"
ROTATION_IN = "in_rotation"
# the canary's series (labels: site, deployment, replica, node)
CANARY_PASS_METRIC = "fabric_canary_replica_pass"
CANARY_SIBLINGS_METRIC = "fabric_canary_sibling_agreement"
CANARY_REFERENCE_METRIC = "fabric_canary_reference_agreement"
CANARY_LATENCY_METRIC = "fabric_canary_latency_seconds"
CANARY_TOKENS_METRIC = "fabric_canary_tokens"
CANARY_IN_ROTATION_METRIC = "fabric_canary_in_rotation"
# a failing canary kept in rotation: live/prober.canary_holds, alert FabricCanaryHeldInRotation
CANARY_HELD_METRIC = "fabric_canary_held_in_rotation"
# the gateway's environment naming the prober (gateway.objects.gateway sets it, gateway.runtime.rotation reads it)
CANARY_URL_ENV = "FABRIC_CANARY_URL"
# its write token: a Secret the operator makes (docs/canary.md), never rendered with a value, mounted on the
# prober (which checks drain notices against it) and on the engine pods (whose preStop drain sends it)
CANARY_TOKEN_SECRET = "fabric-canary-token"
CANARY_TOKEN_DIR = "/etc/fabric-canary-token"
CANARY_TOKEN_FILE = f"{CANARY_TOKEN_DIR}/token"


def canary_url(namespace: str) -> str:
    """Where the gateway and the readiness probes of `namespace` reach the prober."""
    return f"http://{CANARY_SERVICE}.{namespace}.svc.cluster.local:{CANARY_PORT}"


def canary_replica_path(deployment: str, index: int | str) -> str:
    """The path of a replica's verdict; `+ "/" + CANARY_DRAIN` is its drain notice."""
    return f"/{CANARY_REPLICAS}/{deployment}/{index}"


# -- the GPU fault alerts (observability.rules renders them from the Xid table; `fabric nodes remediate`
# acts on them, the prober takes a node-fatal one's node out of rotation)
XID_ALERT_PREFIX = "FabricGpuXid"
XID_NODE_FATAL_ALERT = "FabricGpuXidNodeFatal"
XID_REPLICA_FATAL_ALERT = "FabricGpuXidReplicaFatal"
XID_APPLICATION_ALERT = "FabricGpuXidApplication"
XID_UNCLASSIFIED_ALERT = "FabricGpuXidUnclassified"

# -- a tenant's month and budgets (the report exporter, ledger.tenant_month; the dashboards read them)
TENANT_MONTH_TOKENS_METRIC = "fabric_tenant_month_tokens"
TENANT_BUDGET_TOKENS_METRIC = "fabric_tenant_budget_tokens"
TENANT_MONTH_PRICE_METRIC = "fabric_tenant_month_price"
TENANT_BUDGET_PRICE_METRIC = "fabric_tenant_budget_price"
# the gateway's refusals by reason (the dashboards read it; the gateway's admission has yet to export it)
GATEWAY_REFUSALS_METRIC = "fabric_gateway_refusals_total"

# -- the engine pod's loop guard (engine.runtime: vLLM's logits processor, SGLang's scheduler patch)
LOOP_GUARD_STOPS_METRIC = "fabric_loop_guard_stops"  # prometheus_client's name; it scrapes as ..._total
LOOP_GUARD_ENV_PREFIX = "FABRIC_LOOP_GUARD_"  # the engine commands set them, the runtime reads them

# -- LiteLLM's model list: the keys of a deployment's `model_info` (gateway.config writes them, the proxy's
# hooks and rotation read them) and of a key's `metadata` (the hooks write and read them)
MODEL_INFO_SITE = "fabric_site"
MODEL_INFO_DEPLOYMENT = "fabric_deployment"
MODEL_INFO_REPLICA = "fabric_replica"  # DEPLOYMENT/INDEX: an entry of one replica
MODEL_INFO_EXTERNAL = "fabric_external"
MODEL_INFO_INFERENCE = "fabric_inference"
MODEL_INFO_RELAY = "fabric_relay"
KEY_METADATA_TENANT = "fabric_tenant"
KEY_METADATA_RELAY = MODEL_INFO_RELAY

# -- the engine pod's mounts (serving.workloads and serving.weights mount them, engine.runtime.weights_check
# and weights.snapshot read them)
MODELS_DIR = "/models/hf"  # the engine container's HF_HOME: the node's model folder
WEIGHTS_CONFIG_DIR = "/etc/llm-fabric/weights"
WEIGHTS_CONFIG_FILE = "weights.json"

# -- Ansible variables set by the fabric and read by the playbooks
ENGINE_CACHE_MODELS_DIR_VAR = "fabric_engine_cache_models_dir"
