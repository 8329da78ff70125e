"""mongio.sessions: sessions, their pool, transactions."""
