"""The kinds of server the Server Discovery and Monitoring specification distinguishes."""

from __future__ import annotations

from enum import IntEnum

__all__ = ["SERVER_TYPE", "ServerType"]


class ServerType(IntEnum):
    """What a server told us it is in its last ``hello`` reply (``Unknown`` until it answers).

    The values match PyMongo's ``SERVER_TYPE`` so code comparing them ports unchanged. There is no
    ``PossiblePrimary``: the specification makes it a synonym of ``Unknown`` for asynchronous drivers.
    """

    Unknown = 0
    Mongos = 1
    RSPrimary = 2
    RSSecondary = 3
    RSArbiter = 4
    RSOther = 5
    RSGhost = 6
    Standalone = 7
    LoadBalancer = 8


SERVER_TYPE = ServerType  # the PyMongo spelling
