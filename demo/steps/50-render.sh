#!/usr/bin/env bash
# Render the demo site's stacks as YAML (what `pulumi up` would create), one folder per site (brno and
# vienna: each holds only the replicas placed there), and validate every manifest with
# `fabric render --check`: core kinds with kubernetes-validate --strict for the site's Kubernetes version,
# custom resources against their CRD schemas when the shared CRD folder is beside the checkout.
set -euo pipefail
out="$DEMO_DIR/rendered"
crds="$REPO_ROOT/../shared/crds"
check=(--check)
if [ -d "$crds" ]; then
  check+=(--crds "$crds")
else
  echo "(no CRD folder at $crds: custom resources are rendered but not checked against CRD schemas)"
fi
echo "\$ fabric render -C $SITE --out $out --all-sites ${check[*]}"
rc=0
"$FABRIC" render -C "$SITE" --out "$out" --all-sites "${check[@]}" || rc=$?
if [ "$rc" -eq 3 ] && [ ! -d "$out" ]; then
  # an incomplete plan is never deployed; the stacks that do not need it still render
  echo "(exit 3: the plan is incomplete, see step 40; rendering allocations and observability only)"
  "$FABRIC" render -C "$SITE" --out "$out" --all-sites --stack allocations --stack observability "${check[@]}"
elif [ "$rc" -ne 0 ]; then
  exit "$rc"
fi
