"""The model wing: :class:`~pyg_orch.OrchModel` and what it knows of PyG's models.

- :mod:`~pyg_orch.nn.model`: ``OrchModel``, which wraps a PyG model and feeds
  a loader's hot values into its bottom layer;
- :mod:`~pyg_orch.nn.model_checks`: its wrap-time checks;
- :mod:`~pyg_orch.nn.basic_layers` and :mod:`~pyg_orch.nn.hetero_layers`: the
  layers of a ``BasicGNN`` and of a heterogeneous model, run on a batch and
  layer-wise over the whole graph;
- :mod:`~pyg_orch.nn.convs`: what each PyG conv aggregates;
- :mod:`~pyg_orch.nn.whole_graph`: the whole graph's layout for inference.
"""
