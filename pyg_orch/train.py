"""The training job: a PyG GNN on :class:`~pyg_orch.OrchNeighborLoader` batches.

Training samples fixed fan-outs around the training nodes; evaluation runs
layer-wise over the full neighbourhood of every node (one hop at a time), so it
gives exact full-graph predictions and still scales to graphs that do not fit a
full-batch forward pass.

Example:
    >>> from pyg_orch.train import TrainConfig, train
    >>> result = train(TrainConfig(dataset="cora", epochs=2), progress=False)
    >>> 0.0 <= result.test_acc <= 1.0
    True
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from numba.core import event
from torch import Tensor
from torch_geometric import seed_everything
from torch_geometric.data import Data
from torch_geometric.nn.models.basic_gnn import BasicGNN
from tqdm.auto import tqdm

from pyg_orch.hot.tuning import HotRatioTuning
from pyg_orch.loading.node_loader import OrchNeighborLoader
from pyg_orch.nn.model import OrchModel
from pyg_orch.nn.model_checks import PRECISIONS
from pyg_orch.train_config import MODELS, TrainConfig

# Batches prepared ahead on CUDA when --prefetch is not given.
_CUDA_PREFETCH = 4
# The progress bar's text during the first epoch.
_FIRST_EPOCH = "train (epoch 1 compiles or loads pyg_orch's kernels)"


@dataclass
class TrainResult:
    """What :func:`train` measured.

    Attributes:
        best_val_acc: the best validation accuracy over all evaluations.
        test_acc: the test accuracy at the evaluation with ``best_val_acc``.
        best_epoch: the (1-based) epoch of that evaluation.
        epochs_run: epochs trained.
        seconds_per_epoch: mean wall time of the training part of an epoch
            (sampling, forward, backward, step), without evaluation, over
            the epochs after the first (the first one alone if it is the
            only one).
        first_epoch_seconds: that of the first epoch, which also compiles
            pyg_orch's Numba kernels in an install that has not yet.
        eval_seconds: total wall time spent in evaluation.
        total_seconds: wall time of the whole run, data loading excluded.
        losses: mean training loss of each epoch.
        val_accs: ``(epoch, validation accuracy)`` of each evaluation.
        device: the device that was used, e.g. ``"cpu"``.
        hot_ratio: the hot ratio trained with (for ``"auto"``: the one chosen).
        best_state: the wrapped PyG model's ``state_dict()`` (its own keys,
            on the CPU) at the evaluation with ``best_val_acc``.
        tuning: for ``hot_ratio="auto"``, what decided the ratio
            (:class:`~pyg_orch.hot.tuning.HotRatioTuning`).
        num_hot: the hot vertices trained with.
        batch_stats: the training batches' means
            (:meth:`~pyg_orch.loading.stats.LoaderStats.mean`: nodes,
            frontier nodes, hot frontier nodes, edges, ...).
        compiled_kernels: pyg_orch's Numba functions compiled during the run
            (0 when every kernel came from Numba's on-disk cache).
        compile_seconds: the wall time those compilations took.

    Example:
        >>> result = TrainResult(best_val_acc=0.8, test_acc=0.81, best_epoch=3,
        ...                      epochs_run=5, seconds_per_epoch=0.1)
        >>> f"test accuracy: {result.test_acc:.4f}"
        'test accuracy: 0.8100'
    """

    best_val_acc: float
    test_acc: float
    best_epoch: int
    epochs_run: int
    seconds_per_epoch: float
    eval_seconds: float = 0.0
    total_seconds: float = 0.0
    losses: list[float] = field(default_factory=list)
    val_accs: list[tuple[int, float]] = field(default_factory=list)
    device: str = "cpu"
    hot_ratio: float = 0.0
    first_epoch_seconds: float = 0.0
    best_state: dict[str, Tensor] | None = None
    tuning: HotRatioTuning | None = None
    num_hot: int = 0
    batch_stats: dict[str, float] = field(default_factory=dict)
    compiled_kernels: int = 0
    compile_seconds: float = 0.0


def resolve_device(device: str) -> torch.device:
    """Turns a ``--device`` value into a :class:`torch.device`.

    Args:
        device: ``"auto"`` (CUDA if available, else CPU), ``"cpu"``, ``"cuda"``
            or ``"cuda:<index>"``.

    Returns:
        The device to train on.

    Raises:
        ValueError: the string is not a device, or CUDA is asked for but is not
            available (the message says to pass ``--device cpu`` or ``auto``).

    Example:
        >>> resolve_device("cpu")
        device(type='cpu')
    """
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(
            f"device (--device) must be 'auto', 'cpu' or 'cuda[:index]', got {device!r}"
        ) from error
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"device (--device) is {device!r} but CUDA is not available "
                "on this machine (or this PyTorch build has no CUDA support); "
                "use --device cpu or --device auto (device='cpu' / 'auto')"
            )
        count = torch.cuda.device_count()
        if resolved.index is not None and resolved.index >= count:
            raise ValueError(
                f"device (--device) is {device!r} but only {count} CUDA "
                f"device(s) exist; use --device cuda:0 .. cuda:{count - 1}"
            )
    elif resolved.type != "cpu":
        raise ValueError(
            f"device (--device) {device!r} is not supported; use --device cpu, "
            "cuda or auto"
        )
    return resolved


def num_classes_of(data: Data) -> int:
    """Number of classes, from the largest label.

    Args:
        data: a graph with node labels ``y``.

    Returns:
        ``max(y) + 1``.

    Example:
        >>> num_classes_of(Data(y=torch.tensor([0, 2, 1])))
        3
    """
    return int(data.y.max()) + 1


def build_model(config: TrainConfig, in_channels: int, num_classes: int) -> BasicGNN:
    """Builds the ``config.model`` network, one layer per entry of ``num_neighbors``.

    Args:
        config: the run settings (``model``, ``hidden_channels``, ``dropout``,
            ``num_neighbors``).
        in_channels: node feature width.
        num_classes: number of output classes.

    Returns:
        An untrained PyG :class:`~torch_geometric.nn.models.basic_gnn.BasicGNN`.

    Example:
        >>> build_model(TrainConfig(num_neighbors=(10, 5)), 16, 3)
        GraphSAGE(16, 3, num_layers=2)
    """
    return MODELS[config.model](
        in_channels,
        config.hidden_channels,
        num_layers=len(config.num_neighbors),
        out_channels=num_classes,
        dropout=config.dropout,
    )


def pipeline_arguments(config: TrainConfig, device: torch.device) -> dict[str, Any]:
    """The loader's ``prefetch``, ``device`` and ``device_cache`` for a run.

    On CUDA, batches are delivered to the device and ``config.device_cache``
    bytes are kept there; on the CPU (or with DataLoader worker processes,
    which exclude the loader's own threads) batches stay where
    ``NeighborLoader`` leaves them and nothing is cached.

    Args:
        config: the run settings (``prefetch``, ``device_cache``,
            ``num_workers``).
        device: the resolved training device.

    Returns:
        Keyword arguments of :class:`~pyg_orch.OrchNeighborLoader`.

    Example:
        >>> pipeline_arguments(TrainConfig(), torch.device("cpu"))
        {'prefetch': 0, 'device': None, 'device_cache': 0}
    """
    cuda = device.type == "cuda" and config.num_workers == 0
    prefetch = config.prefetch
    if prefetch is None:
        # On the CPU, training already keeps the cores busy.
        prefetch = _CUDA_PREFETCH if cuda else 0
    return {
        "prefetch": prefetch,
        "device": device if cuda else None,
        "device_cache": config.device_cache if cuda else 0,
    }


def make_train_loader(data: Data, config: TrainConfig) -> OrchNeighborLoader:
    """A shuffled :class:`~pyg_orch.OrchNeighborLoader` over the training nodes.

    Args:
        data: the graph, with ``train_mask``.
        config: the run settings (``num_neighbors``, ``batch_size``,
            ``num_workers``, the hot/cold split and the pipeline, see
            :func:`pipeline_arguments`).

    Returns:
        The mini-batch loader for one training epoch (a context manager that
        stops its threads on exit).

    Example:
        >>> from pyg_orch.datasets import load_cora
        >>> loader = make_train_loader(load_cora(), TrainConfig())
        >>> loader.hot_ratio, loader.hot.nodes.numel()
        (0.2, 542)
    """
    return OrchNeighborLoader(
        data,
        num_neighbors=list(config.num_neighbors),
        input_nodes=data.train_mask,
        batch_size=config.batch_size,
        shuffle=True,
        num_workers=config.num_workers,
        persistent_workers=config.num_workers > 0,
        hot_ratio=config.ratio,
        hot_method=config.hot_method,
        cache=config.cache,
        feature_dtype=PRECISIONS[config.precision],
        **pipeline_arguments(config, resolve_device(config.device)),
    )


def train_epoch(
    model: OrchModel,
    loader: OrchNeighborLoader,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler | None = None,
) -> float:
    """Trains one epoch over the training mini-batches.

    Each layer runs only on the rows the next one needs, and hot vertices take
    their bottom-layer aggregation from the loader's cache (see
    :class:`~pyg_orch.OrchModel`); the loss is taken on the seed nodes only.

    Args:
        model: the wrapped model, already on its device.
        loader: the training loader (see :func:`make_train_loader`).
        optimizer: the optimizer of ``model``'s parameters.
        scaler: scales the loss of float16 training (``precision="fp16"``).

    Returns:
        The mean cross-entropy loss over the epoch's seed nodes.

    Example:
        >>> from pyg_orch.datasets import load_cora
        >>> data, config = load_cora(), TrainConfig()
        >>> loader = make_train_loader(data, config)
        >>> model = OrchModel(build_model(config, data.num_features, 7), loader)
        >>> optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
        >>> train_epoch(model, loader, optimizer) > 0
        True
    """
    model.train()
    total_loss, total_nodes = 0.0, 0
    for batch in loader:
        optimizer.zero_grad()
        out = model(batch)
        target = batch.y[: batch.batch_size].view(-1).to(out.device)
        loss = F.cross_entropy(out.float(), target)
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        total_loss += float(loss.detach()) * batch.batch_size
        total_nodes += batch.batch_size
    return total_loss / max(total_nodes, 1)


def accuracy(logits: Tensor, y: Tensor, mask: Tensor) -> float:
    """Fraction of ``mask`` nodes whose ``argmax`` prediction equals ``y``.

    Args:
        logits: ``[num_nodes, num_classes]`` scores.
        y: labels, ``[num_nodes]`` or ``[num_nodes, 1]``.
        mask: boolean node mask.

    Returns:
        The accuracy, or ``nan`` for an empty mask.

    Example:
        >>> logits = torch.tensor([[2.0, 1.0], [0.0, 3.0]])
        >>> accuracy(logits, torch.tensor([0, 0]), torch.tensor([True, True]))
        0.5
    """
    count = int(mask.sum())
    if count == 0:
        return float("nan")
    pred = logits[mask].argmax(dim=-1)
    return int((pred == y.view(-1)[mask]).sum()) / count


def evaluate(model: OrchModel, data: Data, batch_size: int) -> tuple[float, float]:
    """Validation and test accuracy from full-neighbourhood layer-wise inference.

    Args:
        model: the wrapped model.
        data: the graph, with ``y``, ``val_mask`` and ``test_mask``.
        batch_size: nodes per chunk sent to the device.

    Returns:
        ``(val_acc, test_acc)``.

    Example:
        >>> from pyg_orch.datasets import load_cora
        >>> data = load_cora()
        >>> model = OrchModel(build_model(TrainConfig(), data.num_features, 7))
        >>> val, test = evaluate(model, data, batch_size=4096)
        >>> 0 <= val <= 1 and 0 <= test <= 1
        True
    """
    logits = model.inference(data, batch_size=batch_size)
    return (
        accuracy(logits, data.y, data.val_mask),
        accuracy(logits, data.y, data.test_mask),
    )


def load_data(config: TrainConfig) -> Data:
    """Loads ``config.dataset`` with :func:`pyg_orch.datasets.load_dataset`.

    Args:
        config: the run settings (``dataset``, ``root``, ``seed``).

    Returns:
        The graph, with ``x``, ``y``, ``edge_index`` and the three split masks.

    Example:
        >>> load_data(TrainConfig(dataset="cora")).num_nodes
        2708
    """
    from pyg_orch.datasets import load_dataset

    return load_dataset(config.dataset, root=config.root, seed=config.seed)


def train(
    config: TrainConfig | None = None,
    progress: bool = True,
    data: Data | None = None,
) -> TrainResult:
    """Trains ``config.model`` on ``config.dataset`` and reports its accuracy.

    Mini-batch training with :class:`~pyg_orch.OrchNeighborLoader`,
    :class:`~pyg_orch.OrchModel` and Adam;
    every ``eval_every`` epochs (and after the last one) exact layer-wise
    inference scores the validation and test nodes. The test accuracy reported
    is the one at the best validation accuracy (first such epoch on ties).

    Args:
        config: the run settings (``None``: all defaults).
        progress: show a tqdm bar over epochs with loss and validation accuracy.
        data: an already loaded graph to use instead of loading
            ``config.dataset``.

    Returns:
        The :class:`TrainResult`.

    Raises:
        ValueError: an invalid setting (the message names it) or a graph
            without the needed attributes.

    Example:
        >>> result = train(TrainConfig(epochs=2), progress=False)
        >>> result.epochs_run
        2
    """
    config = config if config is not None else TrainConfig()
    config.validate()
    device = resolve_device(config.device)
    if config.precision == "fp16" and device.type != "cuda":
        raise ValueError(
            f"precision (--precision) fp16 needs a CUDA device, not {device}: use "
            f"--precision bf16 on the CPU"
        )
    if data is None:
        data = load_data(config)
    _check_data(data)

    seed_everything(config.seed)
    model = build_model(config, data.num_features, num_classes_of(data)).to(device)
    optimizer = torch.optim.Adam(
        model.parameters(), lr=config.lr, weight_decay=config.weight_decay
    )
    with (
        event.install_recorder("numba:compile") as compiles,
        make_train_loader(data, config) as train_loader,
    ):
        # With hot_ratio="auto", wrapping the model measures and picks a ratio.
        model = OrchModel(model, train_loader, precision=config.precision)
        result = _fit(config, model, optimizer, train_loader, data, progress)
    result.hot_ratio = float(train_loader.hot_ratio)
    result.tuning = train_loader.tuning
    result.num_hot = 0 if train_loader.hot is None else train_loader.hot.nodes.numel()
    result.batch_stats = train_loader.stats.mean()
    result.compiled_kernels, result.compile_seconds = own_compilations(compiles.buffer)
    return result


def own_compilations(events: list[tuple[float, Any]]) -> tuple[int, float]:
    """pyg_orch's Numba compilations among recorded ``"numba:compile"`` events.

    Args:
        events: a Numba recorder's ``buffer`` of ``(time, event)``.

    Returns:
        The number of pyg_orch functions compiled, and the wall time of the
        compilations (nested ones counted once).

    Example:
        >>> from numba.core import event
        >>> with event.install_recorder("numba:compile") as recorder:
        ...     pass
        >>> own_compilations(recorder.buffer)
        (0, 0.0)
    """
    count, seconds, depth, start = 0, 0.0, 0, 0.0
    for when, happened in events:
        function = happened.data["dispatcher"].py_func
        if happened.is_start:
            count += function.__module__.startswith("pyg_orch.")
            depth, start = depth + 1, start if depth else when
        else:
            depth -= 1
            seconds += 0.0 if depth else when - start
    return count, seconds


def _check_data(data: Data) -> None:
    missing = [
        key
        for key in ("x", "y", "edge_index", "train_mask", "val_mask", "test_mask")
        if getattr(data, key, None) is None
    ]
    if missing:
        raise ValueError(f"data is missing {', '.join(missing)}")
    if int(data.train_mask.sum()) == 0:
        raise ValueError("data.train_mask selects no nodes")


def _fit(
    config: TrainConfig,
    model: OrchModel,
    optimizer: torch.optim.Optimizer,
    train_loader: OrchNeighborLoader,
    data: Data,
    progress: bool,
) -> TrainResult:
    device = model.device
    result = TrainResult(
        best_val_acc=float("nan"),
        test_acc=float("nan"),
        best_epoch=0,
        epochs_run=0,
        seconds_per_epoch=0.0,
        device=str(device),
    )
    start = time.perf_counter()
    epoch_seconds = []
    scaler = torch.amp.GradScaler(device.type) if config.precision == "fp16" else None
    # The first epoch compiles the kernels (or loads them from Numba's cache):
    # the bar says so, and its rate and ETA count only the epochs after it.
    bar = tqdm(total=config.epochs, desc=_FIRST_EPOCH, unit="epoch",
               disable=not progress, smoothing=0)  # fmt: skip
    for epoch in range(1, config.epochs + 1):
        tick = time.perf_counter()
        result.losses.append(train_epoch(model, train_loader, optimizer, scaler))
        epoch_seconds.append(time.perf_counter() - tick)
        result.epochs_run = epoch
        bar.update(1)
        if epoch == 1 and not bar.disable:
            bar.set_description("train", refresh=False)
            bar.initial, bar.start_t = bar.n, time.time()
        postfix = {"loss": f"{result.losses[-1]:.4f}"}
        if epoch % config.eval_every == 0 or epoch == config.epochs:
            tick = time.perf_counter()
            val_acc, test_acc = evaluate(model, data, config.eval_batch_size)
            result.eval_seconds += time.perf_counter() - tick
            result.val_accs.append((epoch, val_acc))
            if result.best_epoch == 0 or val_acc > result.best_val_acc:
                result.best_val_acc, result.test_acc = val_acc, test_acc
                result.best_epoch = epoch
                result.best_state = {
                    key: value.detach().cpu().clone()
                    for key, value in model.model.state_dict().items()
                }
            postfix["val_acc"] = f"{val_acc:.4f}"
            postfix["best"] = f"{result.best_val_acc:.4f}"
        bar.set_postfix(postfix)
    bar.close()
    # The first epoch also compiles the kernels (once per install): apart.
    result.first_epoch_seconds = epoch_seconds[0] if epoch_seconds else 0.0
    steady = epoch_seconds[1:] or epoch_seconds
    result.seconds_per_epoch = sum(steady) / max(len(steady), 1)
    result.total_seconds = time.perf_counter() - start
    return result
