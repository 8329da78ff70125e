"""mongio.tracing: OpenTelemetry spans."""
