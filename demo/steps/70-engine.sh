#!/usr/bin/env bash
# The engine tier: the tiny model served by a real vLLM on this CPU from the qwen3.5 recipe's args,
# with the loop guard loaded; one smoke request; stopped by PID. Skipped when `make engine` was not run.
set -euo pipefail
out="$DEMO_DIR/engine"
mkdir -p "$out"
if [ ! -x "$REPO_ROOT/.venv-engine/bin/python" ] && [ -z "${FABRIC_ENGINE_PYTHON:-}" ]; then
  echo "no vLLM engine (run \`make engine\`); skipping the live engine step"
  exit 0
fi
echo "building the tiny test model in $out/tiny-model"
"$FABRIC" engine tiny-model "$out/tiny-model"
echo "starting vLLM (CPU) from the qwen3.5 recipe, one smoke request, then stop (log in $out/run/vllm.log)"
"$FABRIC" engine run --model qwen3.5 --local --smoke --run-dir "$out/run" --timeout 300
echo "engine outputs in $out"
