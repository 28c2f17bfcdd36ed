"""The README's code runs as written: its reading example, on files made the way its text describes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _block(title: str) -> str:
    """The first python block under the README's section ``title``."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(rf"^## {re.escape(title)}\n.*?```python\n(.*?)```", text, re.S | re.M)
    assert found, f"README.md: no python block under '## {title}'"
    return found.group(1)


def test_the_reading_example_runs_on_two_order_files(tmp_path, monkeypatch) -> None:
    pytest.importorskip("polars")
    from nbkit import FileBroker

    monkeypatch.chdir(tmp_path)
    for name, payloads in {
        "orders-1.ss": ['{"order_id": 1, "amount": 2.5}', '{"amount": 3}'],
        "orders-2.ss": ['{"order_id": 2, "amount": 1.0}'],
    }.items():
        broker = FileBroker(name)
        for payload in payloads:
            broker.publish("orders", payload)
        broker.publish("payments", '{"order_id": 9, "express": true}')
        broker.shutdown()
    namespace: dict = {}
    exec(compile(_block("Reading stream files"), "README.md", "exec"), namespace)
    frame = namespace["frame"]
    assert list(frame["source"].astype(str)) == ["orders-1.ss"] * 3 + ["orders-2.ss"] * 2
    assert str(frame["payload.order_id"].dtype) == "Int64"  # the second order lacks it
    assert namespace["total"] == 3
