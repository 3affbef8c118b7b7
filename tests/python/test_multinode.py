"""Data-parallel jobs across "nodes": two daemons on this machine stand for two nodes, and the ranks
are started with the environment srun or torchrun would give them (MASTER_ADDR, MASTER_PORT, RANK,
WORLD_SIZE, LOCAL_RANK; gloo, env://), each talking to its own node's daemon. There is no traffic
between the daemons: torch.distributed is the only coordination."""
import json
import os
import socket
import subprocess
import sys
import textwrap

import joader
from conftest import BUILD, Daemon

RANK_SCRIPT = textwrap.dedent("""
    import json, os, sys
    sys.path.insert(0, os.environ["JOADER_PYTHON"])
    import torch, torch.distributed as dist
    import joader.torch
    dist.init_process_group("gloo", init_method="env://")
    loader = joader.torch.DataLoader("data", batch_size=4, epochs=2, with_indices=True, layout="NHWC",
                                     name=os.environ["JOB"] + "-rank" + os.environ["RANK"])
    mine = []
    for epoch in range(2):
        ids = []
        for _, _, batch_ids in loader:
            ids += batch_ids.tolist()
        mine.append(ids)
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    if dist.get_rank() == 0:
        json.dump(everyone, open(os.environ["OUT"], "w"))
    dist.barrier()
    dist.destroy_process_group()
""")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_ddp_jobs_on_two_nodes_cover_each_epoch_exactly_and_share_on_each_node(workdir):
    nodes = [Daemon(workdir, name=f"node{n}") for n in range(2)]
    try:
        for node in nodes:
            joader.Client(node.socket).add_dataset("data", source="synthetic:90:40x32", crop=16)
        world, per_node = 4, 2
        procs, outs = [], {}
        for job in ("sweep-a", "sweep-b"):
            port = free_port()
            outs[job] = os.path.join(workdir, f"{job}.json")
            for rank in range(world):
                node = rank // per_node
                env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                           WORLD_SIZE=str(world), LOCAL_RANK=str(rank % per_node), JOB=job, OUT=outs[job],
                           JOADER_SOCKET=nodes[node].socket, JOADER_PYTHON=os.path.join(BUILD, "python"),
                           OMP_NUM_THREADS="1")
                procs.append(subprocess.Popen([sys.executable, "-c", RANK_SCRIPT], env=env,
                                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        for p in procs:
            out, err = p.communicate(timeout=300)
            assert p.returncode == 0, err[-2000:]
        for job, path in outs.items():
            ranks = json.load(open(path))  # [rank][epoch] -> ids
            for epoch in range(2):
                parts = [ranks[r][epoch] for r in range(world)]
                assert len({len(p) for p in parts}) == 1, f"{job}: unequal parts {[len(p) for p in parts]}"
                together = sorted(i for p in parts for i in p)
                # 90 items dealt to 4 ranks: padded to 92 by repeating two, as DistributedSampler does.
                assert len(together) == 92 and set(together) == set(range(90)), job
        for n, node in enumerate(nodes):
            s = node.status()
            assert s["deliveries"] == 2 * 2 * 2 * 23  # 2 jobs × 2 ranks on this node × 2 epochs × 23 items
            assert s["loads"] < s["deliveries"], f"node {n}: the two jobs shared nothing ({s['ld_ratio']})"
    finally:
        for node in nodes:
            node.stop()
