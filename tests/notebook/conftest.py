"""Notebook-layer fixtures: matplotlib on Agg with figures closed after each test, and a file+pipe
retry scenario run through real Sessions (used by the plot and widget tests)."""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from nbkit import App, FileBroker, FilePosition, HandlerOutcome, StdioBroker  # noqa: E402
from nbkit.notebook.session import Session  # noqa: E402
from nbkit.runtime.broker import Broker  # noqa: E402
from nbkit.wire import envelope  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def pipe_line(payload: str, retry_count: int = 0, key: str = "orders") -> str:
    """A stdio line as an upstream stage writes it: enveloped with the retry count when there is one."""
    headers = {envelope.RETRY_COUNT_HEADER: str(retry_count)} if retry_count else {}
    return f"[{key}] " + envelope.encode(headers, payload.encode(), force_text=True).decode()


class RetryScenario:
    """File and pipe side by side, every handler retrying until the dead-letter key.

    - file ``orders.ss``: 3 orders, ``retry_after(5)`` on attempt 1 and ``retry_after(10)`` after,
      ``max_attempts=3``, ``dead_letter="orders.dead"``: attempts 3/3/3, delays 5 s x3 and 10 s x3,
      3 dead letters written at +15 s.
    - pipe: stdin holds a, b (attempt 1), a (attempt 2) and a (attempt 3); ``retry_after(2)``,
      ``max_attempts=3``, ``dead_letter="orders.dlq"``, copies to ``orders.retry``: attempts 2/1/1,
      delays 2 s x3, 1 dead letter at +0 s.
    """

    def __init__(self, tmp_path, *, file: bool = True, pipe: bool = True) -> None:
        brokers: list[Broker[Any]] = []
        self.path = tmp_path / "orders.ss"
        self.out: list[str] = []
        if file:
            self.file = FileBroker(self.path)

            @self.file.subscriber(
                "orders", start_at=FilePosition.beginning(), max_attempts=3, dead_letter="orders.dead"
            )
            def on_file(d):
                return HandlerOutcome.retry_after(5 if d.attempt == 1 else 10)

            brokers.append(self.file)
        if pipe:
            stdin = [pipe_line("a"), pipe_line("b"), pipe_line("a", 1), pipe_line("a", 2)]
            self.pipe = StdioBroker(stdin=stdin, stdout=self.out)

            @self.pipe.subscriber("orders", max_attempts=3, dead_letter="orders.dlq", out_retry="orders.retry")
            def on_pipe(d):
                return HandlerOutcome.retry_after(2)

            brokers.append(self.pipe)
        self.session = Session(App(*brokers))
        if file:
            for i in range(3):
                self.file.publish("orders", f"order {i}")


@pytest.fixture
def scenario(tmp_path) -> RetryScenario:
    """The file+pipe retry scenario, not yet run (see :class:`RetryScenario`)."""
    return RetryScenario(tmp_path)


@pytest.fixture
def ran(scenario) -> RetryScenario:
    """The scenario after ``session.run()``."""
    scenario.session.run()
    return scenario


@pytest.fixture
def make_scenario(tmp_path):
    """Build a :class:`RetryScenario` with options (``file=False``, ``pipe=False``)."""
    return lambda **options: RetryScenario(tmp_path, **options)
