"""mongio.wire: message formats, compression, cursor replies."""
