"""Runtime tests (a package, so modules can share helpers.py)."""
