"""The benchmark and fuzzing scripts' bookkeeping and checks."""
