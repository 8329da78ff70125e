"""The API modules (client, database, collection, cursor, change stream), the package's surface."""
