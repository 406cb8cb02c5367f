"""Gateway overhead: per-request latency p50/p95 and requests/s, direct vs LiteLLM vs LiteLLM + the fabric's hooks.

One run starts a stub OpenAI backend (answers at once) and two real LiteLLM proxies from the same
generated config: one without our hooks (LiteLLM's master-key auth, no callbacks of ours) and one
as `fabric gateway run` starts it. Rounds interleave the three paths (a loaded machine drifts);
each round sends `--requests` sequential requests per path (latency) and the same number from
`--concurrency` threads (requests/s). The target (issue 15): our hooks add at most 20 % to
LiteLLM's own overhead, i.e. (hooks - direct) / (litellm - direct) <= 1.2 at the p50. With `--redis` the
hooks count in a real redis-server on 127.0.0.1 (as the pods of a site do, `gateway.counters`), started here.

    .venv/bin/python bench/gateway.py [--rounds 5] [--requests 200] [--concurrency 4] [--redis]
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fixtures.gateway_site import Backend, issue_keys, make_gateway_plan, make_gateway_site
from tests.fixtures.redis_server import redis_server

from llm_fabric.gateway.config import build_gateway, gateway_site
from llm_fabric.gateway.endpoints import LocalRun
from llm_fabric.gateway.run import start_gateway, write_gateway_files
from llm_fabric.gateway.runtime.settings import COUNTERS_URL_ENV
from llm_fabric.plan.document import load_plan
from llm_fabric.site.loader import load_site

TENANT = "cerit-sc"  # no limits of its own: the bench measures overhead, not throttling
MODEL = "qwen3-5"


class Client:
    """One keep-alive connection, as an SDK client holds."""

    def __init__(self, url: str, key: str, model: str) -> None:
        parts = urlsplit(url)
        self.path = parts.path.rstrip("/") + "/chat/completions"
        self.conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
        self.headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
        self.body = json.dumps(
            {"model": model, "messages": [{"role": "user", "content": "bench hello"}], "max_tokens": 8}
        ).encode()

    def call(self) -> float:
        start = time.perf_counter()
        self.conn.request("POST", self.path, body=self.body, headers=self.headers)
        response = self.conn.getresponse()
        response.read()
        if response.status != 200:
            raise SystemExit(f"{self.path}: HTTP {response.status}")
        return time.perf_counter() - start


def latencies(url: str, key: str, model: str, count: int) -> list[float]:
    client = Client(url, key, model)
    client.call()  # warm the connection
    return [client.call() for _ in range(count)]


def throughput(url: str, key: str, model: str, count: int, threads: int) -> float:
    per = max(count // threads, 1)
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(lambda _: latencies(url, key, model, per), range(threads)))
    return per * threads / (time.perf_counter() - start)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--redis", action="store_true", help="the hooks count in a redis-server started here")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="bench-gateway-"))
    with contextlib.ExitStack() as stack:
        if args.redis:
            os.environ[COUNTERS_URL_ENV] = stack.enter_context(redis_server(root / "redis")).url()
        run(args, root)


def run(args: argparse.Namespace, root: Path) -> None:
    repo = make_gateway_site(root / "site")
    make_gateway_plan(repo, root)
    keys = issue_keys(repo)
    backend = Backend("bench", can_fail=False)
    backend.start()
    site = load_site(repo)
    plan = load_plan(root / "planner.json")  # the planner's own: capacities far above the bench's load
    files = build_gateway(
        site, plan, site_id=gateway_site(site, "brno"), reach=LocalRun(engines={(MODEL, None): backend.url})
    )
    hooks_dir, plain_dir = root / "hooks", root / "plain"
    write_gateway_files(files, hooks_dir)
    files.litellm["general_settings"].pop("custom_auth")
    files.litellm["litellm_settings"]["callbacks"] = ["prometheus"]
    write_gateway_files(files, plain_dir)
    master = "sk-" + secrets.token_hex(24)
    with_hooks = start_gateway(hooks_dir, root / "hooks-records")
    plain = start_gateway(plain_dir, root / "plain-records", master_key=master)
    try:
        with_hooks.wait_healthy(180)
        plain.wait_healthy(180)
        group = f"{MODEL}@sensitive"  # cerit-sc's default class; the plain proxy is asked for the group itself
        paths = {
            "direct": (backend.url, "none", MODEL),
            "litellm": (plain.base_url + "/v1", master, group),
            "litellm+hooks": (with_hooks.base_url + "/v1", keys[TENANT], MODEL),
        }
        lat: dict[str, list[float]] = {p: [] for p in paths}
        rps: dict[str, list[float]] = {p: [] for p in paths}
        for _ in range(args.rounds):
            for name, (url, key, model) in paths.items():
                lat[name] += latencies(url, key, model, args.requests)
                rps[name].append(throughput(url, key, model, args.requests, args.concurrency))
    finally:
        with_hooks.stop()
        plain.stop()
        backend.stop()
    store = "counters in the proxy process"
    if args.redis:
        import redis

        counted = redis.Redis.from_url(os.environ[COUNTERS_URL_ENV]).keys("fabric:*")
        if not counted:
            raise SystemExit("--redis: the hooks left no counters in Redis")
        store = f"counters in Redis ({len(counted)} keys after the run)"
    print(f"{args.rounds} rounds x {args.requests} requests per path; {args.concurrency} threads; {store}")
    print(f"{'path':<15}{'p50 ms':>9}{'p95 ms':>9}{'req/s (median)':>16}")
    for name in paths:
        print(
            f"{name:<15}{pct(lat[name], 0.5) * 1000:>9.2f}{pct(lat[name], 0.95) * 1000:>9.2f}"
            f"{statistics.median(rps[name]):>16.1f}"
        )
    for q, label in ((0.5, "p50"), (0.95, "p95")):
        base = pct(lat["direct"], q)
        own = pct(lat["litellm"], q) - base
        ours = pct(lat["litellm+hooks"], q) - base
        print(
            f"overhead at {label}: LiteLLM {own * 1000:.2f} ms, with hooks {ours * 1000:.2f} ms, "
            f"ratio {ours / own:.2f} (target <= 1.20)"
        )


if __name__ == "__main__":
    main()
