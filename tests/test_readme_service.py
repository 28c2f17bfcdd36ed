"""The README's file service, fed while it runs by the README's own ``nbkit publish`` lines.

The service is the ``# service.py`` block of the README's "A file service" section, run with the
README's ``nbkit run`` line; the feeding commands are the shell block between ``<!-- readme-feed -->``
markers, run line by line through bash with this checkout's nbkit on the path.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()

pytestmark = pytest.mark.timeout(60)


def readme_service() -> str:
    """The ``# service.py`` code block of the README."""
    match = re.search(r"```python\n(# service\.py\n.*?)```", README, re.S)
    assert match, "README: no ```python block starting with '# service.py'"
    return match.group(1)


def readme_feed() -> list[str]:
    """The shell lines between the README's readme-feed markers."""
    match = re.search(r"<!-- readme-feed -->\n```bash\n(.*?)```\n<!-- /readme-feed -->", README, re.S)
    assert match, "README: no readme-feed block"
    return [ln for ln in match.group(1).splitlines() if ln.strip()]


def test_the_readme_service_is_fed_while_it_runs(tmp_path: Path) -> None:
    (tmp_path / "service.py").write_text(readme_service())
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONUNBUFFERED"] = "1"
    run_line = re.search(r"^nbkit run service:app[^#\n]*", README, re.M).group(0).split()
    service = subprocess.Popen(
        [sys.executable, "-m", "nbkit", *run_line[1:]],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out: list[str] = []
    drain = threading.Thread(target=lambda: out.extend(service.stdout), daemon=True)
    drain.start()
    try:
        ss = tmp_path / "orders.ss"
        deadline = time.monotonic() + 20
        while not (ss.exists() and ss.stat().st_size > 128):  # created and primed: the service follows it
            assert service.poll() is None, service.stderr.read()
            assert time.monotonic() < deadline
            time.sleep(0.02)
        time.sleep(0.3)  # the subscription opens at the end of the file right after the priming
        for line in readme_feed():
            done = subprocess.run(
                ["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30
            )
            assert done.returncode == 0, (line, done.stderr)
            assert done.stdout.startswith("published orders seq "), done.stdout
        deadline = time.monotonic() + 30
        while len(out) < 4:
            assert time.monotonic() < deadline, out
            time.sleep(0.05)
    finally:
        service.send_signal(signal.SIGINT)
        err = service.stderr.read()  # stdout is the drain thread's
        service.wait(timeout=30)
        drain.join(timeout=10)
    assert service.returncode == 0, err
    assert sorted(out) == ["paid 1 attempt 1\n", "paid 2 attempt 3\n", "paid 3 attempt 1\n", "paid 4 attempt 1\n"]
    assert out[-1] == "paid 2 attempt 3\n"  # its copies came back after 2 and 4 s
    assert "ack / nack failed" in err  # the README's INFO level shows the runtime's WARN lines
