"""mongio.bson: the codec, the value types, Extended JSON."""
