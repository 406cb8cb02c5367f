"""The weights every replica loads: the site repo's `weights.lock` written from a model cache's files, and
that cache verified against it (the operator's side of the pod's check, engine/runtime/weights_check.py).

`fabric weights stage` (the download into the cache with huggingface_hub) is not built yet: the
package is not a dependency of the fabric's environment (docs/weights.md)."""
