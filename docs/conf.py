"""Sphinx configuration of the pyg_orch documentation.

Build: ``sphinx-build -W -b html docs docs/_build/html`` (warnings are errors).
"""

from __future__ import annotations

import re
import sys
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sphinx.application import Sphinx

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS.parent))

import pyg_orch  # noqa: E402

project = "pyg_orch"
author = "the pyg_orch developers"
copyright = "2026, the pyg_orch developers"  # noqa: A001 - Sphinx's name
release = pyg_orch.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.intersphinx",
    "sphinx.ext.viewcode",
    "sphinx_copybutton",
    "myst_nb",
]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "jupyter_execute", "**.ipynb_checkpoints"]
html_theme = "furo"
html_title = f"pyg_orch {release}"
html_static_path = ["_static"]
# Benchmark outputs wrap within the page (docs/_static/wide_blocks.css).
html_css_files = ["wide_blocks.css"]

# Google-style docstrings, as PyG's.
napoleon_google_docstring = True
napoleon_numpy_docstring = False
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
add_module_names = False
myst_heading_anchors = 3

# The tutorials are stored without outputs and executed on every build; a
# failing cell fails the build.
nb_execution_mode = "force"
nb_execution_raise_on_error = True
nb_execution_timeout = 600

# Any reference to a pyg_orch name that does not exist fails the build.
# References into other projects resolve through intersphinx where the
# inventory knows them and are plain text otherwise.
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(torch|torch_geometric|numpy|np|numba|tqdm|argparse|ogb)(\..*)?"),
    (r"py:.*", r"(Tensor|Data|Module|Optimizer|Generator|Path|PathLike|Any|Callable)"),
    (r"py:.*", r"(optional|None|ndarray|Iterator|Sequence|Self|Namespace)"),
    (r"py:.*", r"(collections\.abc|typing|os|pathlib|dataclasses|queue)\..*"),
    (r"py:.*", r"(weakref\.ref|threading\..*|SubgraphType|SamplerOutput)"),
    (r"py:.*", r"(int|float|str|bool|list|dict|tuple|bytes|object|type)"),
    # Pieces of generic annotations that autodoc splits at commas.
    (r"py:.*", r".*[\[\]].*"),
]

# The intersphinx inventories are fetched online; offline (as in CI) the
# fallback below, written at build time, keeps the links to the names the
# docstrings use.
_FALLBACK = {
    "torch": (
        "https://pytorch.org/docs/stable/",
        {
            "torch.Tensor": ("py:class", "tensors.html#torch.Tensor"),
            "torch.device": ("py:class", "tensor_attributes.html#torch.device"),
            "torch.dtype": ("py:class", "tensor_attributes.html#torch.dtype"),
            "torch.Generator": (
                "py:class",
                "generated/torch.Generator.html#torch.Generator",
            ),
            "torch.nn.Module": (
                "py:class",
                "generated/torch.nn.Module.html#torch.nn.Module",
            ),
            "torch.optim.Optimizer": ("py:class", "optim.html#torch.optim.Optimizer"),
            "torch.utils.data.DataLoader": (
                "py:class",
                "data.html#torch.utils.data.DataLoader",
            ),
            "torch.manual_seed": (
                "py:function",
                "generated/torch.manual_seed.html#torch.manual_seed",
            ),
            "torch.save": ("py:function", "generated/torch.save.html#torch.save"),
            "torch.load": ("py:function", "generated/torch.load.html#torch.load"),
        },
    ),
    "torch_geometric": (
        "https://pytorch-geometric.readthedocs.io/en/latest/",
        {
            name: ("py:class", f"generated/{name}.html#{name}")
            for name in (
                "torch_geometric.data.Data",
                "torch_geometric.loader.NeighborLoader",
                "torch_geometric.loader.NodeLoader",
                "torch_geometric.sampler.NeighborSampler",
                "torch_geometric.sampler.SamplerOutput",
                "torch_geometric.nn.models.GraphSAGE",
                "torch_geometric.nn.models.GCN",
                "torch_geometric.nn.models.GIN",
                "torch_geometric.nn.models.GAT",
                "torch_geometric.nn.conv.SAGEConv",
                "torch_geometric.nn.conv.GCNConv",
                "torch_geometric.nn.conv.GATConv",
            )
        }
        | {
            "torch_geometric.nn.models.basic_gnn.BasicGNN": (
                "py:class",
                "generated/torch_geometric.nn.models.basic_gnn.BasicGNN.html"
                "#torch_geometric.nn.models.basic_gnn.BasicGNN",
            ),
            "torch_geometric.utils.trim_to_layer": (
                "py:function",
                "modules/utils.html#torch_geometric.utils.trim_to_layer",
            ),
            "torch_geometric.nn.conv.gcn_conv.gcn_norm": (
                "py:function",
                "generated/torch_geometric.nn.conv.GCNConv.html",
            ),
        },
    ),
}


def _write_inventory(path: Path, name: str, entries: dict) -> None:
    # Sphinx's objects.inv format, version 2.
    lines = [
        f"{target} {role} 1 {uri} -" for target, (role, uri) in sorted(entries.items())
    ]
    header = (
        f"# Sphinx inventory version 2\n# Project: {name}\n# Version: \n"
        "# The remainder of this file is compressed using zlib.\n"
    )
    path.write_bytes(header.encode() + zlib.compress("\n".join(lines).encode()))


_INVENTORIES = DOCS / "_build" / "inventories"
_INVENTORIES.mkdir(parents=True, exist_ok=True)
intersphinx_mapping = {}
for _name, (_url, _entries) in _FALLBACK.items():
    _path = _INVENTORIES / f"{_name}.inv"
    _write_inventory(_path, _name, _entries)
    intersphinx_mapping[_name] = (_url, (None, str(_path)))
intersphinx_timeout = 5


# viewcode builds every "[docs]" back-link of a source page from the first
# module name under which one of that module's objects was documented
# (sphinx-doc/sphinx#6651). api.md documents the re-exports as `pyg_orch.X`
# first, so `pyg_orch.hot.choice.in_degree` got `api.html#pyg_orch.in_degree`,
# an id that no page has. The hook below points each back-link at the id the
# object really has; docs/check_anchors.py checks the result in CI.
_BACKLINK = re.compile(r'(<a class="viewcode-back" href="[^"#]*#)([^"]+)"')


def _backlink_id(objects: dict, module: str, refname: str, anchor: str) -> str:
    name = anchor.removeprefix(f"{refname}.")
    for fullname in (anchor, f"{module}.{name}"):
        if fullname in objects:
            return objects[fullname].node_id
    return anchor  # unknown: left for check_anchors.py to report


def _fix_viewcode_backlinks(
    app: Sphinx, pagename: str, templatename: str, context: dict, doctree: object
) -> None:
    if not pagename.startswith("_modules/") or "body" not in context:
        return
    module = pagename.removeprefix("_modules/").replace("/", ".")
    entry = getattr(app.env, "_viewcode_modules", {}).get(module)
    if not entry:
        return  # not a module source page, or a module viewcode could not read
    objects = app.env.get_domain("py").objects
    refname = entry[3]  # viewcode's (code, tags, used, refname)
    context["body"] = _BACKLINK.sub(
        lambda m: f'{m[1]}{_backlink_id(objects, module, refname, m[2])}"',
        context["body"],
    )


def setup(app: Sphinx) -> None:
    app.connect("html-page-context", _fix_viewcode_backlinks)
