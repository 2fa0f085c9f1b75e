"""What a bfloat16 row of a benchmark means on this CPU: native or emulated products.

bfloat16 matrix products run natively with AVX-512 BF16 or AMX (about 2.4x
and 3x faster than float32); on other CPUs oneDNN emulates them, slower than
float32, so a bf16 step there cannot gain from its products. The benchmarks
print :func:`bf16_support` above their bf16 rows.
"""

from __future__ import annotations

import statistics
import time

import torch

# Below this time of a bfloat16 product over its float32 time, the CPU runs
# bfloat16 products natively (measured: 0.42 with AVX-512 BF16, about 0.33
# with AMX; 1.5 to 40 where emulated).
NATIVE_BELOW = 0.8
# The timed product: a batch of rows through a hidden layer, as in training.
_ROWS, _WIDTH = 4096, 256


def bf16_product_ratio(repeats: int = 5) -> float:
    """The median time of a bfloat16 product over its float32 twin's, on the CPU.

    Example:
        >>> bf16_product_ratio(repeats=1) > 0
        True
    """
    generator = torch.Generator().manual_seed(0)
    rows = torch.randn(_ROWS, _WIDTH, generator=generator)
    weight = torch.randn(_WIDTH, _WIDTH, generator=generator)
    seconds = {}
    for dtype in (torch.float32, torch.bfloat16):
        a, b = rows.to(dtype), weight.to(dtype)
        a @ b  # warm-up: oneDNN picks its kernel on the first call
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            a @ b
            times.append(time.perf_counter() - start)
        seconds[dtype] = statistics.median(times)
    return seconds[torch.bfloat16] / seconds[torch.float32]


def bf16_support() -> str:
    """One line on this CPU's bfloat16 products, measured, for benchmark output.

    Example:
        >>> bf16_support().startswith("CPU capability ")
        True
    """
    ratio = bf16_product_ratio()
    kind = "native" if ratio < NATIVE_BELOW else "emulated"
    return (
        f"CPU capability {torch.backends.cpu.get_cpu_capability()}; bf16 "
        f"products {kind} here: a {_ROWS}x{_WIDTH} @ {_WIDTH}x{_WIDTH} product "
        f"takes {ratio:.2f}x its float32 time (native below {NATIVE_BELOW})"
    )
