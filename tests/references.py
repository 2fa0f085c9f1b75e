"""Plain torch references the model and kernel tests compare against."""

import torch
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.utils import scatter

# The hot-cache kind each model's bottom layer needs.
MODEL_KINDS = {"sage": "mean", "gcn": "gcn", "gin": "sum"}


def plain_aggregate(kind: str, x, src, dst, num_nodes):
    """A layer's neighbour aggregation with plain torch scatter."""
    src, dst = src.long(), dst.long()
    if kind == "gcn":
        (src, dst), weight = gcn_norm(torch.stack([src, dst]), None, num_nodes)
        return scatter(x[src] * weight.view(-1, 1), dst, 0, num_nodes, "sum")
    return scatter(x[src], dst, 0, num_nodes, kind)


def plain_layer(name: str, conv, agg, x):
    if name == "sage":
        return conv.lin_l(agg) + conv.lin_r(x)
    if name == "gcn":
        return conv.lin(agg) + conv.bias
    return conv.nn((1 + conv.eps) * x + agg)


def reference(name, model, batch, data):
    """The untrimmed model in plain torch: the bottom layer's hot rows aggregate
    over the whole graph, every other row over the batch's sampled edges."""
    kind = MODEL_KINDS[name]
    x, (src, dst) = batch.x, batch.edge_index
    full = plain_aggregate(kind, data.x, *data.edge_index, data.num_nodes)
    for layer, conv in enumerate(model.convs):
        agg = plain_aggregate(kind, x, src, dst, x.size(0))
        if layer == 0:
            hot = batch.hot_index
            agg = agg.index_copy(0, hot, full[batch.n_id[hot]])
        x = plain_layer(name, conv, agg, x)
        if layer < len(model.convs) - 1:
            x = x.relu()
    return x[: batch.batch_size]


def aggregation_reference(edge_index, x, kind: str) -> torch.Tensor:
    """PyG's aggregation of ``x`` for every node, in float64."""
    x, edge_index = x.double(), edge_index.long()
    num_nodes = x.size(0)
    if kind == "gcn":
        edge_index, weight = gcn_norm(edge_index, None, num_nodes, dtype=torch.float64)
        message = x[edge_index[0]] * weight.unsqueeze(1)
        return scatter(message, edge_index[1], 0, dim_size=num_nodes, reduce="sum")
    return scatter(x[edge_index[0]], edge_index[1], 0, dim_size=num_nodes, reduce=kind)


def assert_aggregation_matches(out, edge_index, x, kind, nodes) -> None:
    nodes = torch.as_tensor(nodes, dtype=torch.long)
    out = torch.as_tensor(out).double()
    expected = aggregation_reference(edge_index, x, kind)[nodes]
    if kind == "max":
        # No rounding in a maximum.
        torch.testing.assert_close(out, expected, rtol=0, atol=0)
        return
    # A float32 sum is off by ~degree * 2**-24 of the sum of |x|.
    scale = aggregation_reference(edge_index, x.abs(), kind)[nodes]
    excess = (out - expected).abs() - (1e-5 * scale + 1e-6)
    assert (excess <= 0).all(), f"{kind}: over tolerance by {excess.max():.3g}"


def assert_matches_reference(orch, model, name, batch, data, atol=1e-5) -> None:
    """``orch(batch)`` and the gradients of every parameter equal
    :func:`reference`'s."""
    model.zero_grad()
    out = orch(batch)
    out.square().sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    expected = reference(name, model, batch, data)
    expected.square().sum().backward()
    assert torch.allclose(out, expected, atol=atol, rtol=1e-4)
    for grad, parameter in zip(grads, model.parameters(), strict=True):
        assert torch.allclose(grad, parameter.grad, atol=atol, rtol=1e-3)
