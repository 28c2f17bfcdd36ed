"""Fixtures of the viewer's server tests: jupyter_server's pytest plugin (pytest-jupyter), here only.

Its fixtures (``jp_fetch``, ``jp_root_dir``, ...) include an autouse cleanup, so they are imported in this
folder's conftest rather than registered for the whole suite. The server runs with nbkit's extension on.
"""

from __future__ import annotations

import pytest

pytest.importorskip("jupyter_server", reason="the viewer's handler tests need jupyter_server (the dev extra)")
pytest.importorskip("pytest_jupyter", reason="the viewer's handler tests need pytest-jupyter (the dev extra)")

from pytest_jupyter.jupyter_server import *  # noqa: E402,F403


@pytest.fixture  # type: ignore[no-redef]  # replaces the plugin's fixture of that name, on purpose
def jp_server_config():
    return {"ServerApp": {"jpserver_extensions": {"nbkit.lab": True}}}
