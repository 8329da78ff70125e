"""A loopback cluster harness: one SecantusDB behind asyncio proxies on 127.0.0.1, one proxy per member.

    with replica_set(3) as rs:                 # primary + 2 secondaries
        client = MongoClient(rs.uri)
        rs.failover()                          # step down, elect the next member (new electionId)
        rs.kill(0); rs.restart(0)              # a member dies and comes back
        rs.partition(1); rs.heal()
        rs.set_latency(2, 0.05)
        rs.configure_fail_point("rs0-0", {"configureFailPoint": "failCommand", ...})

    with sharded(2) as cluster: ...            # two mongoses (msg: "isdbgrid"), fail points per mongos
    with load_balanced(2) as lb: ...           # lb.uri has loadBalanced=true; serviceId per mongos

What is real: each member's ``hello`` (setName, hosts, primary, me, setVersion, electionId, tags, lastWrite,
streaming with topologyVersion and moreToCome, ``msg: "isdbgrid"``, ``serviceId``), the errors a secondary
answers writes and primary-only reads with, ``failCommand`` per member, compression (OP_COMPRESSED with
snappy, zlib and zstd, which the test server lacks), connections dropping when a member dies, and
authentication on ``$external`` for a mechanism the deployment accepts (``rs.accept_external_auth(
"MONGODB-AWS", AwsSaslServer(keys))``: the members answer the conversation themselves, the test server
having only SCRAM).

What is not: the members share the one test server's data. Nothing is replicated, so a write acknowledged by
one member is visible on all at once, there is no rollback after a failover, no replication lag in the data
(only the reported ``lastWrite`` lags), and a sharded cluster has one shard. Cursors and transactions are
the server's, so a cursor opened through one mongos could be continued through another (a real cluster
would refuse that).
"""

from spec_runner.cluster.deployment import (
    ALL_COMPRESSORS,
    Deployment,
    build_deployment,
    load_balanced,
    replica_set,
    sharded,
)
from spec_runner.cluster.failpoints import FailCommand
from spec_runner.cluster.faults import Fault, FaultKind, FaultPlan
from spec_runner.cluster.members import Member, MemberConfig, Role

__all__ = [
    "ALL_COMPRESSORS",
    "Deployment",
    "FailCommand",
    "Fault",
    "FaultKind",
    "FaultPlan",
    "Member",
    "MemberConfig",
    "Role",
    "build_deployment",
    "load_balanced",
    "replica_set",
    "sharded",
]
