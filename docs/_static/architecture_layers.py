"""Draws docs/_static/architecture_layers.png: pyg_orch's wings as layers.

The rows are the layers of the import-linter contract in pyproject.toml
([tool.importlinter], "Wings import only downward"), top to bottom; boxes side
by side in a row are independent (neither imports the other). Rerun after the
contract changes:

    python docs/_static/architecture_layers.py
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - after the backend is chosen
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

OUT = Path(__file__).resolve().with_suffix(".png")

# One row per layer, top first: each box is (wing, what it holds).
LAYERS: list[list[tuple[str, str]]] = [
    [("benchmark", "python -m pyg_orch.benchmark: pyg_orch against plain PyG")],
    [("cli", "the pyg-orch command line")],
    [("options", "command-line options shared by pyg-orch, examples, benchmarks")],
    [("distributed", "data-parallel training: shards, shared graph, hot broadcast")],
    [("train", "the training job: train(), TrainResult")],
    [("train_config", "TrainConfig: a job's settings, checked once")],
    [
        (
            "nn",
            "model (OrchModel); basic_layers, hetero_layers"
            "\nconvs, model_checks, whole_graph",
        )
    ],
    [
        (
            "loading",
            "node_loader, link_loader, orch_loader; epoch, producer, pipeline"
            "\nfeature_cache; checkpoint; arguments, graph_inputs, stats",
        )
    ],
    [
        (
            "hot",
            "vertices (HotVertices); choice, cache, relation_cache, serving"
            "\nrefresher, tuning, options, state",
        )
    ],
    [
        ("datasets", "loaders, power-law graphs"),
        ("sampling", "OrchNeighborSampler"),
        ("aggregation", "aggregate_neighbours"),
    ],
    [
        ("dataset_names", "what a name names"),
        ("checks", "shared argument checks"),
        ("kernels", "Numba, NumPy only"),
    ],
]

# Wing colours: the three wings of the restructure stand out.
FILL = {"nn": "#eaf5ec", "loading": "#e8eefa", "hot": "#fdf0e6"}
EDGE = {"nn": "#3d7a4a", "loading": "#44506a", "hot": "#b0602a"}
PLAIN_FILL, PLAIN_EDGE = "#f4f4f4", "#777777"

ROW_HEIGHT, GAP, LEFT, WIDTH = 0.78, 0.16, 1.1, 9.2


def _box(axes, x: float, y: float, width: float, wing: str, text: str) -> None:
    axes.add_patch(
        FancyBboxPatch(
            (x, y),
            width,
            ROW_HEIGHT,
            boxstyle="round,pad=0,rounding_size=0.08",
            facecolor=FILL.get(wing, PLAIN_FILL),
            edgecolor=EDGE.get(wing, PLAIN_EDGE),
            linewidth=1.3,
        )
    )
    middle = y + ROW_HEIGHT / 2
    if width > WIDTH / 2:
        # A wide box: the wing on the left, what it holds beside it.
        axes.text(x + 0.15, middle, wing, fontsize=11, fontweight="bold", va="center")
        axes.text(x + 1.55, middle, text, fontsize=9, color="#333333", va="center")
        return
    axes.text(x + 0.15, middle + 0.08, wing, fontsize=11, fontweight="bold")
    axes.text(x + 0.15, middle - 0.08, text, fontsize=9, color="#333333", va="top")


def draw(path: Path = OUT) -> None:
    """Draws the layers into ``path`` (PNG)."""
    rows = len(LAYERS)
    height = rows * (ROW_HEIGHT + GAP) + 0.5
    figure, axes = plt.subplots(figsize=(10.5, height * 0.78))
    axes.set_xlim(0, LEFT + WIDTH + 0.1)
    axes.set_ylim(0, height)
    axes.axis("off")
    for index, row in enumerate(LAYERS):
        y = height - 0.4 - (index + 1) * (ROW_HEIGHT + GAP) + GAP
        width = (WIDTH - GAP * (len(row) - 1)) / len(row)
        for column, (wing, text) in enumerate(row):
            _box(axes, LEFT + column * (width + GAP), y, width, wing, text)
    top, bottom = height - 0.5, 0.3
    axes.add_patch(
        FancyArrowPatch(
            (0.45, top),
            (0.45, bottom),
            arrowstyle="-|>,head_width=0.35,head_length=0.6",
            mutation_scale=20,
            linewidth=2.5,
            color="#444444",
        )
    )
    axes.text(
        0.25,
        (top + bottom) / 2,
        "imports only go down (lint-imports)",
        rotation=90,
        ha="center",
        va="center",
        fontsize=10,
        color="#444444",
    )
    axes.text(
        LEFT,
        height - 0.25,
        "pyg_orch's wings, top to bottom; boxes in one row do not import each other",
        fontsize=10,
        color="#444444",
        va="center",
    )
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


if __name__ == "__main__":
    draw()
    print(f"wrote {OUT}")
