"""Mixed precision: ``OrchModel(..., precision="bf16")`` under autocast.

The reference is plain PyG in float32 on the whole graph (fan-out -1), so the
only difference is bfloat16's rounding of the products.
"""

import math

import pytest
import torch
from conftest import random_graph
from torch_geometric.nn import GAT, GCN, GIN, GraphSAGE, to_hetero

from pyg_orch import OrchModel, OrchNeighborLoader

MODELS = {"sage": GraphSAGE, "gin": GIN, "gcn": GCN, "gat": GAT}
# bfloat16 keeps 8 bits of mantissa: a few 2**-8 through two layers.
TOLERANCE = 5e-2


def graph():
    data = random_graph(300, 3000, seed=3)
    data.edge_attr = None
    return data


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("feature_dtype", [None, torch.bfloat16])
def test_bf16_matches_plain_pyg_under_autocast_on_the_whole_graph(name, feature_dtype):
    # The reference: the plain model on the whole graph under the same
    # autocast, fed the same (widened) features. The two round differently
    # (other operation orders, hot aggregates stored in bfloat16), so the
    # check allows bfloat16's rounding, and that autocast did run.
    data = graph()
    torch.manual_seed(0)
    model = MODELS[name](data.num_features, 16, num_layers=2, out_channels=4).eval()
    # GCN takes no hot vertices, GAT's are embeddings (constants): not exact.
    ratio = 0.0 if name in ("gcn", "gat") else 0.3
    torch.manual_seed(1)
    loader = OrchNeighborLoader(
        data, [-1, -1], batch_size=64, hot_ratio=ratio, feature_dtype=feature_dtype
    )
    orch = OrchModel(model, loader, precision="bf16")
    batch = next(iter(loader))
    out = orch(batch).float()
    out.square().mean().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    assert all(p.dtype == torch.float32 for p in model.parameters())
    model.zero_grad()
    x = data.x if feature_dtype is None else data.x.to(feature_dtype).float()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = model(x, data.edge_index)[batch.n_id[:64]].float()
    expected.square().mean().backward()
    full = model(data.x, data.edge_index)[batch.n_id[:64]]
    assert not torch.equal(out, full.detach()), "autocast did not run"
    scale = float(expected.abs().max())
    torch.testing.assert_close(out, expected, atol=TOLERANCE * scale, rtol=TOLERANCE)
    for grad, parameter in zip(grads, model.parameters(), strict=True):
        reference = parameter.grad
        error = (grad - reference).norm() / reference.norm().clamp(min=1e-12)
        assert error < 0.1, f"{name}: gradient off by {error:.3f} (relative)"


def test_bf16_training_steps_update_float32_master_weights():
    data = graph()
    torch.manual_seed(0)
    model = GraphSAGE(data.num_features, 16, num_layers=2, out_channels=4)
    loader = OrchNeighborLoader(data, [5, 5], batch_size=64, hot_ratio=0.2)
    orch = OrchModel(model, loader, precision="bf16")
    optimizer = torch.optim.Adam(orch.parameters(), lr=0.01)
    labels = torch.randint(4, (data.num_nodes,), generator=torch.Generator())
    before = [p.detach().clone() for p in model.parameters()]
    losses = []
    for _ in range(3):
        for batch in loader:
            optimizer.zero_grad()
            target = labels[batch.n_id[: batch.batch_size]]
            loss = torch.nn.functional.cross_entropy(orch(batch), target)
            loss.backward()
            optimizer.step()
            losses.append(float(loss))
    assert all(p.dtype == torch.float32 for p in model.parameters())
    changed = zip(before, model.parameters(), strict=True)
    assert any(not torch.equal(a, b) for a, b in changed)
    assert losses[-1] < losses[0]


def _three_layers(name: str, hot_ratio: float, precision: str):
    """A 3-layer model on 96 features, wrapped in ``precision``, and a batch.

    In bf16 the loader gathers the features in bfloat16.
    """
    data = graph()
    data.x = torch.randn(data.num_nodes, 96)
    torch.manual_seed(0)
    model = MODELS[name](96, 32, num_layers=3, out_channels=4)
    feature_dtype = torch.bfloat16 if precision == "bf16" else None
    loader = OrchNeighborLoader(
        data, [8, 4, 2], batch_size=16, hot_ratio=hot_ratio,
        feature_dtype=feature_dtype,
    )  # fmt: skip
    orch = OrchModel(model, loader, precision=precision)
    return model, orch, next(iter(loader))


def _elements_cast(step) -> int:
    # Elements that changed dtype in a step (aten::_to_copy's inputs).
    with torch.profiler.profile(record_shapes=True) as profiler:
        step()
    return sum(
        math.prod(event.input_shapes[0])
        for event in profiler.events()
        if event.name == "aten::_to_copy" and event.input_shapes
    )


@pytest.mark.parametrize("name", ["sage", "gin"])
@pytest.mark.parametrize("hot_ratio", [0.0, 0.3])
def test_a_bf16_step_casts_no_activation(name, hot_ratio):
    # Features and hot values in bfloat16, every layer's rows stay bfloat16
    # through the aggregation, forward and backward: what is cast is the
    # weights (once per step) and their gradients, and the logits for the
    # loss, never a layer's rows.
    model, orch, batch = _three_layers(name, hot_ratio, "bf16")

    def step():
        orch(batch).float().square().mean().backward()

    step()  # the first step of a kernel specialisation compiles it
    tensors = [*model.parameters(), *model.buffers()]
    weights = sum(t.numel() for t in tensors)
    logits = batch.batch_size * 4
    # Each weight cast to bfloat16 and its gradient back, the logits to
    # float32 and their gradient back, and a few scalars (loss, GIN's eps).
    allowed = 2 * weights + 2 * logits + 16
    assert _elements_cast(step) <= allowed
    assert batch.x.numel() > allowed  # one cast of the features would tell


def _elements_copied(step) -> int:
    # Elements copied within one dtype in a step (aten::copy_ not under a
    # cast), but addmm's: it starts the product's output from the bias.
    with torch.profiler.profile(record_shapes=True) as profiler:
        step()
    return sum(
        math.prod(event.input_shapes[0])
        for event in profiler.events()
        if event.name == "aten::copy_"
        and event.input_shapes
        and event.cpu_parent is not None
        and event.cpu_parent.name not in ("aten::addmm", "aten::_to_copy")
    )


@pytest.mark.parametrize("name", ["sage", "gin"])
@pytest.mark.parametrize("hot_ratio", [0.0, 0.3])
def test_an_fp32_step_copies_no_activation(name, hot_ratio):
    # No layer's rows are copied in forward or backward (no .contiguous()
    # of a view, index_copy, cat or gradient of a slice); Adam's step copies
    # scalars, the loss's slice of the logits their gradient.
    _, orch, batch = _three_layers(name, hot_ratio, "fp32")
    optimizer = torch.optim.Adam(orch.parameters())

    def step():
        optimizer.zero_grad()
        orch(batch).square().mean().backward()
        optimizer.step()

    step()  # the first step of a kernel specialisation compiles it
    logits = batch.batch_size * 4
    allowed = logits + 64
    assert _elements_copied(step) <= allowed
    assert 32 * batch.num_sampled_nodes[0] > allowed  # one layer's seed rows


def test_fp16_is_refused_on_the_cpu_with_the_fix():
    data = graph()
    orch = OrchModel(GraphSAGE(data.num_features, 8, num_layers=1), precision="fp16")
    batch = next(iter(OrchNeighborLoader(data, [5], batch_size=8)))
    with pytest.raises(
        ValueError, match="precision='fp16' needs a CUDA device.*'bf16'"
    ):
        orch(batch)


def test_bad_precisions_are_refused():
    model = GraphSAGE(8, 8, num_layers=1)
    with pytest.raises(ValueError, match=r"precision must be one of \['fp32'"):
        OrchModel(model, precision="half")
    with pytest.raises(TypeError, match="master weights.*model.float"):
        OrchModel(GraphSAGE(8, 8, num_layers=1).double(), precision="bf16")
    hetero = to_hetero(
        GraphSAGE((-1, -1), 8, num_layers=1),
        (["a"], [("a", "to", "a")]),
    )
    with pytest.raises(TypeError, match="master weights.*model.float"):
        OrchModel(hetero.double(), precision="bf16")
