"""A module as its users write one (naas_abi_sdk.BaseModule), run by the SDK's own
`naas-abi-module` against abi-engine in test_discovery.py, test_modules.py and the
deploy tests. It serves nothing: it registers, reports itself initialized, renews, and
on SIGTERM drains and unregisters, all of which the SDK does. PYSDK_MODULE_ID names it
otherwise, so that one package runs as several modules, and PYSDK_MODULE_DEPENDS (a
comma list of module ids) declares the modules it depends on."""

import asyncio
import os

from naas_abi_sdk import BaseModule, ModuleDependencies


class ABIModule(BaseModule):
    module_id = os.environ.get("PYSDK_MODULE_ID", "pysdk.module")
    package_version = "1.2.3"
    dependencies = ModuleDependencies(
        modules=tuple(m for m in os.environ.get("PYSDK_MODULE_DEPENDS", "").split(",") if m)
    )

    async def run(self):
        await asyncio.Event().wait()
