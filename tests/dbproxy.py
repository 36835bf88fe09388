"""A TCP proxy between the app and PostgreSQL that can play a database outage.

An asyncio server on a background thread: `down()` refuses new connections and cuts
the open ones (the database was killed or restarted), `stall()` keeps every byte in
both directions until `up()` (the database froze), `up()` restores service.
"""

import asyncio
import contextlib
import threading
from concurrent.futures import Future


class DbProxy:
    """Forward 127.0.0.1:<port> to the database at (host, port) or a unix socket path."""

    def __init__(self, host: str = "127.0.0.1", port: int = 5432, unix_path: str | None = None):
        self.target = (host, port)
        self.unix_path = unix_path
        self.port = 0
        self.connections = 0  # accepted since start, for tests that want to see traffic
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self._flowing: asyncio.Event | None = None  # cleared while stalled
        self._refusing = False
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def start(self) -> "DbProxy":
        self._thread.start()
        self._call(self._listen())
        return self

    def close(self) -> None:
        self._call(self._close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def down(self) -> None:
        """Refuse new connections and cut every open one."""
        self._call(self._down())

    def stall(self) -> None:
        """Hold every byte in both directions; connections stay open."""
        self._call(self._set_flowing(False))

    def up(self) -> None:
        """Accept and forward again."""
        self._call(self._up())

    def _call(self, coro) -> object:
        future: Future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return future.result(10)

    async def _listen(self) -> None:
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _down(self) -> None:
        self._refusing = True
        # Closing the listening socket makes connect() fail with "connection refused",
        # as a stopped PostgreSQL does; the port is kept for up().
        self._server.close()
        for writer in list(self._open):
            writer.transport.abort()  # RST: the client sees the connection lost at once
        self._open.clear()

    async def _up(self) -> None:
        self._flowing.set()
        if self._refusing:
            self._refusing = False
            self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)

    async def _set_flowing(self, flowing: bool) -> None:
        if flowing:
            self._flowing.set()
        else:
            self._flowing.clear()

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._open):
            writer.transport.abort()
        self._flowing.set()  # a stalled pipe must see its aborted transport too
        # Every pipe ends once its transports are aborted: let them, before the loop stops.
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        if tasks:
            await asyncio.wait(tasks, timeout=2)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._refusing:
            writer.transport.abort()
            return
        self.connections += 1
        try:
            if self.unix_path:
                up_reader, up_writer = await asyncio.open_unix_connection(self.unix_path)
            else:
                up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self._open.update((writer, up_writer))
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        self._open.difference_update((writer, up_writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                await self._flowing.wait()  # a stall holds the bytes it has read
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()  # one side ended: end the other
