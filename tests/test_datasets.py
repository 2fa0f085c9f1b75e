"""Tests for pyg_orch.datasets: loaders, splits and the power-law generator."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from ogb_layouts import OGB_NODES, tiny_arxiv
from torch import Tensor
from torch_geometric.data import Data, HeteroData

from pyg_orch.datasets import (
    default_root,
    load_cora,
    load_dataset,
    load_npz,
    load_ogb,
    load_planetoid,
    power_law_graph,
    power_law_hetero_graph,
    random_split_masks,
    synthetic,
)

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
REQUIRED = ("x", "y", "edge_index", "train_mask", "val_mask", "test_mask")


def _shared(relative: str) -> Path:
    path = SHARED / relative
    if not path.exists():
        pytest.skip(f"shared dataset {relative} not available")
    return path


def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("a download was attempted")

    import urllib.request

    from torch_geometric.datasets import Planetoid
    from torch_geometric.io import fs

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    monkeypatch.setattr(Planetoid, "download", refuse)
    monkeypatch.setattr(fs, "cp", refuse)


def _assert_complete(data: Data) -> None:
    for key in REQUIRED:
        assert key in data, key
    assert data.x.dtype == torch.float32
    assert data.y.dtype == torch.int64 and data.y.dim() == 1
    assert data.edge_index.dtype == torch.int64 and data.edge_index.size(0) == 2
    for key in ("train_mask", "val_mask", "test_mask"):
        assert data[key].dtype == torch.bool
        assert data[key].numel() == data.num_nodes


# --------------------------------------------------------------------------
# Roots, Cora, Planetoid
# --------------------------------------------------------------------------


def test_default_root_env(monkeypatch, tmp_path):
    monkeypatch.setenv("PYG_ORCH_HOME", str(tmp_path))
    assert default_root() == tmp_path
    monkeypatch.delenv("PYG_ORCH_HOME")
    assert default_root() == Path.home() / ".cache" / "pyg_orch"


def _check_cora(data: Data) -> None:
    _assert_complete(data)
    assert data.num_nodes == 2708
    assert data.edge_index.size(1) == 10556
    assert data.x.size(1) == 1433
    assert int(data.y.max()) + 1 == 7
    assert [int(data[k].sum()) for k in ("train_mask", "val_mask", "test_mask")] == [
        140,
        500,
        1000,
    ]


def test_load_cora_fresh_root_twice(monkeypatch, tmp_path):
    _no_network(monkeypatch)
    first = load_cora(tmp_path)
    _check_cora(first)
    assert len(list((tmp_path / "Cora" / "raw").glob("ind.cora.*"))) == 8
    processed = sorted((tmp_path / "Cora" / "processed").iterdir())
    stamps = [p.stat().st_mtime_ns for p in processed]

    second = load_cora(tmp_path)
    _check_cora(second)
    assert [p.stat().st_mtime_ns for p in processed] == stamps  # reused
    assert torch.equal(first.edge_index, second.edge_index)
    assert torch.equal(first.x, second.x)


def test_load_cora_default_root_from_env(monkeypatch, tmp_path):
    _no_network(monkeypatch)
    monkeypatch.setenv("PYG_ORCH_HOME", str(tmp_path / "home"))
    _check_cora(load_cora())
    assert (tmp_path / "home" / "Cora" / "processed").is_dir()


def test_load_planetoid_citeseer_from_raw(monkeypatch, tmp_path):
    raw = _shared("Planetoid/CiteSeer/raw")
    _no_network(monkeypatch)
    shutil.copytree(raw, tmp_path / "CiteSeer" / "raw")
    data = load_planetoid("citeseer", tmp_path)
    _assert_complete(data)
    assert data.num_nodes == 3327
    assert data.edge_index.size(1) == 9104
    assert int(data.train_mask.sum()) == 120


def test_load_planetoid_cora_is_embedded(monkeypatch, tmp_path):
    _no_network(monkeypatch)
    _check_cora(load_planetoid("CORA", tmp_path))


def test_load_planetoid_unknown():
    with pytest.raises(ValueError, match="CiteSeer"):
        load_planetoid("reddit")


@pytest.fixture
def offline(monkeypatch):
    """No host name resolves, as on a machine without network.

    The real download code runs down to the socket, so each library raises what
    it raises offline (aiohttp's ClientConnectorDNSError, urllib's URLError).
    """
    import socket

    import aiohttp.connector
    import aiohttp.resolver

    def no_dns(*args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    # With aiodns installed, aiohttp would resolve through c-ares instead.
    monkeypatch.setattr(
        aiohttp.connector, "DefaultResolver", aiohttp.resolver.ThreadedResolver
    )


PLANETOID_URL = "https://github.com/kimiyoung/planetoid/raw/master/data"
CITESEER_FILES = [
    f"ind.citeseer.{part}"
    for part in ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")
]


def _check_planetoid_help(message: str, raw: Path, missing: list[str]) -> None:
    assert f"into {raw} " in message
    assert f"{PLANETOID_URL}/<file name>" in message
    assert f"{PLANETOID_URL}/{missing[0]}" in message
    assert f"put {', '.join(missing)} into" in message


def test_load_planetoid_offline_says_what_to_put_where(tmp_path, offline):
    with pytest.raises(FileNotFoundError) as info:
        load_dataset("citeseer", tmp_path)
    message = str(info.value)
    assert "ClientConnectorDNSError" in message
    _check_planetoid_help(message, tmp_path / "CiteSeer" / "raw", CITESEER_FILES)


def test_load_planetoid_offline_then_local_copy(tmp_path, offline):
    raw = _shared("Planetoid/CiteSeer/raw")
    with pytest.raises(FileNotFoundError):
        load_planetoid("citeseer", tmp_path)
    # Lay the files out where the message said, then load without network.
    for name in CITESEER_FILES:
        shutil.copy(raw / name, tmp_path / "CiteSeer" / "raw" / name)
    assert load_planetoid("citeseer", tmp_path).num_nodes == 3327


def test_load_planetoid_download_cut_off(monkeypatch, tmp_path):
    import aiohttp
    from torch_geometric.io import fs

    raw = tmp_path / "PubMed" / "raw"
    raw.mkdir(parents=True)
    (raw / "ind.pubmed.tx").write_bytes(b"placed by hand")
    fetched = []

    def cut_off(url: str, path: str) -> None:
        Path(path).write_bytes(b"the first bytes")
        fetched.append(url.rsplit("/", 1)[1])
        if len(fetched) == 3:
            raise aiohttp.ClientPayloadError("Response payload is not completed")

    monkeypatch.setattr(fs, "cp", cut_off)
    with pytest.raises(FileNotFoundError) as info:
        load_planetoid("PubMed", tmp_path)
    # Files already there are kept and not fetched again; the one cut off is
    # not left behind, in full or in part.
    assert fetched == ["ind.pubmed.x", "ind.pubmed.allx", "ind.pubmed.y"]
    assert (raw / "ind.pubmed.tx").read_bytes() == b"placed by hand"
    assert sorted(p.name for p in raw.iterdir()) == [
        "ind.pubmed.allx",
        "ind.pubmed.tx",
        "ind.pubmed.x",
    ]
    missing = [f"ind.pubmed.{part}" for part in ("y", "ty", "ally", "graph")]
    _check_planetoid_help(str(info.value), raw, [*missing, "ind.pubmed.test.index"])
    assert "ClientPayloadError" in str(info.value)


def test_train_cli_offline_fails_with_status_2(tmp_path, offline, capsys):
    from pyg_orch.cli import main

    assert main(["train", "--dataset", "citeseer", "--root", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("pyg-orch train: error: could not download")
    assert "Traceback" not in error
    _check_planetoid_help(error, tmp_path / "CiteSeer" / "raw", CITESEER_FILES)


# --------------------------------------------------------------------------
# Split masks
# --------------------------------------------------------------------------


@pytest.mark.parametrize("num_nodes", [1, 10, 1001])
def test_split_masks_partition(num_nodes):
    train, val, test = random_split_masks(num_nodes, (0.6, 0.2, 0.2), seed=3)
    total = train.long() + val.long() + test.long()
    assert torch.equal(total, torch.ones(num_nodes, dtype=torch.long))
    assert int(train.sum()) == int(0.6 * num_nodes)
    assert int(val.sum()) == int(0.2 * num_nodes)


def test_split_masks_partial_split():
    train, val, test = random_split_masks(1000, (0.1, 0.1, 0.3), seed=0)
    assert [int(m.sum()) for m in (train, val, test)] == [100, 100, 300]
    assert not (train & val).any() and not (val & test).any()
    assert not (train & test).any()


def test_split_masks_seeded():
    first = random_split_masks(500, seed=7)
    again = random_split_masks(500, seed=7)
    other = random_split_masks(500, seed=8)
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not torch.equal(first[0], other[0])


@pytest.mark.parametrize("split", [(0.6, 0.3, 0.2), (-0.1, 0.5, 0.5), (0.5, 0.5)])
def test_split_masks_invalid(split):
    with pytest.raises(ValueError, match="split"):
        random_split_masks(10, split)


# --------------------------------------------------------------------------
# npz
# --------------------------------------------------------------------------


def _tiny_graph() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.random((6, 5)).astype(np.float32)
    x[x < 0.5] = 0.0  # sparse enough for CSR to matter
    y = np.array([0, 1, 2, 0, 1, 2], dtype=np.int64)
    edge_index = np.array([[0, 1, 1, 2, 4, 5], [1, 0, 2, 1, 5, 4]], dtype=np.int64)
    return x, y, edge_index


def _csr_parts(x: np.ndarray) -> dict[str, np.ndarray]:
    rows, cols = np.nonzero(x)
    indptr = np.zeros(x.shape[0] + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=x.shape[0]), out=indptr[1:])
    return {
        "x_data": x[rows, cols].astype(np.float32),
        "x_indices": cols.astype(np.int32),
        "x_indptr": indptr,
        "x_shape": np.array(x.shape, np.int64),
    }


@pytest.mark.parametrize("layout", ["dense", "csr"])
def test_load_npz_round_trip(tmp_path, layout):
    x, y, edge_index = _tiny_graph()
    features = {"x": x} if layout == "dense" else _csr_parts(x)
    path = tmp_path / f"tiny_{layout}.npz"
    np.savez(path, edge_index=edge_index, y=y, **features)

    data = load_npz(path, split=(0.5, 0.5, 0.0), seed=1)
    _assert_complete(data)
    assert np.array_equal(data.x.numpy(), x)
    assert np.array_equal(data.y.numpy(), y)
    assert np.array_equal(data.edge_index.numpy(), edge_index)
    assert [int(data[k].sum()) for k in ("train_mask", "val_mask", "test_mask")] == [
        3,
        3,
        0,
    ]


def test_load_npz_amazon_photo():
    path = _shared("amazon_photo.npz")
    data = load_npz(path, seed=0)
    _assert_complete(data)
    assert data.num_nodes == 7650
    assert data.edge_index.size(1) == 238162
    assert data.x.size(1) == 745
    sp = pytest.importorskip("scipy.sparse")
    with np.load(path) as raw:
        expected = sp.csr_matrix(
            (raw["x_data"], raw["x_indices"], raw["x_indptr"]), shape=raw["x_shape"]
        ).toarray()
    assert np.array_equal(data.x.numpy(), expected)
    same = load_npz(path, seed=0)
    assert torch.equal(data.train_mask, same.train_mask)


@pytest.mark.parametrize(
    ("drop", "message"),
    [("y", "missing key 'y'"), ("edge_index", "missing key 'edge_index'")],
)
def test_load_npz_missing_key(tmp_path, drop, message):
    x, y, edge_index = _tiny_graph()
    arrays = {"x": x, "y": y, "edge_index": edge_index}
    del arrays[drop]
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    with pytest.raises(ValueError, match=message) as info:
        load_npz(path)
    assert "x_indptr" in str(info.value)  # the message spells out the layout


def test_load_npz_inconsistent_csr(tmp_path):
    x, y, edge_index = _tiny_graph()
    parts = _csr_parts(x)
    parts["x_indices"] = parts["x_indices"] + 5  # columns beyond x_shape[1]
    path = tmp_path / "bad.npz"
    np.savez(path, y=y, edge_index=edge_index, **parts)
    with pytest.raises(ValueError, match="inconsistent CSR"):
        load_npz(path)


def test_load_npz_missing_features(tmp_path):
    x, y, edge_index = _tiny_graph()
    parts = _csr_parts(x)
    del parts["x_indptr"]
    path = tmp_path / "bad.npz"
    np.savez(path, y=y, edge_index=edge_index, **parts)
    with pytest.raises(ValueError, match="missing key 'x_indptr'"):
        load_npz(path)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("edge_index", np.zeros((3, 2), np.int64), "'edge_index' has shape"),
        ("edge_index", np.array([[0], [6]], np.int64), "outside"),
        ("y", np.zeros(5, np.int64), "'x' has shape"),
    ],
)
def test_load_npz_inconsistent(tmp_path, field, value, message):
    x, y, edge_index = _tiny_graph()
    arrays = {"x": x, "y": y, "edge_index": edge_index, field: value}
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    with pytest.raises(ValueError, match=message):
        load_npz(path)


# --------------------------------------------------------------------------
# power_law_graph
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def power_law() -> Data:
    return power_law_graph(20_000, avg_degree=20, num_features=32, seed=0)


def test_power_law_structure(power_law):
    data = power_law
    _assert_complete(data)
    src, dst = data.edge_index
    assert not bool((src == dst).any())
    keys = src * data.num_nodes + dst
    assert keys.unique().numel() == keys.numel()  # no duplicates
    assert bool((keys[1:] > keys[:-1]).all())  # sorted by (src, dst)
    assert data.is_undirected()
    assert data.x.shape == (20_000, 32)
    assert int(data.y.max()) < 10


def test_power_law_edge_count(power_law):
    target = 20_000 * 20
    assert abs(power_law.edge_index.size(1) - target) < 0.15 * target


def test_power_law_degree_skew(power_law):
    degree = torch.bincount(power_law.edge_index[0], minlength=power_law.num_nodes)
    assert degree.max() > 10 * degree.float().mean()
    # Hubs are spread over the id range, not packed at the low ids.
    hubs = torch.topk(degree, 50).indices
    assert hubs.float().mean() > 0.25 * power_law.num_nodes


def test_power_law_homophily(power_law):
    src, dst = power_law.edge_index
    y = power_law.y
    same = (y[src] == y[dst]).float().mean()
    shuffled = y[torch.randperm(y.numel(), generator=torch.Generator().manual_seed(0))]
    baseline = (shuffled[src] == shuffled[dst]).float().mean()
    assert baseline < 0.2
    assert same > 0.7 > baseline + 0.4


def _nearest_centroid_accuracy(x: Tensor, data: Data) -> float:
    classes = int(data.y.max()) + 1
    train = data.train_mask
    centroids = torch.stack([x[train & (data.y == c)].mean(0) for c in range(classes)])
    predicted = torch.cdist(x[data.test_mask], centroids).argmin(1)
    return float((predicted == data.y[data.test_mask]).float().mean())


def test_power_law_labels_learnable(power_law):
    from torch_geometric.utils import scatter

    data = power_law
    chance = 1 / 10
    from_features = _nearest_centroid_accuracy(data.x, data)
    assert 3 * chance < from_features < 0.9
    # Averaging over (homophilous) neighbours is what a GNN gains.
    src, dst = data.edge_index
    mean = scatter(data.x[src], dst, 0, dim_size=data.num_nodes, reduce="mean")
    from_graph = _nearest_centroid_accuracy(data.x + mean, data)
    assert from_graph > from_features + 0.1


def test_power_law_seeded():
    first = power_law_graph(3000, avg_degree=8, num_features=8, seed=5)
    again = power_law_graph(3000, avg_degree=8, num_features=8, seed=5)
    other = power_law_graph(3000, avg_degree=8, num_features=8, seed=6)
    for key in REQUIRED:
        assert torch.equal(first[key], again[key]), key
    assert not torch.equal(first.x, other.x)
    assert not torch.equal(first.y, other.y)
    assert first.edge_index.shape != other.edge_index.shape or not torch.equal(
        first.edge_index, other.edge_index
    )


def test_power_law_independent_of_chunking(monkeypatch):
    expected = power_law_graph(3000, avg_degree=8, num_features=7, seed=2)
    # Tiny chunks force many threaded kernel calls (and top-up offsets).
    monkeypatch.setattr(synthetic, "_EDGE_CHUNK", 997)
    monkeypatch.setattr(synthetic, "_ROW_CHUNK", 101)
    chunked = power_law_graph(3000, avg_degree=8, num_features=7, seed=2)
    monkeypatch.setattr(synthetic, "_num_threads", lambda: 1)
    serial = power_law_graph(3000, avg_degree=8, num_features=7, seed=2)
    for key in REQUIRED:
        assert torch.equal(expected[key], chunked[key]), key
        assert torch.equal(expected[key], serial[key]), key


@pytest.mark.parametrize(
    "kwargs",
    [
        {"num_nodes": 50, "avg_degree": 4},
        {"num_nodes": 5000, "avg_degree": 40, "exponent": 1.5},
        {"num_nodes": 2000, "num_classes": 1, "homophily": 1.0},
        {"num_nodes": 2000, "homophily": 0.0, "exponent": 3.0},
        {"num_nodes": 2000, "exponent": 2.0, "num_features": 1},
    ],
)
def test_power_law_edge_cases(kwargs):
    data = power_law_graph(**kwargs, seed=1)
    _assert_complete(data)
    assert data.is_undirected() and not data.has_self_loops()
    target = kwargs["num_nodes"] * kwargs.get("avg_degree", 20.0)
    assert abs(data.edge_index.size(1) - target) < 0.15 * target


def test_power_law_unreachable_target_terminates():
    # 2-node classes with homophily 1 cannot hold the requested edges.
    data = power_law_graph(200, avg_degree=20, num_classes=100, homophily=1.0)
    assert data.is_undirected() and not data.has_self_loops()
    assert data.edge_index.size(1) < 200 * 20 / 4
    assert bool((data.y[data.edge_index[0]] == data.y[data.edge_index[1]]).all())


@pytest.mark.parametrize(
    "kwargs",
    [
        {"num_nodes": 1},
        {"num_nodes": 100, "avg_degree": 80},
        {"num_nodes": 100, "exponent": 1.0},
        {"num_nodes": 100, "homophily": 1.5},
        {"num_nodes": 100, "num_classes": 0},
    ],
)
def test_power_law_invalid(kwargs):
    with pytest.raises(ValueError):
        power_law_graph(**kwargs)


# --------------------------------------------------------------------------
# power_law_hetero_graph
# --------------------------------------------------------------------------

HETERO_SCALE = 0.01


@pytest.fixture(scope="module")
def hetero() -> HeteroData:
    return power_law_hetero_graph(HETERO_SCALE, num_features=16, seed=0)


def _structure_reference(scale: float, exponent: float, seed: int) -> HeteroData:
    # The structure-only generator as it was before labels were added.
    rng = np.random.default_rng(seed)
    data = HeteroData()
    weights = {}
    for node_type, count in synthetic.MAG_NODES.items():
        num_nodes = max(round(count * scale), 1)
        data[node_type].num_nodes = num_nodes
        weights[node_type] = rng.permutation(
            synthetic._rank_weights(num_nodes, 10.0, exponent)
        )
        weights[node_type] /= weights[node_type].sum()
    for (src, relation, dst), count in synthetic.MAG_RELATIONS.items():
        num_edges = max(round(count * scale), 1)
        edge_index = torch.from_numpy(
            np.stack(
                [
                    rng.choice(weights[src].size, num_edges, p=weights[src]),
                    rng.choice(weights[dst].size, num_edges, p=weights[dst]),
                ]
            )
        )
        data[src, relation, dst].edge_index = edge_index
        data[dst, f"rev_{relation}", src].edge_index = edge_index.flip(0)
    return data


def _assert_same_hetero(first: HeteroData, second: HeteroData) -> None:
    assert first.node_types == second.node_types
    assert first.edge_types == second.edge_types
    for node_type in first.node_types:
        assert set(first[node_type].keys()) == set(second[node_type].keys())
        for key, value in first[node_type].items():
            if isinstance(value, Tensor):
                assert torch.equal(value, second[node_type][key]), (node_type, key)
            else:
                assert value == second[node_type][key], (node_type, key)
    for edge_type in first.edge_types:
        assert torch.equal(first[edge_type].edge_index, second[edge_type].edge_index), (
            edge_type
        )


def test_power_law_hetero_shapes(hetero):
    data = hetero
    assert len(data.edge_types) == 8
    for node_type, count in synthetic.MAG_NODES.items():
        store = data[node_type]
        num_nodes = round(count * HETERO_SCALE)
        assert store.num_nodes == num_nodes
        assert store.x.dtype == torch.float32
        assert store.x.shape == (num_nodes, 16)
        assert bool(torch.isfinite(store.x).all())
    paper = data["paper"]
    assert paper.y.dtype == torch.int64 and paper.y.shape == (paper.num_nodes,)
    assert 0 <= int(paper.y.min()) and int(paper.y.max()) < 16
    assert len(paper.y.unique()) == 16
    masks = torch.stack([paper.train_mask, paper.val_mask, paper.test_mask])
    assert masks.dtype == torch.bool
    assert torch.equal(masks.sum(0), torch.ones(paper.num_nodes, dtype=torch.long))
    assert int(paper.train_mask.sum()) == int(0.6 * paper.num_nodes)
    for node_type in ("author", "institution", "field_of_study"):
        assert "y" not in data[node_type] and "train_mask" not in data[node_type]
    for (src, relation, dst), count in synthetic.MAG_RELATIONS.items():
        edge_index = data[src, relation, dst].edge_index
        assert edge_index.dtype == torch.int64
        assert edge_index.shape == (2, round(count * HETERO_SCALE))
        assert 0 <= int(edge_index.min())
        assert int(edge_index[0].max()) < data[src].num_nodes
        assert int(edge_index[1].max()) < data[dst].num_nodes
        keys = edge_index[0] * data[dst].num_nodes + edge_index[1]
        assert bool((keys[1:] >= keys[:-1]).all())  # sorted by (src, dst)
        reverse = data[dst, f"rev_{relation}", src].edge_index
        assert torch.equal(reverse, edge_index.flip(0))


def test_power_law_hetero_degree_skew(hetero):
    src, dst = hetero["author", "writes", "paper"].edge_index
    for index, node_type in ((src, "author"), (dst, "paper")):
        degree = torch.bincount(index, minlength=hetero[node_type].num_nodes)
        assert degree.max() > 10 * degree.float().mean()


def test_power_law_hetero_seeded():
    first = power_law_hetero_graph(0.002, seed=5, num_features=8, num_classes=4)
    again = power_law_hetero_graph(0.002, seed=5, num_features=8, num_classes=4)
    other = power_law_hetero_graph(0.002, seed=6, num_features=8, num_classes=4)
    _assert_same_hetero(first, again)
    assert not torch.equal(first["paper"].x, other["paper"].x)
    assert not torch.equal(first["paper"].y, other["paper"].y)
    cites = ("paper", "cites", "paper")
    assert not torch.equal(first[cites].edge_index, other[cites].edge_index)


def test_power_law_hetero_independent_of_chunking(monkeypatch):
    expected = power_law_hetero_graph(0.002, seed=2, num_features=7)
    monkeypatch.setattr(synthetic, "_EDGE_CHUNK", 997)
    monkeypatch.setattr(synthetic, "_ROW_CHUNK", 101)
    chunked = power_law_hetero_graph(0.002, seed=2, num_features=7)
    monkeypatch.setattr(synthetic, "_num_threads", lambda: 1)
    serial = power_law_hetero_graph(0.002, seed=2, num_features=7)
    _assert_same_hetero(expected, chunked)
    _assert_same_hetero(expected, serial)


@pytest.mark.parametrize("scale,seed", [(0.001, 0), (0.003, 7)])
def test_power_law_hetero_structure_only_unchanged(scale, seed):
    data = power_law_hetero_graph(scale, seed=seed)
    _assert_same_hetero(data, _structure_reference(scale, 2.1, seed))
    _assert_same_hetero(data, power_law_hetero_graph(scale, seed=seed, num_features=0))
    for node_type in data.node_types:
        assert set(data[node_type].keys()) == {"num_nodes"}


def _same_class_fraction(y: Tensor, src: Tensor, dst: Tensor) -> float:
    return float((y[src] == y[dst]).float().mean())


def test_power_law_hetero_homophily(hetero):
    y = hetero["paper"].y
    src, dst = hetero["paper", "cites", "paper"].edge_index
    same = _same_class_fraction(y, src, dst)
    shuffled = y[torch.randperm(y.numel(), generator=torch.Generator().manual_seed(0))]
    baseline = _same_class_fraction(shuffled, src, dst)
    # homophily 0.5 plus 1/16 of the class-blind half.
    assert baseline < 0.12
    assert 0.45 < same < 0.62
    blind = power_law_hetero_graph(HETERO_SCALE, num_features=4, homophily=0.0)
    y = blind["paper"].y
    src, dst = blind["paper", "cites", "paper"].edge_index
    assert _same_class_fraction(y, src, dst) < 0.12


def test_power_law_hetero_full_homophily():
    # With homophily 1 every edge stays in its source's class: all papers of
    # an author (of a field of study) share one class, and citations too.
    data = power_law_hetero_graph(HETERO_SCALE, num_features=4, homophily=1.0)
    y = data["paper"].y
    src, dst = data["paper", "cites", "paper"].edge_index
    assert bool((y[src] == y[dst]).all())
    for edge_type in (
        ("author", "writes", "paper"),
        ("field_of_study", "rev_has_topic", "paper"),
    ):
        owner, paper = data[edge_type].edge_index
        pairs = torch.stack([owner, y[paper]]).unique(dim=1)
        assert pairs.size(1) == owner.unique().numel(), edge_type


def test_power_law_hetero_tiny_types_with_empty_classes():
    # 1 institution and 6 fields of study, 16 classes: most classes have no
    # node of those types, and their edges fall back to any node of the type.
    data = power_law_hetero_graph(0.0001, num_features=3, homophily=1.0)
    assert data["institution"].num_nodes == 1
    for (src, relation, dst), count in synthetic.MAG_RELATIONS.items():
        edge_index = data[src, relation, dst].edge_index
        assert edge_index.size(1) == round(count * 0.0001)
        assert int(edge_index[0].max()) < data[src].num_nodes
        assert int(edge_index[1].max()) < data[dst].num_nodes


def _label_votes(data: HeteroData, edge_types) -> Tensor:
    # Per paper: how many train papers of each class it reaches via edge_types.
    from torch_geometric.utils import scatter

    paper = data["paper"]
    onehot = torch.nn.functional.one_hot(paper.y, 16).float()
    onehot *= paper.train_mask.unsqueeze(1)
    votes = torch.zeros(paper.num_nodes, 16)
    for to_mid, to_paper in edge_types:
        # paper -> (mid type) -> paper: sum train labels over the mid nodes.
        mid_src, mid_dst = data[to_mid].edge_index
        size = data[to_mid[2]].num_nodes
        mid = scatter(onehot[mid_src], mid_dst, 0, dim_size=size, reduce="sum")
        if to_paper is None:
            votes += mid
            continue
        src, dst = data[to_paper].edge_index
        votes += scatter(mid[src], dst, 0, dim_size=paper.num_nodes, reduce="sum")
    return votes


def test_power_law_hetero_labels_learnable(hetero):
    from torch_geometric.utils import scatter

    data = hetero
    paper = data["paper"]
    chance = 1 / 16
    test = paper.test_mask
    # A paper's own features are weak on their own...
    own = _nearest_centroid_accuracy(paper.x, paper)
    assert 1.5 * chance < own < 0.4
    # ...while the neighbourhood, of every type, carries the labels.
    paths = {
        "cites": [
            (("paper", "cites", "paper"), None),
            (("paper", "rev_cites", "paper"), None),
        ],
        "writes": [(("paper", "rev_writes", "author"), ("author", "writes", "paper"))],
        "has_topic": [
            (
                ("paper", "has_topic", "field_of_study"),
                ("field_of_study", "rev_has_topic", "paper"),
            )
        ],
    }
    accuracies = {}
    for name, edge_types in paths.items():
        votes = _label_votes(data, edge_types)
        hit = votes[test].argmax(1) == paper.y[test]
        accuracies[name] = float(hit.float().mean())
        assert accuracies[name] > 4 * chance, (name, accuracies[name])
    votes = sum(_label_votes(data, edge_types) for edge_types in paths.values())
    propagated = float((votes[test].argmax(1) == paper.y[test]).float().mean())
    assert propagated > own + 0.3, (propagated, own, accuracies)
    # Features of neighbours help too: a mean over citing/cited papers' and
    # authors' features added to the paper's own.
    x = paper.x.clone()
    for src_type, relation in (
        ("paper", "cites"),
        ("paper", "rev_cites"),
        ("author", "writes"),
    ):
        src, dst = data[src_type, relation, "paper"].edge_index
        x = torch.cat(
            [
                x,
                scatter(
                    data[src_type].x[src],
                    dst,
                    0,
                    dim_size=paper.num_nodes,
                    reduce="mean",
                ),
            ],
            1,
        )
    assert _nearest_centroid_accuracy(x, paper) > own + 0.15


@pytest.mark.parametrize(
    "kwargs",
    [
        {"scale": 0},
        {"scale": 0.001, "exponent": 1.0},
        {"scale": 0.001, "num_features": -1},
        {"scale": 0.001, "num_features": 4, "num_classes": 0},
        {"scale": 0.001, "num_features": 4, "homophily": 1.5},
        {"scale": 0.001, "num_features": 4, "homophily": -0.1},
    ],
)
def test_power_law_hetero_invalid(kwargs):
    with pytest.raises(ValueError):
        power_law_hetero_graph(**kwargs)


# --------------------------------------------------------------------------
# OGB
# --------------------------------------------------------------------------


@pytest.fixture
def no_ogb_download(monkeypatch):
    import ogb.nodeproppred.dataset_pyg as ogb_pyg

    def refuse(*args, **kwargs):
        raise AssertionError("OGB tried to download")

    _no_network(monkeypatch)
    monkeypatch.setattr(ogb_pyg, "download_url", refuse)
    monkeypatch.setattr(ogb_pyg, "decide_download", refuse)
    monkeypatch.setattr(ogb_pyg.PygNodePropPredDataset, "download", refuse)
    monkeypatch.setattr("builtins.input", refuse)


def _check_tiny_arxiv(data: Data, tiny: dict[str, np.ndarray]) -> None:
    _assert_complete(data)
    assert data.num_nodes == OGB_NODES
    assert np.array_equal(data.edge_index.numpy(), tiny["edges"].T)
    assert np.allclose(data.x.numpy(), tiny["x"])
    assert np.array_equal(data.y.numpy(), tiny["y"])
    perm = torch.from_numpy(tiny["perm"])
    for key, part in zip(
        ("train_mask", "val_mask", "test_mask"), perm.split([18, 6, 6]), strict=True
    ):
        assert torch.equal(data[key].nonzero().view(-1), part.sort().values), key


def test_load_ogb_tiny_local(tmp_path, no_ogb_download):
    tiny = tiny_arxiv(tmp_path)
    _check_tiny_arxiv(load_ogb("ogbn-arxiv", tmp_path), tiny)
    processed = tmp_path / "ogbn_arxiv" / "processed" / "geometric_data_processed.pt"
    stamp = processed.stat().st_mtime_ns
    _check_tiny_arxiv(load_ogb("OGBN-Arxiv", tmp_path), tiny)  # reuses processed
    assert processed.stat().st_mtime_ns == stamp


def test_load_ogb_stale_folder_does_not_prompt(tmp_path, no_ogb_download):
    tiny_arxiv(tmp_path)
    (tmp_path / "ogbn_arxiv" / "RELEASE_v1.txt").unlink()
    with pytest.raises(FileNotFoundError, match="RELEASE_v1.txt"):
        load_ogb("ogbn-arxiv", tmp_path)


def test_load_ogb_unknown_name(tmp_path):
    with pytest.raises(ValueError, match="ogbn-products"):
        load_ogb("ogbn-nope", tmp_path)


OGB_URL = "http://snap.stanford.edu/ogb/data/nodeproppred"


@pytest.mark.parametrize(
    "name, folder, unzipped",
    [
        ("ogbn-arxiv", "ogbn_arxiv", "arxiv"),
        ("ogbn-papers100M", "ogbn_papers100M", "papers100M-bin"),
    ],
)
def test_load_ogb_offline_says_what_to_put_where(
    tmp_path, offline, name, folder, unzipped
):
    for _ in range(2):  # the failed attempt leaves no folder that would prompt
        with pytest.raises(FileNotFoundError) as info:
            load_dataset(name, tmp_path)
        message = str(info.value)
        assert "URLError" in message
        assert f"download {OGB_URL}/{unzipped}.zip, unzip it in {tmp_path} " in message
        assert f"rename the folder {tmp_path / unzipped} " in message
        assert f"to {tmp_path / folder} " in message
        assert "RELEASE_v1.txt, raw/ and split/" in message
        assert not any(tmp_path.iterdir())


def test_load_ogb_offline_then_local_copy(tmp_path, offline):
    with pytest.raises(FileNotFoundError):
        load_ogb("ogbn-arxiv", tmp_path)
    tiny = tiny_arxiv(tmp_path)
    _check_tiny_arxiv(load_ogb("ogbn-arxiv", tmp_path), tiny)


def test_load_ogb_download_cut_off(monkeypatch, tmp_path):
    import ogb.nodeproppred.dataset_pyg as ogb_pyg

    def cut_off(url: str, folder: str) -> str:
        # What ogb.utils.url.download_url raises when the connection drops.
        raise RuntimeError("Stopped downloading due to interruption.")

    monkeypatch.setattr(ogb_pyg, "decide_download", lambda url: True)
    monkeypatch.setattr(ogb_pyg, "download_url", cut_off)
    with pytest.raises(FileNotFoundError, match=f"download {OGB_URL}/products.zip"):
        load_ogb("ogbn-products", tmp_path)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("name", ["ogbn-mag", "ogbn-proteins"])
def test_load_ogb_unsupported_before_download(tmp_path, no_ogb_download, name):
    with pytest.raises(ValueError, match="heterogeneous or multi-task"):
        load_ogb(name, tmp_path)
    assert not any(tmp_path.iterdir())


# --------------------------------------------------------------------------
# load_dataset
# --------------------------------------------------------------------------


def test_load_dataset_cora(monkeypatch, tmp_path):
    _no_network(monkeypatch)
    _check_cora(load_dataset("Cora", tmp_path))
    _check_cora(load_dataset("cora", tmp_path))


def test_load_dataset_npz(tmp_path):
    x, y, edge_index = _tiny_graph()
    path = tmp_path / "Tiny.NPZ"
    with path.open("wb") as handle:  # np.savez(path) would append ".npz"
        np.savez(handle, x=x, y=y, edge_index=edge_index)
    data = load_dataset(str(path), seed=4)
    _assert_complete(data)
    assert torch.equal(data.train_mask, load_npz(path, seed=4).train_mask)


def test_load_dataset_ogb(tmp_path, no_ogb_download):
    tiny = tiny_arxiv(tmp_path)
    _check_tiny_arxiv(load_dataset("ogbn-arxiv", tmp_path), tiny)


def test_load_dataset_citeseer(monkeypatch, tmp_path):
    raw = _shared("Planetoid/CiteSeer/raw")
    _no_network(monkeypatch)
    shutil.copytree(raw, tmp_path / "CiteSeer" / "raw")
    assert load_dataset("CiteSeer", tmp_path).num_nodes == 3327


@pytest.mark.parametrize("name", ["synthetic", "Power-Law"])
def test_load_dataset_synthetic(name):
    data = load_dataset(name, seed=3)
    _assert_complete(data)
    assert data.num_nodes == 100_000
    assert torch.equal(data.y, power_law_graph(100_000, seed=3).y)


def test_load_dataset_unknown():
    with pytest.raises(ValueError, match="citeseer.*synthetic.*ogbn-") as info:
        load_dataset("reddit")
    assert ".npz" in str(info.value)
