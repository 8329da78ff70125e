"""What an application sees through MongoClient, against the test server or loopback peers; and the
programs built on the API (examples, the port corpus, the benchmarks)."""
