"""Unified-format suite modules waiting for the client API to pass them: not discovered by the registry.
Each moves to ``spec_runner/suites/`` once its cases pass."""
