"""The one "nothing yet" answer of every ``poll()``: a reader, a subscription and a pipe source all use it."""

from __future__ import annotations

import enum
from typing import Final, Literal

__all__ = ["NEED_MORE", "NeedMore", "Poll"]


class Poll(enum.Enum):
    """What a ``poll()`` returns when nothing is ready now but may be later (a follower waits, then polls again).

    An enum member rather than ``object()``, so ``Message | NeedMore | None`` is a type mypy can narrow with ``is``.

    Examples
    --------
    >>> from nbkit.transport.polling import NEED_MORE, Poll
    >>> NEED_MORE is Poll.NEED_MORE
    True
    """

    NEED_MORE = "need more"

    def __repr__(self) -> str:
        return "NEED_MORE"


#: The single "wait, then poll again" sentinel.
NEED_MORE: Final = Poll.NEED_MORE
#: Its type, for annotations: ``def poll(self) -> Message | NeedMore | None``.
NeedMore = Literal[Poll.NEED_MORE]
