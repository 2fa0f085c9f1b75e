"""Features as large graphs hold them (NumPy memmaps, strided views) serve whole epochs.

Each layout is checked where the loader reads features itself: with
``device=`` (``'cpu'`` is the CPU twin of the GPU path), with its device
feature cache, and with hot vertices, against ``data.x[batch.n_id]`` and
against the batches of the same features as a plain tensor.
"""

import copy

import numpy as np
import torch
from conftest import random_graph
from torch_geometric.data import Data
from torch_geometric.nn import GraphSAGE

from pyg_orch import OrchModel, OrchNeighborLoader

NUM_NODES = 60
FEATURES = 8
GRAPH = random_graph(NUM_NODES, 300)
ROW_BYTES = FEATURES * 4
CONFIGS = [
    {"device": "cpu"},
    {"device": "cpu", "device_cache": 20 * ROW_BYTES},
    {"hot_ratio": 0.3},
    {"hot_ratio": 0.3, "device": "cpu", "device_cache": NUM_NODES * ROW_BYTES},
]


def with_x(x):
    data = copy.copy(GRAPH)
    data.x = x
    return data


def epoch(data, **kwargs):
    """Every batch of one seeded epoch; a hot loader is served by a model."""
    torch.manual_seed(0)
    loader = OrchNeighborLoader(data, [5, 5], batch_size=16, **kwargs)
    if loader.cache is not None:
        OrchModel(GraphSAGE(FEATURES, 16, num_layers=2), loader)
    return list(loader)


def assert_whole_epochs_serve(x):
    """Every config serves all seeds, ``x[n_id]`` and the plain tensor's batches."""
    rows = torch.as_tensor(np.asarray(x))
    for config in CONFIGS:
        batches = epoch(with_x(x), **config)
        expected = epoch(with_x(rows.clone()), **config)
        assert sum(batch.batch_size for batch in batches) == NUM_NODES, config
        if "hot_ratio" in config:
            assert any(batch.hot_index.numel() for batch in batches), config
        for batch, reference in zip(batches, expected, strict=True):
            assert torch.equal(batch.n_id, reference.n_id), config
            assert torch.equal(batch.x, rows[batch.n_id]), config
            if "hot_agg" in reference:
                assert torch.equal(batch.hot_index, reference.hot_index), config
                assert torch.equal(batch.hot_agg, reference.hot_agg), config


def memmap(path, x):
    """``x`` written to a file, mapped back read-only."""
    written = np.memmap(path, dtype=np.float32, mode="w+", shape=x.shape)
    written[:] = x
    written.flush()
    return np.memmap(path, dtype=np.float32, mode="r", shape=x.shape)


def test_memmap_features_work_as_in_pygs_own_neighbor_loader_test(tmp_path):
    # PyG 2.8.0 test/loader/test_neighbor_loader.py::test_memmap_neighbor_loader
    x = memmap(tmp_path / "x.npy", np.random.randn(100, 32))
    data = Data()
    data.x = x
    data.edge_index = torch.randint(100, (2, 500))
    assert str(data) == "Data(x=[100, 32], edge_index=[2, 500])"
    assert data.num_nodes == 100
    loader = OrchNeighborLoader(data, [5] * 2, batch_size=20, num_workers=2)
    batch = next(iter(loader))
    assert batch.num_nodes <= 100
    assert isinstance(batch.x, torch.Tensor)
    assert batch.x.size() == (batch.num_nodes, 32)
    assert torch.equal(batch.x, torch.from_numpy(np.array(x))[batch.n_id])


def test_memmap_features_serve_whole_epochs_read_in_place(tmp_path):
    x = memmap(tmp_path / "x.npy", GRAPH.x.numpy())
    assert_whole_epochs_serve(x)
    # The loader reads the file's pages: no copy of the features in memory.
    for config in CONFIGS:
        loader = OrchNeighborLoader(with_x(x), [5, 5], batch_size=16, **config)
        assert loader.features.data_ptr() == x.ctypes.data


def test_numpy_array_features_serve_whole_epochs():
    assert_whole_epochs_serve(GRAPH.x.numpy().copy())


def test_a_column_slice_of_wider_features_serves_whole_epochs():
    wide = torch.randn(NUM_NODES, 3 * FEATURES)
    x = wide[:, FEATURES : 2 * FEATURES]
    assert not x.is_contiguous()
    assert_whole_epochs_serve(x)
