"""mongio: an asyncio-native MongoDB driver."""

__version__ = "0.1.0.dev0"
