"""The Prometheus fixture runs the real server: it scrapes a live target and serves backfilled history."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, start_http_server

from tests.fixtures.prometheus import PrometheusServer, free_port, scrape_job


def test_scrapes_a_live_target(prometheus_factory: Callable[..., PrometheusServer]) -> None:
    registry = CollectorRegistry()
    counter = Counter("fixture_probe", "A probe counter.", registry=registry)
    counter.inc(41)
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    try:
        prom = prometheus_factory(scrape_configs=[scrape_job("probe", [f"127.0.0.1:{port}"])])
        counter.inc()
        result = prom.wait_for("fixture_probe_total", predicate=lambda r: bool(r) and r[0]["value"][1] == "42")
        assert result[0]["metric"]["job"] == "probe"
        pid = prom.process.pid
        prom.stop()
        assert prom.process.poll() is not None, f"prometheus {pid} still running after stop"
    finally:
        server.shutdown()
        thread.join(timeout=5)


def test_backfilled_history_is_queryable(prometheus_factory: Callable[..., PrometheusServer]) -> None:
    start = 1_700_000_000  # 2023-11-14: far from now, so only the backfill can answer
    lines = ["# TYPE backfill_probe counter"]
    lines += [f'backfill_probe_total{{k="a"}} {i * 10} {start + i * 60}' for i in range(120)]
    prom = prometheus_factory(backfill=["\n".join(lines) + "\n# EOF\n"])
    result = prom.query("backfill_probe_total[3h]", at=start + 119 * 60)
    values = [float(v) for _, v in result[0]["values"]]
    assert values[0] == 0 and values[-1] == 1190 and len(values) == 120
