#!/usr/bin/env bash
# A change without an outage (issue 27): on a branch, llama-3-3-70b (two replicas on the H100 machine step 20
# enrolled, step 40 added) and mistral-small-4 (one replica) get a shorter context. The review (`fabric plan --base`) says what the change
# restarts, in which waves, with the capacity left and the cold start of each; mistral-small-4's only replica
# would go down for a cold start with no room for a surge replica beside it, so the change is refused (exit 3)
# until the deployment says it accepts the outage. The accepted change renders in waves for the GitOps
# controller (waves/wave-N, Flux's chain, Argo CD's sync waves).
set -euo pipefail
out="$DEMO_DIR/rollout"
base="$(git -C "$SITE" rev-parse HEAD)"
branch="$(git -C "$SITE" rev-parse --abbrev-ref HEAD)"
commit() { git -C "$SITE" -c user.name=operator -c user.email=operator@localhost commit -q -am "$1"; }
git -C "$SITE" checkout -q -b shorter-context
sed -i 's/^max_model_len: 131072$/max_model_len: 65536/' "$SITE/deployments/llama-3-3-70b.yaml" \
  "$SITE/deployments/mistral-small-4.yaml"
commit "llama-3-3-70b, mistral-small-4: a 64k context"
echo "\$ git -C \$SITE checkout -b shorter-context   # max_model_len 131072 -> 65536 for llama-3-3-70b and mistral-small-4"
echo "\$ fabric plan -C $SITE --base $branch --format markdown   # the review"
rc=0
"$FABRIC" plan -C "$SITE" --base "$base" --format markdown > "$DEMO_DIR/rollout-review.md" 2> "$DEMO_DIR/rollout-refused.txt" || rc=$?
sed -n '/^### Rollout against/,/^### Placement/p' "$DEMO_DIR/rollout-review.md" | head -n -1
cat "$DEMO_DIR/rollout-refused.txt"
echo "(exit $rc: 3 = refused)"
[ "$rc" -eq 3 ] || { echo "expected the one-replica restart to be refused" >&2; exit 1; }

printf 'rollout:\n  accept_outage: "a shorter context; off-peak, announced to the tenants"\n' >> "$SITE/deployments/mistral-small-4.yaml"
commit "mistral-small-4: accept the restart's outage"
echo
echo "\$ echo 'rollout: {accept_outage: ...}' >> \$SITE/deployments/mistral-small-4.yaml   # reviewed like any field"
echo "\$ fabric plan -C $SITE --base $branch -o $DEMO_DIR/rollout-plan.json"
"$FABRIC" plan -C "$SITE" --base "$base" --format markdown -o "$DEMO_DIR/rollout-plan.json" > "$DEMO_DIR/rollout-accepted.md"
sed -n '/^### Rollout against .*: waves/,/^### Placement/p' "$DEMO_DIR/rollout-accepted.md" | head -n -1
echo "\$ fabric render -C $SITE --plan $DEMO_DIR/rollout-plan.json --all-sites --out $out"
"$FABRIC" render -C "$SITE" --plan "$DEMO_DIR/rollout-plan.json" --all-sites --out "$out" > /dev/null
(cd "$out" && find . -path '*/waves/*' -name '*.yaml' | sort)
git -C "$SITE" checkout -q "$branch"
