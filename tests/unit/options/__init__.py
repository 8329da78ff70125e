"""mongio.options: client options, the connection string, SRV, concerns, the stable API."""
