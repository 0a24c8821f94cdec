"""Real module processes run by the SDK's `naas-abi-module` against abi-engine (checks
C12, C14 and C16 of the SDK notes' §7): a one-shot module, a module depending on
another that is killed and replaced, and a module whose token expires while it runs.
pysdk_test.go starts the engine with discovery on (project "pysdk", lease 5 s).

Every expectation names its source: the SDK's behaviour (naas_abi_sdk/module.py,
discovery.py, health.py) or the Python discovery service's contract."""

import asyncio
import base64
import hashlib
import hmac
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from naas_abi_sdk import ABIClient
from naas_abi_sdk.discovery import DiscoveryClient
from naas_abi_sdk.services.keyvalue import KeyValueService
from naas_abi_sdk.transport import RPCError

URL = os.environ["ABI_NATS_URL"]
TOKEN = os.environ["ABI_TEST_TOKEN"]
PROJECT = "pysdk"
MODULES = Path(__file__).parent / "modules"


def run(coro):
    return asyncio.run(coro)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_module_argv(package):
    """naas-abi-module <package> --discovery-project pysdk (the runner's module form,
    as the console script does not put modules/ on the path)."""
    return [sys.executable, "-m", "naas_abi_sdk.module_runner", package, "--url", URL, "--discovery-project", PROJECT]


def module_env(token, health_port=None, **env):
    env = dict(os.environ, ABI_SERVICE_TOKEN=token, PYTHONPATH=str(MODULES), PYTHONDONTWRITEBYTECODE="1", **env)
    if health_port:
        env.update(ABI_HEALTH_PORT=str(health_port), ABI_HEALTH_HOST="127.0.0.1")
    return env


def start_module(package, token=TOKEN, health_port=None, **env):
    """A module process with its output on a pipe."""
    return subprocess.Popen(
        start_module_argv(package), env=module_env(token, health_port, **env),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )


def stop(*procs):
    for p in procs:
        if p.poll() is None:
            p.kill()
        out, _ = p.communicate()
        print(out.decode(errors="replace"))


async def lookup(module_id):
    """get_module through the SDK's DiscoveryClient: the instances, or the error code."""
    async with ABIClient(URL, TOKEN, timeout=5.0) as client:
        try:
            return await DiscoveryClient(client._transport, PROJECT).get_module(module_id)
        except RPCError as exc:
            return exc.code


def wait_for(what, check, within, *procs):
    """Polls check() until it returns a true value; every process must keep running."""
    deadline = time.monotonic() + within
    last = None
    while time.monotonic() < deadline:
        for p in procs:
            assert p.poll() is None, f"a module exited ({p.returncode}) while waiting for {what}"
        last = check()
        if last:
            return last
        time.sleep(0.1)
    pytest.fail(f"{what}: not within {within} s (last {last!r})")


def ready(port):
    """The SDK's health probe (health.py): 200 READY, else the status and its text."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=2) as r:
            return r.status, r.read().decode().strip()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode().strip()
    except OSError as e:
        return 0, str(e)


def ready_instance(module_id):
    found = run(lookup(module_id))
    if isinstance(found, str):
        return None
    return [i for i in found if i.status == "READY"]


def test_one_shot_module():
    """C12: a module whose run() makes its keyvalue and object calls (through the
    services it declared) and returns: naas-abi-module exits 0. The broker's traffic,
    tapped by a plain subscriber, shows what the SDK notes' §4.3 lists: register,
    renew initialized, the module's calls, a draining renew and unregister (module.py
    run_module's cleanup), so the registry has no instance left at once:
    MODULE_NOT_FOUND, not waiting for the lease."""
    import nats
    from naas_abi_proto.discovery.v1 import discovery_pb2 as dpb

    async def body():
        nc = await nats.connect(URL)
        seen = []

        async def tap(msg):
            op = msg.subject.rsplit(".", 1)[-1]
            if msg.subject.startswith("abi.discovery."):
                if op == "register":
                    req = dpb.RegisterRequest.FromString(msg.data)
                    seen.append(("register", req.descriptor.module_id, req.instance_id))
                elif op == "renew":
                    req = dpb.RenewRequest.FromString(msg.data)
                    seen.append(("renew", req.initialized, req.draining, req.instance_id))
                elif op == "unregister":
                    seen.append(("unregister", dpb.UnregisterRequest.FromString(msg.data).instance_id))
            else:
                seen.append((msg.subject,))

        await nc.subscribe(f"abi.discovery.{PROJECT}.v1.>", cb=tap)
        await nc.subscribe("abi.svc.>", cb=tap)
        await nc.flush()
        proc = await asyncio.create_subprocess_exec(
            *start_module_argv("pysdk_oneshot"), env=module_env(TOKEN),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), 90)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        await nc.flush()
        await nc.close()
        return proc.returncode, out.decode(errors="replace"), seen

    code, text, seen = run(body())
    print(text)
    assert code == 0, text
    assert "oneshot: checks passed" in text
    register = [s for s in seen if s[0] == "register" and s[1] == "pysdk.oneshot"]
    assert len(register) == 1, seen
    instance = register[0][2]
    mine = [s for s in seen if s[-1] == instance or len(s) == 1]
    ops = [s[0] if s[0] != "renew" else ("renew", s[1], s[2]) for s in mine]
    print("the module's traffic:", ops)
    assert ops[0] == "register"
    assert ops[1] == ("renew", True, False), "the initialized renew comes before run()"
    calls = ops[2 : ops.index(("renew", True, True))]
    assert "abi.svc.keyvalue.v1.set" in calls and "abi.svc.keyvalue.v1.delete" in calls
    assert "abi.svc.object_storage.v1.transfer.open" in calls, "the module's 200 KB object went as a transfer"
    assert ops[-2:] == [("renew", True, True), "unregister"], ops[-3:]
    assert run(lookup("pysdk.oneshot")) == "MODULE_NOT_FOUND"


def test_dependency_killed_and_replaced():
    """C14: a consumer declaring a module dependency waits for it before it starts its
    probe (module.py: wait_ready, then the health server); once the provider is READY
    the consumer is READY. kill -9 the provider: nothing unregisters it, so its
    registration ends by lease (5 s) and the consumer's next renew reports it DEGRADED
    (/ready 503 DEGRADED). A replacement provider is READY under another instance id
    and the consumer READY again."""
    port = free_port()
    consumer = start_module("pysdk_module", health_port=port, PYSDK_MODULE_ID="pysdk.consumer",
                            PYSDK_MODULE_DEPENDS="pysdk.provider")
    provider = replacement = None
    try:
        # The consumer waits in wait_ready: registered, not READY, no probe yet.
        wait_for("the consumer registered", lambda: not isinstance(run(lookup("pysdk.consumer")), str), 60, consumer)
        assert ready(port)[0] == 0, "the probe listens before the dependency is READY"
        assert [i.status for i in run(lookup("pysdk.consumer"))] == ["STARTING"]
        provider = start_module("pysdk_module", PYSDK_MODULE_ID="pysdk.provider")
        first = wait_for("the provider READY", lambda: ready_instance("pysdk.provider"), 60, consumer, provider)
        wait_for("the consumer's /ready READY", lambda: ready(port) == (200, "READY"), 60, consumer)

        provider.send_signal(signal.SIGKILL)
        provider.wait()
        killed = time.monotonic()
        wait_for("the provider's lease ended", lambda: run(lookup("pysdk.provider")) == "MODULE_NOT_FOUND", 30, consumer)
        gone_after = time.monotonic() - killed
        wait_for("the consumer's /ready DEGRADED", lambda: ready(port) == (503, "DEGRADED"), 30, consumer)
        print(f"provider gone {gone_after:.1f} s after kill -9 (discovery lease 5 s)")

        replacement = start_module("pysdk_module", PYSDK_MODULE_ID="pysdk.provider")
        second = wait_for("the replacement READY", lambda: ready_instance("pysdk.provider"), 60, consumer, replacement)
        assert second[0].instance_id != first[0].instance_id
        wait_for("the consumer's /ready READY again", lambda: ready(port) == (200, "READY"), 30, consumer)
    finally:
        stop(*(p for p in (consumer, provider, replacement) if p))


def hs256(secret, claims):
    """A service token as the Python system issues them (HS256 over {sub, iat, exp});
    the SDK itself never mints one."""
    enc = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=")
    head = enc(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = enc(json.dumps(claims).encode())
    sig = enc(hmac.new(secret, head + b"." + body, hashlib.sha256).digest())
    return (head + b"." + body + b"." + sig).decode()


def test_token_expires_while_the_module_runs():
    """C16: naas-abi-module reads ABI_SERVICE_TOKEN once (module_runner.py). With a
    token valid for 5 s the module registers and is READY; the first renew after exp is
    UNAUTHENTICATED, which the heartbeat does not retry (discovery.py), so the module
    exits non-zero naming UNAUTHENTICATED, never a micro "500". Its registration then
    ends by lease, and the engine keeps serving."""
    secret = Path(os.environ["ABI_TEST_SECRET_FILE"]).read_bytes().strip()
    now = int(time.time())
    token = hs256(secret, {"sub": "sdk-ci", "iat": now, "exp": now + 5})
    proc = start_module("pysdk_module", token=token, PYSDK_MODULE_ID="pysdk.expiring")
    try:
        wait_for("the module READY", lambda: ready_instance("pysdk.expiring"), 30, proc)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    ended = time.time()
    text = out.decode(errors="replace")
    print(text)
    print(f"the module exited {proc.returncode}, {ended - (now + 5):.1f} s after its token expired")
    assert proc.returncode != 0, text
    assert ended >= now + 5, "the module stopped before its token expired"
    assert "cannot recover from UNAUTHENTICATED" in text, text
    assert "from 500" not in text and "UNKNOWN" not in text
    wait_for("the registration ended by lease", lambda: run(lookup("pysdk.expiring")) == "MODULE_NOT_FOUND", 30)

    async def served(client):
        await KeyValueService(client.keyvalue).set("pysdk:after-expiry", b"v")

    async def with_client():
        async with ABIClient(URL, TOKEN, timeout=5.0) as client:
            await served(client)

    run(with_client())
