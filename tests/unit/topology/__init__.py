"""mongio.topology: descriptions, monitoring, server selection."""
