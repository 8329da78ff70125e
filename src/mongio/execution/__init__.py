"""The executor: deadline, sessions, server selection, checkout, command fields, errors and the retry loop."""
