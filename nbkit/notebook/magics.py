"""IPython magics that make a notebook cell the unit of work (``%load_ext nbkit``).

``%nbkit_file PATH`` or ``%nbkit_pipe`` opens a broker; ``%%nbkit_handler KEY [options]`` turns the
cell into that subscription's handler (the cell is the body of ``def handler(delivery): ...``, so it
``return``s an outcome; a cell that uses ``await`` becomes an ``async def`` handler); ``%nbkit_step``,
``%nbkit_run``, ``%nbkit_advance``, ``%nbkit_events``, ``%nbkit_pending``, ``%nbkit_log`` and
``%nbkit_reset`` drive and show the current Session; ``%nbkit_forget`` drops brokers and Session (a cell
that opens brokers starts with it to run again).
Every magic is a thin layer over :class:`~nbkit.notebook.session.Session`. A line magic cannot
``await``: with async handlers in a notebook, ``%nbkit_step`` and ``%nbkit_run`` refuse and name the
cell to write instead (``await nbkit_session.astep()``).
"""

from __future__ import annotations

import ast
import asyncio
import textwrap
from argparse import Namespace
from typing import Any

import pandas as pd
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from nbkit.errors import ConfigurationError
from nbkit.notebook.session import Advanced, Pending, Session, Steps
from nbkit.runtime.app import App
from nbkit.runtime.broker import Broker
from nbkit.runtime.clock import VirtualClock
from nbkit.runtime.file_broker import FileBroker
from nbkit.runtime.stdio_broker import StdioBroker
from nbkit.transport.positions import FilePosition

__all__ = [
    "READING_ORDER",
    "NbkitMagics",
    "load_ipython_extension",
]


#: The columns ``%nbkit_events`` shows first: which delivery, and what became of it.
READING_ORDER = ("stream_key", "seq", "attempt", "outcome", "action", "delay", "destination")


def _position(text: str | None) -> FilePosition | None:
    """``beginning``, ``end``, ``seq:N`` or ``ts:MS`` -> FilePosition."""
    if text is None:
        return None
    if text == "beginning":
        return FilePosition.beginning()
    if text == "end":
        return FilePosition.end()
    kind, _, value = text.partition(":")
    if kind in ("seq", "sequence") and value.isdigit():
        return FilePosition.sequence(int(value))
    if kind in ("ts", "timestamp") and value.isdigit():
        return FilePosition.timestamp(int(value))
    raise ConfigurationError(f"--start-at takes beginning, end, seq:N or ts:MS, not {text!r}")


def _refuse_other_transport_options(broker: Broker, args: Namespace) -> FileBroker | StdioBroker:
    """Check that ``%%nbkit_handler``'s options belong to ``broker``'s transport, before anything changes."""
    if isinstance(broker, FileBroker):
        if args.out_retry is not None:
            raise ConfigurationError(
                "--out-retry is an option of a pipe (%nbkit_pipe); on a file, retry copies are appended "
                "under the subscribed key itself"
            )
        return broker
    if isinstance(broker, StdioBroker):
        if args.replay or args.start_at is not None:
            raise ConfigurationError(
                "--replay and --start-at are options of a file (%nbkit_file); a pipe keeps no log to start in"
            )
        return broker
    raise ConfigurationError(f"%%nbkit_handler registers on a FileBroker or a StdioBroker, not {broker!r}")


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _awaits(function: ast.AST) -> bool:
    """Whether a function's own body awaits (``await``, ``async for``/``with``, an async comprehension),
    not counting the functions and classes defined inside it."""
    pending = list(ast.iter_child_nodes(function))
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Await, ast.AsyncFor, ast.AsyncWith)):
            return True
        if isinstance(node, ast.comprehension) and node.is_async:
            return True
        if not isinstance(node, _SCOPES):
            pending.extend(ast.iter_child_nodes(node))
    return False


def _handler_source(cell: str) -> str:
    """The cell as the body of ``def __nbkit_handler__(delivery)``, ``async def`` if it awaits."""
    source = "def __nbkit_handler__(delivery):\n" + textwrap.indent(cell.strip("\n") or "pass", "    ")
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source  # compile() reports it, with the cell's line
    return "async " + source if _awaits(tree.body[0]) else source


def _refuse_async(session: Session, magic: str, instead: str) -> None:
    """Raise before anything is delivered when a handler is async and the notebook's loop is running:
    a line magic cannot await, so the error names the cell to write instead."""
    if not session.has_async_handlers:
        return
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return  # no loop here (a plain IPython shell): Session runs the handler on the app's own loop
    raise ConfigurationError(
        f"{magic} cannot wait for an async handler (a line magic cannot await); "
        f"run `{instead}` in a cell instead (nothing was delivered)"
    )


@magics_class
class NbkitMagics(Magics):
    """The current brokers and Session of this notebook, and the magics that drive them."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self.brokers: list[Broker] = []
        self._session: Session | None = None
        self.clock = VirtualClock()

    # -- state -------------------------------------------------------------------------------------
    @property
    def user_ns(self) -> dict[str, Any]:
        """The notebook's namespace, where the magics read inputs and bind brokers and the session."""
        if self.shell is None:
            raise ConfigurationError("the nbkit magics run inside IPython: %load_ext nbkit in a notebook")
        namespace: dict[str, Any] = self.shell.user_ns
        return namespace

    @property
    def session(self) -> Session:
        """The Session over the current brokers, created at the first step (after handlers exist)."""
        if self._session is None:
            if not self.brokers:
                raise ConfigurationError("no broker yet: start with %nbkit_file PATH or %nbkit_pipe")
            self._session = Session(App(*self.brokers), clock=self.clock)
            self.user_ns["nbkit_session"] = self._session
        return self._session

    def _broker(self, name: str | None) -> Broker:
        if name is not None:
            broker = self.user_ns.get(name)
            if not isinstance(broker, Broker):
                raise ConfigurationError(f"--broker {name!r} is not a FileBroker or StdioBroker in this notebook")
            if broker not in self.brokers:
                self._add(broker)
            return broker
        if not self.brokers:
            raise ConfigurationError("no broker yet: start with %nbkit_file PATH or %nbkit_pipe")
        return self.brokers[-1]

    def _add(self, broker: Broker) -> None:
        if self._session is not None:
            raise ConfigurationError(
                "the session has started; %nbkit_reset first, then add brokers (or %nbkit_forget first to "
                "start a new scenario, as a cell that opens brokers does to run again)"
            )
        broker.bind_clock(self.clock)
        self.brokers.append(broker)

    # -- brokers -----------------------------------------------------------------------------------
    @magic_arguments()
    @argument("path", help="the .ss stream file (created if missing)")
    @argument("--beacon-interval", type=int, default=None, help="bytes between beacons (multiple of 1024)")
    @argument("--end-with-eos", action="store_true", help="write the end-of-stream mark at close")
    @argument("--name", default="broker", help="variable to bind the broker to (default: broker)")
    @line_magic
    def nbkit_file(self, line: str) -> FileBroker:
        """Open a FileBroker on PATH and make it the current broker."""
        args = parse_argstring(self.nbkit_file, line)
        options = {"end_with_eos": args.end_with_eos}
        if args.beacon_interval is not None:
            options["beacon_interval"] = args.beacon_interval
        broker = FileBroker(args.path.strip("'\""), **options)
        self._add(broker)
        self.user_ns[args.name] = broker
        return broker

    @magic_arguments()
    @argument("--stdin", default=None, help="variable holding the input lines (a list or a string)")
    @argument("--loopback", action="store_true", help="feed this stage's output back into its input")
    @argument("--name", default="pipe", help="variable to bind the broker to (default: pipe)")
    @line_magic
    def nbkit_pipe(self, line: str) -> StdioBroker:
        """Open a StdioBroker whose stdin is a notebook variable and whose stdout is captured."""
        args = parse_argstring(self.nbkit_pipe, line)
        stdin = self.user_ns[args.stdin] if args.stdin else []
        broker = StdioBroker(stdin=stdin, stdout=[], loopback=args.loopback)
        self._add(broker)
        self.user_ns[args.name] = broker
        return broker

    # -- handlers ----------------------------------------------------------------------------------
    @magic_arguments()
    @argument("key", help="the stream key to subscribe to")
    @argument("--max-attempts", type=int, default=None, help="deliveries per message, counting the first")
    @argument("--dead-letter", default=None, help="key for deliveries that used up their attempts")
    @argument("--out-retry", default=None, help="key for retry copies (required on a pipe)")
    @argument("--replay", action="store_true", help="read the file from the start and end at its end")
    @argument("--start-at", default=None, help="beginning, end, seq:N or ts:MS")
    @argument("--broker", default=None, help="variable of the broker to register on (default: the last one)")
    @cell_magic
    def nbkit_handler(self, line: str, cell: str) -> None:
        """Make this cell the handler of KEY: it runs as ``def handler(delivery): <cell>``.

        ``return HandlerOutcome.retry_after(5)`` (or ack/drop/retry; no return acks). A cell that uses
        ``await`` becomes ``async def handler(delivery)``: step it with ``await nbkit_session.astep()``.
        Running the cell again replaces the handler; after the session started, run %nbkit_reset first.
        """
        args = parse_argstring(self.nbkit_handler, line)
        broker = self._broker(args.broker)
        if broker.connected:
            raise ConfigurationError("the session has started; run %nbkit_reset before changing handlers")
        target = _refuse_other_transport_options(broker, args)
        start_at = _position(args.start_at)
        source = _handler_source(cell)
        namespace = self.user_ns
        exec(compile(source, f"<nbkit handler {args.key}>", "exec"), namespace)
        handler = namespace.pop("__nbkit_handler__")
        handler.__name__ = f"handle_{args.key}".replace(".", "_").replace("-", "_")
        if isinstance(target, FileBroker):
            target.registrations[:] = [r for r in target.registrations if r.name != args.key]
            target.subscriber(
                args.key,
                max_attempts=args.max_attempts,
                dead_letter=args.dead_letter,
                replay=args.replay,
                start_at=start_at,
            )(handler)
        else:
            target.registrations[:] = [r for r in target.registrations if r.name != args.key]
            target.subscriber(
                args.key, max_attempts=args.max_attempts, dead_letter=args.dead_letter, out_retry=args.out_retry
            )(handler)

    # -- driving -----------------------------------------------------------------------------------
    @magic_arguments()
    @argument("n", nargs="?", type=int, default=1, help="how many deliveries (default 1)")
    @line_magic
    def nbkit_step(self, line: str) -> Steps:
        """Deliver and settle the next N messages.

        With an ``async def`` handler in a notebook (an event loop is running) this raises a
        ConfigurationError before delivering anything: write ``await nbkit_session.astep(N)`` in the
        cell instead (IPython awaits it; a line magic cannot).
        """
        n = parse_argstring(self.nbkit_step, line).n
        _refuse_async(self.session, "%nbkit_step", f"await nbkit_session.astep({n})")
        return self.session.step(n)

    @magic_arguments()
    @argument("--max", type=int, default=None, help="stop after this many deliveries")
    @line_magic
    def nbkit_run(self, line: str) -> Steps:
        """Deliver until nothing is left, moving the virtual clock to each delayed copy.

        With an ``async def`` handler in a notebook (an event loop is running) this raises a
        ConfigurationError before delivering anything: write ``await nbkit_session.arun()`` in the
        cell instead (IPython awaits it; a line magic cannot).
        """
        limit = parse_argstring(self.nbkit_run, line).max
        instead = "await nbkit_session.arun()" if limit is None else f"await nbkit_session.arun(max_deliveries={limit})"
        _refuse_async(self.session, "%nbkit_run", instead)
        return self.session.run(max_deliveries=limit)

    @magic_arguments()
    @argument("seconds", type=float, help="how far to move the virtual clock")
    @line_magic
    def nbkit_advance(self, line: str) -> Advanced:
        """Move the virtual clock forward; delayed copies that fall due are published."""
        return self.session.advance(parse_argstring(self.nbkit_advance, line).seconds)

    @line_magic
    def nbkit_events(self, line: str) -> pd.DataFrame:
        """The settlement events so far, as a DataFrame: what happened (key, seq, attempt, outcome, action)
        first, then when and where (the full schema of :mod:`nbkit.runtime.events`)."""
        events = self.session.events
        first = [c for c in READING_ORDER if c in events.columns]
        return events[first + [c for c in events.columns if c not in first]]

    @line_magic
    def nbkit_pending(self, line: str) -> Pending:
        """The delayed copies waiting in the process."""
        return self.session.pending

    @line_magic
    def nbkit_log(self, line: str) -> None:
        """Print the runtime's log lines from this session."""
        print("\n".join(self.session.log) or "(no log lines)")

    @line_magic
    def nbkit_reset(self, line: str) -> None:
        """Start the session over (files cut back, output cleared, clock reset); handlers may change."""
        if self._session is not None:
            self._session.reset()
            self._session = None

    @line_magic
    def nbkit_forget(self, line: str) -> None:
        """Drop every broker and the session (start a new scenario)."""
        if self._session is not None:
            self._session.reset()
        self._session = None
        self.brokers = []
        self.clock = VirtualClock()


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext nbkit`` registers the magics."""
    ipython.register_magics(NbkitMagics(ipython))
