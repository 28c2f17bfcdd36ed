"""Which file a viewer request may read: a relative path resolved inside the server's root directory.

The browser names files as JupyterLab does, relative to the server's ``root_dir``. Whatever it sends, the
handlers read only a regular file whose real path (symbolic links followed) lies inside that root: an
absolute path, a ``..`` part, a NUL byte, or a link that leads out of the root is refused. Hidden files
are refused as Jupyter's contents API refuses them (unless its ``ContentsManager.allow_hidden`` is set):
a path with a part starting with ``.`` here, before the file is looked up (so the answer does not say
whether it exists), and the contents manager's own ``is_hidden`` in the handlers (:mod:`nbkit.lab.handlers`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

__all__ = ["PathRefused", "hidden_message", "relative_message", "resolve_inside"]


class PathRefused(ValueError):
    """The request names a path the viewer will not read; ``status`` is the HTTP status to answer with
    (400 malformed, 403 outside the root, 404 missing or not a regular file)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def resolve_inside(root_dir: str | os.PathLike, path: str, *, allow_hidden: bool = False) -> tuple[str, str]:
    """The real path of ``path`` (relative to ``root_dir``) and its clean relative form, or PathRefused.

    Parameters
    ----------
    root_dir : str or os.PathLike
        The server's root directory.
    path : str
        The path the request names, ``/``-separated and relative to the root (JupyterLab's form).
    allow_hidden : bool
        Serve hidden paths (a part starting with ``.``): Jupyter's ``ContentsManager.allow_hidden``.

    Returns
    -------
    (str, str)
        The absolute real path to open, and the relative path (``/``-separated) to show.

    Raises
    ------
    PathRefused
        An empty, absolute or ``..`` path (400 or 403), a path leading out of the root through a link
        (403), a hidden path (404, as Jupyter answers it), or one that is missing or not a regular file (404).

    Examples
    --------
    >>> resolve_inside("/srv/notebooks", "../etc/passwd")
    Traceback (most recent call last):
    ...
    nbkit.lab.paths.PathRefused: '../etc/passwd' is outside the server's root directory ('..' is not allowed)
    """
    if not isinstance(path, str) or not path.strip() or "\x00" in path:
        raise PathRefused("give the stream file's path relative to the server's root (path=...)", 400)
    pure = PurePosixPath(path.replace("\\", "/"))
    if pure.is_absolute() or (pure.parts and pure.parts[0].endswith(":")):
        raise PathRefused(f"{path!r} is an absolute path; give it relative to the server's root directory", 403)
    if ".." in pure.parts:
        raise PathRefused(f"{path!r} is outside the server's root directory ('..' is not allowed)", 403)
    if not allow_hidden and any(part.startswith(".") for part in pure.parts):
        raise PathRefused(hidden_message(path), 404)
    root = Path(root_dir).expanduser().resolve()
    try:
        real = (root / pure).resolve(strict=True)
    except (OSError, RuntimeError):
        raise PathRefused(f"{path!r}: no such file in the server's root directory", 404) from None
    if not real.is_relative_to(root):
        raise PathRefused(f"{path!r} leads outside the server's root directory (through a link)", 403)
    if not real.is_file():
        raise PathRefused(f"{path!r} is not a regular file", 404)
    return str(real), pure.as_posix()


def hidden_message(path: str) -> str:
    """The refusal of a hidden path (the same whether or not it exists, as Jupyter's contents API)."""
    return (
        f"{path!r} is hidden: hidden files and folders are not served (Jupyter's ContentsManager.allow_hidden is off)"
    )


def relative_message(root_dir: str | os.PathLike, text: str) -> str:
    """``text`` with the server root's absolute path taken out (paths in errors are relative to the root).

    Examples
    --------
    >>> relative_message("/srv/notebooks", "/srv/notebooks/data/x.ss: not a stream file")
    'data/x.ss: not a stream file'
    """
    given = Path(root_dir).expanduser()
    for root in dict.fromkeys((str(given.resolve()), str(given.absolute()))):
        pattern = re.escape(root) + "(" + re.escape(os.sep) + r"|(?![\w-]|\.\w))"
        text = re.sub(pattern, lambda m: "" if m.group(1) else ".", text)
    return text
