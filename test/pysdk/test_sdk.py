"""The Python SDK (naas-abi-sdk) against abi-engine, through the SDK's public API only:
its facades (KeyValueService, ObjectStorageService), its generated clients
(ABIClient.keyvalue, ABIClient.object_storage) and its exceptions. pysdk_test.go
starts the engine and passes the broker's URL and the tokens in the environment.

Every expectation names where it comes from: the SDK's own behaviour (its facades and
exception classes) or the Python engine's contract that abi-engine reproduces."""

import asyncio
import importlib
import importlib.metadata as md
import io
import os
import re
import urllib.request

import pytest
from naas_abi_proto.keyvalue.v1 import keyvalue_pb2 as kv
from naas_abi_proto.object_storage.v1 import object_storage_pb2 as osp
from naas_abi_sdk import ABIClient
from naas_abi_sdk.services.errors import KVNotFoundError, ObjectNotFound, ServiceError
from naas_abi_sdk.services.keyvalue import KeyValueService
from naas_abi_sdk.services.object_storage import ObjectStorageService
from naas_abi_sdk.transport import RPCError

URL = os.environ["ABI_NATS_URL"]
TOKEN = os.environ["ABI_TEST_TOKEN"]
METRICS = os.environ["ABI_TEST_METRICS"]


def run(coro):
    return asyncio.run(coro)


async def with_client(token, body):
    async with ABIClient(URL, token, timeout=5.0) as client:
        return await body(client)


def test_probe():
    """Logs what is installed and which SDK behaviours it has (never fails)."""
    for dist in ("naas-abi-sdk", "naas-abi-proto", "nats-py", "protobuf"):
        print(f"{dist} {md.version(dist)}")
    import naas_abi_sdk.no_responders as nr
    import naas_abi_sdk.transfer as xf

    print("no_responders.transfer_open:", hasattr(nr, "transfer_open"))
    for mod in ("naas_abi_sdk.lifeline", "naas_abi_sdk.health", "naas_abi_sdk.service_token"):
        try:
            importlib.import_module(mod)
            print(mod, "importable")
        except ImportError as exc:
            print(mod, "missing:", exc)
    print("transfer.read_legacy_upload:", hasattr(xf, "read_legacy_upload"))
    print("keyvalue_pb2.ListKeysRequest:", hasattr(kv, "ListKeysRequest"))
    from naas_abi_proto.discovery.v1 import discovery_pb2

    print("RegisterRequest.rollout_id:", "rollout_id" in discovery_pb2.RegisterRequest.DESCRIPTOR.fields_by_name)


def shapes(files):
    """Every message of the abi.* packages: its fields by number, name, type, label,
    oneof (proto3 optional's synthetic oneofs left out), presence and message type."""
    out = {}
    for fd in files:
        if not fd.package.startswith("abi."):
            continue
        for m in fd.message_types_by_name.values():
            out[m.full_name] = sorted(
                (
                    f.number,
                    f.name,
                    f.type,
                    f.is_repeated,
                    f.containing_oneof.name
                    if f.containing_oneof and not f.containing_oneof.name.startswith("_")
                    else None,
                    f.has_presence,
                    f.message_type.full_name if f.message_type else None,
                )
                for f in m.fields
            )
    return out


def test_contracts_match_the_installed_proto():
    """abi-engine's .proto files describe the same messages as the installed
    naas-abi-proto: names, field numbers, types, labels, oneofs and presence."""
    from google.protobuf import descriptor_pb2, descriptor_pool
    from naas_abi_proto.common.v1 import common_pb2
    from naas_abi_proto.discovery.v1 import discovery_pb2
    from naas_abi_proto.transfer.v1 import transfer_pb2

    theirs = shapes(m.DESCRIPTOR for m in (common_pb2, kv, osp, transfer_pb2, discovery_pb2))
    fds = descriptor_pb2.FileDescriptorSet()
    with open(os.environ["ABI_TEST_DESCRIPTORS"], "rb") as f:
        fds.ParseFromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for f in fds.file:
        pool.Add(f)
    ours = shapes(pool.FindFileByName(f.name) for f in fds.file)
    assert len(theirs) >= 43
    assert ours == theirs


def test_keyvalue_round_trip():
    """The facade's values (SDK services/keyvalue.py): None for set, bytes for get,
    False not None for a refused set_if_not_exists, b"" not None for an empty value."""

    async def body(client):
        s = KeyValueService(client.keyvalue)
        assert await s.set("pysdk:k", b"v") is None
        assert await s.get("pysdk:k") == b"v"
        assert await s.exists("pysdk:k") is True
        assert await s.set_if_not_exists("pysdk:k", b"x") is False
        assert await s.get("pysdk:k") == b"v"
        assert await s.delete_if_value_matches("pysdk:k", b"w") is False
        assert await s.delete_if_value_matches("pysdk:k", b"v") is True
        assert await s.exists("pysdk:k") is False
        await s.set("pysdk:empty", b"")
        assert await s.get("pysdk:empty") == b""
        assert await s.set_if_not_exists("pysdk:nx", b"1", ttl=60) is True
        await s.set("pysdk:ttl", b"v", ttl=30)
        assert await s.get("pysdk:ttl") == b"v"

    run(with_client(TOKEN, body))


def test_keyvalue_misses():
    """A missing key is KV_NOT_FOUND (the Python engine's code): KVNotFoundError from
    the facade, an RPCError carrying the response from the generated client; never
    code "500" (which micro's error headers would make)."""

    async def body(client):
        s = KeyValueService(client.keyvalue)
        with pytest.raises(KVNotFoundError) as e:
            await s.get("pysdk:nope")
        assert e.value.code == "KV_NOT_FOUND"
        with pytest.raises(KVNotFoundError) as e:
            await s.delete("pysdk:nope")
        assert e.value.code == "KV_NOT_FOUND"
        with pytest.raises(RPCError) as e:
            await client.keyvalue.get(kv.GetRequest(key="pysdk:nope"))
        assert e.value.code == "KV_NOT_FOUND"
        assert e.value.response.error.code == "KV_NOT_FOUND"
        assert e.value.response.error.message == "Key not found: pysdk:nope"

    run(with_client(TOKEN, body))


def test_keyvalue_list_keys_and_get_ttl():
    """list_keys and get_ttl through the SDK's generated keyvalue client, as the Python
    engine answers them: pages in key order with next_after while more keys exist, a
    limit outside 1..1000 INVALID_ARGUMENT, get_ttl in whole seconds with seconds unset
    for a key that never expires, and KV_NOT_FOUND for a missing key."""

    async def body(client):
        s = KeyValueService(client.keyvalue)
        for k in ("pysdk:list:c", "pysdk:list:a", "pysdk:list:b"):
            await s.set(k, b"v")
        page = await client.keyvalue.list_keys(kv.ListKeysRequest(prefix="pysdk:list:", limit=2))
        assert list(page.keys) == ["pysdk:list:a", "pysdk:list:b"]
        assert page.HasField("next_after") and page.next_after == "pysdk:list:b"
        page = await client.keyvalue.list_keys(
            kv.ListKeysRequest(prefix="pysdk:list:", limit=2, after=page.next_after)
        )
        assert list(page.keys) == ["pysdk:list:c"]
        assert not page.HasField("next_after")
        with pytest.raises(RPCError) as e:
            await client.keyvalue.list_keys(kv.ListKeysRequest(prefix="pysdk:list:", limit=0))
        assert e.value.code == "INVALID_ARGUMENT"
        assert e.value.response.error.message == "limit must be between 1 and 1000, got 0"

        await s.set("pysdk:ttl60", b"v", ttl=60)
        got = await client.keyvalue.get_ttl(kv.GetTtlRequest(key="pysdk:ttl60"))
        assert got.HasField("seconds") and 0 < got.seconds <= 60
        got = await client.keyvalue.get_ttl(kv.GetTtlRequest(key="pysdk:list:a"))
        assert not got.HasField("seconds")
        with pytest.raises(RPCError) as e:
            await client.keyvalue.get_ttl(kv.GetTtlRequest(key="pysdk:nope"))
        assert e.value.code == "KV_NOT_FOUND"
        assert e.value.response.error.message == "Key not found: pysdk:nope"

    run(with_client(TOKEN, body))


def test_objects_recursive():
    """list_objects_recursive through the facade: every object at any depth, named
    relative to the prefix; list_objects of a prefix with objects only deeper down
    succeeds empty, and both listings are ObjectNotFound once nothing is left."""

    async def body(client):
        s = ObjectStorageService(client.object_storage)
        await s.put_object("pysdk-rec", "2024/q1/january.pdf", b"x")
        await s.put_object("pysdk-rec", "2024/notes.txt", b"y")
        assert await s.list_objects_recursive("pysdk-rec") == ["2024/notes.txt", "2024/q1/january.pdf"]
        assert await s.list_objects("pysdk-rec") == []
        await s.delete_object("pysdk-rec", "2024/q1/january.pdf")
        await s.delete_object("pysdk-rec", "2024/notes.txt")
        with pytest.raises(ObjectNotFound):
            await s.list_objects_recursive("pysdk-rec")
        with pytest.raises(ObjectNotFound):
            await s.list_objects("pysdk-rec")

    run(with_client(TOKEN, body))


def test_keyvalue_bad_input():
    """A ttl of 0 is refused INVALID_ARGUMENT by abi-engine (a documented difference:
    the Python engine's backends disagree on it); the facade raises ServiceError with
    the code, and nothing is stored."""

    async def body(client):
        s = KeyValueService(client.keyvalue)
        with pytest.raises(ServiceError) as e:
            await s.set("pysdk:ttl0", b"v", ttl=0)
        assert e.value.code == "INVALID_ARGUMENT"
        assert await s.exists("pysdk:ttl0") is False

    run(with_client(TOKEN, body))


@pytest.mark.parametrize("env", ["ABI_TEST_TOKEN_WRONG_SECRET", "ABI_TEST_TOKEN_EXPIRED", None])
def test_auth_failures(env):
    """Every token failure is UNAUTHENTICATED (the Python engine's code), for keyvalue
    and object_storage alike, and nothing runs."""
    token = os.environ[env] if env else "not-a-jwt"

    async def body(client):
        with pytest.raises(RPCError) as e:
            await KeyValueService(client.keyvalue).set("pysdk:auth", b"v")
        assert e.value.code == "UNAUTHENTICATED"
        with pytest.raises(RPCError) as e:
            await ObjectStorageService(client.object_storage).put_object("pysdk", "auth.txt", b"hi")
        assert e.value.code == "UNAUTHENTICATED"

    run(with_client(token, body))

    async def check(client):
        assert await KeyValueService(client.keyvalue).exists("pysdk:auth") is False

    run(with_client(TOKEN, check))


def test_empty_token_refused_by_the_sdk():
    """The SDK refuses an empty token before it sends anything (SDK transport.py)."""

    async def body(client):
        with pytest.raises(ValueError):
            await client.keyvalue.get(kv.GetRequest(key="k"))

    run(with_client("", body))


def test_objects_small():
    """Small objects through the facade's unary put and the generated unary get;
    OBJECT_NOT_FOUND as ObjectNotFound; metadata as the facade's ObjectMetaData."""

    async def body(client):
        s = ObjectStorageService(client.object_storage)
        await s.put_object("pysdk", "a.txt", b"hi")
        await s.put_object("pysdk", "d/b.txt", b"nested")
        got = await client.object_storage.get_object(osp.GetObjectRequest(prefix="pysdk", key="a.txt"))
        assert got.content == b"hi"
        got = await client.object_storage.get_object(osp.GetObjectRequest(prefix="pysdk", key="d/b.txt"))
        assert got.content == b"nested"
        assert sorted(await s.list_objects("pysdk")) == ["a.txt"]
        meta = await s.get_object_metadata("pysdk", "a.txt")
        assert meta.file_size_bytes == 2
        assert meta.file_name == "a.txt"
        assert meta.file_path == "pysdk/a.txt"
        assert meta.modified_time is not None and meta.modified_time.tzinfo is not None
        assert meta.created_time is None and meta.mime_type is None
        await s.delete_object("pysdk", "a.txt")
        with pytest.raises(ObjectNotFound) as e:
            await s.delete_object("pysdk", "a.txt")
        assert e.value.code == "OBJECT_NOT_FOUND"
        with pytest.raises(RPCError) as e:
            await client.object_storage.get_object(osp.GetObjectRequest(prefix="pysdk", key="a.txt"))
        assert e.value.code == "OBJECT_NOT_FOUND"
        with pytest.raises(ObjectNotFound):
            await s.list_objects("pysdk-nothing-here")

    run(with_client(TOKEN, body))


def metric(name, **labels):
    """The sum of the engine's /metrics samples of name whose labels include labels:
    what the engine itself says it served."""
    text = urllib.request.urlopen(METRICS, timeout=5).read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        series, _, value = line.rpartition(" ")
        if series != name and not series.startswith(name + "{"):
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', series))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(value)
    return total


def unary(operation):
    return metric("abi_engine_requests_total", service="object_storage", operation=operation)


def test_objects_through_transfers():
    """Objects of 2 B, 300 KB, 3 MiB and 40 MiB put and got back through the facade.
    Its get_object is always a transfer (open, start, reads until done, close) and
    falls back to the unary get_object only when the open has no responders, after
    its ~5 s retry window (SDK services/object_storage.py): the engine's own count of
    unary get_object calls staying put shows every get was served as a transfer.
    Puts above 64 KiB are transfers too: only the 2 B one reaches the unary put."""
    sizes = {"two": 2, "300k": 300_000, "3mib": 3 << 20, "40mib": 40 << 20}

    async def body(client):
        s = ObjectStorageService(client.object_storage)
        gets, puts = unary("get_object"), unary("put_object")
        for name, n in sizes.items():
            content = os.urandom(n)
            await s.put_object("pysdk-xfer", name, content)
            got = await s.get_object("pysdk-xfer", name)
            assert len(got) == n and got == content, name
        assert unary("get_object") == gets, "a get fell back to the unary call: the transfer open went unanswered"
        assert unary("put_object") == puts + 1, "only the 2-byte put is unary"
        assert metric("abi_engine_open_sessions") == 0

    run(with_client(TOKEN, body))


def test_empty_object_through_a_transfer():
    """A transfer put with no writes stores an empty object (the SDK writes nothing
    for an empty stream), and its transfer get is done at the first read."""

    async def body(client):
        s = ObjectStorageService(client.object_storage)
        gets = unary("get_object")
        await s.put_object_stream("pysdk-xfer", "empty", io.BytesIO(b""))
        assert await s.get_object("pysdk-xfer", "empty") == b""
        meta = await s.get_object_metadata("pysdk-xfer", "empty")
        assert meta.file_size_bytes == 0
        with pytest.raises(ObjectNotFound) as e:
            await s.get_object("pysdk-xfer", "missing")
        assert e.value.code == "OBJECT_NOT_FOUND"
        assert unary("get_object") == gets
        assert metric("abi_engine_open_sessions") == 0

    run(with_client(TOKEN, body))


def test_stream_left_early():
    """A get stream left after 7 bytes of 3 MiB: the SDK closes the transfer as the
    context ends, and the engine then holds no session (its /metrics gauge)."""

    async def body(client):
        s = ObjectStorageService(client.object_storage)
        content = os.urandom(3 << 20)
        await s.put_object("pysdk-xfer", "early", content)
        async with s.get_object_stream("pysdk-xfer", "early") as reader:
            assert await reader.read(7) == content[:7]
        assert metric("abi_engine_open_sessions") == 0

    run(with_client(TOKEN, body))


def test_keyvalue_parked_reply():
    """A kv get whose reply (3 MiB) is above the broker's max payload (1 MiB): the
    engine parks it and answers with an empty body and the two overflow headers; the
    SDK reads it without a start on abi.rpc.overflow.<owner>.read until done, checks
    the announced size, closes it and decodes it (SDK overflow.py). The value was
    stored before the engine started (pysdk_test.go)."""
    key, size = os.environ["ABI_TEST_BIG_KEY"], int(os.environ["ABI_TEST_BIG_SIZE"])

    async def body(client):
        got = await KeyValueService(client.keyvalue).get(key)
        assert len(got) == size and got == b"0123456789abcdef" * (size // 16)
        assert metric("abi_engine_open_sessions") == 0

    run(with_client(TOKEN, body))


def test_request_overflow():
    """A request above the broker's max payload (1 MiB here): the SDK uploads it on
    abi.rpc.overflow (open "request", writes, no start) and calls with an empty body
    and Abi-Overflow-Request (SDK transport._overflowing, the Python engine's
    request_payload). Read back through a parked reply. Without request overflow the
    SDK's open has no responder and the call fails PAYLOAD_TOO_LARGE."""
    big = bytes(range(256)) * (3 * 1024 * 1024 // 256)  # 3 MiB

    async def body(client):
        s = KeyValueService(client.keyvalue)
        assert await s.set("pysdk:overflow", big) is None
        assert await s.get("pysdk:overflow") == big
        await client.object_storage.put_object(osp.PutObjectRequest(prefix="pysdk-overflow", key="big.bin", content=big))
        got = await client.object_storage.get_object(osp.GetObjectRequest(prefix="pysdk-overflow", key="big.bin"))
        assert got.content == big
        await s.delete("pysdk:overflow")
        assert metric("abi_engine_open_sessions") == 0, "an upload or parked reply left open"

    run(with_client(TOKEN, body))


def test_transfer_contract():
    """C7 of the SDK notes (§7; §6 rows 3 and 4): the open reply of a transfer on the
    object_storage prefix, through the SDK's own open_transfer. The id's owner part is
    32 lowercase hex and a colon (else the SDK's transfer_subject raises "Invalid
    transfer owner"); chunk_bytes lies between 1024 and what the SDK asked,
    min(65536, max_payload // 2) (0 would make its put loop store an empty object). A
    close by another caller is PERMISSION_DENIED and a repeated write sequence
    CONFLICT (the Python engine's session codes), and neither ends the session."""
    from naas_abi_proto.transfer.v1 import transfer_pb2 as tpb
    from naas_abi_sdk.transfer import open_transfer, transfer_subject

    prefix = "abi.svc.object_storage.v1.transfer"
    other = os.environ["ABI_TEST_TOKEN_OTHER"]

    async def body(client):
        s = ObjectStorageService(client.object_storage)
        await s.put_object("pysdk-c7", "a.bin", b"contract")
        nc = await client._transport.connect()
        asked = min(65536, nc.max_payload // 2)
        meta = osp.GetObjectRequest(prefix="pysdk-c7", key="a.bin").SerializeToString()
        async with open_transfer(client._transport, prefix, "get", meta) as xfer:
            assert re.match(r"^[0-9a-f]{32}:", xfer.id), xfer.id
            assert 1024 <= xfer.chunk_bytes <= asked, (xfer.chunk_bytes, asked)
            print(f"transfer open: id {xfer.id}, chunk_bytes {xfer.chunk_bytes} (asked {asked})")
            async with ABIClient(URL, other, timeout=5.0) as intruder:
                with pytest.raises(RPCError) as e:
                    await intruder._transport.call(
                        transfer_subject(prefix, "close", xfer.id), tpb.CloseRequest(id=xfer.id), tpb.CloseResponse
                    )
                assert e.value.code == "PERMISSION_DENIED"
            await xfer.start()
            got = b"".join([d async for d, _ in xfer.fragments()])
            assert got == b"contract", "another caller's close ended the owner's session"

        put = osp.PutObjectRequest(prefix="pysdk-c7", key="b.bin").SerializeToString()
        async with open_transfer(client._transport, prefix, "put", put) as xfer:
            assert re.match(r"^[0-9a-f]{32}:", xfer.id), xfer.id
            assert 1024 <= xfer.chunk_bytes <= asked
            await xfer.write(b"first")
            xfer.write_sequence = 0  # the SDK's own counter, moved back: a resent write
            with pytest.raises(RPCError) as e:
                await xfer.write(b"again")
            assert e.value.code == "CONFLICT"
            xfer.write_sequence = 1
            await xfer.start()
            async for _ in xfer.fragments():
                pass
        assert await s.get_object("pysdk-c7", "b.bin") == b"first", "the refused write was stored"
        assert metric("abi_engine_open_sessions") == 0

    run(with_client(TOKEN, body))
