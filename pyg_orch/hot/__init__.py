"""The hot vertices: how they are chosen, their cache, and what it serves.

- :mod:`~pyg_orch.hot.choice`: the hot set (:class:`~pyg_orch.hot.choice.HotSet`),
  chosen by presampling or degree;
- :mod:`~pyg_orch.hot.cache` and :mod:`~pyg_orch.hot.relation_cache`: their
  bottom-layer values, on a homogeneous graph and per relation;
- :mod:`~pyg_orch.hot.serving`: the contract between a loader's hot values
  and the model that consumes them;
- :mod:`~pyg_orch.hot.refresher`: re-sampled and embedded values, re-made in
  a background thread within a staleness bound;
- :mod:`~pyg_orch.hot.tuning`: ``hot_ratio="auto"``;
- :mod:`~pyg_orch.hot.options`: the hot settings of a loader, held once;
- :mod:`~pyg_orch.hot.vertices`: :class:`~pyg_orch.hot.vertices.HotVertices`,
  which coordinates them for one loader.
"""
