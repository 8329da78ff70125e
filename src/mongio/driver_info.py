"""PyMongo's ``pymongo.driver_info`` name: what a library wrapping the driver adds to the handshake."""

from mongio.connection.handshake import DriverInfo

__all__ = ["DriverInfo"]
