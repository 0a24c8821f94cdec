"""A module as its users write one (naas_abi_sdk.BaseModule), run by the SDK's own
`naas-abi-module` against abi-engine in test_discovery.py and the deploy tests. It
serves nothing: it registers, reports itself initialized, renews, and on SIGTERM drains
and unregisters, all of which the SDK does. PYSDK_MODULE_ID names it otherwise, so that
one package runs as two different modules."""

import asyncio
import os

from naas_abi_sdk import BaseModule


class ABIModule(BaseModule):
    module_id = os.environ.get("PYSDK_MODULE_ID", "pysdk.module")
    package_version = "1.2.3"

    async def run(self):
        await asyncio.Event().wait()
