"""The spec runner: the unified format, the skip list, the cluster harness's pure parts."""
