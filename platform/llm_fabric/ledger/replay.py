"""Replay request records as a vLLM engine's metrics: for the demo and for tests with a real Prometheus.

Two modes over the same counters (vLLM metric names and `model_name`, plus the labels the serving
PodMonitor relabels onto every series: deployment, replica, node, owner, site):

- `serve`: an HTTP /metrics endpoint that plays the records' timeline compressed into `duration`
  seconds, starting at the first scrape (which sees zeros, as a fresh engine would).
- `backfill`: OpenMetrics text with a sample every `step` seconds at the records' own times, for
  `promtool tsdb create-blocks-from openmetrics`: a month of history in seconds.

Gauges (running/waiting requests) are derived from the requests per step (running up to 64 per
replica, the rest waiting); they are a replay's stand-in, not measurements.

    python -m llm_fabric.ledger.replay serve --site-repo SITE --records R.parquet --port 9400 --duration 5
    python -m llm_fabric.ledger.replay backfill --site-repo SITE --records R.parquet --month 2026-11 --out h.om
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from llm_fabric.ledger.period import Month
from llm_fabric.ledger.records import SUCCESS_SQL, register_records
from llm_fabric.ledger.usage import connect
from llm_fabric.site.loader import SiteRepo, load_site

BUCKETS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000, 500000]
RUNNING_CAP = 64
_COUNTERS = (("prompt_tokens", "Number of prefill tokens processed."),
             ("prompt_tokens_cached", "Number of cached prompt tokens."),
             ("generation_tokens", "Number of generation tokens processed."),
             ("request_success", "Count of successfully processed requests."),
             ("prefix_cache_queries", "Prefix cache queries, in tokens."),
             ("prefix_cache_hits", "Prefix cache hits, in tokens."))


@dataclass
class Series:
    """Cumulative values of one deployment after each step (index i = through step i)."""

    labels: str
    counters: dict[str, list[int]]
    buckets: list[list[int]]  # per step, cumulative count of prompts <= BUCKETS[j]
    prompt_sum: list[int]
    per_step: list[int]


def placement_labels(site: SiteRepo, deployment: str) -> dict[str, str]:
    """Where a replay pretends replica 0 runs: the first active node its placement allows."""
    dep = site.deployments.get(deployment)
    for name, node in sorted(site.nodes.items()):
        if node.status != "active" or dep is None:
            continue
        if dep.placement.gpu_models and node.gpus.catalog_id not in dep.placement.gpu_models:
            continue
        if dep.placement.nodes and name not in dep.placement.nodes:
            continue
        return {"node": name, "owner": node.owner, "site": node.site}
    return {}


def _label_text(labels: dict[str, str]) -> str:
    return ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))


def load_series(site: SiteRepo, records: list[Path], t0: float, t1: float, steps: int) -> dict[str, Series]:
    """Per deployment, cumulative counters over `steps` equal steps of [t0, t1) (epoch seconds)."""
    con = connect()
    register_records(con, records)
    width = (t1 - t0) / steps
    le = " + ".join(f"(prompt_tokens > {b})::INT" for b in BUCKETS)
    rows = con.execute(
        f"""
        SELECT model, least({steps - 1}, floor((epoch(ts) - {t0}) / {width}))::INT AS step, {le} AS b,
               count(*), sum(prompt_tokens), sum(coalesce(cached_prompt_tokens, 0)), sum(completion_tokens),
               count(*) FILTER (WHERE {SUCCESS_SQL})
        FROM records WHERE epoch(ts) >= {t0} AND epoch(ts) < {t1} GROUP BY ALL ORDER BY ALL
        """
    ).fetchall()
    out: dict[str, Series] = {}
    for model, step, bucket, n, inp, cached, outp, ok in rows:
        labels = {"model_name": model, "deployment": model, "replica": "0", **placement_labels(site, model)}
        s = out.setdefault(model, Series(_label_text(labels), {k: [0] * steps for k, _ in _COUNTERS},
                                         [[0] * len(BUCKETS) for _ in range(steps)], [0] * steps, [0] * steps))
        for name, value in (("prompt_tokens", inp), ("prompt_tokens_cached", cached), ("generation_tokens", outp),
                            ("request_success", ok), ("prefix_cache_queries", inp), ("prefix_cache_hits", cached)):
            s.counters[name][step] += int(value)
        s.prompt_sum[step] += int(inp)
        s.per_step[step] += int(n)
        for j in range(bucket, len(BUCKETS)):
            s.buckets[step][j] += int(n)
    for s in out.values():
        for i in range(1, steps):
            for values in (*s.counters.values(), s.prompt_sum):
                values[i] += values[i - 1]
            s.buckets[i] = [a + b for a, b in zip(s.buckets[i], s.buckets[i - 1], strict=True)]
    return out


def exposition(series: dict[str, Series], upto: int, *, timestamp: float | None = None) -> Iterator[str]:
    """Metric lines after `upto` steps (0: nothing served yet); with `timestamp`, OpenMetrics samples."""
    ts = f" {timestamp:.3f}" if timestamp is not None else ""
    for name, help_text in _COUNTERS:
        yield f"# HELP vllm:{name} {help_text}"
        yield f"# TYPE vllm:{name} counter"
        for s in series.values():
            yield f"vllm:{name}_total{{{s.labels}}} {s.counters[name][upto - 1] if upto else 0}{ts}"
    for gauge in ("num_requests_running", "num_requests_waiting"):
        yield f"# HELP vllm:{gauge} Requests {gauge.rsplit('_', 1)[1]} (replayed)."
        yield f"# TYPE vllm:{gauge} gauge"
        for s in series.values():
            n = s.per_step[upto - 1] if upto else 0
            value = min(n, RUNNING_CAP) if gauge.endswith("running") else max(n - RUNNING_CAP, 0)
            yield f"vllm:{gauge}{{{s.labels}}} {value}{ts}"
    yield "# HELP vllm:request_prompt_tokens Number of prefill tokens processed."
    yield "# TYPE vllm:request_prompt_tokens histogram"
    for s in series.values():
        counts = s.buckets[upto - 1] if upto else [0] * len(BUCKETS)
        total = sum(s.per_step[:upto])
        for bound, count in zip(BUCKETS, counts, strict=True):
            yield f'vllm:request_prompt_tokens_bucket{{{s.labels},le="{bound}"}} {count}{ts}'
        yield f'vllm:request_prompt_tokens_bucket{{{s.labels},le="+Inf"}} {total}{ts}'
        yield f"vllm:request_prompt_tokens_sum{{{s.labels}}} {s.prompt_sum[upto - 1] if upto else 0}{ts}"
        yield f"vllm:request_prompt_tokens_count{{{s.labels}}} {total}{ts}"


def openmetrics_history(series: dict[str, Series], t0: float, t1: float, steps: int) -> str:
    """Samples at t0 - 60 s (zeros, the baseline) and at the end of every step: OpenMetrics with `# EOF`."""
    width = (t1 - t0) / steps
    per_family: dict[str, list[str]] = {}
    for upto in range(steps + 1):
        at = t0 - 60 if upto == 0 else t0 + upto * width - 1
        family = ""
        for line in exposition(series, upto, timestamp=at):
            if line.startswith("# TYPE"):
                family = line
                per_family.setdefault(family, [])
            elif not line.startswith("#"):
                per_family[family].append(line)
    lines: list[str] = []
    for family, samples in per_family.items():
        lines.append(family)
        # OpenMetrics wants a series' samples together and in time order
        lines.extend(sorted(samples, key=lambda s: (s.rsplit(" ", 2)[0], float(s.rsplit(" ", 1)[1]))))
    return "\n".join(lines) + "\n# EOF\n"


OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


class ReplayServer:
    """Serves the replay on 127.0.0.1; the timeline starts at the first scrape and lasts `duration` s.

    With `sample_times=(first, step_s)` every sample carries its own timestamp, `first + position x
    step_s` (OpenMetrics), instead of the scrape's: a live scrape whose data lands at a chosen time,
    so a test's month does not depend on the wall clock (Prometheus needs an out-of-order window
    reaching back that far, since its own `up` series is written at the real time).
    """

    def __init__(self, series: dict[str, Series], steps: int, duration: float, port: int, address: str = "127.0.0.1",
                 *, sample_times: tuple[float, float] | None = None):
        self.series, self.steps, self.duration = series, steps, duration
        self.sample_times = sample_times
        self.started: float | None = None
        replay = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                text, content_type = replay.body()
                body = text.encode()
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return

        self.httpd = ThreadingHTTPServer((address, port), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def body(self) -> tuple[str, str]:
        """The /metrics text at the current position, and its content type."""
        upto = self.position()
        if self.sample_times is None:
            return "\n".join(exposition(self.series, upto)) + "\n", "text/plain; version=0.0.4"
        first, step_s = self.sample_times
        lines = exposition(self.series, upto, timestamp=first + upto * step_s)
        return "\n".join(lines) + "\n# EOF\n", OPENMETRICS

    def position(self) -> int:
        now = time.monotonic()
        if self.started is None:
            self.started = now
            return 0
        return min(self.steps, int((now - self.started) / self.duration * self.steps))

    def finished(self) -> bool:
        return self.started is not None and time.monotonic() - self.started >= self.duration

    def start(self) -> ReplayServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def _span(args: argparse.Namespace) -> tuple[float, float]:
    month = Month.parse(args.month)
    return month.start.timestamp(), month.end.timestamp()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m llm_fabric.ledger.replay", description=__doc__.split("\n")[0])
    parser.add_argument("mode", choices=["serve", "backfill"])
    parser.add_argument("--site-repo", type=Path, required=True)
    parser.add_argument("--records", type=Path, action="append", required=True)
    parser.add_argument("--month", required=True, help="YYYY-MM whose records are replayed")
    parser.add_argument("--port", type=int, default=9400)
    parser.add_argument("--duration", type=float, default=10.0, help="serve: seconds the month takes")
    parser.add_argument("--step", type=float, default=900.0, help="backfill: seconds between samples")
    parser.add_argument("--out", type=Path, help="backfill: OpenMetrics file to write")
    args = parser.parse_args(argv)
    site = load_site(args.site_repo)
    t0, t1 = _span(args)
    if args.mode == "backfill":
        steps = max(1, round((t1 - t0) / args.step))
        text = openmetrics_history(load_series(site, args.records, t0, t1, steps), t0, t1, steps)
        (args.out or Path("history.om")).write_text(text)
        return
    steps = 200
    server = ReplayServer(load_series(site, args.records, t0, t1, steps), steps, args.duration, args.port).start()
    try:
        server.thread.join()
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
