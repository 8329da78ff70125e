"""mongio against the loopback cluster harness (spec_runner.cluster)."""
