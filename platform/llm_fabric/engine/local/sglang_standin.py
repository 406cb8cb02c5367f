"""A small OpenAI-compatible server that behaves like SGLang where the fabric looks: its metrics and its queue.

SGLang itself needs CUDA; this stand-in lets the paths engine -> Prometheus -> `fabric report` and
gateway -> engine be tested for SGLang as they are with the real vLLM (CPU). It is a test double of
the engine's *interface*, not of a model: the text it generates is filler, one character per token.

What it reproduces from SGLang 0.5.23 (read in the pinned wheel):
- metric names and labels of `--enable-metrics` on /metrics of the serving port:
  `sglang:prompt_tokens_total`, `sglang:generation_tokens_total`, `sglang:num_requests_total`
  (every finished request, aborted ones included; label `is_streaming`), `sglang:cached_tokens_total`
  (label `cache_source`), `sglang:num_aborted_requests_total`, the gauges `sglang:num_running_reqs`,
  `sglang:num_queue_reqs`, `sglang:token_usage`, and the histograms `sglang:time_to_first_token_seconds`,
  `sglang:e2e_request_latency_seconds`, `sglang:prompt_tokens_histogram`; every series has `model_name`.
- the queue: at most `max_running` requests run, the rest wait; with priority scheduling the waiting
  request with the best priority starts first - HIGHER values unless `low_priority_values_first`
  (`--schedule-low-priority-values-first`) - then the oldest. A full queue (`max_queued`) answers 503
  "The request queue is full.", or, with priority scheduling, aborts the least-preferred waiting
  request when the newcomer is strictly better (`Scheduler._abort_on_queued_limit`).
- `custom_logit_processor` on a request is refused (400) unless `enable_custom_logit_processor`.
- `GET /get_server_info` (and `/server_info`): the server arguments it was started with, in SGLang's
  field names (`model_path`, `context_length`, `kv_cache_dtype`, `quantization`, the parsers, the chat
  template, `served_model_name`) and `version`, as SGLang's `build_server_info` answers them;
  `options_from_args` reads them from a `sglang.launch_server` argument list.
- usage: prompt tokens are the UTF-8 bytes of the prompt (a byte-level tokenizer, like the tiny vLLM
  model); `prompt_tokens_details.cached_tokens` only with `enable_cache_report`, counted as the
  longest prefix shared with an earlier prompt (SGLang's radix cache, one token per page).

The order in which requests started (their `user` fields) is kept for tests (`started`, GET /standin/started).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

QUEUE_FULL = "The request queue is full."
PREEMPTED = "The request is aborted by a higher priority request."
NO_CUSTOM_PROCESSOR = (
    "The server is not configured to enable custom logit processor. "
    "Please set `--enable-custom-logit-processor` to enable this feature."
)


@dataclass(frozen=True)
class StandinOptions:
    served_model_name: str
    max_running: int = 4
    max_queued: int = 64
    priority_scheduling: bool = False
    low_priority_values_first: bool = False  # SGLang's default polarity: higher values first
    default_priority: int | None = None
    enable_custom_logit_processor: bool = False
    enable_cache_report: bool = False
    seconds_per_token: float = 0.0
    kv_tokens: int = 1 << 20  # the pool `sglang:token_usage` is measured against
    # reported by /get_server_info only (SGLang's defaults: the model's context, dtype and chat template)
    model_path: str | None = None
    context_length: int | None = None
    kv_cache_dtype: str = "auto"
    quantization: str | None = None
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    chat_template: str | None = None
    # the release it stands in for (engine.sglang.command.SGLANG_VERSION; engine.sglang imports this package)
    version: str = "0.5.23"

    def server_info(self) -> dict[str, Any]:
        return {
            "model_path": self.model_path,
            "served_model_name": self.served_model_name,
            "context_length": self.context_length,
            "kv_cache_dtype": self.kv_cache_dtype,
            "quantization": self.quantization,
            "tool_call_parser": self.tool_call_parser,
            "reasoning_parser": self.reasoning_parser,
            "chat_template": self.chat_template,
            "max_running_requests": self.max_running,
            "max_queued_requests": self.max_queued,
            "version": self.version,
        }


class _Metrics:
    def __init__(self, model: str) -> None:
        self.registry = CollectorRegistry()
        r, base = self.registry, ["model_name"]
        self.model = model
        self.prompt = Counter(
            "sglang:prompt_tokens", "Number of prefill tokens processed.", [*base, "is_streaming"], registry=r
        )
        self.generation = Counter(
            "sglang:generation_tokens", "Number of generation tokens processed.", [*base, "is_streaming"], registry=r
        )
        self.cached = Counter(
            "sglang:cached_tokens", "Number of cached prompt tokens by source.", [*base, "cache_source"], registry=r
        )
        self.requests = Counter(
            "sglang:num_requests", "Number of requests processed.", [*base, "is_streaming"], registry=r
        )
        self.aborted = Counter("sglang:num_aborted_requests", "Number of requests aborted.", base, registry=r)
        self.running = Gauge("sglang:num_running_reqs", "The number of running requests.", base, registry=r)
        self.queued = Gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.", base, registry=r)
        self.usage = Gauge("sglang:token_usage", "The token usage.", base, registry=r)
        self.ttft = Histogram(
            "sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", base, registry=r
        )
        self.e2e = Histogram(
            "sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency.", base, registry=r
        )
        self.prompt_hist = Histogram(
            "sglang:prompt_tokens_histogram",
            "Histogram of prompt token length.",
            base,
            buckets=(100, 300, 500, 1000, 2000, 4000, 8000, 16000, 32000, float("inf")),
            registry=r,
        )
        for gauge in (self.running, self.queued, self.usage):
            gauge.labels(model_name=model).set(0)
        # series exist from the start at 0, so a scrape before the first request reads 0, not nothing
        self.aborted.labels(model_name=model)
        self.cached.labels(model_name=model, cache_source="device")
        for counter in (self.prompt, self.generation, self.requests):
            for streaming in ("false", "true"):
                counter.labels(model_name=model, is_streaming=streaming)


@dataclass(order=True)
class _Waiting:
    key: tuple[int, int]
    ticket: int = field(compare=False)
    name: str = field(compare=False)
    event: threading.Event = field(compare=False, default_factory=threading.Event)
    aborted: str | None = field(compare=False, default=None)


class Scheduler:
    """SGLang's admission: `max_running` slots, a bounded waiting queue ordered by priority then arrival."""

    def __init__(self, options: StandinOptions, metrics: _Metrics) -> None:
        self.options, self.metrics = options, metrics
        self.lock = threading.Lock()
        self.running = 0
        self.waiting: list[_Waiting] = []
        self.started: list[str] = []  # request names in the order they started
        self.tokens_in_use = 0
        self._tickets = 0

    def _key(self, priority: int | None) -> tuple[int, int]:
        """Smaller sorts first: the preferred priority, then the oldest (arrival number)."""
        if not self.options.priority_scheduling:
            return (0, self._tickets)
        value = priority if priority is not None else (self.options.default_priority or 0)
        return (value if self.options.low_priority_values_first else -value, self._tickets)

    def _gauges(self) -> None:
        model = self.metrics.model
        self.metrics.running.labels(model_name=model).set(self.running)
        self.metrics.queued.labels(model_name=model).set(len(self.waiting))
        self.metrics.usage.labels(model_name=model).set(min(1.0, self.tokens_in_use / self.options.kv_tokens))

    def admit(self, priority: int | None, name: str) -> str | None:
        """Block until the request may run; None, or the message it was aborted with."""
        with self.lock:
            self._tickets += 1
            entry = _Waiting(self._key(priority), self._tickets, name)
            if self.running < self.options.max_running and not self.waiting:
                self.running += 1
                self.started.append(name)
                self._gauges()
                return None
            if len(self.waiting) + 1 > self.options.max_queued:
                worst = max(self.waiting) if self.waiting else None
                if self.options.priority_scheduling and worst is not None and entry.key[0] < worst.key[0]:
                    self.waiting.remove(worst)
                    worst.aborted = PREEMPTED
                    worst.event.set()
                else:
                    return QUEUE_FULL
            self.waiting.append(entry)
            self._gauges()
        entry.event.wait()
        return entry.aborted

    def finish(self, tokens: int) -> None:
        with self.lock:
            self.running -= 1
            self.tokens_in_use = max(0, self.tokens_in_use - tokens)
            if self.waiting and self.running < self.options.max_running:
                nxt = min(self.waiting)
                self.waiting.remove(nxt)
                self.running += 1
                self.started.append(nxt.name)
                nxt.event.set()
            self._gauges()

    def hold(self, tokens: int) -> None:
        with self.lock:
            self.tokens_in_use += tokens
            self._gauges()


class SglangStandin:
    """The server; `start()` binds 127.0.0.1, `stop()` closes it."""

    def __init__(self, options: StandinOptions, port: int = 0) -> None:
        self.options = options
        self.metrics = _Metrics(options.served_model_name)
        self.scheduler = Scheduler(options, self.metrics)
        self.prompts: list[bytes] = []
        self._prompts_lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def started(self) -> list[str]:
        """The requests' `user` fields (else their arrival numbers) in the order they started."""
        return list(self.scheduler.started)

    def start(self) -> SglangStandin:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def cached_prefix(self, prompt: bytes) -> int:
        """Tokens of `prompt` an earlier prompt already put in the cache (longest shared prefix)."""
        with self._prompts_lock:
            best = 0
            for earlier in self.prompts:
                n = 0
                for a, b in zip(earlier, prompt, strict=False):
                    if a != b:
                        break
                    n += 1
                best = max(best, n)
            self.prompts.append(prompt)
        return min(best, max(0, len(prompt) - 1))  # the last prompt token is always computed

    def serve(self, body: dict[str, Any], chat: bool) -> tuple[int, dict[str, Any] | Iterator[dict[str, Any]]]:
        if body.get("custom_logit_processor") and not self.options.enable_custom_logit_processor:
            return HTTPStatus.BAD_REQUEST, _error(NO_CUSTOM_PROCESSOR, HTTPStatus.BAD_REQUEST)
        if chat:
            text = "".join(str(m.get("content") or "") for m in body.get("messages", []))
        else:
            text = str(body.get("prompt", ""))
        prompt = text.encode()
        stream = bool(body.get("stream"))
        output_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        arrived = time.monotonic()
        aborted = self.scheduler.admit(body.get("priority"), str(body.get("user", "")))
        model, streaming = self.metrics.model, str(stream).lower()
        if aborted is not None:
            self.metrics.requests.labels(model_name=model, is_streaming=streaming).inc()
            self.metrics.aborted.labels(model_name=model).inc()
            return HTTPStatus.SERVICE_UNAVAILABLE, _error(aborted, HTTPStatus.SERVICE_UNAVAILABLE)
        cached = self.cached_prefix(prompt)
        self.scheduler.hold(len(prompt) + output_tokens)
        usage: dict[str, Any] = {
            "prompt_tokens": len(prompt),
            "completion_tokens": output_tokens,
            "total_tokens": len(prompt) + output_tokens,
        }
        if self.options.enable_cache_report:
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        request_id = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"

        def run() -> Iterator[str]:
            try:
                for i in range(output_tokens):
                    if self.options.seconds_per_token:
                        time.sleep(self.options.seconds_per_token)
                    if i == 0:
                        self.metrics.ttft.labels(model_name=model).observe(time.monotonic() - arrived)
                    yield "x"
            finally:
                self.scheduler.finish(len(prompt) + output_tokens)
                self.metrics.prompt.labels(model_name=model, is_streaming=streaming).inc(len(prompt))
                self.metrics.generation.labels(model_name=model, is_streaming=streaming).inc(output_tokens)
                self.metrics.cached.labels(model_name=model, cache_source="device").inc(cached)
                self.metrics.requests.labels(model_name=model, is_streaming=streaming).inc()
                self.metrics.prompt_hist.labels(model_name=model).observe(len(prompt))
                self.metrics.e2e.labels(model_name=model).observe(time.monotonic() - arrived)

        kind = "chat.completion" if chat else "text_completion"
        if not stream:
            text_out = "".join(run())
            choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
            choice |= {"message": {"role": "assistant", "content": text_out}} if chat else {"text": text_out}
            return HTTPStatus.OK, {
                "id": request_id,
                "object": kind,
                "created": int(time.time()),
                "model": model,
                "choices": [choice],
                "usage": usage,
            }

        def chunks() -> Iterator[dict[str, Any]]:
            for piece in run():
                delta = {"delta": {"content": piece}} if chat else {"text": piece}
                yield {
                    "id": request_id,
                    "object": f"{kind}.chunk",
                    "model": model,
                    "choices": [{"index": 0, "finish_reason": None} | delta],
                }
            if (body.get("stream_options") or {}).get("include_usage"):
                yield {"id": request_id, "object": f"{kind}.chunk", "model": model, "choices": [], "usage": usage}

        return HTTPStatus.OK, chunks()


def _error(message: str, status: HTTPStatus) -> dict[str, Any]:
    return {"object": "error", "message": message, "type": status.phrase, "code": int(status)}


def _handler(standin: SglangStandin) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return  # quiet: tests read the metrics, not an access log

        def _send(self, status: int, payload: bytes, content_type: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:
            if self.path in ("/health", "/health_generate"):
                self._send(200, b"")
            elif self.path == "/metrics":
                self._send(200, generate_latest(standin.metrics.registry), "text/plain; version=0.0.4")
            elif self.path == "/v1/models":
                model = {"id": standin.options.served_model_name, "object": "model", "owned_by": "sglang"}
                self._send(200, json.dumps({"object": "list", "data": [model]}).encode())
            elif self.path in ("/get_server_info", "/server_info"):
                self._send(200, json.dumps(standin.options.server_info()).encode())
            elif self.path == "/standin/started":
                self._send(200, json.dumps(standin.started).encode())
            else:
                self._send(404, json.dumps(_error("Not Found", HTTPStatus.NOT_FOUND)).encode())

        def do_POST(self) -> None:
            if self.path not in ("/v1/chat/completions", "/v1/completions"):
                self._send(404, json.dumps(_error("Not Found", HTTPStatus.NOT_FOUND)).encode())
                return
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
            except json.JSONDecodeError as exc:
                self._send(400, json.dumps(_error(f"invalid JSON: {exc}", HTTPStatus.BAD_REQUEST)).encode())
                return
            status, answer = standin.serve(body, chat=self.path == "/v1/chat/completions")
            if isinstance(answer, dict):
                self._send(status, json.dumps(answer).encode())
                return
            self.send_response(status)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for chunk in answer:
                self._chunk(f"data: {json.dumps(chunk)}\n\n".encode())
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    return Handler


def _parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(
        prog="python -m llm_fabric.engine.local.sglang_standin",
        description="An SGLang-like OpenAI server on 127.0.0.1 (metrics, queue, priority, server info).",
    )
    cli.add_argument("--served-model-name", required=True)
    cli.add_argument("--port", type=int, default=0)
    cli.add_argument("--max-running-requests", type=int, default=4)
    cli.add_argument("--max-queued-requests", type=int, default=64)
    cli.add_argument("--enable-priority-scheduling", action="store_true")
    cli.add_argument("--schedule-low-priority-values-first", action="store_true")
    cli.add_argument("--enable-custom-logit-processor", action="store_true")
    cli.add_argument("--enable-cache-report", action="store_true")
    cli.add_argument("--model-path")
    cli.add_argument("--context-length", type=int)
    cli.add_argument("--kv-cache-dtype", default="auto")
    cli.add_argument("--quantization")
    cli.add_argument("--tool-call-parser")
    cli.add_argument("--reasoning-parser")
    cli.add_argument("--chat-template")
    return cli


def options_from_args(argv: list[str], *, lenient: bool = False) -> tuple[StandinOptions, int]:
    """The stand-in's options (and port) from SGLang launch arguments; `lenient`: ignore the flags it has no use for
    (a plan's full `sglang.launch_server` command: parallelism, memory, metrics)."""
    cli = _parser()
    args = cli.parse_known_args(argv)[0] if lenient else cli.parse_args(argv)
    options = StandinOptions(
        served_model_name=args.served_model_name,
        max_running=args.max_running_requests,
        max_queued=args.max_queued_requests,
        priority_scheduling=args.enable_priority_scheduling,
        low_priority_values_first=args.schedule_low_priority_values_first,
        enable_custom_logit_processor=args.enable_custom_logit_processor,
        enable_cache_report=args.enable_cache_report,
        model_path=args.model_path,
        context_length=args.context_length,
        kv_cache_dtype=args.kv_cache_dtype,
        quantization=args.quantization,
        tool_call_parser=args.tool_call_parser,
        reasoning_parser=args.reasoning_parser,
        chat_template=args.chat_template,
    )
    return options, args.port


def main(argv: list[str] | None = None) -> int:
    options, port = options_from_args(sys.argv[1:] if argv is None else argv)
    standin = SglangStandin(options, port=port)
    print(standin.base_url, flush=True)
    standin.server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
