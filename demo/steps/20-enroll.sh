#!/usr/bin/env bash
# Enroll three contributed machines into the demo site: 8 x H100 (full), 8 x L40S (limited), 4 x A100 (rejected).
# Each machine is an sshd in a network namespace whose nvidia-smi replays a capture (tests/fixtures/testhost.py);
# without namespaces (not root) they fall back to `--connection local` with the fake tools on PATH.
set -euo pipefail
hosts_json="$DEMO_DIR/enroll-hosts.json"
# start the test hosts; they stay up until this step ends
"$PYTHON" - "$DEMO_DIR/enroll-hosts" "$hosts_json" <<'PY' &
import json, signal, sys, time
from pathlib import Path
import os
sys.path.insert(0, os.environ["REPO_ROOT"])
from tests.fixtures.testhost import TestHostFactory
factory = TestHostFactory(Path(sys.argv[1]))
try:
    hosts = {p: factory.make(p, name=p) for p in ("h100x8", "l40sx8", "a100x4")}
    out = {p: {"args": h.cli_args(), "path": str(h.tool_dir) if h.connection == "local" else ""} for p, h in hosts.items()}
    Path(sys.argv[2]).write_text(json.dumps(out))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        time.sleep(1)
finally:
    factory.close()
PY
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do [ -s "$hosts_json" ] && break; sleep 0.1; done

enroll() {  # profile node-name
  mapfile -t args < <("$PYTHON" -c "import json,sys; print('\n'.join(json.load(open(sys.argv[1]))[sys.argv[2]]['args']))" "$hosts_json" "$1")
  tools=$("$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]]['path'])" "$hosts_json" "$1")
  echo "\$ fabric enroll ${args[0]} --site-repo \$SITE --owner cerit-sc --site brno --name $2"
  set +e
  PATH="${tools:+$tools:}$PATH" "$FABRIC" enroll "${args[@]}" --site-repo "$SITE" --owner cerit-sc --site brno --name "$2"
  rc=$?
  set -e
  echo "(exit $rc)"
}
enroll h100x8 contrib-h100
enroll l40sx8 contrib-l40s
enroll a100x4 contrib-a100
echo "\$ fabric nodes list --site-repo \$SITE"
"$FABRIC" nodes list --site-repo "$SITE"
echo "\$ fabric nodes verify --site-repo \$SITE"
"$FABRIC" nodes verify --site-repo "$SITE"
