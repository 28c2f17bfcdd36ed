"""Fetch pinned JavaScript from the npm registry at build time, so the site serves it itself (no CDN).

The site is read offline, in CI and in Binder: every script a page runs comes from its own
``_static``. Each asset is one npm package at a pinned version; ``npm pack`` downloads its tarball once
per cache folder, the files a page needs are copied out of ``package/dist/``, and the main file's
SHA-256 is checked against the pin (a changed or corrupted download fails the build, naming both).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sphinx.errors import ExtensionError

__all__ = ["NpmAsset", "cache_root", "fetch"]


@dataclass(frozen=True)
class NpmAsset:
    """One pinned npm package and the files of its ``dist/`` folder the site serves."""

    package: str
    version: str
    #: The file the pages load, relative to ``dist/``, and its pinned SHA-256.
    main: str
    sha256: str
    #: The folder under ``_static`` the files go to (pages load ``folder/main``).
    folder: str
    #: Which other ``dist/`` files to copy (fonts, licences), by file name.
    extra: Callable[[str], bool] = lambda name: False

    @property
    def uri(self) -> str:
        """The path pages load the main file from, relative to ``_static``."""
        return f"{self.folder}/{self.main}"


def cache_root(confdir: str | os.PathLike[str], asset: NpmAsset) -> Path:
    """The static root holding ``asset``: ``$NBKIT_DOCS_CACHE`` or ``docs/_build/.cache``, per version."""
    base = Path(os.environ.get("NBKIT_DOCS_CACHE") or Path(confdir) / "_build" / ".cache")
    return base / f"{asset.package.rsplit('/', 1)[-1]}-{asset.version}"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fetch(asset: NpmAsset, static_root: Path) -> Path:
    """Put ``asset``'s files under ``static_root/asset.folder`` (once); returns the main file's path."""
    target = static_root / asset.folder
    main = target / asset.main
    if main.exists() and _sha256(main) == asset.sha256:
        return main
    spec = f"{asset.package}@{asset.version}"
    npm = shutil.which("npm")
    if npm is None:
        raise ExtensionError(
            f"the docs need {spec} from the npm registry (served from the site, not a CDN), and npm is not "
            f"installed: install Node.js (`apt-get install npm`), or set NBKIT_DOCS_CACHE to a folder holding "
            f"{static_root.name}/{asset.uri}"
        )
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(
            [npm, "pack", spec, "--pack-destination", tmp, "--silent"],
            capture_output=True,
            text=True,
            cwd=tmp,
            timeout=300,
        )
        tarballs = list(Path(tmp).glob("*.tgz"))
        if done.returncode != 0 or not tarballs:
            raise ExtensionError(f"npm pack {spec} failed: {done.stderr.strip() or done.stdout.strip()}")
        target.mkdir(parents=True, exist_ok=True)
        with tarfile.open(tarballs[0]) as tar:
            for member in tar.getmembers():
                name = Path(member.name)
                if name.parent.as_posix() == "package/dist" and (name.name == asset.main or asset.extra(name.name)):
                    extracted = tar.extractfile(member)
                    if extracted is not None:
                        (target / name.name).write_bytes(extracted.read())
    if not main.exists():
        raise ExtensionError(f"{spec}: the package has no dist/{asset.main}")
    if (found := _sha256(main)) != asset.sha256:
        main.unlink()
        raise ExtensionError(f"{spec}: dist/{asset.main} has SHA-256 {found}, not the pinned {asset.sha256}")
    return main
