"""Concurrent agent runs over loopback through the default ``OpenAIChat`` (``make bench``).

A keep-alive HTTP/1.1 server in its own process answers every request at once with a short
Chat Completions stream. Against it, in a fresh client process per measurement:

- ``agent``: ``Agent.run`` of a one-turn conversation, all runs on one ``Agent`` whose
  ``OpenAIChat`` has the default client (nothing configured);
- ``raw``: the floor, ``httpx.AsyncClient`` (with the same pool size) posting the same body
  and reading the same stream with a plain ``data:`` line parse;
- ``adapter_per_run`` (with ``--per-run``): a new default ``OpenAIChat`` for every run,
  closed after it, for scale.

The modes are interleaved and repeated (five rounds); the figures are medians: runs per
second, the ratio of the floor's rate to the agent's (the median of each round's ratio, the
two taken one after the other; ``ratio_of_medians`` too), errors, the client's peak RSS
during the burst (VmHWM reset before it) and its open file descriptors before the client
existed, after the burst (the pool's idle connections) and after closing it, and the peak
RSS per concurrent run (the burst's peak over the RSS before it, divided by the runs).

``sse_decode`` (in this process, no sockets): the same Chat Completions stream bytes (text
deltas and a streamed tool call, cut into 1 KiB reads) decoded and accumulated into one
answer by the default adapter's path (``SSEDecoder`` + bounded JSON + ``StreamAccumulator``)
and by the official ``openai`` SDK's (its ``SSEDecoder``, chunks built as its ``Stream`` does,
``ChatCompletionStreamState``, the accumulator behind ``client.chat.completions.stream``);
medians of timed passes, in MB/s and µs per frame.

Results go under the ``load`` key of ``benchmarks/results.json`` (other keys are kept). Only
``127.0.0.1`` is contacted; every process runs under a timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._results import merge_results

GOAL_RATIO = 1.3
WARMUP_RUNS = 20
WORKER_TIMEOUT = 60.0
REPLY_WORDS = ("Hello", ",", " world", "!")
PROMPT = "Say hello."
MODEL = "bench-model"


# -- the server -----------------------------------------------------------------------------


def _frame(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def stream_body() -> bytes:
    """The SSE body of every reply: a role chunk, a few text deltas, finish, usage, DONE."""
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": MODEL}
    frames = [_frame({**base, "choices": [{"index": 0, "delta": {"role": "assistant"}}]})]
    frames += [
        _frame({**base, "choices": [{"index": 0, "delta": {"content": word}}]})
        for word in REPLY_WORDS
    ]
    frames.append(_frame({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
    usage = {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16}
    frames.append(_frame({**base, "choices": [], "usage": usage}))
    frames.append(b"data: [DONE]\n\n")
    return b"".join(frames)


class _Server(asyncio.Protocol):
    """HTTP/1.1 with keep-alive: reads each request (by ``content-length``), answers it."""

    def __init__(self, response: bytes) -> None:
        self.response = response
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            length = 0
            for line in bytes(self.buffer[:end]).split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(self.buffer) < end + 4 + length:
                return
            del self.buffer[: end + 4 + length]
            assert self.transport is not None
            self.transport.write(self.response)


async def serve(port_out: Any) -> None:
    body = stream_body()
    head = (
        f"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Server(head + body), "127.0.0.1", 0, backlog=4096)
    port_out.write(f"{server.sockets[0].getsockname()[1]}\n")
    port_out.flush()
    # Serve until the parent closes our stdin.
    await loop.run_in_executor(None, sys.stdin.read)
    server.close()


# -- the client -----------------------------------------------------------------------------


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


async def _gather(runs: int, one: Any) -> tuple[float, Counter[str]]:
    started = time.perf_counter()
    results = await asyncio.gather(*(one() for _ in range(runs)), return_exceptions=True)
    elapsed = time.perf_counter() - started
    errors: Counter[str] = Counter()
    for result in results:
        if isinstance(result, BaseException):
            errors[type(result).__name__] += 1
        elif result != "".join(REPLY_WORDS):
            errors["WrongAnswer"] += 1
    return elapsed, errors


async def measure(mode: str, runs: int, port: int) -> dict[str, Any]:
    import httpx

    from agentfsm import Agent
    from agentfsm.adapters.providers import OpenAIChat
    from agentfsm.adapters.providers._http_adapter import MAX_KEEPALIVE, default_pool_size

    base_url = f"http://127.0.0.1:{port}/v1"
    fds_before = _fds()
    closers: list[Any] = []

    if mode == "raw":
        size = default_pool_size()
        client = httpx.AsyncClient(
            limits=httpx.Limits(
                max_connections=size, max_keepalive_connections=min(size, MAX_KEEPALIVE)
            ),
            timeout=httpx.Timeout(10.0, read=None, pool=None),
        )
        closers.append(client.aclose)
        body = json.dumps(
            {
                "model": MODEL,
                "messages": [{"role": "user", "content": PROMPT}],
                "stream": True,
                "stream_options": {"include_usage": True},
            }
        )
        headers = {"content-type": "application/json", "accept": "text/event-stream"}

        async def one() -> str:
            text: list[str] = []
            async with client.stream(
                "POST", f"{base_url}/chat/completions", content=body, headers=headers
            ) as response:
                response.raise_for_status()
                async for line in response.aiter_lines():
                    if not line.startswith("data: ") or line == "data: [DONE]":
                        continue
                    for choice in json.loads(line[6:]).get("choices", ()):
                        text.append(choice.get("delta", {}).get("content") or "")
            return "".join(text)

    elif mode == "agent":
        engine = Agent(OpenAIChat(MODEL, base_url=base_url))
        closers.append(engine.chat.aclose)  # type: ignore[attr-defined]

        async def one() -> str:
            outcome = await engine.run(PROMPT)
            return outcome.final.content if outcome.final is not None else ""

    elif mode == "adapter_per_run":

        async def one() -> str:
            chat = OpenAIChat(MODEL, base_url=base_url)
            try:
                outcome = await Agent(chat).run(PROMPT)
            finally:
                await chat.aclose()
            return outcome.final.content if outcome.final is not None else ""

    else:
        raise ValueError(mode)

    warm_elapsed, warm_errors = await _gather(WARMUP_RUNS, one)
    rss_before_kb = _status_kb("VmRSS")
    peak_reset = _reset_peak()
    elapsed, errors = await _gather(runs, one)
    peak_kb = _status_kb("VmHWM")
    fds_pooled = _fds()
    for close in closers:
        await close()
    fds_after = _fds()
    return {
        "mode": mode,
        "runs": runs,
        "seconds": round(elapsed, 4),
        "runs_per_s": round(runs / elapsed, 1),
        "errors": sum(errors.values()) + sum(warm_errors.values()),
        "error_types": dict(errors + warm_errors),
        "rss_before_mb": round(rss_before_kb / 1024, 1),
        "peak_rss_mb": round(peak_kb / 1024, 1),
        "peak_is_burst_only": peak_reset,
        "peak_rss_per_run_kb": round(max(0, peak_kb - rss_before_kb) / runs, 1),
        "fds_before": fds_before,
        "fds_pooled": fds_pooled,
        "fds_after": fds_after,
        "warmup_seconds": round(warm_elapsed, 4),
    }


# -- SSE decode throughput ----------------------------------------------------------------

SSE_TEXT_DELTAS = 400
SSE_ARGUMENT_DELTAS = 100
SSE_READ_BYTES = 1024


def decode_body() -> bytes:
    """A longer reply than the load test's: text deltas, then one tool call streamed in
    argument pieces, finish, usage, DONE."""
    base = {"id": "chatcmpl-2", "object": "chat.completion.chunk", "created": 0, "model": MODEL}

    def delta(d: dict[str, Any], finish: str | None = None) -> bytes:
        return _frame({**base, "choices": [{"index": 0, "delta": d, "finish_reason": finish}]})

    frames = [delta({"role": "assistant", "content": ""})]
    frames += [delta({"content": f" word{i}"}) for i in range(SSE_TEXT_DELTAS)]
    head = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "echo"}}
    frames.append(delta({"tool_calls": [{**head, "function": {"name": "echo", "arguments": ""}}]}))
    pieces = ['{"text": "'] + [f"p{i} " for i in range(SSE_ARGUMENT_DELTAS - 2)] + ['"}']
    frames += [
        delta({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}) for piece in pieces
    ]
    frames.append(delta({}, "tool_calls"))
    usage = {"prompt_tokens": 12, "completion_tokens": 500, "total_tokens": 512}
    frames.append(_frame({**base, "choices": [], "usage": usage}))
    frames.append(b"data: [DONE]\n\n")
    return b"".join(frames)


def _reads(body: bytes) -> list[bytes]:
    return [body[i : i + SSE_READ_BYTES] for i in range(0, len(body), SSE_READ_BYTES)]


def decode_agentfsm(reads: list[bytes]) -> tuple[str, str]:
    from agentfsm.adapters.providers._limits import Limits, loads_bounded
    from agentfsm.adapters.providers._openai_wire import StreamAccumulator
    from agentfsm.adapters.providers._sse import SSEDecoder

    limits = Limits()
    decoder = SSEDecoder(
        max_line_bytes=limits.max_line_bytes, max_event_bytes=limits.max_event_bytes
    )
    acc = StreamAccumulator(limits)
    for read in reads:
        for event in decoder.feed(read):
            data = event.data.strip()
            if not data or data == "[DONE]":
                continue
            acc.add(loads_bounded(data, limits.max_json_depth))
    result = acc.result()
    call = result.message.tool_calls[0]
    return result.message.content, json.dumps(call.arguments)


def decode_openai(reads: list[bytes]) -> tuple[str, str]:
    from openai._models import construct_type
    from openai._streaming import SSEDecoder
    from openai.lib.streaming.chat import ChatCompletionStreamState
    from openai.types.chat import ChatCompletionChunk

    state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
    for sse in SSEDecoder().iter_bytes(iter(reads)):
        if sse.data.startswith("[DONE]"):
            continue
        chunk = construct_type(type_=ChatCompletionChunk, value=sse.json())
        for _ in state.handle_chunk(chunk):  # type: ignore[arg-type]
            pass
    message = state.get_final_completion().choices[0].message
    call: Any = message.tool_calls[0] if message.tool_calls else None
    arguments = call.function.arguments if call is not None else "{}"
    return message.content or "", json.dumps(json.loads(arguments))


def sse_decode(passes: int) -> dict[str, Any]:
    """Both decoders over the same bytes, interleaved; medians of ``passes`` timed passes."""
    from importlib import metadata

    body = decode_body()
    reads = _reads(body)
    frames = body.count(b"\n\n")
    decoders = {"agentfsm": decode_agentfsm, "openai_sdk": decode_openai}
    answers = {name: fn(reads) for name, fn in decoders.items()}  # warm-up, and the check
    if answers["agentfsm"] != answers["openai_sdk"]:
        raise AssertionError(f"the decoders disagree: {answers}")
    times: dict[str, list[float]] = {name: [] for name in decoders}
    for _ in range(passes):
        for name, fn in decoders.items():
            started = time.perf_counter()
            fn(reads)
            times[name].append(time.perf_counter() - started)
    out: dict[str, Any] = {
        "body_bytes": len(body),
        "frames": frames,
        "read_bytes": SSE_READ_BYTES,
        "passes": passes,
        "openai_version": metadata.version("openai"),
    }
    for name, xs in times.items():
        seconds = statistics.median(xs)
        out[name] = {
            "mb_per_s": round(len(body) / seconds / 1e6, 2),
            "us_per_frame": round(seconds * 1e6 / frames, 2),
        }
    out["agentfsm_speedup"] = round(out["agentfsm"]["mb_per_s"] / out["openai_sdk"]["mb_per_s"], 2)
    return out


# -- the driver -----------------------------------------------------------------------------


def _worker(mode: str, runs: int, port: int) -> dict[str, Any]:
    command = [sys.executable, __file__, "--worker", mode, "--runs", str(runs), "--port", str(port)]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=WORKER_TIMEOUT, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{mode} x{runs} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _summary(samples: list[dict[str, Any]]) -> dict[str, Any]:
    def median(key: str) -> float:
        return round(statistics.median(float(s[key]) for s in samples), 1)

    return {
        "runs_per_s": median("runs_per_s"),
        "errors": max(int(s["errors"]) for s in samples),
        "peak_rss_mb": median("peak_rss_mb"),
        "rss_before_mb": median("rss_before_mb"),
        "peak_rss_per_run_kb": median("peak_rss_per_run_kb"),
        "fds_before": max(int(s["fds_before"]) for s in samples),
        "fds_pooled": max(int(s["fds_pooled"]) for s in samples),
        "fds_after": max(int(s["fds_after"]) for s in samples),
        "fd_leak": max(int(s["fds_after"]) - int(s["fds_before"]) for s in samples),
        "samples_runs_per_s": [s["runs_per_s"] for s in samples],
    }


def run_benchmark(sizes: list[int], rounds: int, modes: list[str]) -> dict[str, Any]:
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        by_size: dict[str, Any] = {}
        for runs in sizes:
            samples: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
            for round_ in range(rounds):
                order = modes if round_ % 2 == 0 else modes[::-1]  # interleaved, alternating
                for mode in order:
                    samples[mode].append(_worker(mode, runs, port))
            summary = {mode: _summary(xs) for mode, xs in samples.items()}
            for mode in modes:
                # Paired: each round's floor over the same round's mode (taken one after the
                # other), then the median, so a slow stretch of the shared machine weighs on
                # both sides of a ratio instead of on one side of a ratio of medians.
                paired = [
                    float(raw["runs_per_s"]) / float(own["runs_per_s"])
                    for raw, own in zip(samples["raw"], samples[mode], strict=True)
                ]
                summary[mode]["ratio"] = round(statistics.median(paired), 2)
                summary[mode]["ratio_of_medians"] = round(
                    summary["raw"]["runs_per_s"] / summary[mode]["runs_per_s"], 2
                )
            by_size[str(runs)] = summary
    finally:
        if server.stdin is not None:
            server.stdin.close()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    return by_size


def _table(by_size: dict[str, Any]) -> str:
    lines = [
        f"{'runs':>5} {'mode':<16} {'runs/s':>8} {'ratio':>6} {'errors':>6} "
        f"{'peak RSS MB':>11} {'KB/run':>7} {'fds before/pooled/after':>24}"
    ]
    for runs, summary in by_size.items():
        for mode, s in summary.items():
            fds = f"{s['fds_before']}/{s['fds_pooled']}/{s['fds_after']}"
            lines.append(
                f"{runs:>5} {mode:<16} {s['runs_per_s']:>8} {s['ratio']:>6} {s['errors']:>6} "
                f"{s['peak_rss_mb']:>11} {s['peak_rss_per_run_kb']:>7} {fds:>24}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results.json"))
    parser.add_argument("--sizes", default="200,1000", help="concurrent runs, comma-separated")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--per-run", action="store_true", help="also one adapter per run")
    parser.add_argument("--decode-passes", type=int, default=31, help="SSE decode timed passes")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--runs", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.serve:
        asyncio.run(serve(sys.stdout))
        return 0
    if args.worker:
        print(json.dumps(asyncio.run(measure(args.worker, args.runs, args.port))))
        return 0

    sizes = [int(size) for size in args.sizes.split(",")]
    if not all(0 < size <= 5000 for size in sizes) or not 0 < args.rounds <= 10:
        parser.error("sizes must be 1-5000 runs and rounds 1-10")
    modes = ["agent", "raw"] + (["adapter_per_run"] if args.per_run else [])
    started = time.perf_counter()
    decode = sse_decode(args.decode_passes)
    by_size = run_benchmark(sizes, args.rounds, modes)
    largest = by_size[str(max(sizes))]["agent"]
    result = {
        "benchmark": "concurrent one-turn Agent runs over loopback, default OpenAIChat "
        "vs raw httpx; medians of fresh client processes (ratios: medians of each round's "
        "ratio)",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "rounds": args.rounds,
        "goal": f"ratio <= {GOAL_RATIO} and 0 errors at {max(sizes)} runs",
        "goal_met": largest["ratio"] <= GOAL_RATIO and largest["errors"] == 0,
        "by_runs": by_size,
        "sse_decode": decode,
        "seconds": round(time.perf_counter() - started, 1),
    }
    merge_results(args.out, "load", result)
    print(_table(by_size))
    print(
        f"SSE decode, {decode['body_bytes']} bytes / {decode['frames']} frames: agentfsm "
        f"{decode['agentfsm']['mb_per_s']} MB/s ({decode['agentfsm']['us_per_frame']} µs/frame), "
        f"openai SDK {decode['openai_sdk']['mb_per_s']} MB/s "
        f"({decode['openai_sdk']['us_per_frame']} µs/frame): {decode['agentfsm_speedup']}x"
    )
    print(f"goal met: {result['goal_met']} ({result['goal']}); {result['seconds']} s -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
