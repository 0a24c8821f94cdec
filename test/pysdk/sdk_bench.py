"""SDK figures: calls per second and p50/p99 latency of the published Python SDK
against whichever engine serves, for keyvalue get, keyvalue set and a 1 MiB object get,
with 1 and 16 concurrent SDK clients. Not a pytest file; bench_test.go runs it
(docs/performance.md has the command).

  sdk_bench.py [--rounds 5] [--seconds 3] [--clients 1,16] [--unary-get]

Each client is its own process with its own ABIClient (its own connection), calling
one operation back to back, as a module process does. The rounds interleave: every
round runs every (operation, clients) pair once, and the figure of a pair is the median
of its rounds. Prints one JSON line per pair and, last, a Markdown table. The URL and
the token come from ABI_NATS_URL and ABI_SERVICE_TOKEN.

Where the time goes: each pair also reports the CPU time per call of the SDK clients
(their own process time), of the engine (the process whose pid is in
ABI_BENCH_ENGINE_PID) and of the broker (the seconds the URL in
ABI_BENCH_BROKER_CPU answers: bench_test.go's process, which runs the broker), when
those are set."""

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import statistics
import time
import urllib.request

from naas_abi_proto.object_storage.v1 import object_storage_pb2 as osp
from naas_abi_sdk import ABIClient
from naas_abi_sdk.services.keyvalue import KeyValueService
from naas_abi_sdk.services.object_storage import ObjectStorageService

URL = os.environ["ABI_NATS_URL"]
TOKEN = os.environ["ABI_SERVICE_TOKEN"]
PREFIX = "bench"
OBJECT = 1 << 20
OPS = ("kv.get", "kv.set", "object.get 1 MiB")


async def client_loop(op, seconds, unary_get, start_at):
    async with ABIClient(URL, TOKEN, timeout=30.0) as client:
        kv = KeyValueService(client.keyvalue)
        store = ObjectStorageService(client.object_storage)
        value = b"v" * 64
        if op == "kv.get":
            call = lambda: kv.get("bench-key")  # noqa: E731
        elif op == "kv.set":
            call = lambda: kv.set("bench-key-%d" % os.getpid(), value)  # noqa: E731
        elif unary_get:
            call = lambda: client.object_storage.get_object(osp.GetObjectRequest(prefix=PREFIX, key="1mib"))  # noqa: E731
        else:
            call = lambda: store.get_object(PREFIX, "1mib")  # noqa: E731
        await call()  # connect and warm up outside the measured window
        await asyncio.sleep(max(0.0, start_at - time.time()))
        lat, end, cpu = [], time.time() + seconds, time.process_time()
        while time.time() < end:
            t0 = time.perf_counter()
            await call()
            lat.append(time.perf_counter() - t0)
        return lat, time.process_time() - cpu


def worker(op, seconds, unary_get, start_at, out):
    out.put(asyncio.run(client_loop(op, seconds, unary_get, start_at)))


def cpu_seconds(env):
    """The CPU seconds of another process: the engine's by its pid in env (from
    /proc, Linux), the broker's as the URL in env answers them; None when env is unset."""
    where = os.environ.get(env)
    if not where:
        return None
    if where.isdigit():
        with open(f"/proc/{where}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return float(urllib.request.urlopen(where, timeout=10).read().decode().strip())


def run_pair(op, clients, seconds, unary_get):
    """One measurement: clients processes on op, started together."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    start_at = time.time() + 2.0 + 0.15 * clients  # every process connected by then
    procs = [ctx.Process(target=worker, args=(op, seconds, unary_get, start_at, out)) for _ in range(clients)]
    # The engine's and the broker's CPU over the whole pair, each client's connection and
    # first call included (one call in hundreds).
    engine0, broker0 = cpu_seconds("ABI_BENCH_ENGINE_PID"), cpu_seconds("ABI_BENCH_BROKER_CPU")
    for p in procs:
        p.start()
    lat, client_cpu = [], 0.0
    for _ in procs:
        got, cpu = out.get(timeout=120 + seconds)
        lat.extend(got)
        client_cpu += cpu
    for p in procs:
        p.join()
    engine1, broker1 = cpu_seconds("ABI_BENCH_ENGINE_PID"), cpu_seconds("ABI_BENCH_BROKER_CPU")
    lat.sort()
    pick = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1000  # noqa: E731
    res = {"calls_per_s": len(lat) / seconds, "p50_ms": pick(0.50), "p99_ms": pick(0.99), "calls": len(lat),
           "client_cpu_us_per_call": client_cpu / len(lat) * 1e6}
    if engine0 is not None:
        res["engine_cpu_us_per_call"] = (engine1 - engine0) / len(lat) * 1e6
    if broker0 is not None:
        res["broker_cpu_us_per_call"] = (broker1 - broker0) / len(lat) * 1e6
    return res


async def setup():
    async with ABIClient(URL, TOKEN, timeout=30.0) as client:
        await KeyValueService(client.keyvalue).set("bench-key", b"v" * 64)
        # Unary put: the broker of the bench takes 8 MiB messages, as the Python dev
        # broker does, so setup needs no transfer.
        await client.object_storage.put_object(osp.PutObjectRequest(prefix=PREFIX, key="1mib", content=os.urandom(OBJECT)))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--clients", default="1,16")
    p.add_argument("--unary-get", action="store_true")
    args = p.parse_args()
    asyncio.run(setup())
    counts = [int(c) for c in args.clients.split(",")]
    results = {}
    for r in range(args.rounds):
        for op in OPS:
            for n in counts:
                res = run_pair(op, n, args.seconds, args.unary_get)
                results.setdefault((op, n), []).append(res)
                print(json.dumps({"round": r, "op": op, "clients": n, **res}), flush=True)
    print("\n| operation | clients | calls/s | p50 ms | p99 ms | CPU µs per call: clients | engine | broker |")
    print("|---|---|---|---|---|---|---|---|")
    for (op, n), rs in results.items():
        med = lambda k: statistics.median(x.get(k, float("nan")) for x in rs)  # noqa: E731
        print(f"| {op} | {n} | {med('calls_per_s'):.0f} | {med('p50_ms'):.2f} | {med('p99_ms'):.2f} "
              f"| {med('client_cpu_us_per_call'):.0f} | {med('engine_cpu_us_per_call'):.0f} | {med('broker_cpu_us_per_call'):.0f} |")


if __name__ == "__main__":
    main()
