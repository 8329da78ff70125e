"""mongio.execution: the executor, retries, the operation timeout."""
