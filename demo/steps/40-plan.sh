#!/usr/bin/env bash
# Plan the demo federation (including the nodes step 20 enrolled), then review what enrolment changed
# with `fabric plan --base` against the site repo's first commit, as Markdown for a PR comment.
set -euo pipefail
export FABRIC_PLAN_TIME_LIMIT="${FABRIC_PLAN_TIME_LIMIT:-10}"
echo "\$ fabric plan $SITE"
rc=0
"$FABRIC" plan "$SITE" || rc=$?
echo "(exit $rc: 0 = every policy holds and every target is met, 3 = not)"
first="$(git -C "$SITE" rev-list --max-parents=0 HEAD)"
commits="$(git -C "$SITE" rev-list --count "$first"..HEAD)"
echo
echo "\$ fabric plan $SITE --base $first --format markdown   # $commits commits since the example was created"
rc=0
"$FABRIC" plan "$SITE" --base "$first" --format markdown > "$DEMO_DIR/plan-review.md" || rc=$?
sed -n '1,/^### Placement/p' "$DEMO_DIR/plan-review.md" | head -n -1
echo "(full review in $DEMO_DIR/plan-review.md; exit $rc)"
echo
echo "\$ fabric validate $SITE   # the policy gate (exit 3 on a violation)"
"$FABRIC" validate "$SITE"
