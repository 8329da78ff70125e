"""Test helpers shared by the unit and integration tests (not part of the driver). Test modules import
helpers from here, never from one another.

``loopback_peer``: a MongoDB-wire peer of our own on 127.0.0.1 that records what the client sends and answers
through handler callbacks, with fault injection (see its module documentation).
``hostile_server``: a server on 127.0.0.1 that answers the handshake from a configurable (possibly lying)
hello, then misbehaves per command as scripted: bad lengths, compression bombs, invalid BSON, stalls...
``virtual_clock``: an event loop whose clock jumps to the next timer when the loop is idle, for tests of
timeouts and intervals that take no real time.
``fake_deployment``: fake replica sets, mongoses and standalones on loopback for the topology tests.
``recorders``: a command listener that keeps every command event.
``socks5_proxy``: a SOCKS5 proxy of our own on 127.0.0.1 (CONNECT, optional RFC 1929 authentication, a
destination mapping), recording what clients asked for; it can refuse, drop or stall.
``tls_server``: the test server started with TLS only.
``oidc_server``: a server on 127.0.0.1 configured for MONGODB-OIDC: verifies the signed tokens it issues (one-step,
two-step, speculative), answers 391 once a connection's token is revoked, and keeps failCommand fail points.
``metadata_endpoint``: a fake Azure / GCP metadata endpoint on 127.0.0.1 (slow, failing, hanging up, chunked).
"""
