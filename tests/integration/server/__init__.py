"""The layers below the API against a server: the test server (SecantusDB) in its own modes, the harness
that starts it, and peers that stand in for a server or misbehave."""
