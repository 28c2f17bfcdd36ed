"""Stream-key rules shared by the file and pipe formats: 1-249 ASCII characters of [A-Za-z0-9._-]."""

from __future__ import annotations

import re

from nbkit.errors import InvalidKeyError

__all__ = [
    "BROADCAST_KEY",
    "INTERNAL_KEY",
    "INTERNAL_KEYS",
    "MAX_KEY_LEN",
    "PRIMING_KEY",
    "is_dead_letter_key",
    "is_valid_key",
    "validate_key",
]

#: The longest stream key, in characters (one length byte in a frame; upstream's limit is 249).
MAX_KEY_LEN = 249
#: Key of the end-of-stream mark written by SeaStreamer (payload ``EOS``).
INTERNAL_KEY = "SEA_STREAMER_INTERNAL"
#: Key of the priming message a ruststream FileBroker writes into a fresh file.
PRIMING_KEY = "ruststream-internal"
#: Key a stdio line without a header is delivered under.
BROADCAST_KEY = "broadcast"
#: Keys that are bookkeeping, not user data; DataFrames leave them out unless asked.
INTERNAL_KEYS = frozenset({INTERNAL_KEY, PRIMING_KEY})

_KEY_RE = re.compile(rf"[A-Za-z0-9._-]{{1,{MAX_KEY_LEN}}}")


def is_valid_key(key: str) -> bool:
    """True when ``key`` is a stream key both transports accept."""
    return isinstance(key, str) and _KEY_RE.fullmatch(key) is not None


def validate_key(key: str, *, what: str = "stream key") -> str:
    """Return ``key`` unchanged, or raise InvalidKeyError saying what is wrong with it and how to fix it."""
    if not isinstance(key, str):
        raise InvalidKeyError(f"{what} must be a str, not {type(key).__name__}")
    if not key:
        raise InvalidKeyError(f"{what} must be non-empty (1-{MAX_KEY_LEN} characters of [A-Za-z0-9._-])")
    if len(key) > MAX_KEY_LEN:
        raise InvalidKeyError(f"{what} {key[:20]!r}... is {len(key)} characters long; the limit is {MAX_KEY_LEN}")
    if _KEY_RE.fullmatch(key) is None:
        bad = sorted({c for c in key if not (c.isascii() and (c.isalnum() or c in "._-"))})
        raise InvalidKeyError(
            f"{what} {key!r} has characters {''.join(bad)!r} outside [A-Za-z0-9._-]; "
            "use letters, digits, '.', '_' or '-'"
        )
    return key


#: A key's last name part that marks a dead-letter key, after ``.``, ``-`` or ``_`` (or the whole key), any case.
_DEAD_LETTER_NAME_RE = re.compile(r"(?:\A|[._-])(?:dead|dlq|dead[-_]letter)\Z", re.IGNORECASE)


def is_dead_letter_key(key: str) -> bool:
    """True for a key named like a dead-letter key: its last part is ``dead``, ``dlq`` or ``dead-letter``.

    The rule: the key, or the part after its last ``.``, ``-`` or ``_``, is ``dead``, ``dlq``,
    ``dead-letter`` or ``dead_letter``, in any case (``orders.dead``, ``jobs.dlq``, ``orders-dead``,
    ``jobs_DLQ``, ``orders.dead-letter``). ``deadline`` or ``orders.dead.v2`` are not.

    This is a naming convention, not something the data records: a registration's ``dead_letter=``
    may name any key, and neither a stream file nor a pipe capture says which key was declared.
    Where the declaration is known, use it: settlement events (``Session.events``) mark dead letters
    by their action (``dead-letter``, declared key in ``destination``), and the readers of a file
    (``lineage``, the plots, ``FileWatch``, ``nbkit info``/``lineage``) take the declared keys as
    ``dead_letter_keys``; they fall back to this rule only when none are given.

    Parameters
    ----------
    key : str
        A stream key.

    Returns
    -------
    bool
        Whether the key is named like a dead-letter key.

    Examples
    --------
    >>> from nbkit.wire.keys import is_dead_letter_key
    >>> [is_dead_letter_key(k) for k in ("orders.dead", "jobs.dlq", "jobs_dead-letter", "orders.retry", "deadline")]
    [True, True, True, False, False]
    """
    return _DEAD_LETTER_NAME_RE.search(key) is not None
