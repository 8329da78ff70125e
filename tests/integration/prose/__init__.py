"""The specifications' prose tests, and the rules their shared test files do not reach."""
