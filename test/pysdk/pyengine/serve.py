"""Runs the Python ABI engine (naas-abi-core 3.x, NATS mode) as a process, for
pyengine_test.go: load it from a config file, serve until SIGTERM, then shut it down,
which releases the ABI_ENGINE lease and drains (the engine installs no signal handler
of its own; its API host calls the same Engine.shutdown from uvicorn's lifespan).

  python serve.py CONFIG.yaml

Prints the installed versions, then "loaded <instance id>" once load() returned, that is once the engine serves and
renews its lease, and "stopped" after shutdown(). Built-in modules are kept from calling
services while they load, as naas-abi-core's own handover tests do."""

import importlib.metadata as md
import signal
import sys
import threading

from naas_abi_core.engine.Engine import Engine


def main():
    print(" ".join(f"{d} {md.version(d)}" for d in ("naas-abi-core", "naas-abi-sdk", "nats-py")), flush=True)
    Engine.on_initialized = lambda self: None
    with open(sys.argv[1]) as f:
        engine = Engine(f.read())
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    engine.load()
    print("loaded", engine.instance_id, flush=True)
    stop.wait()
    engine.shutdown()
    print("stopped", flush=True)


if __name__ == "__main__":
    main()
