"""PyMongo compatibility: the PyMongo-typed mode, PyMongo's names and objects, the differences."""
