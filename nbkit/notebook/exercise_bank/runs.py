"""Small, fresh services the exercise checks run (in a temporary folder) to recompute their answers."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nbkit.notebook.session import Session

__all__ = ["file_session", "fresh_path"]


def file_session(
    tmp: str,
    name: str,
    key: str,
    handler: Callable[..., Any],
    payloads: list[str],
    *,
    max_attempts: int | None = None,
    dead_letter: str | None = None,
) -> tuple[Session, str]:
    """Run ``handler`` on a fresh stream file ``tmp/name`` holding ``payloads`` under ``key``.

    Returns
    -------
    (Session, str)
        The session, run to the end, and the file's path.
    """
    from nbkit.notebook.session import Session
    from nbkit.runtime.app import App
    from nbkit.runtime.file_broker import FileBroker
    from nbkit.transport.positions import FilePosition

    path = os.path.join(tmp, name)
    broker = FileBroker(path)
    broker.subscriber(key, start_at=FilePosition.beginning(), max_attempts=max_attempts, dead_letter=dead_letter)(
        handler
    )
    session = Session(App(broker))
    for payload in payloads:
        broker.publish(key, payload)
    session.run()
    return session, path


def fresh_path(folder: str | os.PathLike, name: str) -> Path:
    """``folder/name`` with no file there (one left by an earlier run of the scenario is removed), so a
    scenario writes its evidence into an empty file.

    Returns
    -------
    pathlib.Path
        The path.
    """
    path = Path(folder) / name
    if path.exists():
        path.unlink()
    return path
