"""The settings of a training job: :class:`TrainConfig`, checked at construction.

Example:
    >>> TrainConfig(dataset="cora", epochs=2, hot_ratio=0.2).hot_ratio
    0.2
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from torch_geometric.nn import GAT, GCN, GIN, GraphSAGE
from torch_geometric.nn.models.basic_gnn import BasicGNN

from pyg_orch.hot.cache import CACHE_MODES
from pyg_orch.hot.choice import check_hot_method, check_hot_ratio
from pyg_orch.loading.arguments import check_device_cache, check_num_workers
from pyg_orch.nn.model_checks import PRECISIONS

#: ``--model`` choices: PyG models OrchModel serves exactly from the hot cache.
MODELS: dict[str, type[BasicGNN]] = {
    "sage": GraphSAGE,
    "gcn": GCN,
    "gin": GIN,
    "gat": GAT,
}
# Models whose bottom layer weighs its messages: their hot rows are layer
# outputs (cache mode "embedding"), not raw-feature aggregations.
_EMBEDDING_MODELS = ("gat",)
#: The job's hot ratio when none is given (0 for ``gcn``, which cannot use
#: hot vertices): the training job shows the hot split at work.
DEFAULT_HOT_RATIO = 0.2


@dataclass
class TrainConfig:
    """Settings of one training run (the ``pyg-orch train`` options).

    Invalid values raise :class:`ValueError` on construction (and again in
    :func:`~pyg_orch.train.train`, in case a field was changed afterwards);
    the message names the field and its command-line option.

    Attributes:
        dataset: a name understood by :func:`pyg_orch.datasets.load_dataset`
            (``"cora"``, ``"citeseer"``, ``"pubmed"``, ``"ogbn-*"``,
            ``"power-law"``) or a path to an ``.npz`` file.
        root: where datasets are downloaded/cached (``None``: the loader's
            default).
        model: ``"sage"`` (GraphSAGE), ``"gcn"`` (GCN), ``"gin"`` (GIN) or
            ``"gat"`` (GAT, whose hot vertices use the ``embedding`` cache
            mode).
        num_neighbors: fan-out per hop for training; its length is the number
            of layers. ``-1`` takes all neighbours of that hop.
        batch_size: training seed nodes per mini-batch.
        hidden_channels: width of the hidden layers.
        epochs: passes over the training nodes.
        lr: Adam learning rate.
        dropout: dropout probability between layers.
        device: ``"auto"`` (CUDA if available, else CPU), ``"cpu"``,
            ``"cuda"`` or ``"cuda:<index>"``.
        seed: seed for Python, NumPy and PyTorch (model init, shuffling and
            neighbour sampling).
        num_workers: ``DataLoader`` worker processes for training batches.
        eval_batch_size: nodes per batch in layer-wise evaluation.
        eval_every: evaluate every this many epochs (the last epoch is always
            evaluated); the reported test accuracy is the one at the
            evaluation with the best validation accuracy.
        weight_decay: Adam weight decay (L2 penalty).
        hot_ratio: fraction of vertices whose bottom-layer aggregation comes
            from the hot cache, in ``[0, 1]`` (0: none, plain NeighborLoader
            batches), or ``"auto"``: wrapping the model measures several
            ratios and keeps the one whose CPU work hides under the device's;
            ``None``: :data:`DEFAULT_HOT_RATIO`, or 0 for ``gcn`` (see
            :attr:`ratio`).
        hot_method: how hot vertices are chosen: ``"presample"`` or
            ``"degree"``.
        cache: how hot values are made: ``"static"``, ``"resample"`` or
            ``"embedding"`` (``None``: static, or embedding for ``gat``);
            needs hot vertices.
        prefetch: batches prepared ahead by a background thread (``None``: 4
            on CUDA, 0 on the CPU, where training already keeps the cores
            busy).
        device_cache: bytes of GPU memory for the hot aggregates and the most
            gathered feature rows, or ``"auto"`` (half of the free memory);
            used on CUDA only.
        precision: ``"fp32"``, ``"bf16"`` or ``"fp16"`` (CUDA only, with a
            grad scaler): the model trains under autocast in that dtype
            (:class:`~pyg_orch.OrchModel`'s ``precision``) and the loader
            keeps the features in it (``feature_dtype``); evaluation stays
            float32.

    Example:
        >>> config = TrainConfig(num_neighbors=[10, 5], epochs=5)
        >>> config.num_neighbors
        (10, 5)
    """

    dataset: str = "cora"
    root: str | None = None
    model: str = "sage"
    num_neighbors: tuple[int, ...] = (15, 10, 5)
    batch_size: int = 512
    hidden_channels: int = 256
    epochs: int = 30
    lr: float = 0.003
    dropout: float = 0.5
    device: str = "auto"
    seed: int = 0
    num_workers: int = 0
    eval_batch_size: int = 4096
    eval_every: int = 1
    weight_decay: float = 0.0
    hot_ratio: float | str | None = None
    hot_method: str = "presample"
    cache: str | None = None
    prefetch: int | None = None
    device_cache: int | str = "auto"
    precision: str = "fp32"

    def __post_init__(self) -> None:
        if isinstance(self.num_neighbors, str) or not isinstance(
            self.num_neighbors, Sequence
        ):
            raise ValueError(
                "num_neighbors (--num-neighbors) must be a sequence of fan-outs "
                f"such as (15, 10, 5), got {self.num_neighbors!r}"
            )
        self.num_neighbors = tuple(self.num_neighbors)
        self.validate()

    @property
    def ratio(self) -> float | str:
        """The hot ratio the job runs with (``hot_ratio``, or its default).

        Example:
            >>> TrainConfig().ratio, TrainConfig(model="gcn").ratio
            (0.2, 0.0)
        """
        if self.hot_ratio is not None:
            return self.hot_ratio
        return 0.0 if self.model == "gcn" else DEFAULT_HOT_RATIO

    def validate(self) -> None:
        """Checks every field; raises :class:`ValueError` naming the bad one.

        Raises:
            ValueError: a field has an invalid value.

        Example:
            >>> TrainConfig(epochs=3).validate()
        """
        if not self.dataset:
            raise ValueError("dataset (--dataset) must be a name or a path")
        if self.model not in MODELS:
            raise ValueError(
                f"model (--model) must be one of {sorted(MODELS)}, got {self.model!r}"
            )
        check_hot_ratio(self.ratio, "hot_ratio (--hot-ratio)", allow_auto=True)
        if self.model == "gcn" and self.ratio != 0:
            raise ValueError(
                f"model gcn (--model) cannot use hot vertices (--hot-ratio "
                f"{self.ratio}): GCN normalises by the degrees in the sampled "
                "batch, which hot vertices change. Use --hot-ratio 0 with gcn, or "
                "--model sage/gin/gat"
            )
        check_hot_method(self.hot_method, "hot_method (--hot-method)")
        _check_fanouts(self.num_neighbors)
        for name, option in (
            ("batch_size", "--batch-size"),
            ("hidden_channels", "--hidden-channels"),
            ("epochs", "--epochs"),
            ("eval_batch_size", "--eval-batch-size"),
            ("eval_every", "--eval-every"),
        ):
            _check_int(getattr(self, name), name, option, minimum=1)
        _check_int(self.num_workers, "num_workers", "--num-workers", minimum=0)
        _check_int(self.seed, "seed", "--seed", minimum=0)
        if not self.lr > 0:
            raise ValueError(f"lr (--lr) must be > 0, got {self.lr!r}")
        if not 0 <= self.dropout < 1:
            raise ValueError(
                f"dropout (--dropout) must be in [0, 1), got {self.dropout!r}"
            )
        if not self.weight_decay >= 0:
            raise ValueError(
                f"weight_decay (--weight-decay) must be >= 0, got {self.weight_decay!r}"
            )
        if self.precision not in PRECISIONS:
            raise ValueError(
                f"precision (--precision) must be one of {list(PRECISIONS)}, got "
                f"{self.precision!r}"
            )
        if not isinstance(self.device, str) or not self.device:
            raise ValueError(
                "device (--device) must be 'auto', 'cpu' or 'cuda[:index]', "
                f"got {self.device!r}"
            )
        self._check_pipeline()

    def _check_pipeline(self) -> None:
        # The loader would refuse these too, but only once training starts.
        if self.cache is not None:
            self._check_cache()
        if self.prefetch is not None:
            _check_int(self.prefetch, "prefetch", "--prefetch", minimum=0)
        _naming_option(
            "device_cache", "--device-cache", check_device_cache, self.device_cache
        )
        # Batches go to the device through the loader's threads only without
        # workers (pipeline_arguments), so no device is named here.
        _naming_option(
            "num_workers", "--num-workers", check_num_workers,
            self.num_workers, self.prefetch or 0, None, self.cache,
        )  # fmt: skip

    def _check_cache(self) -> None:
        if self.cache not in CACHE_MODES:
            raise ValueError(
                f"cache (--cache) must be one of {CACHE_MODES}, got {self.cache!r}"
            )
        if self.ratio == 0:
            raise ValueError(
                f"cache (--cache) {self.cache} needs hot vertices: set --hot-ratio "
                "> 0 or auto, or leave --cache unset"
            )
        embedding = self.model in _EMBEDDING_MODELS
        if (self.cache == "embedding") != embedding:
            needed = "embedding" if embedding else "static or resample"
            raise ValueError(
                f"cache (--cache) {self.cache} does not fit model {self.model} "
                f"(--model), which needs --cache {needed} (or leave --cache unset)"
            )


def _naming_option(name: str, option: str, check: Callable, *args: object) -> None:
    # The loader's own check, with the field and its option named first.
    try:
        check(*args)
    except ValueError as error:
        raise ValueError(f"{name} ({option}): {error}") from None


def _check_int(value: object, name: str, option: str, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} ({option}) must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} ({option}) must be >= {minimum}, got {value}")


def _check_fanouts(num_neighbors: tuple[int, ...]) -> None:
    if len(num_neighbors) == 0:
        raise ValueError(
            "num_neighbors (--num-neighbors) must not be empty: give one fan-out "
            "per layer, e.g. --num-neighbors 15 10 5"
        )
    for fanout in num_neighbors:
        if isinstance(fanout, bool) or not isinstance(fanout, int):
            raise ValueError(
                "num_neighbors (--num-neighbors) entries must be integers, "
                f"got {fanout!r}"
            )
        if fanout < 1 and fanout != -1:
            raise ValueError(
                "num_neighbors (--num-neighbors) entries must be >= 1, or -1 for "
                f"all neighbours, got {fanout}"
            )
