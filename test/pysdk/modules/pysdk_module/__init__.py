"""A module as its users write one (naas_abi_sdk.BaseModule), run by the SDK's own
`naas-abi-module` against abi-engine in test_discovery.py. It serves nothing: it
registers, reports itself initialized, renews, and on SIGTERM drains and unregisters,
all of which the SDK does."""

import asyncio

from naas_abi_sdk import BaseModule


class ABIModule(BaseModule):
    module_id = "pysdk.module"
    package_version = "1.2.3"

    async def run(self):
        await asyncio.Event().wait()
