"""What one forward pass of a heterogeneous model needs, read by its hooks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torch import Tensor
from torch_geometric.data import HeteroData

from pyg_orch.nn.convs import cold_rows

EdgeType = tuple[str, str, str]


@dataclass
class HeteroForward:
    """What one forward pass of a heterogeneous model needs, read by its hooks.

    :class:`~pyg_orch.nn.hetero_layers.HeteroLayers` makes one per call of the
    model: the batch's per-hop counts, its edges (to tell which relation a
    conv runs on), its raw features (to check the bottom layer reads them),
    its hot rows and values, and the bottom layer's cold-row mask of each
    node type (made once, for all its relations).

    Example:
        >>> import torch
        >>> forward = HeteroForward(1, {"a": [2, 3]}, {}, {}, {}, {}, {}, {})
        >>> x = torch.ones(5, 4)
        >>> forward.took(x, 2)  # a conv's input, of which its layer outputs 2 rows
        >>> forward.beside(x).shape  # a linear applied to it beside the conv
        torch.Size([2, 4])
        >>> forward.beside(torch.ones(5, 4)).shape  # another tensor: untouched
        torch.Size([5, 4])
    """

    num_layers: int
    nodes: dict[str, list[int]]
    edges: dict[EdgeType, list[int]]
    edge_index: dict[EdgeType, Tensor]
    x: dict[str, Tensor]
    hot_index: dict[str, Tensor]
    hot_agg: dict[EdgeType, Tensor]
    # The edge values the model is given, by name and relation.
    edge_values: dict[str, dict[EdgeType, Tensor]]
    # For inference: the whole graph, whose every destination row of every
    # layer gets its full-neighbourhood aggregate.
    whole: HeteroData | None = None
    # Whether hot_agg holds the bottom convs' outputs (embedding mode).
    embedded: bool = False
    calls: dict[EdgeType, int] = field(default_factory=dict)
    cold: dict[str, Tensor] = field(default_factory=dict)
    # The inputs the convs took so far, by id (held, so no id is reused while
    # this pass lasts), each with the rows its layer outputs.
    taken: dict[int, tuple[Tensor, int]] = field(default_factory=dict)

    def took(self, x: Tensor, rows: int) -> None:
        """Records that a conv took ``x``, of which its layer outputs ``rows``."""
        self.taken.setdefault(id(x), (x, rows))

    def beside(self, x: Any) -> Any:
        """``x`` cut to its layer's rows where a conv took it, else ``x``.

        PyG's heterogeneous models add a module of the layer's input to each
        conv's output (``conv(x, edge_index) + lin(x)``); the convs output
        only the rows their layer needs, so such a module gets those rows.
        """
        taken = self.taken.get(id(x))
        return x if taken is None else x[: taken[1]]

    def cold_mask(self, node_type: str, num_dst: int) -> Tensor:
        """The bottom layer's mask of the ``num_dst`` rows of ``node_type`` not hot."""
        if node_type not in self.cold:
            self.cold[node_type] = cold_rows(num_dst, self.hot_index[node_type])
        return self.cold[node_type]

    def given_values(
        self, relation: EdgeType, conv: Any, inputs: tuple
    ) -> dict[str, Tensor]:
        """The relation's edge values among a conv's other inputs, by name.

        Raises:
            NotImplementedError: a tensor that is none of them, which
                OrchModel cannot cut to each layer's edges.
        """
        known = {
            name: by_relation[relation]
            for name, by_relation in self.edge_values.items()
            if relation in by_relation
        }
        given = {}
        for value in inputs:
            if not isinstance(value, Tensor):
                continue
            name = next((n for n, v in known.items() if v is value), None)
            if name is None:
                raise NotImplementedError(
                    f"{type(conv).__name__} of relation {relation} got a tensor "
                    f"besides x and edge_index that is not the batch's "
                    f"edge_weight or edge_attr of that relation, so OrchModel "
                    f"cannot cut it to each layer's edges. Hand the convs the "
                    f"batch's values, or use the plain model"
                )
            given[name] = value
        return given

    def relation(self, edge_index: Any) -> EdgeType:
        """The relation whose batch ``edge_index`` a conv was given.

        Raises:
            ValueError: ``edge_index`` is none of the batch's.
        """
        for edge_type, tensor in self.edge_index.items():
            if tensor is edge_index:
                return edge_type
        raise ValueError(
            "OrchModel runs a heterogeneous model's relation convs on the "
            "batch's own edges, but a conv got an edge_index that is none of "
            "batch.edge_index_dict's: call each relation's conv on its "
            "edge_index as to_hetero and HeteroConv do, or use hot_ratio=0 "
            "with the plain model"
        )
