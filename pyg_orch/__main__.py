"""``python -m pyg_orch``: the ``pyg-orch`` command line."""

from pyg_orch.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
