"""Client sessions: server session pool, cluster time, causal consistency and transactions."""
