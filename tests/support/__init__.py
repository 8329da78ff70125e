"""Test helpers shared by the unit and integration tests (not part of the driver).

``loopback_peer``: a MongoDB-wire peer of our own on 127.0.0.1 that records what the client sends and answers
through handler callbacks, with fault injection (see its module documentation).
"""
