#!/usr/bin/env bash
# The request path, live: tenants call the real vLLM (CPU, tiny model) through the real LiteLLM gateway that
# `fabric gateway run` generates from the site repo and the plan. The federation is the reference one (brno, CZ;
# vienna, AT) with a replica of qwen3-5 added at vienna; the demo runs Brno's gateway (each site runs its own).
# One tenant is throttled (429 + Retry-After), the sensitive tenant only ever reaches the CZ replica, and the
# month's report shows usage per tenant from the gateway's meter. Skipped without `make engine` and `make gateway`.
set -euo pipefail
out="$DEMO_DIR/gateway"
mkdir -p "$out"
if [ ! -x "$REPO_ROOT/.venv-engine/bin/python" ] || [ ! -x "$REPO_ROOT/.venv-gateway/bin/python" ]; then
  echo "no vLLM engine or no LiteLLM (run \`make engine gateway\`); skipping the gateway step"
  exit 0
fi
MONTH="$(date -u +%Y-%m)"
records="$out/records"  # the meter's folder: one file per UTC day
# shellcheck source=demo/live.sh
source "$REPO_ROOT/demo/live.sh"
read -r engine_port gw_port < <(free_ports 2)

echo "\$ the reference federation's second site, vienna (AT), gets a qwen3-5 replica on a signed node"
"$PYTHON" - "$out" <<'PY'
import json, sys
from pathlib import Path
from tests.fixtures.gateway_site import make_gateway_plan, make_gateway_site
out = Path(sys.argv[1])
repo = make_gateway_site(out / "site")
plan = make_gateway_plan(repo, out)
data = json.loads(plan.read_text())
for replica in data["replicas"]:  # the local engine answers to the recipe's name
    args = replica["engine_args"]
    if replica["deployment"] == "qwen3-5":
        args[args.index("--served-model-name") + 1] = "qwen3.5"
plan.write_text(json.dumps(data))
PY
site="$out/site"
for tenant in muni-researchers fnusa-clinical throttled; do
  echo "\$ fabric tenants key issue -C $site $tenant --json"
  "$FABRIC" tenants key issue -C "$site" "$tenant" --json >"$out/key-$tenant.json"
  "$PYTHON" -c 'import json,sys; print("  key", json.load(open(sys.argv[1]))["key_id"], "(shown once; the repo keeps its hash)")' "$out/key-$tenant.json"
done
key() { "$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["key"])' "$out/key-$1.json"; }

echo "\$ fabric engine run --model qwen3.5 --local --port $engine_port   (in the background)"
"$FABRIC" engine run --model qwen3.5 --local --port "$engine_port" --run-dir "$out/engine" --timeout 300 \
  >"$out/engine-run.out" 2>&1 &
pids+=($!)
echo "\$ fabric gateway run -C $site --plan plan.json --site brno --port $gw_port --endpoint qwen3-5=... --records $records"
"$FABRIC" gateway run -C "$site" --plan "$out/plan.json" --site brno --port "$gw_port" --run-dir "$out/gateway-run" \
  --endpoint "qwen3-5=http://127.0.0.1:$engine_port/v1" \
  --records "$records" >"$out/gateway-run.out" 2>&1 &
pids+=($!)
"$PYTHON" - "$engine_port" "$gw_port" <<'PY'
import sys, time, urllib.request
engine, gw = sys.argv[1:3]
deadline = time.monotonic() + 360
for url in (f"http://127.0.0.1:{engine}/health", f"http://127.0.0.1:{gw}/health/liveliness"):
    while True:
        try:
            if urllib.request.urlopen(url, timeout=2).status == 200:
                break
        except OSError:
            pass
        if time.monotonic() > deadline:
            sys.exit(f"{url} did not answer within 360 s")
        time.sleep(1)
print("engine and gateway are up")
PY

call() {  # tenant, message, [extra curl args]: prints the status and, for a refusal, its Retry-After
  local tenant="$1" text="$2"; shift 2
  curl -s -o "$out/last.json" -D "$out/last.headers" -w "%{http_code}" "http://127.0.0.1:$gw_port/v1/chat/completions" \
    -H "Authorization: Bearer $(key "$tenant")" -H "Content-Type: application/json" "$@" \
    -d "{\"model\": \"qwen3-5\", \"max_tokens\": 8, \"messages\": [{\"role\": \"user\", \"content\": \"$text\"}]}"
}
echo "\$ muni-researchers: 3 requests of public data (header X-Fabric-Data-Class: public)"
for i in 1 2 3; do echo "  HTTP $(call muni-researchers "Summarise the federation, take $i." -H "X-Fabric-Data-Class: public")"; done
echo "\$ throttled (3 requests a minute): 4 requests"
for i in 1 2 3 4; do
  code="$(call throttled "Hello $i")"
  echo "  HTTP $code $(grep -i '^retry-after' "$out/last.headers" | tr -d '\r' | tr '\n' ' ')"
done
echo "\$ fnusa-clinical (sensitive data, CZ only): 3 requests"
for i in 1 2 3; do echo "  HTTP $(call fnusa-clinical "Patient cohort summary $i.")"; done
sleep 2  # the meter writes a success just after its response

echo "\$ where each request went (the gateway's meter, $records)"
"$PYTHON" - "$records" <<'PY'
import collections, json, sys
import pathlib
rows = [json.loads(line) for day in sorted(pathlib.Path(sys.argv[1]).glob("requests-*.jsonl")) for line in open(day)]
seen = collections.Counter((r["tenant"], r["status"], r.get("site") or "-") for r in rows)
for (tenant, status, site), n in sorted(seen.items()):
    print(f"  {tenant:<18} status {status}  site {site:<7} x{n}")
assert all(r.get("site") in (None, "brno") for r in rows if r["tenant"] == "fnusa-clinical"), "sensitive data left CZ"
print("  fnusa-clinical's requests reached the CZ replica only")
PY

echo "\$ fabric report -C $site --month $MONTH --requests $records"
"$FABRIC" report -C "$site" --month "$MONTH" --requests "$records" --out "$out/report" >/dev/null
"$PYTHON" - "$out/report/report.json" <<'PY' || true
import json, sys
report = json.load(open(sys.argv[1]))
for row in report["usage_by_tenant"]:
    print(f"  {row['name']:<18} requests {row['requests']:>3} (failed {row['failed_requests']}), "
          f"input {row['input_tokens']:>5} tokens, output {row['output_tokens']:>4}, cached {row['cached_input_tokens']}")
PY
echo "stopping the gateway and vLLM"
stop_all
trap - EXIT
echo "gateway outputs in $out: records/ (a file per UTC day), gateway-run/ (litellm-config.yaml, fabric-gateway.json, litellm.log), report/"
