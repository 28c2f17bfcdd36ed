"""Sphinx configuration for the nbkit site (``sphinx-build -W --keep-going -n docs docs/_build/html``).

Pages: the landing page, Learn (the tutorial notebooks, rendered from their stored outputs), the user
guide, the CLI reference (from the argparse parsers), the API reference (autosummary from ``__all__``),
reliability and benchmarks. The local extension in ``_ext/nbkit_docs`` generates what is not written by
hand; ``tests/docs/test_site.py`` builds the site with warnings as errors.
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path[:0] = [str(ROOT), str(DOCS / "_ext")]

from nbkit_docs import api_pages  # noqa: E402
from numpydoc.xref import DEFAULT_LINKS  # noqa: E402

import nbkit  # noqa: E402  (after the path: the checkout's nbkit, not an installed one)

project = "nbkit"
author = "the nbkit authors"
copyright = "2026, the nbkit authors"
release = version = nbkit.__version__

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "sphinx_copybutton",
    "nbkit_docs",
]

# -- sources ------------------------------------------------------------------------------------------
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints"]
templates_path = ["_templates"]
root_doc = "index"
suppress_warnings = ["myst.header"]
smartquotes = False  # code-heavy text: keep quotes, dashes and "..." as written

# -- notebooks: rendered from the outputs strict nbval checked; never executed here --------------------
nb_execution_mode = "off"
nb_merge_streams = True
# A widget's output also holds a still picture of it (text/html, nbkit.notebook.snapshot): the site shows
# that, which says it is a picture and shows its own cell's state, rather than the live-looking view of
# the state the whole notebook ended in.
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", 35)]
myst_enable_extensions = ["colon_fence", "deflist", "html_admonition"]
myst_heading_anchors = 3

# -- API reference ---------------------------------------------------------------------------------------
nbkit_api_namespaces = ["nbkit", "nbkit.plot", "nbkit.widgets", "nbkit.exercises", "nbkit.dask", "nbkit.polars"]
autosummary_generate = True
autosummary_imported_members = True
autodoc_typehints = "none"
autodoc_member_order = "bysource"
autodoc_default_options = {"exclude-members": "__init__, __new__"}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
# Parameter and return types that name one of nbkit's public classes link to its page; other words stay
# plain text (Python's, pandas' and pyarrow's pages cannot be linked: intersphinx needs the network, which
# a build must not use).
numpydoc_xref_param_type = True
numpydoc_xref_ignore = "all"
# numpydoc's own aliases point Python's and numpy's words at intersphinx targets: they stay plain words.
numpydoc_xref_aliases = {word: word for word in DEFAULT_LINKS} | api_pages.type_aliases(nbkit_api_namespaces)

# Nitpicky for nbkit's own names; types from Python and other libraries have no pages here (no network
# for intersphinx), so references to them are not checked.
nitpicky = True
_EXTERNAL = (
    r"(builtins\.)?(int|float|str|bytes|bytearray|bool|dict|list|tuple|set|frozenset|object|type|None|"
    r"callable|iterable|sequence|mapping|optional|any|Exception|BaseException|\w+Error|\w+Warning|"
    r"KeyboardInterrupt|SystemExit|path-like|file-like|os\.PathLike)"
    r"|(typing|collections|enum|os|pathlib|datetime|io|logging|argparse|threading|signal|decimal|json|"
    r"numpy|np|pandas|pd|matplotlib|ipywidgets|IPython|dask|distributed|pyarrow|polars|pl|duckdb|msgspec)(\..*)?"
)
nitpick_ignore_regex = [(r"py:.*", _EXTERNAL)]

# -- HTML -------------------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"nbkit {release}"
html_static_path = ["_static"]
html_css_files = ["nbkit.css"]
#: The repository: the navbar's link, the lessons' Binder and download links (docs/_ext/nbkit_docs/lessons.py).
nbkit_repository = "https://github.com/nbkit/nbkit"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
    "icon_links": [
        {"name": "Source on GitHub", "url": nbkit_repository, "icon": "fa-brands fa-github", "type": "fontawesome"},
    ],
    "header_links_before_dropdown": 5,
}
html_context = {"default_mode": "light"}
html_last_updated_fmt = None
# The pages at the top level (the landing page, Install, Glossary, Command line, Reliability...) have no
# pages under them: no left column of section navigation, which would stay empty.
html_sidebars = {"*": []}
# A page's source is its Markdown, or for a lesson the whole notebook with its outputs (hundreds of KB of
# JSON): the lesson pages link the notebook itself for download instead, and no page links its source.
html_show_sourcelink = False
html_copy_source = False
copybutton_prompt_text = r">>> |\.\.\. |\$ "
copybutton_prompt_is_regexp = True
