"""mongio.operations: the commands each operation builds and how replies become results."""
