"""Loading: the loaders and everything that turns seeds into finished batches.

- :mod:`~pyg_orch.loading.node_loader` and :mod:`~pyg_orch.loading.link_loader`:
  the drop-in loaders, thin shells over PyG's;
- :mod:`~pyg_orch.loading.orch_loader`: what both share: the pipeline, the
  device caches, ``hot_ratio="auto"`` and checkpoints;
- :mod:`~pyg_orch.loading.epoch`, :mod:`~pyg_orch.loading.producer` and
  :mod:`~pyg_orch.loading.pipeline`: an epoch's plan, its batches and the
  threads that make them ahead;
- :mod:`~pyg_orch.loading.feature_cache`: features on the device;
- :mod:`~pyg_orch.loading.checkpoint`: what identifies a loader, and the
  checks of its checkpoint;
- :mod:`~pyg_orch.loading.arguments` and
  :mod:`~pyg_orch.loading.graph_inputs`: the loaders' arguments and graph;
- :mod:`~pyg_orch.loading.stats`: per-batch statistics.
"""
