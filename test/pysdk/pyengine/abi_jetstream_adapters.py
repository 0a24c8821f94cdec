"""Adapters that put a Python engine's keyvalue and object_storage on the JetStream
buckets abi-engine's `jetstream` adapters use, in abi-engine's layout, so the data a
Python engine acknowledged is there when abi-engine takes over (docs/compatibility.md,
"Moving an account from the Python engine to abi-engine").

The Python engine loads them as `custom` adapters (`python_module`,
`module_callable`, `custom_config`, `shared_storage: true`). The layout they write:

- keyvalue: bucket ABI_KV, each key under its unpadded base64url encoding, the value
  as it is. They do not write abi-engine's epoch: a Python engine is not fenced.
- object_storage: the JetStream object store ABI_OBJECTS, an object named
  "<prefix>/<key>" (nats-py's object store writes the layout nats.go reads).

Both buckets are made by abi-engine (a standby opens its backends while the Python
engine serves): these adapters bind to them and never create them, so the buckets keep
abi-engine's settings. Enough for the migration test; not a production adapter (no
TTLs, no locks)."""

from __future__ import annotations

import base64
import io
from contextlib import contextmanager
from datetime import datetime, timezone
from queue import Queue

from naas_abi_core.engine.nats_runtime import get_connection, run_coro
from naas_abi_core.services.keyvalue.KeyValuePorts import (
    IKeyValueAdapter,
    KVKeyPage,
    KVNotFoundError,
    paginate_keys,
)
from naas_abi_core.services.object_storage.ObjectStoragePort import (
    Exceptions,
    IObjectStorageAdapter,
    ObjectMetaData,
)
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError, NotFoundError, ObjectNotFoundError


def _enc(key: str) -> str:
    return base64.urlsafe_b64encode(key.encode()).decode().rstrip("=")


def _dec(enc: str) -> str | None:
    try:
        return base64.urlsafe_b64decode(enc + "=" * (-len(enc) % 4)).decode()
    except Exception:  # abi-engine's own keys (abi.epoch, abi.fence) are not base64url
        return None


class JetStreamKeyValue(IKeyValueAdapter):
    def __init__(self, nats_url: str, bucket: str = "ABI_KV"):
        self._url, self._bucket, self._kv = nats_url, bucket, None

    def _run(self, fn):
        async def go():
            if self._kv is None:
                self._kv = await get_connection(self._url).jetstream().key_value(self._bucket)
            return await fn(self._kv)

        return run_coro(go())

    def get(self, key: str) -> bytes:
        async def fn(kv):
            try:
                entry = await kv.get(_enc(key))
            except KeyNotFoundError:
                raise KVNotFoundError(key) from None
            return entry.value or b""

        return self._run(fn)

    def set(self, key: str, value: bytes, ttl: int | None = None) -> None:
        if ttl is not None:
            raise ValueError("this adapter stores no TTLs")
        self._run(lambda kv: kv.put(_enc(key), bytes(value)))

    def set_if_not_exists(self, key: str, value: bytes, ttl: int | None = None) -> bool:
        if ttl is not None:
            raise ValueError("this adapter stores no TTLs")

        async def fn(kv):
            try:
                await kv.create(_enc(key), bytes(value))
                return True
            except KeyWrongLastSequenceError:
                return False

        return self._run(fn)

    def delete(self, key: str) -> None:
        self.get(key)  # KVNotFoundError for a missing key, as the Python adapters
        self._run(lambda kv: kv.purge(_enc(key)))

    def delete_if_value_matches(self, key: str, value: bytes) -> bool:
        async def fn(kv):
            try:
                entry = await kv.get(_enc(key))
            except KeyNotFoundError:
                return False
            if entry.value != bytes(value):
                return False
            try:
                await kv.purge(_enc(key))  # not atomic: a test adapter
            except KeyWrongLastSequenceError:
                return False
            return True

        return self._run(fn)

    def exists(self, key: str) -> bool:
        try:
            self.get(key)
            return True
        except KVNotFoundError:
            return False

    def list_keys(self, prefix: str = "", limit: int = 1000, after: str | None = None) -> KVKeyPage:
        async def fn(kv):
            try:
                return await kv.keys()
            except NotFoundError:
                return []

        keys = (k for k in map(_dec, self._run(fn)) if k is not None)
        return paginate_keys(keys, prefix, limit, after)

    def get_ttl(self, key: str) -> int | None:
        self.get(key)
        return None


class JetStreamObjects(IObjectStorageAdapter):
    def __init__(self, nats_url: str, bucket: str = "ABI_OBJECTS"):
        self._url, self._bucket, self._os = nats_url, bucket, None

    def _run(self, fn, timeout: float = 30.0):
        async def go():
            if self._os is None:
                self._os = await get_connection(self._url).jetstream().object_store(self._bucket)
            return await fn(self._os)

        return run_coro(go(), timeout=timeout)

    @staticmethod
    def _name(prefix: str, key: str) -> str:
        return f"{prefix}/{key}" if prefix else key

    def get_object(self, prefix: str, key: str) -> bytes:
        async def fn(store):
            try:
                return (await store.get(self._name(prefix, key))).data or b""
            except (ObjectNotFoundError, NotFoundError):
                raise Exceptions.ObjectNotFound(f"{prefix}/{key}") from None

        return self._run(fn)

    @contextmanager
    def get_object_stream(self, prefix: str, key: str):
        # The engine's transfer host enters it as a context manager, as it does the
        # file system adapter's.
        yield io.BytesIO(self.get_object(prefix, key))

    def put_object(self, prefix: str, key: str, content: bytes) -> None:
        self._run(lambda store: store.put(self._name(prefix, key), bytes(content)))

    def put_object_stream(self, prefix: str, key: str, stream) -> None:
        self.put_object(prefix, key, stream.read())

    def delete_object(self, prefix: str, key: str) -> None:
        self.get_object_metadata(prefix, key)
        self._run(lambda store: store.delete(self._name(prefix, key)))

    def _names(self) -> list[str]:
        async def fn(store):
            try:
                return [i.name for i in await store.list() if not i.deleted]
            except (NotFoundError, ObjectNotFoundError):
                return []

        return self._run(fn)

    def list_objects(self, prefix: str, queue: Queue | None = None) -> list[str]:
        base = prefix.rstrip("/") + "/" if prefix else ""
        out = sorted({n[len(base):] for n in self._names() if n.startswith(base) and "/" not in n[len(base):]})
        for n in out:
            if queue is not None:
                queue.put(n)
        return out

    def list_objects_recursive(self, prefix: str = "", queue: Queue | None = None) -> list[str]:
        base = prefix.rstrip("/") + "/" if prefix else ""
        out = sorted(n for n in self._names() if n.startswith(base))
        for n in out:
            if queue is not None:
                queue.put(n)
        return out

    def get_object_metadata(self, prefix: str, key: str) -> ObjectMetaData:
        async def fn(store):
            try:
                return await store.get_info(self._name(prefix, key))
            except (ObjectNotFoundError, NotFoundError):
                raise Exceptions.ObjectNotFound(f"{prefix}/{key}") from None

        info = self._run(fn)
        mtime = None
        if getattr(info, "mtime", None):
            try:
                mtime = datetime.fromisoformat(str(info.mtime).replace("Z", "+00:00"))
            except ValueError:
                mtime = datetime.now(timezone.utc)
        return ObjectMetaData(
            file_path=self._name(prefix, key), file_name=key, file_size_bytes=info.size or 0,
            created_time=mtime, modified_time=mtime, accessed_time=None,
            permissions=None, mime_type=None, encoding=None,
        )

