"""The module registry through the SDK's own discovery client (DiscoveryClient,
DiscoverySession) and a real module process (`naas-abi-module`), against abi-engine
with nats.discovery on (project "pysdk", lease 5 s). pysdk_test.go starts the engine.

Every expectation names its source: the SDK's behaviour (naas_abi_sdk/discovery.py,
module.py) or the Python discovery service's contract that abi-engine reproduces."""

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from naas_abi_proto.discovery.v1 import discovery_pb2 as pb
from naas_abi_sdk import ABIClient
from naas_abi_sdk.discovery import DiscoveryClient, DiscoverySession
from naas_abi_sdk.transport import RPCError

URL = os.environ["ABI_NATS_URL"]
TOKEN = os.environ["ABI_TEST_TOKEN"]
PROJECT = "pysdk"


def run(coro):
    return asyncio.run(coro)


async def with_discovery(body, token=TOKEN):
    async with ABIClient(URL, token, timeout=5.0) as client:
        return await body(DiscoveryClient(client._transport, PROJECT))


def descriptor(module_id, *deps):
    return pb.ModuleDescriptor(
        module_id=module_id,
        package_version="1.0",
        contract_major=1,
        dependencies=[pb.Dependency(module_id=d, contract_major=1) for d in deps],
    )


def test_session_register_lookup_and_unregister():
    """A DiscoverySession registers (STARTING), renews initialized (READY: no
    dependencies), is found by get_module and list_modules under its uuid4 instance
    id, and close() unregisters it: MODULE_NOT_FOUND (the Python service's codes)."""

    async def body(discovery):
        session = DiscoverySession(discovery, descriptor("pysdk.session"))
        await session.register()
        assert session.status == "STARTING"
        assert 0 < session.lease_seconds <= 5
        session.initialized = True
        await session.renew()
        assert session.status == "READY"
        found = await discovery.get_module("pysdk.session")
        assert [i.instance_id for i in found] == [session.instance_id]
        assert found[0].status == "READY"
        page, _ = await discovery.list_modules(limit=100)
        assert session.instance_id in [i.instance_id for i in page]
        with pytest.raises(RPCError) as exc:
            await discovery.get_module("pysdk.session", contract_major=2)
        assert exc.value.code == "INCOMPATIBLE_MODULE"
        await session.close()
        with pytest.raises(RPCError) as exc:
            await discovery.get_module("pysdk.session")
        assert exc.value.code == "MODULE_NOT_FOUND"
        assert str(exc.value) == "MODULE_NOT_FOUND: MODULE_NOT_FOUND: pysdk.session"

    run(with_discovery(body))


def test_dependencies_rollouts_and_refusals():
    """A consumer is DEGRADED until its provider is READY; a cycle is refused
    DEPENDENCY_CYCLE; a bad descriptor INVALID_ARGUMENT with the service's text; a
    page of 0 INVALID_ARGUMENT; a wrong token UNAUTHENTICATED, never retried."""

    async def body(discovery):
        consumer = DiscoverySession(discovery, descriptor("pysdk.consumer", "pysdk.provider"))
        provider = DiscoverySession(discovery, descriptor("pysdk.provider"))
        await consumer.register()
        consumer.initialized = True
        await consumer.renew()
        assert consumer.status == "DEGRADED"
        await provider.register()
        provider.initialized = True
        await provider.renew()
        await consumer.renew()
        assert consumer.status == "READY"
        first = DiscoverySession(discovery, descriptor("pysdk.c1", "pysdk.c2"))
        await first.register()
        cycle = DiscoverySession(discovery, descriptor("pysdk.c2", "pysdk.c1"))
        with pytest.raises(RPCError) as exc:
            await cycle.register()
        assert exc.value.code == "DEPENDENCY_CYCLE"
        await first.close()
        # Another replica of a contract must declare the same dependencies.
        other = DiscoverySession(discovery, descriptor("pysdk.provider", "pysdk.c1"))
        with pytest.raises(RPCError) as exc:
            await other.register()
        assert exc.value.code == "DESCRIPTOR_CONFLICT"
        bad = DiscoverySession(discovery, descriptor("bad.*"))
        with pytest.raises(RPCError) as exc:
            await bad.register()
        assert exc.value.code == "INVALID_ARGUMENT"
        # RPCError's text is "<code>: <message>", and the service's message repeats the code.
        assert str(exc.value) == "INVALID_ARGUMENT: INVALID_ARGUMENT: Invalid module or instance identity"
        with pytest.raises(RPCError) as exc:
            await discovery.list_modules(limit=0)
        assert exc.value.code == "INVALID_ARGUMENT"
        # An admin-only operation: the test's identity is not "api" or "engine".
        with pytest.raises(RPCError) as exc:
            await discovery.evict(provider.instance_id)
        assert exc.value.code == "PERMISSION_DENIED"
        await consumer.close()
        await provider.close()

    run(with_discovery(body))

    async def wrong(discovery):
        with pytest.raises(RPCError) as exc:
            await discovery.get_module("pysdk.provider")
        assert exc.value.code == "UNAUTHENTICATED"

    run(with_discovery(wrong, token=os.environ["ABI_TEST_TOKEN_WRONG_SECRET"]))


def test_admin_evicts_and_the_session_registers_again_under_its_id():
    """evict by "api" returns the instance; the session's next renew gets
    LEASE_EXPIRED, and the SDK registers again under the same instance id with a new
    lease token (naas_abi_sdk/discovery.py heartbeat)."""

    async def body(discovery):
        session = DiscoverySession(discovery, descriptor("pysdk.evicted"))
        await session.start()  # register and the heartbeat (every lease/4 here)
        admin = os.environ["ABI_TEST_TOKEN_API"]
        async with ABIClient(URL, admin, timeout=5.0) as client:
            evicted = await DiscoveryClient(client._transport, PROJECT).evict(session.instance_id)
        assert evicted.instance_id == session.instance_id
        old_token = session.lease_token
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                found = await discovery.get_module("pysdk.evicted")
                if session.lease_token != old_token and [i.instance_id for i in found] == [session.instance_id]:
                    break
            except RPCError as exc:
                assert exc.code == "MODULE_NOT_FOUND"
            await asyncio.sleep(0.1)
        else:
            pytest.fail("the session did not register again under its instance id")
        await session.close()

    run(with_discovery(body))


def test_a_real_module_process():
    """`naas-abi-module` runs a BaseModule with --discovery-project: it registers,
    renews initialized and is READY under one instance id; SIGTERM drains it (a
    DRAINING renew) and it unregisters (naas_abi_sdk/module.py run_module)."""
    env = dict(os.environ, ABI_SERVICE_TOKEN=TOKEN, PYTHONPATH=str(Path(__file__).parent / "modules"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "naas_abi_sdk.module_runner", "pysdk_module", "--url", URL, "--discovery-project", PROJECT],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    try:

        async def ready(discovery):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                assert proc.poll() is None, proc.stdout.read().decode()
                try:
                    found = await discovery.get_module("pysdk.module")
                    if found and found[0].status == "READY":
                        return found
                except RPCError as exc:
                    assert exc.code == "MODULE_NOT_FOUND"
                await asyncio.sleep(0.1)
            pytest.fail("the module never became READY")

        found = run(with_discovery(ready))
        assert len(found) == 1
        uuid.UUID(found[0].instance_id)  # the SDK's uuid4 with hyphens
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        print(out.decode())

        async def gone(discovery):
            with pytest.raises(RPCError) as exc:
                await discovery.get_module("pysdk.module")
            assert exc.value.code == "MODULE_NOT_FOUND"

        run(with_discovery(gone))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_registry_written_by_python_is_read_and_updated_without_loss():
    """A RegistryState written with Python's protobuf (the layout of the Python
    service's store, plus a record field this engine does not know) is read by
    abi-engine (get_module computes READY), its owner and lease hash are honoured (a
    renew by the same caller and token), and a later write keeps the unknown field.
    Runs last: it replaces the registry's value."""
    import hashlib

    import nats
    from google.protobuf.internal.encoder import _VarintBytes

    lease_token = uuid.uuid4().hex
    marker = b"written-by-python-future-field"
    record = pb.RegistryRecord(
        instance=pb.Instance(
            descriptor=descriptor("pysdk.python"),
            instance_id="py-1",
            status="READY",
            expires_at=time.time() + 60,
        ),
        owner="sdk-ci",  # the sub of ABI_TEST_TOKEN
        lease_hash=hashlib.sha256(lease_token.encode()).hexdigest(),
        initialized=True,
        registered_at=time.time(),
    ).SerializeToString()
    record += _VarintBytes((99 << 3) | 2) + _VarintBytes(len(marker)) + marker
    state = _VarintBytes((1 << 3) | 2) + _VarintBytes(len(record)) + record

    async def body():
        nc = await nats.connect(URL)
        try:
            kv = await nc.jetstream().key_value("ABI_DISCOVERY_" + PROJECT)
            await kv.put("registry", state)

            async def check(discovery):
                found = await discovery.get_module("pysdk.python")
                assert [(i.instance_id, i.status) for i in found] == [("py-1", "READY")]
                renewed = await discovery._call(
                    "renew",
                    pb.RenewRequest(instance_id="py-1", lease_token=lease_token, initialized=True),
                    pb.RenewResponse,
                )
                assert renewed.instance.status == "READY"
                other = DiscoverySession(discovery, descriptor("pysdk.after"))
                await other.register()

            await with_discovery(check)
            after = (await kv.get("registry")).value
            assert marker in after, "the unknown field was lost"
            parsed = pb.RegistryState.FromString(after)
            assert sorted(r.instance.instance_id for r in parsed.records)[-1] == "py-1"
            assert len(parsed.records) == 2
        finally:
            await nc.close()

    run(body())
