"""Running the farm's ADB server: in the foreground (the CLI) or on a background thread (tests,
embedding in another process)."""
from __future__ import annotations

import asyncio
import logging
import signal
import threading

from simfarm.adb_server import AdbServer

logger = logging.getLogger(__name__)


def build_farm(devices: int, seed: int, apps_dir=None, blind_share: float = 0.0, real_phone: bool = False,
               handback_rate: float = 0.0, first_device: int = 0):
    from simfarm.farm import Farm  # the phones; imported late so the server stands alone

    return Farm(devices=devices, seed=seed, apps_dir=apps_dir, blind_share=blind_share, real_phone=real_phone,
                handback_rate=handback_rate, first_device=first_device)


def serve_forever(farm, host: str = "127.0.0.1", port: int = 5037, on_ready=None) -> None:
    """Serve until host:kill, SIGINT or SIGTERM."""

    async def main() -> None:
        server = AdbServer(farm, host=host, port=port)
        bound_port = await server.start()
        loop = asyncio.get_running_loop()
        for signal_number in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(signal_number, server.stop)
            except (NotImplementedError, RuntimeError):
                pass  # not the main thread, or not supported here
        if on_ready is not None:
            on_ready(bound_port)
        await server.wait_stopped()

    asyncio.run(main())
    close = getattr(farm, "close", None)
    if callable(close):
        close()


class ServerThread:
    """The farm's ADB server on its own thread and loop. `with ServerThread(farm) as server:`
    then talk to 127.0.0.1:server.port. Port 0 (the default) picks a free port."""

    def __init__(self, farm, host: str = "127.0.0.1", port: int = 0):
        self.farm = farm
        self.host = host
        self.port = port
        self.server: AdbServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="adb-farm-server", daemon=True)

    def start(self, timeout: float = 10.0) -> ServerThread:
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError("the farm's ADB server did not start in time")
        if self._error is not None:
            raise self._error
        return self

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        try:
            self._loop.run_until_complete(self._main())
        except BaseException as error:  # surfaced to start() when it happens before ready
            self._error = error
            self._ready.set()
        finally:
            self._loop.close()

    async def _main(self) -> None:
        self.server = AdbServer(self.farm, host=self.host, port=self.port)
        self.port = await self.server.start()
        self._ready.set()
        await self.server.wait_stopped()

    def stop(self, timeout: float = 10.0) -> None:
        if self._loop is not None and self._thread.is_alive() and self.server is not None:
            self._loop.call_soon_threadsafe(self.server.stop)
        self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()
