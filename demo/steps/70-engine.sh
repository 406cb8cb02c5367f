#!/usr/bin/env bash
# The engine tier, live: the tiny model served by a real vLLM on this CPU from the qwen3.5 recipe's engine args
# (loop guard loaded), a known burst of requests, Prometheus scraping the engine's own /metrics with the labels
# the serving PodMonitor adds, and this month's report published (signed, verified) from both. Everything started
# here is stopped at the end. Skipped when `make engine` was not run.
set -euo pipefail
out="$DEMO_DIR/engine"
mkdir -p "$out"
if [ ! -x "$REPO_ROOT/.venv-engine/bin/python" ] && [ -z "${FABRIC_ENGINE_PYTHON:-}" ]; then
  echo "no vLLM engine (run \`make engine\`); skipping the live engine step"
  exit 0
fi
MONTH="$(date -u +%Y-%m)"
records="$out/requests-$MONTH.jsonl"
# shellcheck source=demo/live.sh
source "$REPO_ROOT/demo/live.sh"
read -r engine_port prom_port < <(free_ports 2)

# Until Prometheus holds the engine's current token counters (so the report sees all of the burst).
wait_scraped() {
  "$PYTHON" - "$engine_port" "$prom_port" <<'PY'
import json, sys, time, urllib.parse, urllib.request
from prometheus_client.parser import text_string_to_metric_families
engine, prom = (f"http://127.0.0.1:{p}" for p in sys.argv[1:3])
names = ("vllm:prompt_tokens_total", "vllm:generation_tokens_total")
def engine_totals():
    text = urllib.request.urlopen(engine + "/metrics", timeout=10).read().decode()
    return [sum(s.value for f in text_string_to_metric_families(text) for s in f.samples if s.name == n) for n in names]
def scraped():
    out = []
    for n in names:
        q = urllib.parse.urlencode({"query": f"sum({n})"})
        try:
            result = json.load(urllib.request.urlopen(f"{prom}/api/v1/query?{q}", timeout=10))["data"]["result"]
        except OSError:  # Prometheus not listening yet (it starts in the background)
            return None
        out.append(float(result[0]["value"][1]) if result else None)
    return out
want, deadline = engine_totals(), time.monotonic() + 60
while scraped() != want:
    if time.monotonic() > deadline:
        sys.exit(f"Prometheus did not scrape the engine's counters {want} within 60 s")
    time.sleep(0.5)
time.sleep(2)  # one more scrape after the newest value
print(f"Prometheus holds the engine's counters: {int(want[0])} prompt + {int(want[1])} generation tokens")
PY
}

echo "\$ fabric engine run --model qwen3.5 --local --port $engine_port --run-dir $out/run   (in the background)"
"$FABRIC" engine run --model qwen3.5 --local --port "$engine_port" --run-dir "$out/run" --timeout 300 \
  >"$out/engine-run.out" 2>&1 &
pids+=($!)
"$PYTHON" - "$engine_port" "${pids[0]}" "$out" <<'PY'
import os, sys, time, urllib.request
port, pid, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
start = time.monotonic()
while time.monotonic() - start < 320:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        sys.exit(f"the engine exited during start-up; see {out}/engine-run.out and {out}/run/vllm.log")
    try:
        if urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).status == 200:
            print(f"vLLM healthy on 127.0.0.1:{port} after {time.monotonic() - start:.0f} s (log {out}/run/vllm.log)")
            sys.exit(0)
    except OSError:
        pass
    time.sleep(1)
sys.exit("the engine was not healthy within 320 s")
PY

echo "\$ prometheus (scrapes http://127.0.0.1:$engine_port/metrics every second, PodMonitor labels as static labels)"
cat >"$out/prometheus.yml" <<YML
global: {scrape_interval: 1s}
scrape_configs:
  - job_name: vllm
    static_configs:
      - targets: ["127.0.0.1:$engine_port"]
        labels: {deployment: qwen3-5, replica: qwen3-5-0, owner: cerit-sc, site: brno, node: dgx-b200-01}
YML
rm -rf "$out/tsdb"
prometheus --config.file="$out/prometheus.yml" --storage.tsdb.path="$out/tsdb" --log.level=warn \
  --web.listen-address="127.0.0.1:$prom_port" >"$out/prometheus.log" 2>&1 &
pids+=($!)
wait_scraped

echo "\$ fabric engine burst --url http://127.0.0.1:$engine_port --model qwen3.5 --deployment qwen3-5 --requests 20 ..."
"$FABRIC" engine burst --url "http://127.0.0.1:$engine_port" --model qwen3.5 --deployment qwen3-5 --requests 20 \
  --tenant cerit-sc --tenant muni-researchers --records "$records"
wait_scraped

echo "\$ fabric report --month $MONTH --prometheus http://127.0.0.1:$prom_port --requests $records   (signed with the federation key)"
"$FABRIC" report --site-repo "$SITE" --month "$MONTH" --prometheus "http://127.0.0.1:$prom_port" \
  --requests "$records" --out "$out/report"
echo "\$ fabric report verify $out/report --site-repo $SITE"
"$FABRIC" report verify "$out/report" --site-repo "$SITE"
grep -E '^\| (Model|qwen3-5) ' "$out/report/report.md" || true

echo "stopping vLLM and Prometheus"
stop_all
trap - EXIT
echo "engine outputs in $out: run/vllm.log, requests-$MONTH.jsonl, prometheus.yml, report/ (report.md, report.html, manifest.json)"
