"""The site's own Sphinx extension: everything generated from the repository at build time.

- :mod:`.lessons`: the tutorial notebooks copied in as pages, and the Learn index's objectives;
- :mod:`.widgets_js`: the ipywidgets HTML manager served from the site's own ``_static``;
- :mod:`.mermaid`: ```` ```mermaid ```` fences drawn as diagrams by a Mermaid bundle the site serves;
- :mod:`.npm_assets`: the pinned npm downloads those two rely on;
- :mod:`.glossary_links`: lower-case glossary anchors, and lessons' glossary links made local;
- :mod:`.site_links`: notebooks' links to other pages of the published site made local;
- :mod:`.api_pages`: one autosummary page per public namespace, listed from its ``__all__``;
- :mod:`.cli_reference`: the ``nbkit-cli`` directive, rendering the real argparse parsers;
- :mod:`.public_refs`: cross-references to implementation modules resolved to the public names.

Nothing here is hand-listed: adding a notebook, a public name or a subcommand changes the site.
"""

from __future__ import annotations

from typing import Any

from sphinx.application import Sphinx

from . import api_pages, cli_reference, glossary_links, lessons, mermaid, public_refs, widgets_js


def setup(app: Sphinx) -> dict[str, Any]:
    """Register every part (Sphinx calls this for ``extensions = ["nbkit_docs"]``)."""
    lessons.setup(app)
    widgets_js.setup(app)
    mermaid.setup(app)
    glossary_links.setup(app)
    api_pages.setup(app)
    cli_reference.setup(app)
    public_refs.setup(app)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
