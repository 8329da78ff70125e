"""mongio.errors: the error classes and what each error means (retryable, network, state change)."""
