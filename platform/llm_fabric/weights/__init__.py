"""The weights every replica loads: the checkpoints a plan needs (needs) downloaded into a node's model
cache with huggingface_hub (stage), the cache's snapshots hashed (snapshot) and pinned in the site repo's
`weights.lock` (pin, lock_file), and a cache verified with the pod's own check (verify;
engine/runtime/weights_check). docs/weights.md."""
