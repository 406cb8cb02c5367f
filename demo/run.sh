#!/usr/bin/env bash
# The demo: every step in demo/steps/ in order, sharing one working folder.
# Each step is a bash script that uses $FABRIC (the CLI), $DEMO_DIR (scratch) and $SITE (the demo site repo).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
export FABRIC="${FABRIC:-$root/.venv/bin/fabric}"
export PYTHON="${PYTHON:-$root/.venv/bin/python}"
export DEMO_DIR="${DEMO_DIR:-$root/.demo}"
export SITE="$DEMO_DIR/site"
export REPO_ROOT="$root"
rm -rf "$DEMO_DIR"
mkdir -p "$DEMO_DIR"
for step in "$here"/steps/*.sh; do
  echo
  echo "=== $(basename "$step" .sh)"
  bash "$step"
done
echo
echo "demo finished; outputs in $DEMO_DIR"
