"""A shared writer that appends one large payload after another, as fast as it can, for SECONDS.

usage: hammer_writer.py FOLDER SECONDS PAYLOAD_BYTES LOCK_TIMEOUT START_EPOCH ROTATE_SECONDS

It writes to FOLDER/part-N.ss where N = int((time - START_EPOCH) / ROTATE_SECONDS), so writers started
together share each part while the test deletes parts they have left (the disk holds a few parts only).
The payload is made once: the writer asks for the lock again the moment it lets go (the case in which a
polling waiter used to starve). Prints one JSON line: the messages written per part, the longest wait
for one append, and the error if one ended it.
"""

import json
import os
import sys
import time

from nbkit.errors import WriterLockedError
from nbkit.transport.file_writer import StreamWriter

folder, seconds, size, timeout, start, rotate = sys.argv[1:7]
payload = os.urandom(int(size))
counts: dict[int, int] = {}
longest = 0.0
error = None
end = float(start) + float(seconds)
part = -1
writer = None
try:
    while (now := time.time()) < end:
        current = int((now - float(start)) / float(rotate))
        if current != part:
            if writer is not None:
                writer.close()
            part = current
            writer = StreamWriter(os.path.join(folder, f"part-{part}.ss"), lock_timeout=float(timeout))
        began = time.monotonic()
        writer.write("k", payload)
        longest = max(longest, time.monotonic() - began)
        counts[part] = counts.get(part, 0) + 1
except WriterLockedError as exc:
    error = str(exc)
finally:
    if writer is not None:
        writer.close()
print(json.dumps({"counts": counts, "longest": longest, "error": error}))
