"""Data-parallel training: two CPU ranks with gloo, as torchrun starts them.

Each rank is a spawned (not forked) process that joins the group through the
same environment variables ``torchrun`` sets (MASTER_ADDR, MASTER_PORT, RANK,
WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE), so the code path is the one of
several machines; the ranks share nothing but the files in /dev/shm.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import sys
import tempfile
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from pyg_orch.distributed import batches_per_rank, exit_without_teardown, shard_seeds

WORLD_SIZE = 2

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not Path("/dev/shm").is_dir(),
    reason="the shared graph lives in /dev/shm",
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _memory_kb() -> dict[str, int]:
    # RssAnon: private anonymous pages; RssShmem: pages of /dev/shm files.
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("RssAnon", "RssShmem", "RssFile"):
            fields[key] = int(value.split()[0])
    return fields


def _join_env(rank: int, port: int) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
        WORLD_SIZE=str(WORLD_SIZE), LOCAL_RANK=str(rank),
        LOCAL_WORLD_SIZE=str(WORLD_SIZE),
    )  # fmt: skip


def _worker(rank: int, port: int, out: str, job: str) -> None:
    _join_env(rank, port)
    import torch.distributed as dist

    from pyg_orch import distributed as pd

    torch.set_num_threads(1)
    context = pd.init_distributed("gloo")
    try:
        result = _train(context) if job == "train" else _memory(context)
        torch.save(result, Path(out) / f"rank{rank}.pt")
        dist.barrier()
    except BaseException:
        dist.destroy_process_group()
        raise
    exit_without_teardown()


def _train(context) -> dict:
    import torch.nn.functional as F
    from torch_geometric.nn import GraphSAGE

    from pyg_orch import distributed as pd
    from pyg_orch.datasets import load_cora

    graph = pd.share_graph(load_cora, context)
    data = graph.data
    hot, values = pd.broadcast_hot(graph, context, [5, 5], data.train_mask, 0.1)
    torch.manual_seed(context.rank)  # different inits: DDP must broadcast rank 0's
    model = pd.wrap_model(GraphSAGE(data.num_features, 16, 2, 7), context)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    sampler = graph.sampler([5, 5])
    seeds, steps = [], []
    for epoch in range(2):
        loader = pd.distributed_loader(
            graph, context, [5, 5], data.train_mask, epoch, batch_size=16,
            hot=hot, hot_values=values, sampler=sampler,
        )  # fmt: skip
        epoch_seeds, count = [], 0
        for batch in loader:
            optimizer.zero_grad()
            out = model(batch)
            F.cross_entropy(out, batch.y[: batch.batch_size]).backward()
            optimizer.step()
            epoch_seeds.append(batch.n_id[: batch.batch_size])
            count += 1
        seeds.append(torch.cat(epoch_seeds))
        steps.append(count)
    return {
        "seeds": seeds,
        "steps": steps,
        "params": [p.detach().clone() for p in model.parameters()],
        "hot": hot,
        "shared_x": "/dev/shm/pyg_orch" in Path("/proc/self/maps").read_text(),
    }


def _memory(context) -> dict:
    from pyg_orch import distributed as pd
    from pyg_orch.datasets import power_law_graph

    def build():
        return power_law_graph(200_000, avg_degree=10, num_features=64, seed=0)

    before = _memory_kb()
    graph = pd.share_graph(build, context)
    data = graph.data
    # Touch every page of the shared tensors, as training eventually does.
    touched = float(data.x.sum()) + int(data.edge_index.sum()) + int(graph.colptr.sum())
    touched += int(data.y.sum())
    after = _memory_kb()
    nbytes = sum(
        t.numel() * t.element_size()
        for t in (data.x, data.edge_index, graph.colptr, data.y)
    )
    return {"before": before, "after": after, "bytes": nbytes, "touched": touched}


def _spawn(job: str, out: Path) -> list[dict]:
    mp.spawn(_worker, args=(_free_port(), str(out), job), nprocs=WORLD_SIZE)
    return [torch.load(out / f"rank{rank}.pt") for rank in range(WORLD_SIZE)]


def test_shards_are_disjoint_balanced_and_reshuffled():
    seeds = torch.arange(3, 140)
    for world in (1, 2, 3, 8):
        for epoch in (0, 1):
            shards = [shard_seeds(seeds, r, world, epoch, seed=5) for r in range(world)]
            assert torch.equal(torch.cat(shards).sort().values, seeds)
            sizes = [shard.numel() for shard in shards]
            assert max(sizes) - min(sizes) <= 1
    assert not torch.equal(
        shard_seeds(seeds, 0, 2, 0, 5), shard_seeds(seeds, 0, 2, 1, 5)
    )
    # A boolean mask selects the same nodes as its indices.
    mask = torch.zeros(200, dtype=torch.bool)
    mask[seeds] = True
    assert torch.equal(shard_seeds(mask, 1, 2, 0, 5), shard_seeds(seeds, 1, 2, 0, 5))
    # 129 seeds on 2 ranks: shards of 65 and 64, both cut into 3 batches of <= 32.
    assert batches_per_rank(129, 2, 32) == 3


def test_two_ranks_train_identical_replicas(tmp_path):
    from pyg_orch.datasets import load_cora

    ranks = _spawn("train", tmp_path)
    train = load_cora().train_mask.nonzero().view(-1)
    for epoch in range(2):
        union = torch.cat([r["seeds"][epoch] for r in ranks])
        assert union.numel() == train.numel()  # no overlap, nothing padded
        assert torch.equal(union.sort().values, train)
    assert not torch.equal(ranks[0]["seeds"][0], ranks[0]["seeds"][1])
    assert ranks[0]["steps"] == ranks[1]["steps"] == [5, 5]  # ceil(70 / 16)
    assert torch.equal(ranks[0]["hot"], ranks[1]["hot"]) and ranks[0]["hot"].numel()
    for a, b in zip(ranks[0]["params"], ranks[1]["params"], strict=True):
        assert torch.equal(a, b)
    assert all(r["shared_x"] for r in ranks)


@pytest.mark.slow
def test_the_graph_is_shared_not_copied_per_rank(tmp_path):
    ranks = _spawn("memory", tmp_path)
    graph_kb = ranks[0]["bytes"] // 1024
    growth = [
        {key: r["after"][key] - r["before"][key] for key in r["after"]} for r in ranks
    ]
    print(f"graph {graph_kb} kB; RSS growth per rank (kB): {growth}")
    # Rank 1 never builds the graph: it only maps the /dev/shm files. Its
    # private (anonymous) memory grows by the unpickled metadata, gloo buffers
    # and allocator noise, a few MB; a private copy would add the whole graph
    # (~100 MB). So allow a tenth of the graph's bytes.
    assert growth[1]["RssAnon"] < graph_kb / 10
    # ...while the graph's pages are resident in it as shared memory.
    assert growth[1]["RssShmem"] > graph_kb * 0.9
    # Rank 0 (the local leader) built the graph privately before copying it
    # to shared memory; what its allocator keeps of that build is not the
    # per-rank cost this test is about, so only its shared pages are checked.
    assert growth[0]["RssShmem"] > graph_kb * 0.9


SHARED = {"x": torch.arange(12.0).view(3, 4), "empty": torch.empty(0, 5)}


def _share_worker(rank: int, port: int, folder: str, name: str, doomed: int) -> None:
    _join_env(rank, port)

    from pyg_orch import distributed as pd

    context = pd.init_distributed("gloo")
    if rank == doomed:
        # Killed at its first barrier: the leader has written the files, no
        # other rank has mapped them yet. os._exit runs no cleanup, as a
        # SIGKILL from the OOM killer would not.
        pd.replicated._barrier = lambda context: os._exit(1)
    tensors = SHARED if context.is_local_leader else None
    shared = pd.share_tensors(tensors, context, name, Path(folder))
    assert all(torch.equal(shared[key], value) for key, value in SHARED.items())
    exit_without_teardown()


def _launch(folder: Path, name: str, doomed: int = -1) -> None:
    args = (_free_port(), str(folder), name, doomed)
    mp.spawn(_share_worker, args=args, nprocs=WORLD_SIZE)


@pytest.fixture
def shm_folder():
    folder = Path(tempfile.mkdtemp(prefix="pytest-shm-", dir="/dev/shm"))
    yield folder
    shutil.rmtree(folder)


@pytest.mark.slow
@pytest.mark.parametrize("doomed", [0, 1], ids=["local-leader", "other-rank"])
def test_a_rank_killed_mid_share_leaves_no_files_after_the_next_launch(
    shm_folder, doomed
):
    with pytest.raises(mp.ProcessExitedException):
        _launch(shm_folder, "dead", doomed)
    left = sorted(path.name for path in shm_folder.iterdir())
    print(f"rank {doomed} killed: {len(left)} files left {left}")
    _launch(shm_folder, "next")  # each launch has its own name
    # The next launch removed the dead one's files, and left none of its own.
    assert list(shm_folder.iterdir()) == []


def test_orphan_removal_spares_shares_still_running(tmp_path):
    from pyg_orch.distributed import remove_orphans

    for name in ("live", "dead"):
        (tmp_path / f"pyg_orch-{name}.x").write_bytes(b"\0" * 64)
        (tmp_path / f"pyg_orch-{name}.lock").write_text("1234\n")
    (tmp_path / "other.lock").write_text("1\n")  # not ours
    with open(tmp_path / "pyg_orch-live.lock") as live:
        fcntl.flock(live, fcntl.LOCK_EX)  # as the live share's leader does
        assert remove_orphans(tmp_path) == ["pyg_orch-dead"]
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "other.lock", "pyg_orch-live.lock", "pyg_orch-live.x",
    ]  # fmt: skip
