#!/usr/bin/env bash
# The monthly report from real Prometheus data. The demo has no GPU engine yet, so the month's request
# records (generated from the deployments' context profiles) are replayed as vLLM metrics: backfilled
# into Prometheus' TSDB with promtool (a month of history), and served live by a replay exporter that
# Prometheus scrapes. Then `fabric report` reads Prometheus and the records, and signs the result with the federation key.
set -euo pipefail
MONTH="${DEMO_MONTH:-$(date -u -d "$(date -u +%Y-%m-01) -1 day" +%Y-%m)}"  # the last complete month
work="$DEMO_DIR/report"
mkdir -p "$work"
records="$work/requests-$MONTH.parquet"

echo "\$ generate 200,000 request records for $MONTH (DuckDB)"
"$PYTHON" - "$SITE" "$MONTH" "$records" <<'PY'
import sys
from pathlib import Path
from llm_fabric.ledger.store.period import Month
from tests.fixtures.ledger_synthetic import generate_records
from llm_fabric.site.loader import load_site
site = load_site(Path(sys.argv[1]))
profiles = {n: (d.context.p50, d.context.p95) for n, d in site.deployments.items() if d.context}
generate_records(Path(sys.argv[3]), Month.parse(sys.argv[2]), 200_000, profiles, sorted(site.tenants))
PY

echo "\$ backfill the month into Prometheus' TSDB (promtool tsdb create-blocks-from openmetrics)"
"$PYTHON" -m tests.fixtures.ledger_replay backfill --site-repo "$SITE" --records "$records" --month "$MONTH" \
  --step 3600 --out "$work/history.om"
rm -rf "$work/tsdb"
promtool tsdb create-blocks-from openmetrics --quiet "$work/history.om" "$work/tsdb" >/dev/null

read -r prom_port replay_port < <("$PYTHON" -c '
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])')
cat >"$work/prometheus.yml" <<YML
global: {scrape_interval: 1s}
scrape_configs:
  - job_name: vllm-replay
    static_configs: [{targets: ["127.0.0.1:$replay_port"]}]
YML
"$PYTHON" -m tests.fixtures.ledger_replay serve --site-repo "$SITE" --records "$records" --month "$MONTH" \
  --port "$replay_port" --duration 5 &
replay_pid=$!
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" --log.level=warn \
  --web.listen-address="127.0.0.1:$prom_port" --storage.tsdb.retention.time=10y >"$work/prometheus.log" 2>&1 &
prom_pid=$!
trap 'kill "$prom_pid" "$replay_pid" 2>/dev/null || true; wait "$prom_pid" "$replay_pid" 2>/dev/null || true' EXIT
"$PYTHON" - "$prom_port" <<'PY'
import json, sys, time, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}"
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    try:
        with urllib.request.urlopen(url + "/api/v1/query?query=up", timeout=2) as r:
            if any(x["value"][1] == "1" for x in json.load(r)["data"]["result"]):
                print(f"Prometheus on {url} is up and scraping the replay exporter")
                sys.exit(0)
    except OSError:
        pass
    time.sleep(0.5)
sys.exit("Prometheus did not come up within 60 s")
PY

# signed with the federation's key (made by `fabric init` in step 10); verified against the site repo's keys/
echo "\$ fabric report --month $MONTH --prometheus http://127.0.0.1:$prom_port --requests ..."
"$FABRIC" report --site-repo "$SITE" --month "$MONTH" --prometheus "http://127.0.0.1:$prom_port" \
  --requests "$records" --out "$work/out"
echo "\$ fabric report verify $work/out --site-repo $SITE"
"$FABRIC" report verify "$work/out" --site-repo "$SITE"
sed -n '1,22p' "$work/out/report.md"
