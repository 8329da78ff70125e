"""The event-loop runtime: what happens when a loop closes or the process forks, the sockets of each loop,
fair waiting."""
