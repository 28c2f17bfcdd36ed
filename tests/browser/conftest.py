"""Browser-test fixtures: a throwaway JupyterLab server and Debian's Chromium driven by Playwright.

Everything follows DESIGN.md ("Notebook and browser testing"): the server listens on 127.0.0.1 with
a token on a free port, with fresh temporary Jupyter config/runtime/data/workspace/settings dirs
(news and update checks off), and a ``python3`` kernelspec that runs *this* interpreter with this
checkout first on ``PYTHONPATH``. Playwright launches ``/usr/bin/chromium`` (or ``$NBKIT_CHROMIUM``)
through ``executable_path``; ``playwright install`` is never needed.

Missing pieces (Chromium, Playwright, JupyterLab) skip the tests on a developer machine and fail
them when ``CI`` is set: CI installs them with ``.ci/browser-deps.sh``. Screenshots and logs go to
``test-artifacts/browser/`` at the repository root (git-ignored).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from checkout_env import checkout_env
from waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "browser"
CHROMIUM = os.environ.get("NBKIT_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
#: One deadline for a whole browser test -- server start, browser, notebook, clicks -- so that it ends in
#: well under 90 s even when every wait runs out (each wait also has its own cap).
TEST_BUDGET = 80.0
SERVER_START_TIMEOUT = 40.0


def pytest_configure(config):
    config.addinivalue_line("markers", "browser: end-to-end test in JupyterLab + headless Chromium (slow)")


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.browser)


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def missing_requirements() -> list[str]:
    missing = []
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        missing.append(f"Chromium at {CHROMIUM} (apt-get install chromium)")
    if importlib.util.find_spec("playwright") is None:
        missing.append("the Python package playwright (pip install playwright)")
    if importlib.util.find_spec("jupyterlab") is None:
        missing.append("the Python package jupyterlab (pip install jupyterlab)")
    if importlib.util.find_spec("ipykernel") is None:
        missing.append("the Python package ipykernel (pip install ipykernel)")
    return missing


@pytest.fixture(scope="session")
def browser_requirements() -> None:
    """Skip (developer machine) or fail (CI) when something the browser test needs is missing."""
    missing = missing_requirements()
    if missing:
        reason = "browser test needs " + "; ".join(missing) + " -- run: bash .ci/browser-deps.sh"
        if in_ci():
            pytest.fail(f"CI is set, so not skipping: {reason}", pytrace=False)
        pytest.skip(reason)


@pytest.fixture
def artifacts_dir(request) -> Path:
    """``test-artifacts/browser/``, without the files an earlier run of this test left there."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for old in ARTIFACTS.glob(f"{request.node.name}-*"):
        old.unlink()
    return ARTIFACTS


class Budget:
    """One deadline shared by every wait of a test; each wait gets at most its own cap and what is left."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.start = time.monotonic()
        self.end = self.start + seconds

    def left(self, cap: float) -> float:
        """Seconds for the next wait: ``min(cap, time left)``; raises once the budget is spent."""
        left = self.end - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"the browser test ran over its {self.seconds:.0f} s budget")
        return min(cap, left)

    def ms(self, cap: float) -> float:
        """:meth:`left` in milliseconds, for Playwright's ``timeout=``."""
        return 1000 * self.left(cap)

    def elapsed(self) -> float:
        return time.monotonic() - self.start


@pytest.fixture
def budget(browser_requirements) -> Budget:
    return Budget(TEST_BUDGET)


# -- JupyterLab -----------------------------------------------------------------------------------------
@dataclass
class LabServer:
    url: str  # http://127.0.0.1:PORT (no trailing slash)
    token: str
    root_dir: Path
    log_path: Path
    process: subprocess.Popen

    def api(self, path: str, method: str = "GET", timeout: float = 5.0):
        req = urllib.request.Request(
            f"{self.url}{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body = resp.read()
        return json.loads(body) if body else None

    def log_tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no server log)"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_isolated_dirs(base: Path) -> dict[str, str]:
    """Fresh Jupyter dirs, lab settings that switch off news/update checks, and a python3 kernelspec
    that runs this interpreter; returns the environment variables pointing at them."""
    dirs = {name: base / name for name in ("config", "runtime", "data", "workspaces", "settings", "ipython")}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    notification = dirs["settings"] / "@jupyterlab" / "apputils-extension"
    notification.mkdir(parents=True, exist_ok=True)
    (notification / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    kernel_dir = dirs["data"] / "kernels" / "python3"
    kernel_dir.mkdir(parents=True, exist_ok=True)
    (kernel_dir / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Python 3 (nbkit browser test)",
                "language": "python",
                "metadata": {"debugger": False},
            },
            indent=1,
        )
    )
    # the stream viewer as this checkout built it (what .ci/run just built, not an older installed copy):
    # its front end on the data path searched first, its server extension enabled in the config dir
    (dirs["data"] / "labextensions").mkdir(exist_ok=True)
    (dirs["data"] / "labextensions" / "nbkit-viewer").symlink_to(ROOT / "nbkit" / "lab" / "labextension")
    (dirs["config"] / "jupyter_server_config.d").mkdir(exist_ok=True)
    (dirs["config"] / "jupyter_server_config.d" / "nbkit.json").write_text(
        json.dumps({"ServerApp": {"jpserver_extensions": {"nbkit.lab": True}}})
    )
    env = checkout_env(
        JUPYTER_CONFIG_DIR=str(dirs["config"]),
        JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
        JUPYTER_DATA_DIR=str(dirs["data"]),
        JUPYTER_PATH=str(dirs["data"]),  # searched first: our python3 kernelspec wins
        JUPYTERLAB_WORKSPACES_DIR=str(dirs["workspaces"]),
        JUPYTERLAB_SETTINGS_DIR=str(dirs["settings"]),
        IPYTHONDIR=str(dirs["ipython"]),
        PYTHONUNBUFFERED="1",
    )
    env.pop("JUPYTER_PREFER_ENV_PATH", None)
    return env


def _stop(proc: subprocess.Popen, server: LabServer | None) -> None:
    """Shut kernels down through the API, then end the server and every process it started, by pid."""
    try:
        import psutil

        descendants = psutil.Process(proc.pid).children(recursive=True)
    except Exception:
        descendants = []
    if server is not None and proc.poll() is None:
        with contextlib.suppress(Exception):
            for kernel in server.api("/api/kernels", timeout=3):
                with contextlib.suppress(Exception):
                    server.api(f"/api/kernels/{kernel['id']}", method="DELETE", timeout=5)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    for child in descendants:
        with contextlib.suppress(Exception):
            if child.is_running():
                child.kill()


def _answers(server: LabServer, errors: list[str]) -> bool:
    """Whether a starting server answers /api/status (or has exited: True, the caller says so); keeps the errors."""
    if server.process.poll() is not None:
        return True
    try:
        server.api("/api/status", timeout=2)
    except (urllib.error.URLError, ConnectionError, OSError, ValueError) as exc:
        errors.append(repr(exc))
        return False
    return True


def _start_lab(base: Path, root_dir: Path, env: dict[str, str], log_path: Path, budget: Budget) -> LabServer:
    token = os.urandom(16).hex()
    last_error = "not started"
    for _attempt in range(3):  # the free port can be taken between probing and binding: retry
        port = _free_port()
        cmd = [
            sys.executable, "-m", "jupyterlab",
            "--no-browser", "--allow-root",
            "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root_dir}",
            "--LabApp.expose_app_in_browser=True",
        ]  # fmt: skip
        log = open(log_path, "ab")  # noqa: SIM115 -- the server writes it until teardown
        proc = subprocess.Popen(cmd, cwd=base, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        server = LabServer(f"http://127.0.0.1:{port}", token, root_dir, log_path, proc)
        errors: list[str] = []
        try:
            wait_until(functools.partial(_answers, server, errors), budget.left(SERVER_START_TIMEOUT), interval=0.25)
        except AssertionError:
            _stop(proc, server)
            raise RuntimeError(
                f"JupyterLab did not answer /api/status in time ({errors[-1:]}); log tail:\n{server.log_tail()}"
            ) from None
        if proc.poll() is None:
            return server
        last_error = f"exit code {proc.returncode}; log tail:\n{server.log_tail()}"
    raise RuntimeError(f"JupyterLab did not start: {last_error}")


@pytest.fixture
def lab_server(budget, tmp_path, artifacts_dir, request):
    """A running JupyterLab (root_dir = a fresh temp dir); always stopped, with its kernels, at teardown."""
    base = tmp_path / "jupyter"
    root_dir = tmp_path / "root"
    root_dir.mkdir()
    env = _write_isolated_dirs(base)
    log_path = base / "jupyterlab.log"
    server = _start_lab(base, root_dir, env, log_path, budget)
    try:
        yield server
    finally:
        _stop(server.process, server)
        with contextlib.suppress(OSError):
            shutil.copy(log_path, artifacts_dir / f"{request.node.name}-jupyterlab.log")


@dataclass
class BrowserPage:
    page: object  # playwright.sync_api.Page
    console: list[str]  # the page's console messages, "type: text"


@pytest.fixture
def browser_page(budget):
    """A Playwright page in headless Debian Chromium (1400x1000), with its console messages recorded;
    the browser is closed at teardown."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS, timeout=budget.ms(30))
        try:
            page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            console: list[str] = []
            page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
            yield BrowserPage(page, console)
        finally:
            browser.close()
