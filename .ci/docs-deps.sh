#!/usr/bin/env bash
# What the documentation build needs beyond its Python packages (the `docs` extra), on a fresh Debian
# machine, as root: npm, which fetches the ipywidgets HTML manager from the npm registry at build time
# (docs/_ext/nbkit_docs/widgets_js.py) so widget snapshots render with no CDN. Safe to run again.
set -euo pipefail

if ! command -v npm >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq npm >/dev/null
fi
echo "docs-deps: npm $(npm --version)"
