"""Types of the compiled write route of StreamWriter (nbkit/transport/_writer.pyx), for mypy."""

from collections.abc import Callable

from nbkit.transport.file_writer import StreamWriter
from nbkit.transport.write_routes import PureRoute
from nbkit.transport.writer_state import Written

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

class CompiledRoute:
    name: str
    state: WriterState
    def __init__(
        self, state: WriterState, owner: StreamWriter, pure: PureRoute, default_clock: Callable[[], int], written: type
    ) -> None: ...
    def write(
        self, stream_key: str, payload: bytes, seq: int | None, shard_id: int, timestamp_ms: int | None, /
    ) -> Written: ...
