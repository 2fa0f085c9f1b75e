"""The bar charts benchmarks save next to their tables (``--save``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class BarChart:
    """One bar (or stack of bars) per configuration.

    Attributes:
        title: the chart's title.
        labels: one per configuration.
        series: name -> one value per configuration; stacked when several.
        ylabel: the value axis' label.

    Example:
        >>> chart = BarChart("ms per batch", ["a", "b"], {"train": [2.0, 1.0]}, "ms")
        >>> chart.labels
        ['a', 'b']
    """

    title: str
    labels: list[str]
    series: dict[str, list[float]]
    ylabel: str

    def save(self, path: Path) -> None:
        """Draws the chart into ``path`` (PNG); needs matplotlib."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        figure, axes = plt.subplots(figsize=(8, 0.5 * len(self.labels) + 1.5))
        left = [0.0] * len(self.labels)
        for name, values in self.series.items():
            axes.barh(self.labels, values, left=left, label=name)
            left = [a + b for a, b in zip(left, values, strict=True)]
        axes.invert_yaxis()
        axes.set_xlabel(self.ylabel)
        axes.set_title(self.title)
        if len(self.series) > 1:
            axes.legend()
        figure.tight_layout()
        figure.savefig(path, dpi=100)
        plt.close(figure)
