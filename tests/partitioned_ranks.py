"""What each rank of tests/test_partitioned.py runs, in a process of its own.

Spawned processes import these functions by name, so they live in a module
beside the tests. Each returns what the parent checks; the references (the
whole graph, plain PyG models) are computed in the parent, not here.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import torch
from conftest import WeightedGraphConvGNN
from torch_geometric.distributed import DistContext, LocalFeatureStore, LocalGraphStore
from torch_geometric.nn import GraphSAGE, to_hetero

import pyg_orch.distributed  # noqa: F401 - makes PyG's engine run here
from pyg_orch import OrchModel
from pyg_orch.distributed.hot_store import HotFeatureStore, load_partition
from pyg_orch.distributed.launch import process_group
from pyg_orch.distributed.loaders import (
    OrchDistLinkNeighborLoader,
    OrchDistNeighborLoader,
)


def context(rank: int, world_size: int) -> DistContext:
    return DistContext(
        rank=rank, global_rank=rank, world_size=world_size,
        global_world_size=world_size, group_name="pyg-orch-test",
    )  # fmt: skip


def stores(
    root: Path, rank: int, world_size: int
) -> tuple[HotFeatureStore, LocalGraphStore]:
    """This rank's stores, as a job loads them (one node and edge map for both)."""
    feature_store, graph_store = load_partition(root, rank, world_size)
    assert feature_store.edge_feat_pb is graph_store.edge_pb
    return feature_store, graph_store


def rpc_port() -> int:
    return int(os.environ["MASTER_PORT"]) + 1


def node_batches(
    rank: int, world_size: int, root: Path, fanouts: list[int], num_workers: int,
    model_state: dict | None = None, batch_size: int = 64,
) -> dict:  # fmt: skip
    """Every batch of this rank's seeds, and the model's outputs on them."""
    data = stores(root, rank, world_size)
    seeds = data[0].get_global_id(None)
    loader = OrchDistNeighborLoader(
        data, fanouts, current_ctx=context(rank, world_size), master_port=rpc_port(),
        input_nodes=seeds, batch_size=batch_size, num_workers=num_workers,
        concurrency=2,
    )  # fmt: skip
    model = None
    if model_state is not None:
        model = GraphSAGE(
            model_state["in"], 16, num_layers=len(fanouts), out_channels=4
        )
        model.load_state_dict(model_state["weights"])
        model = OrchModel(model.eval(), loader)
    elif loader.cache is not None:
        loader.serve("mean")  # what a GraphSAGE bottom layer would serve
    batches, outputs = [], []
    for batch in loader:
        keep = {key: batch[key] for key in ("n_id", "e_id", "x", "y", "edge_index")}
        keep["edge_attr"] = batch.get("edge_attr")
        keep["batch_size"], keep["hot"] = batch.batch_size, batch.get("hot_index")
        batches.append(keep)
        if model is not None:
            with torch.no_grad():
                outputs.append((batch.n_id[: batch.batch_size], model(batch)))
    sampler = loader.dist_sampler._sampler if num_workers == 0 else None
    return {
        "batches": batches,
        "outputs": outputs,
        "traffic": loader.traffic.per_batch(),
        # The sampler's columns: this part's nodes only, not the graph's.
        "columns": None if sampler is None else sampler.colptr.numel() - 1,
        "nodes": data[0].get_global_id(None).numel(),
    }


def weighted_outputs(rank: int, world_size: int, root: Path, model_state: dict) -> dict:
    """A GraphConv model's outputs on this rank's seeds at full fan-out.

    With the batches' edge ids and edge weights.
    """
    data = stores(root, rank, world_size)
    loader = OrchDistNeighborLoader(
        data, [-1, -1], current_ctx=context(rank, world_size), master_port=rpc_port(),
        input_nodes=data[0].get_global_id(None), batch_size=256, concurrency=2,
    )  # fmt: skip
    model = WeightedGraphConvGNN(model_state["in"], 16, num_layers=2, out_channels=4)
    model.load_state_dict(model_state["weights"])
    orch = OrchModel(model.eval(), loader)
    outputs, edges = [], []
    with torch.no_grad():
        for batch in loader:
            outputs.append((batch.n_id[: batch.batch_size], orch(batch)))
            edges.append((batch.e_id, batch.edge_weight))
    return {"outputs": outputs, "edges": edges}


def hetero_outputs(
    rank: int, world_size: int, root: Path, model_state: dict, seed_type: str
) -> list:
    """A to_hetero(GraphSAGE)'s outputs on this rank's seeds at full fan-out.

    With each batch's edge ids and edge weights by edge type, where it has
    them.
    """
    data = stores(root, rank, world_size)
    seeds = (seed_type, data[0].get_global_id(seed_type))
    fanouts = {edge_type: [-1, -1] for edge_type in model_state["metadata"][1]}
    loader = OrchDistNeighborLoader(
        data, fanouts, current_ctx=context(rank, world_size), master_port=rpc_port(),
        input_nodes=seeds, batch_size=32, concurrency=2,
    )  # fmt: skip
    model = to_hetero(
        GraphSAGE((-1, -1), 16, num_layers=2, out_channels=4), model_state["metadata"]
    )
    with torch.no_grad():
        model(model_state["x"], model_state["edge_index"])  # creates the lazy weights
    model.load_state_dict(model_state["weights"])
    orch = OrchModel(model.eval(), loader)
    outputs, hot, edges = [], 0, []
    with torch.no_grad():
        for batch in loader:
            size = batch[seed_type].batch_size
            outputs.append((batch[seed_type].n_id[:size], orch(batch)))
            hot += sum(store.get("hot_index", torch.empty(0)).numel()
                       for store in batch.node_stores)  # fmt: skip
            edges.append({
                edge_type: (batch[edge_type].e_id, batch[edge_type].edge_weight)
                for edge_type in batch.edge_types
                if "edge_weight" in batch[edge_type]
            })  # fmt: skip
    sampler = loader.dist_sampler._sampler
    columns = {
        edge_type: sampler.colptr_dict[sampler.to_rel_type[edge_type]].numel() - 1
        for edge_type in sampler.edge_types
    }
    nodes = {t: data[0].get_global_id(t).numel() for t in model_state["metadata"][0]}
    return {
        "outputs": outputs, "hot": hot, "edges": edges,
        "columns": columns, "nodes": nodes,
    }  # fmt: skip


def link_batches(rank: int, world_size: int, root: Path, fanouts: list[int]) -> list:
    """Every batch of this rank's own edges, with binary negatives.

    The stores are PyG's own (no hot vertices): the loaders take them too.
    """
    data = (
        LocalFeatureStore.from_partition(str(root), rank),
        LocalGraphStore.from_partition(str(root), rank),
    )
    edge_index = data[1].get_edge_index(edge_type=None, layout="coo")
    loader = OrchDistLinkNeighborLoader(
        data, fanouts, current_ctx=context(rank, world_size), master_port=rpc_port(),
        edge_label_index=(None, edge_index), neg_sampling="binary", batch_size=256,
        concurrency=2,
    )  # fmt: skip
    if loader.cache is not None:
        loader.serve("mean")  # what a GraphSAGE bottom layer would serve
    return [
        {key: batch[key] for key in ("n_id", "e_id", "edge_index", "edge_label_index",
                                     "edge_label", "x")}
        for batch in loader
    ]  # fmt: skip


def killed_after_one_batch(rank: int, world_size: int, root: Path) -> int:
    """Rank 1 dies (SIGKILL) after its first batch; rank 0 goes on sampling."""
    data = stores(root, rank, world_size)
    loader = OrchDistNeighborLoader(
        data, [-1, -1], current_ctx=context(rank, world_size), master_port=rpc_port(),
        input_nodes=data[0].get_global_id(None), batch_size=8, hot_ratio=0,
    )  # fmt: skip
    batches = 0
    for _ in loader:
        batches += 1
        if rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)
    return batches


def waits_for_a_peer(rank: int, world_size: int) -> None:
    """Waits for a rank ``world_size`` that never comes."""
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world_size + 1)


def load_in_group(rank: int, world_size: int, roots: list[Path]) -> None:
    """Joins a process group, then loads this rank's part of ``roots[rank]``."""
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        load_partition(roots[rank], rank, world_size)
    finally:
        torch.distributed.destroy_process_group()


def load_only(rank: int, world_size: int, root: Path) -> None:
    """Loads this rank's part, as every job does first."""
    load_partition(root, rank, world_size)


def ddp_rounds(rank: int, world_size: int, rounds: int) -> int:
    """``rounds`` process groups one after another, each with a DDP replica.

    Each round ends as a training job does: a collective that makes Python
    tensors (``all_gather_object``), a barrier, the group destroyed.
    """
    address, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    store = torch.distributed.TCPStore(address, port, world_size, rank == 0)
    for round_ in range(rounds):
        prefix = torch.distributed.PrefixStore(f"round{round_}", store)
        with process_group("gloo", store=prefix, rank=rank, world_size=world_size):
            _ddp_steps(world_size)
    return rounds


def _ddp_steps(world_size: int) -> None:
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(64, 8))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        optimizer.zero_grad()
        model(torch.randn(16, 64)).sum().backward()
        optimizer.step()
    gathered: list[float | None] = [None] * world_size
    torch.distributed.all_gather_object(gathered, 1.0)
    torch.distributed.barrier()
