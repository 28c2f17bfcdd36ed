#!/usr/bin/env bash
# What the JupyterLab + headless Chromium test (tests/browser/) needs, on a fresh Debian machine, as root.
# Playwright drives Debian's /usr/bin/chromium through executable_path: never run `playwright install`
# (it downloads its own browser build, which cannot be fetched here). Safe to run again: it only adds.
set -euo pipefail

if ! [ -x /usr/bin/chromium ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq chromium fonts-dejavu-core fonts-liberation >/dev/null
fi
/usr/bin/chromium --version 2>/dev/null || { echo "browser-deps: /usr/bin/chromium does not run" >&2; exit 1; }

PY="${PYTHON:-python}"
"$PY" -m pip install -q --disable-pip-version-check --root-user-action=ignore "jupyterlab>=4.2" "playwright>=1.45" "ipykernel>=6.29" "nbformat>=5.9"
"$PY" -c "import jupyterlab, playwright, ipykernel, nbformat; print('browser-deps: jupyterlab', jupyterlab.__version__)"
