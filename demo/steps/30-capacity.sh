#!/usr/bin/env bash
# Capacity of the reference site's deployments (recipes x GPU catalog x kernel matrix), one sizing
# question from seed 002 (TP, then a multi-node replica and data-parallel attention), and the vLLM
# and SGLang commands of the Kimi deployment.
set -euo pipefail
echo "\$ fabric capacity -C $SITE"
"$FABRIC" capacity -C "$SITE"
echo
echo "\$ fabric capacity --model llama-3.3-70b --gpu h200 --count 1 --quantization fp8 --context 3000 --users 48"
"$FABRIC" capacity --model llama-3.3-70b --gpu h200 --count 1 --quantization fp8 --context 3000 --users 48
echo
echo "\$ fabric capacity --model deepseek-v3 --gpu h100-sxm --count 8   # seed 002: it will not fit (exit 3)"
rc=0
"$FABRIC" capacity --model deepseek-v3 --gpu h100-sxm --count 8 || rc=$?
[ "$rc" -eq 3 ] || { echo "expected exit 3, got $rc" >&2; exit 1; }
echo
echo "\$ fabric capacity --model deepseek-v3 --gpu h100-sxm --count 16   # two nodes: one multi-node replica"
"$FABRIC" capacity --model deepseek-v3 --gpu h100-sxm --count 16
echo
echo "\$ fabric capacity --model deepseek-v3 --gpu b200 --count 8 --context 100000 --users 300   # DP attention"
"$FABRIC" capacity --model deepseek-v3 --gpu b200 --count 8 --context 100000 --users 300
echo
echo "\$ fabric engine-args --model kimi-k2.6 --gpu b300 --count 4"
"$FABRIC" engine-args --model kimi-k2.6 --gpu b300 --count 4
echo
echo "\$ fabric engine-args --model kimi-k2.6 --gpu b300 --count 4 --engine sglang   # the same replica on SGLang"
"$FABRIC" engine-args --model kimi-k2.6 --gpu b300 --count 4 --engine sglang
