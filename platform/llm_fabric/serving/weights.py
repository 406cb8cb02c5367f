"""A replica's weights checked before its engine starts: the site's `weights.lock` as a ConfigMap, and an
init container that runs the pod's check (engine/runtime/weights_check) against the node's model cache.

Only replicas whose checkpoint the lock pins get the check; without a lock the pods are as before. The
ConfigMap holds the lock as JSON, the one format the engine image's standard library reads. The pod
template carries the pinned revision as an annotation, so a lock that pins other bytes restarts the
replica (the rollout's `weights` reason) and the check runs again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from llm_fabric.engine.backends import backend
from llm_fabric.kube import labels as L
from llm_fabric.kube.manifests import Manifest
from llm_fabric.names import MODELS_DIR, WEIGHTS_CONFIG_DIR, WEIGHTS_CONFIG_FILE
from llm_fabric.plan.document import ReplicaPlacement
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.weights_lock import LockedCheckpoint

CONFIGMAP = "llm-fabric-weights-lock"
LOCK_KEY = WEIGHTS_CONFIG_FILE
MOUNT = WEIGHTS_CONFIG_DIR
VOLUME = "weights-lock"
HF_HOME = MODELS_DIR  # the engine container's HF_HOME (serving.workloads)
CHECK_MODULE = "llm_fabric.engine.runtime.weights_check"
REVISION_ANNOTATION = "llm-fabric.io/weights-revision"


@dataclass(frozen=True)
class PinnedWeights:
    checkpoint: str
    locked: LockedCheckpoint


def pinned_weights(site: SiteRepo, replica: ReplicaPlacement) -> PinnedWeights | None:
    """The lock's entry for the checkpoint the replica loads (the plan's), if pinned."""
    locked = site.weights_lock.checkpoints.get(replica.checkpoint)
    return PinnedWeights(replica.checkpoint, locked) if locked is not None else None


def lock_configmap(namespace: str, pinned: list[PinnedWeights]) -> Manifest:
    """The site's pinned checkpoints (only those its replicas load) as compact JSON, keys sorted: stable bytes
    and far below a ConfigMap's 1 MiB for any real checkpoint (about 150 bytes a file)."""
    # what the pods check: the review's fields (`ref`, `accept_ref`) stay in the site repo
    checkpoints = {
        p.checkpoint: p.locked.model_dump(include={"revision", "files"})
        for p in sorted(pinned, key=lambda p: p.checkpoint)
    }
    body = json.dumps({"version": 1, "checkpoints": checkpoints}, sort_keys=True, separators=(",", ":"))
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIGMAP, "namespace": namespace, "labels": L.common_labels("serving", CONFIGMAP)},
        "data": {LOCK_KEY: body},
    }


def check_container(replica: ReplicaPlacement, image: str, pinned: PinnedWeights) -> dict[str, Any]:
    command = [backend(replica.engine).probe_traits.python, "-m", CHECK_MODULE]
    args = ["--lock", f"{MOUNT}/{LOCK_KEY}", "--root", HF_HOME, "--checkpoint", pinned.checkpoint]
    return {
        "name": "weights-check",
        "image": image,
        "command": command,
        "args": args,
        "volumeMounts": [
            {"name": "models", "mountPath": "/models", "readOnly": True},
            {"name": VOLUME, "mountPath": MOUNT, "readOnly": True},
        ],
    }


def attach_check(pod_spec: dict[str, Any], replica: ReplicaPlacement, pinned: PinnedWeights) -> None:
    """The init container and the lock's volume added to an engine pod (its engine container's image)."""
    image = pod_spec["containers"][0]["image"]
    pod_spec["initContainers"] = [check_container(replica, image, pinned)]
    pod_spec["volumes"].append({"name": VOLUME, "configMap": {"name": CONFIGMAP}})


# vLLM's Run:ai streamer reads a checkpoint's safetensors concurrently, overlapping the reads with moving the
# tensors to the GPUs (seed 002: ~25x faster cold starts): an engine's `streamed_load_format`.
# Only where the weights are staged and checked on the node (a pinned checkpoint): the streamer reads local
# files; only for an engine whose images carry one; never over a recipe's own --load-format (mistral: a
# consolidated checkpoint, not the Hugging Face safetensors the streamer reads).
def loader_args(replica: ReplicaPlacement, args: list[str]) -> list[str]:
    streamed = backend(replica.engine).streamed_load_format
    if streamed is None or any(a == "--load-format" or a.startswith("--load-format=") for a in args):
        return args
    return [*args, "--load-format", streamed]


def revision_annotation(pinned: PinnedWeights) -> dict[str, str]:
    return {REVISION_ANNOTATION: pinned.locked.revision}
