"""mongocryptd, the query analysis process of automatic encryption: :class:`Mongocryptd` spawns it (unless
``mongocryptd_bypass_spawn``) and asks it, over a client of its own, to mark the fields of a command that
must be encrypted.

As the client-side encryption specification says ("Managing mongocryptd"): the process is spawned with
``--idleShutdownTimeoutSecs`` (it exits after that long unused, so nothing here stops it), its output goes
nowhere, its client selects servers for up to 10 seconds (unless its URI says otherwise), and when that selection fails the process is
spawned again and the command tried once more; a second failure is the caller's error. The spawn runs in a
worker thread (``fork``/``exec`` may take a while) and a daemon thread reaps the process when it exits, so
the event loop never waits for either.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Sequence
from typing import Any

from mongio import backend
from mongio.bson import RawBSONDocument
from mongio.bson.codec_options import CodecOptions
from mongio.client import MongoClient
from mongio.errors import EncryptionError, ServerSelectionTimeoutError
from mongio.options.client_options import ClientOptions

__all__ = ["SERVER_SELECTION_TIMEOUT_MS", "Mongocryptd"]

SERVER_SELECTION_TIMEOUT_MS = 10_000
"""The mongocryptd client's ``serverSelectionTimeoutMS`` (the specification's value)."""

_RAW = CodecOptions(document_class=RawBSONDocument)


def _spawn(command: Sequence[str]) -> None:
    """Start mongocryptd detached from the caller's terminal, its output discarded, and reap it when it
    exits (it shuts itself down when idle)."""
    process = subprocess.Popen(
        list(command),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    threading.Thread(target=process.wait, name="mongio mongocryptd reaper", daemon=True).start()


class Mongocryptd:
    """Markings from mongocryptd at ``uri``. ``spawn_command`` (path and arguments) starts it; None when the
    application runs it itself (``mongocryptd_bypass_spawn``)."""

    def __init__(self, uri: str, spawn_command: Sequence[str] | None) -> None:
        # The specification's selection timeout, unless the mongocryptd URI names its own.
        given = ClientOptions.from_uri(uri).options.get("serverSelectionTimeoutMS")
        timeout: dict[str, Any] = {} if given is not None else {"serverSelectionTimeoutMS": SERVER_SELECTION_TIMEOUT_MS}
        self._client: MongoClient[Any] = MongoClient(uri, **timeout)
        self._spawn_command = tuple(spawn_command) if spawn_command is not None else None
        self._spawned = False

    def __repr__(self) -> str:
        return f"Mongocryptd({self._client!r}, spawns={self._spawn_command is not None})"

    @property
    def spawn_command(self) -> tuple[str, ...] | None:
        """The command that starts mongocryptd, None when it is not spawned by the driver."""
        return self._spawn_command

    async def mark_command(self, database: str, command_bson: bytes) -> bytes:
        """The command with the fields to encrypt marked, as mongocryptd answers it (BSON)."""
        if self._spawn_command is not None and not self._spawned:
            # Set before the spawn: the operations that start meanwhile connect (their server selection waits
            # for the process to listen) rather than spawn it again.
            self._spawned = True
            await self.spawn()
        try:
            return await self._mark(database, command_bson)
        except ServerSelectionTimeoutError:
            if self._spawn_command is None:
                raise
        # It was not running (it exited after its idle time, say): start it again and try once more.
        await self.spawn()
        return await self._mark(database, command_bson)

    async def spawn(self) -> None:
        """Start mongocryptd (in a worker thread); an error names the command when it cannot start."""
        command = self._spawn_command
        if command is None:
            raise EncryptionError(RuntimeError("mongocryptd_bypass_spawn is set: mongocryptd is not spawned"))
        try:
            await backend.to_thread(_spawn, command)
        except OSError as exc:
            raise EncryptionError(
                OSError(
                    f"could not spawn mongocryptd with {list(command)!r}: {exc.strerror or exc}; install "
                    "mongocryptd (or set mongocryptd_spawn_path), load crypt_shared (crypt_shared_lib_path), "
                    "or run mongocryptd yourself with mongocryptd_bypass_spawn=True"
                )
            ) from exc

    async def _mark(self, database: str, command_bson: bytes) -> bytes:
        reply = await self._client[database].command(RawBSONDocument(command_bson), codec_options=_RAW)
        assert isinstance(reply, RawBSONDocument)  # decoded with _RAW
        return bytes(reply.raw)

    def close(self) -> Any:
        """Close the client to mongocryptd (the process stops on its own when idle); returns what
        :meth:`MongoClient.close` returns."""
        return self._client.close()
