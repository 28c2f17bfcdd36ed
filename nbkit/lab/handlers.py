"""The Jupyter Server handlers of the stream viewer: JSON pages under ``{base_url}nbkit/viewer/``.

=====================  ====  ==============================================================================
route                  verb  answers
=====================  ====  ==============================================================================
``summary``            GET   ``nbkit info --json`` of the part indexed so far, the damaged regions with the
                             row after each, the stream keys, and how far indexing got (``progress``)
``messages``           GET   a page of rows: ``start``, ``count`` (bounded), ``key`` (one stream key)
``locate``             GET   ``{"row": n}`` of an ``offset``, a ``seq`` (of ``seq_key``) or a ``time``
                             (epoch ms or ISO UTC) in the numbering of ``key``
``notebook``           POST  creates a notebook beside the file (body ``{"path": ...}``), ``{"path": nb}``
=====================  ====  ==============================================================================

Every request names the file with ``path``, relative to the server's root (:mod:`nbkit.lab.paths`
refuses anything else). The handlers are Jupyter ``APIHandler`` s behind ``@tornado.web.authenticated``:
the server's token or cookie, and XSRF for the POST, as every other Jupyter API. File reading runs on a
worker thread, never on the server's event loop.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import nbformat
import tornado.web
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import ensure_async, url_path_join
from tornado.ioloop import IOLoop

from nbkit.errors import NbkitError
from nbkit.lab.cache import IndexCache
from nbkit.lab.index import StreamIndex
from nbkit.lab.notebook import notebook_cells, notebook_name
from nbkit.lab.pages import PageRequestError, describe_region, read_page, row_of
from nbkit.lab.paths import PathRefused, resolve_inside
from nbkit.wire.timestamps import parse_timestamp

__all__ = ["ROUTE", "LocateHandler", "MessagesHandler", "NotebookHandler", "SummaryHandler", "setup_handlers"]

#: Where the handlers live, under the server's base URL.
ROUTE = "nbkit/viewer"
#: How long the first request for a file waits for the first piece of the index (seconds).
FIRST_PIECE_WAIT = 1.0

T = TypeVar("T")


class _ViewerHandler(APIHandler):
    """What the viewer's handlers share: the root, the index cache, errors as JSON with a status."""

    @property
    def cache(self) -> IndexCache:
        cache: IndexCache = self.settings["nbkit_index_cache"]
        return cache

    def _file(self, path: str | None = None) -> tuple[str, str]:
        asked = path if path is not None else self.get_argument("path", "")
        try:
            return resolve_inside(self.settings["server_root_dir"], asked)
        except PathRefused as exc:
            raise tornado.web.HTTPError(exc.status, str(exc), reason=_reason(exc)) from None

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on a worker thread; our errors become HTTP errors that say what and where."""
        try:
            return await IOLoop.current().run_in_executor(None, fn, *args)
        except PageRequestError as exc:
            raise tornado.web.HTTPError(exc.status, str(exc), reason=_reason(exc)) from None
        except NbkitError as exc:
            raise tornado.web.HTTPError(422, str(exc), reason=_reason(exc)) from None
        except OSError as exc:
            raise tornado.web.HTTPError(
                404, f"{exc.filename or ''}: {exc.strerror or exc}", reason="not readable"
            ) from None

    async def _index(self) -> StreamIndex:
        real, shown = self._file()
        index = await self._run(self.cache.get, real, shown)
        if index.all.count == 0 and index.busy:
            await self._run(index.refresh, FIRST_PIECE_WAIT)
        return index

    def _int(self, name: str, default: int | None = None) -> int | None:
        raw = self.get_argument(name, None)
        if raw is None or raw == "":
            return default
        try:
            return int(raw)
        except ValueError:
            raise tornado.web.HTTPError(400, f"{name}={raw!r} is not an integer", reason=f"bad {name}") from None

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Errors as ``{"message": ...}``, the message saying what was wrong (Jupyter's API form)."""
        self.set_header("Content-Type", "application/json")
        message = self._reason
        exc_info = kwargs.get("exc_info")
        if exc_info is not None and isinstance(exc_info[1], tornado.web.HTTPError) and exc_info[1].log_message:
            message = exc_info[1].log_message
        self.finish(json.dumps({"message": message, "status": status_code}))


def _reason(exc: Exception) -> str:
    """A short, header-safe reason phrase (the full message goes in the JSON body)."""
    return type(exc).__name__


class SummaryHandler(_ViewerHandler):
    """``GET summary?path=``: the file's summary so far and the indexing progress."""

    @tornado.web.authenticated
    async def get(self) -> None:
        index = await self._index()
        summary = await self._run(index.summary)
        body = summary.to_dict()
        body["damaged"] = [
            {**describe_region(region, row), "recovered_after": n}
            for (region, row), n in zip(index.damaged(), summary.recovered_after, strict=False)
        ]
        body["text"] = summary.to_text()
        body["keys"] = sorted(index.by_key)
        body["progress"] = index.progress()
        self.finish(json.dumps(body))


class MessagesHandler(_ViewerHandler):
    """``GET messages?path=&start=&count=&key=``: one bounded page of rows."""

    @tornado.web.authenticated
    async def get(self) -> None:
        index = await self._index()
        start = self._int("start", 0)
        count = self._int("count", 100)
        key = self.get_argument("key", None) or None
        assert start is not None and count is not None
        page = await self._run(lambda: read_page(index, start, count, key=key))
        page["progress"] = index.progress()
        self.finish(json.dumps(page))


class LocateHandler(_ViewerHandler):
    """``GET locate?path=&key=&offset=|seq=&seq_key=|time=``: the row to scroll to."""

    @tornado.web.authenticated
    async def get(self) -> None:
        index = await self._index()
        key = self.get_argument("key", None) or None
        seq_key = self.get_argument("seq_key", None) or None
        offset = self._int("offset")
        seq = self._int("seq")
        time_ms = _time_argument(self.get_argument("time", None))
        row = await self._run(lambda: row_of(index, key=key, offset=offset, seq=seq, seq_key=seq_key, time_ms=time_ms))
        self.finish(json.dumps({"row": row}))


def _time_argument(raw: str | None) -> int | None:
    """``time=``: epoch milliseconds, or ISO UTC text (``2024-01-01T00:00:00.5``, a trailing ``Z`` allowed)."""
    if raw is None or raw.strip() == "":
        return None
    text = raw.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    ms = parse_timestamp(text.removesuffix("Z").removesuffix("z"))
    if ms is None:
        raise tornado.web.HTTPError(
            400, f"time={raw!r} is neither epoch milliseconds nor YYYY-MM-DDTHH:MM:SS[.f] (UTC)", reason="bad time"
        )
    return ms


class NotebookHandler(_ViewerHandler):
    """``POST notebook`` with ``{"path": ...}``: a new notebook reading the file, its path in the answer."""

    @tornado.web.authenticated
    async def post(self) -> None:
        try:
            asked = json.loads(self.request.body or b"{}").get("path", "")
        except (ValueError, AttributeError):
            raise tornado.web.HTTPError(400, 'the body must be JSON: {"path": "<stream file>"}') from None
        _, shown = self._file(asked)
        cm = self.contents_manager
        taken: set[str] = set()
        name = notebook_name(shown, lambda p: p in taken)
        while await ensure_async(cm.exists(name)):
            taken.add(name)
            name = notebook_name(shown, lambda p: p in taken)
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nb.cells = [
            nbformat.v4.new_markdown_cell(src) if kind == "markdown" else nbformat.v4.new_code_cell(src)
            for kind, src in notebook_cells(shown)
        ]
        await ensure_async(cm.save({"type": "notebook", "format": "json", "content": nb}, name))
        self.set_status(201)
        self.finish(json.dumps({"path": name}))


def setup_handlers(web_app: Any) -> None:
    """Add the viewer's routes to a Jupyter Server's tornado application (and its index cache)."""
    web_app.settings.setdefault("nbkit_index_cache", IndexCache())
    base = url_path_join(web_app.settings["base_url"], ROUTE)
    web_app.add_handlers(
        ".*$",
        [
            (url_path_join(base, "summary"), SummaryHandler),
            (url_path_join(base, "messages"), MessagesHandler),
            (url_path_join(base, "locate"), LocateHandler),
            (url_path_join(base, "notebook"), NotebookHandler),
        ],
    )
