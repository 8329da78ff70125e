"""The tests' own support code (tests/support)."""
