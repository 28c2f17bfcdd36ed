"""Rust's notion of whitespace, so trimming in nbkit matches ``str::trim`` in the upstream Rust code.

Python's ``str.strip()`` with no argument also strips U+001C..U+001F, which Rust keeps; the codecs
must therefore always pass :data:`RUST_WHITESPACE` explicitly.
"""

from __future__ import annotations

__all__ = ["RUST_WHITESPACE"]

#: The Unicode ``White_Space`` property, which Rust's ``char::is_whitespace`` tests.
RUST_WHITESPACE = (
    "\t\n\x0b\x0c\r "
    "\u0085\u00a0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)
