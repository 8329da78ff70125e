"""mongio.events: command events, logs, listeners."""
