"""The unified test format runner: loading and checking test files, the entity map, matching results,
errors, events and log messages, runOnRequirements, and the operation registry the driver API plugs into.

Nothing here talks to a server: the later operation implementations and the suite that drives files
against a server fill in the parts that need a client (see ``operations.py``).
"""
