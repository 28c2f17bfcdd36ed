"""Types of the compiled short route of StreamWriter (nbkit/transport/_writer.pyx), for mypy."""

from collections.abc import Callable
from typing import Any

class StreamState:
    seq: int
    ts: int
    running: int
    crcs: list[int]
    def __init__(self, seq: int, ts: int, running: int, crcs: list[int] | None = None) -> None: ...
    def note(self, seq: int, ts: int, crc: int) -> None: ...
    def checksum(self) -> int: ...

class WriterState:
    fd: int
    offset: int
    stop: int
    direct: bool
    clock: Callable[[], int]
    hot: dict[str, tuple[bytes, StreamState]]
    pending: list[bytes]
    pending_count: int
    flush_every: int
    def __init__(self, clock: Callable[[], int]) -> None: ...

class ShortRoute:
    state: WriterState
    def __init__(self, state: WriterState, default_clock: Callable[[], int], written: type) -> None: ...
    def attach(self, owner: Any, pure: Callable[..., Any]) -> None: ...
    def write(
        self,
        stream_key: str,
        payload: bytes,
        *,
        seq: int | None = None,
        shard_id: int = 0,
        timestamp_ms: int | None = None,
    ) -> Any: ...
