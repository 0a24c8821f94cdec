"""The SDK's no-responders window (check C10 of the SDK notes' §7), run by
engine_down_test.go while no engine serves the account. Prints one JSON line per
phase; the Go test starts abi-engine when it reads the line of the phase "calling".

Phases, each through the generated keyvalue client (ABIClient.keyvalue):
- "window": get with ABIClient(timeout=10): nats-py's NoRespondersError once the
  SDK's window of min(5 s, timeout - 0.5 s) is over (naas_abi_sdk/no_responders.py).
- "short": get with timeout=1: the window is 0.5 s, so NoRespondersError at about
  0.5 s, not a timeout (the newest no_responders.py; an older SDK times out).
- "calling", then "delayed": a set (timeout=10) made while nobody serves; the Go
  test starts an engine 2 s later, and the set succeeds if it serves within the
  window. The value is then read back."""

import asyncio
import json
import os
import sys
import time

from nats.errors import NoRespondersError
from naas_abi_proto.keyvalue.v1 import keyvalue_pb2 as kv
from naas_abi_sdk import ABIClient

URL, TOKEN = os.environ["ABI_NATS_URL"], os.environ["ABI_TEST_TOKEN"]


def say(**fields):
    print(json.dumps(fields), flush=True)


async def refused(phase, timeout):
    async with ABIClient(URL, TOKEN, timeout=timeout) as client:
        start = time.monotonic()
        try:
            await client.keyvalue.get(kv.GetRequest(key="pysdk:nobody"))
            error = "none"
        except NoRespondersError:
            error = "NoRespondersError"
        except asyncio.TimeoutError:
            error = "TimeoutError"
        except Exception as exc:  # reported, not raised: the Go test names it
            error = f"{type(exc).__name__}: {exc}"
        say(phase=phase, timeout=timeout, error=error, seconds=round(time.monotonic() - start, 3))


async def delayed():
    async with ABIClient(URL, TOKEN, timeout=10) as client:
        await client._transport.connect()
        say(phase="calling")
        start = time.monotonic()
        try:
            await client.keyvalue.set(kv.SetRequest(key="pysdk:delayed", value=b"late"))
            got = await client.keyvalue.get(kv.GetRequest(key="pysdk:delayed"))
            error, value = "none", got.value.decode()
        except Exception as exc:
            error, value = f"{type(exc).__name__}: {exc}", ""
        say(phase="delayed", error=error, value=value, seconds=round(time.monotonic() - start, 3))


async def main():
    await refused("window", 10.0)
    await refused("short", 1.0)
    await delayed()


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
