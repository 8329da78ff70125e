"""mongio.connection: connections, the pool, the handshake, authentication."""
