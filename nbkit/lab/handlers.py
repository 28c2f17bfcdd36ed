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
refuses anything else, and hidden files as Jupyter's contents API does); every parameter is parsed by
:mod:`nbkit.lab.params` (a bad one answers 400 naming it), and error messages name paths relative to the
root. The handlers are Jupyter ``APIHandler`` s behind ``@tornado.web.authenticated``:
the server's token or cookie, and XSRF for the POST, as every other Jupyter API. File reading runs on a
worker thread, never on the server's event loop.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any, TypeVar

import nbformat
import tornado.web
from jupyter_core.paths import is_hidden
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import ensure_async, url_path_join
from tornado.ioloop import IOLoop

from nbkit.errors import NbkitError
from nbkit.lab.cache import IndexCache
from nbkit.lab.index import StreamIndex
from nbkit.lab.notebook import notebook_cells, notebook_name
from nbkit.lab.pages import PageRequestError, describe_region, read_page, row_of
from nbkit.lab.params import ParamError, parse_body, parse_params
from nbkit.lab.paths import PathRefused, hidden_message, relative_message, resolve_inside

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

    @property
    def root_dir(self) -> str:
        root: str = self.settings["server_root_dir"]
        return root

    def params(self, *names: str) -> dict[str, Any]:
        """The query parameters ``names``, parsed by :mod:`nbkit.lab.params` (a bad one answers 400)."""
        try:
            return parse_params(self.request.query_arguments, names)
        except ParamError as exc:
            raise tornado.web.HTTPError(exc.status, str(exc), reason="bad parameter") from None

    async def _file(self, asked: str | None) -> tuple[str, str]:
        """(real path, shown path) of the stream file a request names, or an HTTP error: outside the
        root, missing, or hidden where Jupyter's contents API would not serve it."""
        cm = self.contents_manager
        allow_hidden = bool(getattr(cm, "allow_hidden", False))
        try:
            real, shown = resolve_inside(self.root_dir, asked or "", allow_hidden=allow_hidden)
        except PathRefused as exc:
            raise tornado.web.HTTPError(exc.status, str(exc), reason=_reason(exc)) from None
        if not allow_hidden and await self._hidden(shown, real):
            raise tornado.web.HTTPError(404, hidden_message(shown), reason="hidden")
        return real, shown

    async def _hidden(self, shown: str, real: str) -> bool:
        """Whether the contents manager calls ``shown`` hidden (its flags and unreadable folders too);
        a manager without ``is_hidden`` is asked as Jupyter's file manager would answer."""
        try:
            return bool(await ensure_async(self.contents_manager.is_hidden(shown)))
        except NotImplementedError:
            return is_hidden(os.path.join(self.root_dir, shown), self.root_dir) or is_hidden(real, self.root_dir)

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

    async def _index(self, path: str | None) -> StreamIndex:
        real, shown = await self._file(path)
        index = await self._run(self.cache.get, real, shown)
        if index.all.count == 0 and index.busy:
            await self._run(index.refresh, FIRST_PIECE_WAIT)
        return index

    def progress(self, index: StreamIndex) -> dict[str, object]:
        """The index's progress, its error (if any) with paths relative to the root."""
        progress = index.progress()
        if progress["error"] is not None:
            progress["error"] = relative_message(self.root_dir, str(progress["error"]))
        return progress

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Errors as ``{"message": ...}``, the message saying what was wrong (Jupyter's API form), with
        paths relative to the server's root (never its absolute path)."""
        self.set_header("Content-Type", "application/json")
        message = self._reason
        exc_info = kwargs.get("exc_info")
        if exc_info is not None and isinstance(exc_info[1], tornado.web.HTTPError) and exc_info[1].log_message:
            message = exc_info[1].log_message
        message = relative_message(self.root_dir, message)
        self.finish(json.dumps({"message": message, "status": status_code}))


def _reason(exc: Exception) -> str:
    """A short, header-safe reason phrase (the full message goes in the JSON body)."""
    return type(exc).__name__


class SummaryHandler(_ViewerHandler):
    """``GET summary?path=``: the file's summary so far and the indexing progress."""

    @tornado.web.authenticated
    async def get(self) -> None:
        p = self.params("path")
        index = await self._index(p["path"])
        summary = await self._run(index.summary)
        body = summary.to_dict()
        body["damaged"] = [
            {**describe_region(region, row), "recovered_after": n}
            for (region, row), n in zip(index.damaged(), summary.recovered_after, strict=False)
        ]
        body["text"] = summary.to_text()
        body["keys"] = sorted(index.by_key)
        body["progress"] = self.progress(index)
        self.finish(json.dumps(body))


class MessagesHandler(_ViewerHandler):
    """``GET messages?path=&start=&count=&key=``: one bounded page of rows."""

    @tornado.web.authenticated
    async def get(self) -> None:
        p = self.params("path", "start", "count", "key")
        index = await self._index(p["path"])
        start = 0 if p["start"] is None else p["start"]
        count = 100 if p["count"] is None else p["count"]
        page = await self._run(lambda: read_page(index, start, count, key=p["key"]))
        page["progress"] = self.progress(index)
        self.finish(json.dumps(page))


class LocateHandler(_ViewerHandler):
    """``GET locate?path=&key=&offset=|seq=&seq_key=|time=``: the row to scroll to."""

    @tornado.web.authenticated
    async def get(self) -> None:
        p = self.params("path", "key", "seq_key", "offset", "seq", "time")
        index = await self._index(p["path"])
        row = await self._run(
            lambda: row_of(
                index, key=p["key"], offset=p["offset"], seq=p["seq"], seq_key=p["seq_key"], time_ms=p["time"]
            )
        )
        self.finish(json.dumps({"row": row}))


class NotebookHandler(_ViewerHandler):
    """``POST notebook`` with ``{"path": ...}``: a new notebook reading the file, its path in the answer.

    Nothing is written unless the request is accepted: the path is checked (inside the root, not hidden)
    and the file opened as a stream file first.
    """

    @tornado.web.authenticated
    async def post(self) -> None:
        try:
            asked = parse_body(self.request.body, ["path"])["path"]
        except ParamError as exc:
            raise tornado.web.HTTPError(exc.status, str(exc), reason="bad parameter") from None
        real, shown = await self._file(asked)
        await self._run(self.cache.get, real, shown)  # a stream file (its header reads), or 422
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
