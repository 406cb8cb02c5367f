# Sourced by the live demo steps (70-engine, 75-gateway): free local ports, and stopping what a step started.
# A step sets $out, appends the PID of everything it starts in the background to `pids`, and writes
# `fabric engine run`'s output to $out/engine-run.out.

# free_ports N: N free TCP ports on 127.0.0.1, space separated
free_ports() {
  "$PYTHON" -c '
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])' "$1"
}

pids=()
stop_all() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  # `fabric engine run` stops vLLM on SIGTERM; should it have died first, stop vLLM's process group by its PID
  vllm_pid="$(sed -n 's/^vLLM pid \([0-9]*\) .*/\1/p' "$out/engine-run.out" 2>/dev/null | head -1)"
  if [ -n "$vllm_pid" ] && kill -0 "$vllm_pid" 2>/dev/null; then kill -- "-$vllm_pid" 2>/dev/null || true; fi
}
trap stop_all EXIT
