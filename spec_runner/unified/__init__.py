"""The unified test format runner.

- ``loader``: reads a ``.json`` test file, checks ``schemaVersion`` (``SUPPORTED_SCHEMA_VERSION``) and the
  structure (``schema``), and gives typed views (``UnifiedTestFile``, ``UnifiedTest``, ``Operation``, ...).
- ``matcher``: the "Evaluating Matches" rules and the ``$$`` operators; ``MatchError`` names the path.
- ``entities``: the per-test entity map; ``requirements``: ``runOnRequirements`` against ``ServerFacts``.
- ``expect``: ``expectError`` through ``describe_error``; ``events``: recorded events and log messages, the
  per-client stores that record them, ``expectEvents`` and ``expectLogMessages``.
- ``operations``: the registry (``@operation(name, object=kind, ...)``) and ``execute``, the one path every
  operation takes; ``special``: the ``testRunner`` operations that need no client; ``threads``: thread
  entities; ``runner``: one test's execution over a driver-facing ``Backend``; ``collect``: spec cases from a
  directory of unified files.

Nothing here talks to a server: the driver-facing operations and the ``Backend`` are registered and written
beside the client API.
"""
