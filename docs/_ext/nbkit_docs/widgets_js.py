"""Serve the ipywidgets HTML manager from the site itself, so widget snapshots render with no CDN.

The notebooks store their widget state; myst-nb writes it into each page with the widget views, and the
``@jupyter-widgets/html-manager`` bundle (``embed.js``, standalone: no require.js) renders them. By
default that bundle loads from a CDN; here ``npm pack`` fetches the pinned release from the npm registry
once per cache folder at build time, its checksum is verified, and ``embed.js`` with the Font Awesome
files it references is copied into the site's ``_static/jupyter-widgets/``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.errors import ExtensionError

PACKAGE = "@jupyter-widgets/html-manager"
#: The release that renders ipywidgets 8 state (widget protocol 2), pinned with its bundle's checksum.
VERSION = "1.0.15"
EMBED_SHA256 = "8f6d2d3f856d8595d1841dec3019d99bbe74d331f2a5178c2a33bfec729e3d6a"
#: Where pages load it from (relative to ``_static``).
EMBED_URI = "jupyter-widgets/embed.js"
_FONT_SUFFIXES = (".woff2", ".woff", ".ttf", ".eot", ".svg")


def cache_dir(confdir: str | os.PathLike[str]) -> Path:
    """The folder holding the fetched bundle: ``$NBKIT_DOCS_CACHE`` or ``docs/_build/.cache``."""
    return Path(os.environ.get("NBKIT_DOCS_CACHE") or Path(confdir) / "_build" / ".cache") / f"html-manager-{VERSION}"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fetch(static_root: Path) -> Path:
    """Put ``jupyter-widgets/embed.js`` (and its fonts) under ``static_root``; returns embed.js's path."""
    target = static_root / "jupyter-widgets"
    embed = target / "embed.js"
    if embed.exists() and _sha256(embed) == EMBED_SHA256:
        return embed
    npm = shutil.which("npm")
    if npm is None:
        raise ExtensionError(
            f"the docs need {PACKAGE}@{VERSION} from the npm registry to render widget snapshots, and npm is "
            "not installed: install Node.js (`apt-get install npm`), or set NBKIT_DOCS_CACHE to a folder "
            f"holding html-manager-{VERSION}/jupyter-widgets/embed.js"
        )
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(
            [npm, "pack", f"{PACKAGE}@{VERSION}", "--pack-destination", tmp, "--silent"],
            capture_output=True,
            text=True,
            cwd=tmp,
            timeout=300,
        )
        tarballs = list(Path(tmp).glob("*.tgz"))
        if done.returncode != 0 or not tarballs:
            raise ExtensionError(f"npm pack {PACKAGE}@{VERSION} failed: {done.stderr.strip() or done.stdout.strip()}")
        target.mkdir(parents=True, exist_ok=True)
        with tarfile.open(tarballs[0]) as tar:
            for member in tar.getmembers():
                name = Path(member.name)
                if name.parent.as_posix() == "package/dist" and (
                    name.name in ("embed.js", "embed.js.LICENSE.txt") or name.suffix in _FONT_SUFFIXES
                ):
                    extracted = tar.extractfile(member)
                    if extracted is not None:
                        (target / name.name).write_bytes(extracted.read())
    if _sha256(embed) != EMBED_SHA256:
        embed.unlink()
        raise ExtensionError(f"{PACKAGE}@{VERSION}: dist/embed.js does not have the pinned checksum {EMBED_SHA256}")
    return embed


def add_static_path(app: Sphinx, config: Config) -> None:
    """Fetch the bundle if needed and add its folder to ``html_static_path``; point myst-nb at it."""
    static_root = cache_dir(app.confdir)
    fetch(static_root)
    config.html_static_path = [*config.html_static_path, str(static_root)]
    config.nb_ipywidgets_js = {EMBED_URI: {}}


def setup(app: Sphinx) -> dict[str, Any]:
    """Run after conf.py is read (myst-nb reads ``nb_ipywidgets_js`` when the builder starts)."""
    app.connect("config-inited", add_static_path, priority=900)
    return {"parallel_read_safe": True}
