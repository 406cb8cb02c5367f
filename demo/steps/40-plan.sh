#!/usr/bin/env bash
# Plan the demo federation (including the nodes step 20 enrolled), then review a change to it
# with `fabric plan --base`, as Markdown for a PR comment.
set -euo pipefail
export FABRIC_PLAN_TIME_LIMIT="${FABRIC_PLAN_TIME_LIMIT:-10}"
echo "\$ fabric plan -C $SITE"
rc=0
"$FABRIC" plan -C "$SITE" || rc=$?
echo "(exit $rc: 0 = every policy holds and every target is met, 3 = not)"
# A pull request as an operator would write it: serve Llama 3.3 70B (FP8, TP 2) on the freshly
# enrolled machines. The review shows what the change does before it lands.
base="$(git -C "$SITE" rev-parse HEAD)"
cat > "$SITE/deployments/llama-3-3-70b.yaml" <<'YAML'
version: 1
name: llama-3-3-70b
recipe: llama-3.3-70b
quantization: fp8
tensor_parallel_size: 2
replicas: 2
max_model_len: 131072
context: {p50: 800, p95: 12000}
data_classes: [public, internal]
YAML
git -C "$SITE" add deployments/llama-3-3-70b.yaml
git -C "$SITE" -c user.name=operator -c user.email=operator@localhost commit -q -m "serve llama 3.3 70b on the contributed machines"
echo
echo "\$ git -C \$SITE commit -m 'serve llama 3.3 70b on the contributed machines'   # adds deployments/llama-3-3-70b.yaml"
echo "\$ fabric plan -C $SITE --base $base --format markdown   # the PR review"
rc=0
"$FABRIC" plan -C "$SITE" --base "$base" --format markdown > "$DEMO_DIR/plan-review.md" || rc=$?
sed -n '1,/^### Placement/p' "$DEMO_DIR/plan-review.md" | head -n -1
echo "(full review in $DEMO_DIR/plan-review.md; exit $rc)"
echo
echo "\$ fabric validate -C $SITE   # the policy gate (exit 3 on a violation)"
"$FABRIC" validate -C "$SITE"
