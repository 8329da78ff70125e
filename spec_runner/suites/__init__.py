"""One module per specification directory; each defines ``SUITE = Suite(...)`` (or ``SUITES``)."""
