"""Motor's and PyMongo's own async test suites, run natively and through mongio, with their differences classified."""
