"""A one-shot module (the SDK notes' smallest module, §4.3): its run() makes keyvalue
and object_storage calls through the services it declares and returns, so that
`naas-abi-module` unregisters it and exits 0. A failed check raises, which makes the
runner exit non-zero."""

import os

from naas_abi_sdk import BaseModule, ModuleDependencies
from naas_abi_sdk.services.errors import KVNotFoundError


class ABIModule(BaseModule):
    module_id = "pysdk.oneshot"
    dependencies = ModuleDependencies(services=("keyvalue", "object_storage"))

    async def run(self):
        kv = self.engine.services.keyvalue
        objects = self.engine.services.object_storage
        key = "pysdk-oneshot:" + os.urandom(4).hex()
        await kv.set(key, b"from a module")
        assert await kv.get(key) == b"from a module"
        await kv.delete(key)
        try:
            await kv.get(key)
        except KVNotFoundError:
            pass
        else:
            raise AssertionError("a deleted key was found")
        content = os.urandom(200_000)  # above 64 KiB: a transfer each way
        await objects.put_object("pysdk-oneshot", "blob", content)
        assert await objects.get_object("pysdk-oneshot", "blob") == content
        await objects.delete_object("pysdk-oneshot", "blob")
        print("oneshot: checks passed", flush=True)
