#!/usr/bin/env bash
# Create the reference federation (seed 000) as a git site repo and validate it.
set -euo pipefail
echo "\$ fabric init $SITE --example cerit-sc"
"$FABRIC" init "$SITE" --example cerit-sc
echo "\$ fabric validate -C $SITE"
"$FABRIC" validate -C "$SITE"
