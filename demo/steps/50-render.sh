#!/usr/bin/env bash
# Render the demo site's stacks as YAML (what `pulumi up` would create) and validate every manifest:
# core kinds with kubernetes-validate --strict, custom resources against their CRD schemas when the
# shared CRD folder is beside the checkout.
set -euo pipefail
out="$DEMO_DIR/rendered"
echo "\$ fabric render $SITE --out $out"
rc=0
"$FABRIC" render "$SITE" --out "$out" || rc=$?
if [ "$rc" -eq 3 ]; then
  # an incomplete plan is never deployed; the stacks that do not need it still render
  echo "(exit 3: the plan is incomplete, see step 40; rendering allocations and observability only)"
  "$FABRIC" render "$SITE" --out "$out" --stack allocations --stack observability
elif [ "$rc" -ne 0 ]; then
  exit "$rc"
fi
echo "\$ validate the rendered manifests"
"$PYTHON" - "$out" "$REPO_ROOT" <<'PY'
import sys
from pathlib import Path

import jsonschema
import yaml
from kubernetes_validate import utils as kv

out, repo = Path(sys.argv[1]), Path(sys.argv[2])
sys.path.insert(0, str(repo))
from tests.deploy.crdschemas import CRDS, validate_custom  # noqa: E402

core = custom = 0
for path in sorted(out.rglob("*.yaml")):
    doc = yaml.safe_load(path.read_text())
    if doc.get("kind") == "Kustomization":
        continue
    group = doc["apiVersion"].rsplit("/", 1)[0] if "/" in doc["apiVersion"] else ""
    if group in ("", "apps") or (group.endswith(".k8s.io") and not group.endswith(".x-k8s.io")):
        kv.validate(doc, "1.33.0", strict=True)
        core += 1
    elif CRDS.is_dir():
        validate_custom(doc)
        custom += 1
note = "" if CRDS.is_dir() else f" (custom resources not checked: {CRDS} is absent)"
print(f"valid: {core} Kubernetes manifests (1.33, strict), {custom} custom resources against their CRDs{note}")
PY
