"""One SDK client process of a deploy test (deploy_test.go): the published Python SDK
calling whichever engine serves, through its public API only. Not a pytest file.

  sdk_traffic.py write --client N --acked FILE [--big-objects]
      Until SIGTERM: a keyvalue set of a fresh key and its get, then an object put of a
      fresh key and its get, again and again. Every third object is 96 KiB with
      --big-objects (above the facade's 64 KiB unary limit, so a transfer), else 4 KiB.
      Each write the engine acknowledged is appended to FILE as a JSON line before the
      next call; at exit one JSON line on stdout counts the calls and lists every failed
      one (exception class and text), which the Go test asserts is empty.

  sdk_traffic.py verify --acked FILE...
      Reads every acknowledged write back and prints one JSON line: how many were read,
      and each one missing or different.

Values are derived from their key (sha256 of it, repeated to the size), so verify needs
nothing but the key and the size. The URL and the token come from ABI_NATS_URL and
ABI_SERVICE_TOKEN, as for the SDK's own naas-abi-module."""

import argparse
import asyncio
import hashlib
import json
import os
import signal
import sys
import time
import traceback

from naas_abi_proto.object_storage.v1 import object_storage_pb2 as osp
from naas_abi_sdk import ABIClient
from naas_abi_sdk.services.keyvalue import KeyValueService
from naas_abi_sdk.services.object_storage import ObjectStorageService

URL = os.environ["ABI_NATS_URL"]
TOKEN = os.environ["ABI_SERVICE_TOKEN"]
PREFIX = "deploy"
SMALL = 4 * 1024
BIG = 96 * 1024


def value(key: str, size: int) -> bytes:
    seed = hashlib.sha256(key.encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


async def get_object(client, store, key):
    """The facade's get (a transfer) once the engine serves transfers in protobuf; the
    generated unary get_object before (--unary-get)."""
    if ARGS.unary_get:
        got = await client.object_storage.get_object(osp.GetObjectRequest(prefix=PREFIX, key=key))
        return got.content
    return await store.get_object(PREFIX, key)


async def write(args):
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    calls, failed = 0, []
    run = args.run or str(os.getpid())
    with open(args.acked, "a", buffering=1) as acked:
        async with ABIClient(URL, TOKEN, timeout=10.0) as client:
            kv = KeyValueService(client.keyvalue)
            store = ObjectStorageService(client.object_storage)
            i = 0
            # Tell the Go test this client is connected and about to call.
            print(json.dumps({"started": args.client}), flush=True)
            while not stop.is_set():
                i += 1
                key = f"{run}-c{args.client}-{i}"
                size = BIG if args.big_objects and i % 3 == 0 else SMALL
                steps = (
                    ("kv.set", lambda: kv.set(key, value(key, 64))),
                    ("kv.get", lambda: kv.get(key)),
                    ("object.put", lambda: store.put_object(PREFIX, key, value(key, size))),
                    ("object.get", lambda: get_object(client, store, key)),
                )
                for name, call in steps:
                    calls += 1
                    started = time.monotonic()
                    try:
                        got = await call()
                    except Exception as exc:  # every failure is the finding: report it whole
                        failed.append(f"{name} {key}: {type(exc).__name__}: {exc} after {time.monotonic() - started:.2f}s")
                        break
                    if name == "kv.set":
                        acked.write(json.dumps({"kind": "kv", "key": key, "size": 64}) + "\n")
                    elif name == "object.put":
                        acked.write(json.dumps({"kind": "object", "key": key, "size": size}) + "\n")
                    elif name == "kv.get" and got != value(key, 64):
                        failed.append(f"{name} {key}: read {len(got or b'')} bytes that are not what was written")
                    elif name == "object.get" and got != value(key, size):
                        failed.append(f"{name} {key}: read {len(got or b'')} bytes, not the {size} written")
    print(json.dumps({"client": args.client, "calls": calls, "failed": failed}), flush=True)


async def verify(args):
    read, bad = 0, []
    async with ABIClient(URL, TOKEN, timeout=10.0) as client:
        kv = KeyValueService(client.keyvalue)
        store = ObjectStorageService(client.object_storage)
        for path in args.acked:
            with open(path) as f:
                for line in f:
                    w = json.loads(line)
                    try:
                        if w["kind"] == "kv":
                            got = await kv.get(w["key"])
                        else:
                            got = await get_object(client, store, w["key"])
                    except Exception as exc:
                        bad.append(f"{w['kind']} {w['key']}: {type(exc).__name__}: {exc}")
                        continue
                    read += 1
                    if got != value(w["key"], w["size"]):
                        bad.append(f"{w['kind']} {w['key']}: {len(got or b'')} bytes, not the {w['size']} written")
    print(json.dumps({"read": read, "bad": bad}), flush=True)


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=("write", "verify"))
    p.add_argument("--client", type=int, default=0)
    p.add_argument("--run", default="")
    p.add_argument("--acked", nargs="+", required=True)
    p.add_argument("--big-objects", action="store_true")
    p.add_argument("--unary-get", action="store_true")
    ARGS = p.parse_args()
    if ARGS.mode == "write":
        ARGS.acked = ARGS.acked[0]
        asyncio.run(write(ARGS))
    else:
        asyncio.run(verify(ARGS))


ARGS = None

if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc()
        sys.exit(1)
