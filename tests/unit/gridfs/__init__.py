"""mongio.gridfs without a server."""
