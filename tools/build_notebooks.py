"""Build the tutorial notebooks from the cell lists below, execute them, and save them with outputs.

Run from the repository root after changing nbkit's behaviour or a notebook's text:

    python tools/build_notebooks.py            # all notebooks
    python tools/build_notebooks.py 03         # only those whose name starts with 03

The saved outputs are what ``pytest --nbval notebooks`` compares against, so re-run this (and commit the
result) whenever an output legitimately changes. Cells are ``("md", text)`` or ``("code", source)``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


def setup(n: str) -> str:
    return f"""import pathlib, shutil
import pandas as pd
pd.set_option("display.width", 110)
pd.set_option("display.max_columns", 12)
pd.set_option("display.max_colwidth", 40)
work = pathlib.Path("work/{n}")          # every file this notebook writes lives here
shutil.rmtree(work, ignore_errors=True)
work.mkdir(parents=True)"""


BOOKS: dict[str, list[tuple[str, str]]] = {}

BOOKS["00-start-here"] = [
    ("md", """# Start here: stream files, pipes, and what nbkit shows

Rust services built on the **ruststream** runtime can run with no broker at all:

* over a **stream file** (`.ss`): an append-only binary log that SeaStreamer writes. A service reads it
  (and follows it as it grows) and appends to it;
* over a **pipe**: one message per line on stdin and stdout, `producer | service | consumer`.

Neither transport can acknowledge a message or remember how far a service has read. So the runtime gives
the handler outcomes (`ack`, `drop`, `retry`, `retry_after`) a special meaning there, and retries by
publishing **copies**. nbkit is that runtime in Python, and this tutorial lets you watch it work.

The path: **00** (this page, one dashboard) → **01** stream files as DataFrames → **02** ack, drop and
retry → **03** retries and dead letters → **04** pipes → **05** analysis on a larger workload."""),
    ("code", setup("00")),
    ("md", """## One service, two transports

`nbkit demo` runs a small order-processing service twice: on a stream file and as a pipe stage. Its
payment step fails transiently for some orders; the handler answers `retry_after(2 ** attempt)` seconds,
each registration allows `max_attempts=4`, and spent orders go to the dead-letter key `orders.dead`.
Everything runs on a **virtual clock**, so every run gives exactly the same numbers."""),
    ("code", """from nbkit.notebook.demo import run_demo

result = run_demo(str(work), png=False)
result.summary"""),
    ("md", """Every row of `events` is one **settlement**: one delivery and what the runtime did with it
(`action`): `unsupported` (an ack or drop, which these transports cannot do: logged, nothing else),
`delayed-copy` (a retry copy published after the delay), `dead-letter`, `rejected`."""),
    ("code", """events = result.events
events[["time", "transport", "stream_key", "seq", "attempt", "outcome", "action", "delay", "destination"]].head(8)"""),
    ("md", """## The dashboard

Three panels, file and pipe side by side: how many deliveries each attempt number got, which retry
delays were scheduled, and when dead-letter copies were written."""),
    ("code", """import nbkit.plot

fig = nbkit.plot.dashboard(events)"""),
    ("md", """Both transports show the same numbers: the runtime applies the same rule to both. What differs is
*where the copies go*: on the file they are appended under the same stream key and read back by the
live subscription; on the pipe they are written to stdout under `orders.retry` (here fed back into the
stage, as the next stage of a pipeline would read them). The next notebooks show each piece."""),
    ("code", """from nbkit import read_pipe, read_stream

on_file = read_stream(result.stream_file)
on_pipe = read_pipe(result.pipe_output)
print("file:", on_file["stream_key"].value_counts().to_dict())
print("pipe stdout:", on_pipe["stream_key"].value_counts().to_dict())"""),
    ("md", """## Exercise

How many orders ended up as **dead letters on the file transport**? Compute it from `events` and
check your answer with `check("00-dead-letters", answer)`."""),
    ("code", """from nbkit.exercises import check

answer = None   # replace with your expression
check("00-dead-letters", answer)"""),
    ("md", """### Solution"""),
    ("code", """answer = int(((events["transport"] == "file") & (events["action"] == "dead-letter")).sum())
check("00-dead-letters", answer)"""),
]

BOOKS["01-stream-files"] = [
    ("md", """# Stream files as DataFrames

A `.ss` file is a 128-byte header followed by **message frames** (stream key, shard, sequence number,
timestamp, payload, CRC-16 checksum), with a **beacon** every *interval* bytes that summarises the
streams so a reader can start in the middle. `data/sample-1.ss` was written by the Rust implementation."""),
    ("code", setup("01")),
    ("code", """from nbkit import StreamReader, read_stream

with StreamReader("data/sample-1.ss") as reader:
    print(reader.header)
    messages = list(reader)
    print(len(messages), "messages;", reader.end.describe())"""),
    ("md", """`read_stream` loads the file into pandas: one row per message, typed columns (categorical keys,
UTC timestamps, nullable integers). The end-of-stream mark is left out unless you ask for it."""),
    ("code", """df = read_stream("data/sample-1.ss")
df.dtypes"""),
    ("code", """df[["stream_key", "seq", "timestamp", "size", "attempt", "offset"]].head()"""),
    ("md", """## Filtering by key, sequence and time"""),
    ("code", """df.groupby("stream_key", observed=True).agg(messages=("seq", "size"), first=("timestamp", "min"),
                                          last=("timestamp", "max"))"""),
    ("code", """events = df[df["stream_key"] == "event"]
events[(events["seq"] >= 10) & (events["seq"] < 13)][["seq", "timestamp", "size"]]"""),
    ("md", """The reader can also **start** somewhere: `FilePosition.sequence(n)` (message *n* of one key,
inclusive), `FilePosition.timestamp(t)` (strictly after *t*), `.beginning()`, `.end()`. A seek uses the
beacons, then scans forward."""),
    ("code", """from nbkit import FilePosition

read_stream("data/sample-1.ss", keys="event", start=FilePosition.sequence(20))[["stream_key", "seq"]]"""),
    ("code", """read_stream("data/sample-1.ss", start="2023-09-15T08:39:38.560Z")[["stream_key", "seq", "timestamp"]]"""),
    ("md", """JSON payloads can be parsed, and object fields become `payload.<field>` columns."""),
    ("code", """bp = read_stream("data/sample-1.ss", keys="breakpoint", payload="json")
bp[["seq", "payload.id", "payload.breakpoint_type"]]"""),
    ("md", """To page through a file and look inside one message, `StreamBrowser` is a small widget: filter by
key and sequence range, page with Previous/Next, pick a row to see its headers and payload."""),
    ("code", """from nbkit.widgets import StreamBrowser

browser = StreamBrowser("data/sample-1.ss", page_size=10)
browser"""),
    ("code", """browser.key.value = "breakpoint"      # what choosing a key in the dropdown does
browser.filtered[["stream_key", "seq", "size"]]"""),
    ("md", """## Writing a file and following it live

`StreamWriter` appends frames (a beacon at every multiple of the interval; here a tiny interval of 1024
bytes so you can see them). A **follower** (`StreamReader(..., follow=True)`) sees each message as soon as
its frame is complete, and ends at the end-of-stream mark. Here writer and follower take turns in one
cell; in real life they are two processes (`nbkit cat --follow FILE` is the follower)."""),
    ("code", """from nbkit import StreamWriter
from nbkit.transport.file_reader import NEED_MORE

path = work / "live.ss"
clock_ms = lambda: 1_700_000_000_100    # a fixed clock keeps this notebook's output reproducible
writer = StreamWriter(path, beacon_interval=1024, created_at_ms=1_700_000_000_000, clock_ms=clock_ms)
follower = StreamReader(path, follow=True)
seen = []
for i in range(1, 31):
    writer.write("sensor", f'{{"reading": {i}}}'.encode(), timestamp_ms=1_700_000_000_000 + i)
    item = follower.poll()
    while item is not NEED_MORE and item is not None:
        seen.append(item)
        item = follower.poll()
writer.close(eos=True)
while (item := follower.poll()) is not None:
    if item is not NEED_MORE:
        seen.append(item)
print("followed", len(seen), "messages; the last one:", seen[-1].stream_key, seen[-1].payload)
print(follower.end.describe(), "| beacons crossed:", follower.beacons_seen)
"""),
    ("code", """import subprocess, sys

print(subprocess.run([sys.executable, "-m", "nbkit", "info", str(path)], capture_output=True, text=True).stdout)"""),
    ("md", """## Exercise

Which stream key in `data/sample-1.ss` has the most messages, and how many? Answer with a pair."""),
    ("code", """from nbkit.exercises import check

answer = (None, None)
check("01-busiest-key", answer, path="data/sample-1.ss")"""),
    ("md", """### Solution"""),
    ("code", """counts = df.groupby("stream_key", observed=True).size()
answer = (counts.idxmax(), int(counts.max()))
check("01-busiest-key", answer, path="data/sample-1.ss")"""),
]

BOOKS["02-outcomes"] = [
    ("md", """# ack, drop and retry on a file and on a pipe

A handler returns `HandlerOutcome.ack()`, `.drop()`, `.retry()` or `.retry_after(delay)` (`None` means
ack; an exception means drop). On a broker like Kafka these acknowledge or requeue. On a stream file or a
pipe **there is nothing to acknowledge to**: the runtime calls `ack`/`nack`, gets `AckError`
"unsupported", **logs it**, and nothing else happens. Let's see that."""),
    ("code", setup("02")),
    ("code", """from nbkit import App, FileBroker, FilePosition, HandlerOutcome, Session, StdioBroker, read_stream

outcomes = {"a": HandlerOutcome.ack(), "d": HandlerOutcome.drop(), "r": HandlerOutcome.retry()}

def handle(delivery):
    return outcomes[delivery.text]

broker = FileBroker(work / "outcomes.ss")
broker.subscriber("jobs", start_at=FilePosition.beginning())(handle)
session = Session(App(broker))      # a virtual clock: time moves only when we say so
for text in "adr":
    broker.publish("jobs", text)
session.run()"""),
    ("code", """print("\\n".join(session.log))"""),
    ("md", """Three settlements, three warnings `ack / nack failed ... acknowledgement is not supported by this
broker`, and **nothing written**: the file holds exactly the three messages we published. Even `retry()`
did nothing: without a retry declaration, requeue is unsupported and the message does not come back."""),
    ("code", """read_stream(work / "outcomes.ss")[["stream_key", "seq", "payload", "attempt"]]"""),
    ("code", """delivery = session.last_delivery
try:
    delivery.ack()
except Exception as exc:
    print(type(exc).__name__, "|", exc, "| kind:", exc.kind)"""),
    ("md", """## The same on a pipe

A pipe stage reads lines like `[2024-01-01T00:00:00 | jobs | 0] a` from stdin. Here stdin is a list and
stdout is captured. (Every pipe registration must name `out_retry`; notebook 04 explains why.)"""),
    ("code", """lines = ["[2024-01-01T00:00:00 | jobs | 0] a", "[2024-01-01T00:00:01 | jobs | 1] d",
         "[2024-01-01T00:00:02 | jobs | 2] r"]
stdout = []
pipe = StdioBroker(stdin=lines, stdout=stdout)
pipe.subscriber("jobs", out_retry="jobs.retry")(handle)
pipe_session = Session(App(pipe))
pipe_session.run()"""),
    ("code", """print("stdout lines:", stdout)
print("\\n".join(pipe_session.log))"""),
    ("md", """## retry() with a declaration

Declare `max_attempts` (or a dead-letter key) and `retry()` takes the **retry path at once**: the
delivery is dropped and a copy is published immediately, with the attempt counter in the
`x-ruststream-retry-count` header."""),
    ("code", """broker2 = FileBroker(work / "declared.ss")

@broker2.subscriber("jobs", start_at=FilePosition.beginning(), max_attempts=3)
def always_retry(delivery):
    return HandlerOutcome.retry()

s2 = Session(App(broker2))
broker2.publish("jobs", "once more")
s2.run()"""),
    ("code", """read_stream(work / "declared.ss")[["stream_key", "seq", "payload", "retry_count", "attempt", "headers"]]"""),
    ("md", """## Nothing records how far a service has read

There are no consumer offsets. A service that restarts must save its position itself.
`PositionStore` saves *the next sequence to read* per stream key, atomically (temporary file, fsync,
rename); `checkpoint=store` saves after every settlement; `start_at=store.position(key)` resumes."""),
    ("code", """from nbkit import PositionStore

path = work / "resume.ss"
store = PositionStore(work / "positions.json")
handled = []

def make_service():
    broker = FileBroker(path)
    @broker.subscriber("orders", start_at=store.position("orders"), checkpoint=store)
    def handle(delivery):
        handled.append(delivery.seq)
    return broker, Session(App(broker))

broker, first_run = make_service()
for i in range(1, 6):
    broker.publish("orders", f"order {i}")
first_run.step(3)          # handle three orders, then "stop"
first_run.crash()          # the process dies; the store survives
print("handled:", handled, "| store:", store.as_dict())"""),
    ("code", """broker, second_run = make_service()   # a new process: the store says where to start
second_run.run()
print("handled:", handled, "| store:", store.as_dict())"""),
    ("md", """Each order was handled exactly once across the two runs. Without the store a live subscription
starts at the **end** of the file (only new messages), and a replay starts at the **beginning** (all of
them again).

## Exercise

A service processed sequences 1 to 7 of `orders`. With what position should it resume so that it neither
skips nor repeats a message? (Remember: `sequence(n)` is inclusive.)"""),
    ("code", """from nbkit.exercises import check

answer = FilePosition.beginning()   # replace
check("02-resume-position", answer, last_processed=7)"""),
    ("md", """### Solution"""),
    ("code", """check("02-resume-position", FilePosition.sequence(8), last_processed=7)"""),
]

BOOKS["03-retries-and-dead-letters"] = [
    ("md", """# Retries, attempts and dead letters

`retry_after(d)` drops the delivery and publishes a **copy** after `d`. The copy carries the same
payload and headers plus `x-ruststream-retry-count` (the first delivery is attempt 1, its copy attempt
2, ...). With `max_attempts` the cap is checked **first**: at the cap the copy goes to the dead-letter key
at once, or, without one, the delivery is rejected and nothing is written."""),
    ("code", setup("03")),
    ("code", """from nbkit import App, FileBroker, FilePosition, HandlerOutcome, Session, read_stream
from nbkit.widgets import SessionPanel

broker = FileBroker(work / "parcels.ss")

@broker.subscriber("parcels", start_at=FilePosition.beginning(), max_attempts=3, dead_letter="parcels.dead")
def deliver(delivery):
    return HandlerOutcome.retry_after(5)      # the courier is never home

session = Session(App(broker))
broker.publish("parcels", '{"parcel": 1}')
session.step()"""),
    ("code", """session.pending"""),
    ("md", """The copy is **not in the file yet**: it waits in the process until its due time. Move the clock:"""),
    ("code", """session.advance(5)"""),
    ("code", """session.step()"""),
    ("md", """The panel below drives the same session with buttons (Step, Step ×10, Run, Advance, Reset): each
button calls the method you would call in a cell. Click **Advance** then **Step** to reach the cap."""),
    ("code", """panel = SessionPanel(session)
panel"""),
    ("code", """session.run()"""),
    ("code", """frame = read_stream(work / "parcels.ss")
frame[["stream_key", "seq", "timestamp", "retry_count", "attempt", "headers"]]"""),
    ("md", """Three deliveries (header absent, `1`, `2`), then the dead-letter copy with count `3`, written at
once (no delay). Each copy also carries the **original** `stream-sequence` inside its envelope.

## Without a dead-letter key: rejected"""),
    ("code", """b2 = FileBroker(work / "rejected.ss")
b2.subscriber("parcels", start_at=FilePosition.beginning(), max_attempts=2)(deliver)
s2 = Session(App(b2))
b2.publish("parcels", "lost cause")
print(s2.run())
print("\\n".join(s2.log))
print(read_stream(work / "rejected.ss")[["seq", "attempt"]].to_string())"""),
    ("md", """## A replay misses a copy appended after it reached the end

A **replay** subscription reads the file from the start and ends at its end. A copy appended *after* the
replay got there is never read by it (it stays in the file). With `retry_after(0)` the copy lands while
the replay still has a backlog, so it is seen."""),
    ("code", """def replay_with(delay):
    b = FileBroker(work / f"replay-{delay}.ss")
    seen = []
    @b.subscriber("jobs", replay=True)
    def h(d):
        seen.append((d.text, d.attempt))
        return HandlerOutcome.retry_after(delay) if d.attempt == 1 and d.text == "first" else None
    s = Session(App(b))
    for text in ("first", "second", "third"):
        b.publish("jobs", text)
    s.run()
    in_file = read_stream(work / f"replay-{delay}.ss")
    return seen, len(in_file)

print("retry_after(0):", replay_with(0))
print("retry_after(5):", replay_with(5))"""),
    ("md", """With a 5 s delay the replay had finished before the copy was written: the copy is in the file (4
messages) but the replay saw only the three originals.

## A crash loses a pending delayed copy"""),
    ("code", """b3 = FileBroker(work / "crash.ss")
b3.subscriber("jobs", start_at=FilePosition.beginning())(lambda d: HandlerOutcome.retry_after(30))
s3 = Session(App(b3))
b3.publish("jobs", "important")
s3.step()
print("pending before the crash:", len(s3.pending))
print("copies lost:", s3.crash())
print("messages in the file:", len(read_stream(work / "crash.ss")))"""),
    ("md", """A graceful shutdown (`session.close()`, or SIGTERM to `nbkit run`) would have waited for the copy.

## Attempts across many messages"""),
    ("code", """import nbkit.plot

b4 = FileBroker(work / "many.ss")

@b4.subscriber("jobs", start_at=FilePosition.beginning(), max_attempts=4, dead_letter="jobs.dead")
def flaky(d):
    n = d.json()["n"]
    return None if d.attempt > n % 5 else HandlerOutcome.retry_after(2 * d.attempt)

s4 = Session(App(b4))
for n in range(40):
    b4.publish("jobs", f'{{"n": {n}}}')
s4.run()
fig = nbkit.plot.dashboard(s4.events)"""),
    ("md", """## One cell, one handler: the notebook magics

`%load_ext nbkit` turns a cell into a handler: `%%nbkit_handler KEY [options]` runs the cell as the body
of `def handler(delivery): ...`, and line magics step, run, advance and show the session. Run the handler
cell again after `%nbkit_reset` to try another outcome."""),
    ("code", """%load_ext nbkit
%nbkit_file work/03/magic.ss"""),
    ("code", """%%nbkit_handler orders --max-attempts 2 --dead-letter orders.dead --start-at beginning
from nbkit import HandlerOutcome
if delivery.json()["priority"] == "high":
    return HandlerOutcome.ack()
return HandlerOutcome.retry_after(30)"""),
    ("code", """broker.publish("orders", '{"priority": "high"}')
broker.publish("orders", '{"priority": "low"}')
%nbkit_run"""),
    ("code", """%nbkit_events"""),
    ("md", """## Exercise

With `max_attempts=3` and a handler that always returns `retry_after`, how many times does the handler
run for one message, and what `x-ruststream-retry-count` does its dead-letter copy carry? Answer with a
pair."""),
    ("code", """from nbkit.exercises import check

check("03-attempts", (None, None), max_attempts=3)"""),
    ("md", """### Solution"""),
    ("code", """calls = int((session.events["stream_key"] == "parcels").sum())
dead = frame[frame["stream_key"] == "parcels.dead"].iloc[0]
check("03-attempts", (calls, int(dead["headers"]["x-ruststream-retry-count"])), max_attempts=3)"""),
]

BOOKS["04-pipes"] = [
    ("md", """# Pipes: `producer | stage | stage`

On a pipe, stdin is the subscription and stdout is the publisher. A retry copy cannot go back into the
pipe it came from: it is a **line the stage writes to stdout** under the key the registration names with
`out_retry`, and the next stage reads it."""),
    ("code", setup("04")),
    ("code", """from nbkit import App, HandlerOutcome, Session, StdioBroker, read_pipe

lines = ["[2024-01-01T00:00:00 | jobs | 0] resize photo-1",
         "[2024-01-01T00:00:00 | jobs | 1] resize photo-2",
         "binary? this line has no header, so it goes to 'broadcast' (every subscription)"]
stdout = []
stage = StdioBroker(stdin=lines, stdout=stdout)

@stage.subscriber("jobs", out_retry="jobs.retry", max_attempts=3, dead_letter="jobs.dead")
def resize(delivery):
    return HandlerOutcome.retry_after(10) if "photo-2" in delivery.text else None

session = Session(App(stage))
session.run()"""),
    ("code", """for line in stdout:
    print(line)"""),
    ("code", """read_pipe(stdout)[["stream_key", "seq", "payload", "attempt", "headers"]]"""),
    ("md", """The copy is `rs1:` + base64: the **header envelope**, because a copy always carries the retry
count. Binary and multi-line payloads travel the same way, so they survive a shell pipeline.

## The registration that refuses to start

Every pipe registration must name `out_retry`, even one that never retries: "a delayed message that went
nowhere is worse than a service that does not come up"."""),
    ("code", """from nbkit import RetryDestinationError

bad = StdioBroker(stdin=[], stdout=[])
bad.subscriber("jobs")(lambda d: None)
try:
    Session(App(bad)).step()
except RetryDestinationError as exc:
    print(exc)"""),
    ("md", """## A real three-stage shell pipeline

`nbkit cat --format stdio FILE` turns a stream file into stdio lines; each `nbkit run MODULE:ATTR` is a
process. The first stage retries every job once; its copies reach the second stage under `jobs.retry`."""),
    ("code", """import json, subprocess, sys
from nbkit import StreamWriter

with StreamWriter(work / "in.ss", created_at_ms=1_704_067_200_000) as w:
    for i in range(3):
        w.write("jobs", json.dumps({"job": i}).encode(), timestamp_ms=1_704_067_200_000 + i)

(work / "first.py").write_text('''
from nbkit import App, HandlerOutcome, StdioBroker
broker = StdioBroker()
@broker.subscriber("jobs", out_retry="jobs.retry")
def first(delivery):
    return HandlerOutcome.retry_after(0)
app = App(broker)
''')
(work / "second.py").write_text('''
import sys
from nbkit import App, StdioBroker
broker = StdioBroker()
@broker.subscriber("jobs.retry", out_retry="jobs.retry2")
def second(delivery):
    print(f"second stage got {delivery.text} attempt {delivery.attempt}", file=sys.stderr)
app = App(broker)
''')
nbkit = f"{sys.executable} -m nbkit"
pipeline = f"{nbkit} cat --format stdio in.ss | {nbkit} run first:app | {nbkit} run second:app"
done = subprocess.run(["bash", "-o", "pipefail", "-c", pipeline], cwd=work, capture_output=True, text=True)
print("exit status:", done.returncode)
print(done.stderr)"""),
    ("md", """## Exercise

Which `subscriber` option makes a pipe registration start?"""),
    ("code", """from nbkit.exercises import check

check("04-pipe-start", "max_attempts")"""),
    ("md", """### Solution"""),
    ("code", """check("04-pipe-start", "out_retry")"""),
]

BOOKS["05-analysis"] = [
    ("md", """# Analysis: attempts, delays and dead letters on a larger workload

2,000 orders through the demo service, on a file and on a pipe. We read the results back the way you
would read a real service's data: the stream file with `read_stream`, the pipe stage's stdout with
`read_pipe`, and the runtime's own events."""),
    ("code", setup("05")),
    ("code", """from nbkit import concat_frames, read_pipe, read_stream
from nbkit.notebook.demo import run_demo

result = run_demo(str(work), orders=2000, seed=11, png=False)
result.summary"""),
    ("code", """events = result.events
events.groupby(["transport", "attempt"], observed=True).size().unstack("attempt")"""),
    ("md", """## The data as written

The file holds the orders, every retry copy (same key, higher retry count) and the dead letters. The
pipe's stdout holds only what the stage wrote: copies under `orders.retry` and dead letters."""),
    ("code", """messages = concat_frames(read_stream(result.stream_file), read_pipe(result.pipe_output))
messages.groupby(["transport", "stream_key"], observed=True).size()"""),
    ("code", """import nbkit.plot

ax = nbkit.plot.attempts(messages)"""),
    ("code", """ax = nbkit.plot.retry_delays(events)"""),
    ("code", """ax = nbkit.plot.dead_letters(events, freq="5min")"""),
    ("code", """delays = events[events["action"] == "delayed-copy"]
delays.groupby(["transport", "delay"], observed=True).size().unstack("delay")"""),
    ("md", """## Exercise

Which retry delay (in seconds) was scheduled most often?"""),
    ("code", """from nbkit.exercises import check

check("05-busiest-delay", 8.0, events=events)"""),
    ("md", """### Solution"""),
    ("code", """answer = float(delays.groupby("delay").size().idxmax())
check("05-busiest-delay", answer, events=events)"""),
]

BOOKS["06-scale"] = [
    ("md", """# Scale-out: a stream file larger than one DataFrame, on Dask

A stream file can reach 16 GiB. Its **beacons** (one every interval, 1 MiB by default) let a reader
start cleanly in the middle, so `nbkit.dask.read_stream` splits the file into beacon-aligned byte
ranges that Dask workers read in parallel: together exactly the messages of a sequential read, with the
same columns and dtypes. This needs the optional extra: `pip install 'nbkit[scale]'`."""),
    ("code", setup("06")),
    ("md", """How big a file to generate. The test suite runs this notebook on 0.05 GiB; the next cell (skipped by
the tests) asks for 2 GiB, which takes a few minutes to write on a laptop. On Binder, whose machines are
small, set it to 0.5."""),
    ("code", """GIB = 0.05"""),
    ("code", """# NBVAL_SKIP
GIB = 2"""),
    ("md", """The workload: orders, their retry copies (on the same key, with the retry count in the envelope) and
dead letters, written with the ordinary `StreamWriter` (batched: one write per 10,000 messages)."""),
    ("code", """import json, random
from nbkit import StreamWriter
from nbkit.wire import envelope

path = work / "big.ss"
rng = random.Random(3)
target = int(GIB * 2**30)
t0 = 1_704_067_200_000
with StreamWriter(path, flush_every=10_000, created_at_ms=t0) as w:
    n = 0
    while w.offset < target:
        n += 1
        payload = json.dumps({"id": n, "item": rng.choice(["book", "lamp", "mug"]), "note": "x" * rng.randint(80, 200)}).encode()
        fails = rng.choice([0, 0, 0, 1, 1, 2, 3, 9])
        ts = t0 + n * 10
        w.write("orders", payload, timestamp_ms=ts)
        for attempt in range(1, min(fails, 3) + 1):
            headers = {"x-ruststream-retry-count": str(attempt)}
            w.write("orders", envelope.encode(headers, payload, force_text=False), timestamp_ms=ts + 2000 * attempt)
        if fails >= 4:
            w.write("orders.dead", envelope.encode({"x-ruststream-retry-count": "4"}, payload, force_text=False),
                    timestamp_ms=ts + 8000)
print(f"{path.stat().st_size / 2**30:.2f} GiB" if GIB >= 1 else "a small file for the test suite")"""),
    ("md", """A local cluster of two worker processes (open its dashboard from `client.dashboard_link` if you
like), and the file as a Dask DataFrame: one partition per range, indexed by byte offset."""),
    ("code", """from dask.distributed import Client, LocalCluster
import nbkit.dask

cluster = LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None)
client = Client(cluster)
ddf = nbkit.dask.read_stream(path, partition_size="8MiB")
print(ddf.npartitions > 1, list(ddf.columns) == list(nbkit.read_stream(path, end=t0 + 1).columns))"""),
    ("md", """The reductions run on the workers; only their small results come back."""),
    ("code", """narrow = ddf[["stream_key", "timestamp", "retry_count", "attempt", "transport"]]
per_attempt = narrow[narrow["stream_key"] == "orders"].groupby("attempt").size().compute()
dead = int((narrow["stream_key"] == "orders.dead").sum().compute())
share = per_attempt / per_attempt.sum()
print("deliveries per attempt (share):", {int(k): round(float(v), 2) for k, v in share.items()})
print("dead-letter share of orders:", round(dead / per_attempt.loc[1], 2))"""),
    ("md", """The three panels from the narrow columns (no payloads or headers are shipped to the notebook).
A stream file holds no scheduled delays, so the middle panel says so; the runtime's events carry them."""),
    ("code", """import nbkit.plot

fig = nbkit.plot.dashboard(narrow.compute(), freq="1h" if GIB >= 1 else "1min")"""),
    ("code", """client.close()
cluster.close()"""),
]


def build(name: str, cells: list[tuple[str, str]]) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    for kind, text in cells:
        if kind == "md":
            nb.cells.append(nbformat.v4.new_markdown_cell(text))
        else:
            nb.cells.append(nbformat.v4.new_code_cell(text))
    # record what the test suite will compare: cells marked NBVAL_SKIP are not run (nbval skips them too)
    skipped = {i: c.source for i, c in enumerate(nb.cells) if c.cell_type == "code" and "NBVAL_SKIP" in c.source}
    for i in skipped:
        nb.cells[i].source = "pass"
    client = NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()
    for i, source in skipped.items():
        nb.cells[i].source = source
        nb.cells[i].outputs = []
        nb.cells[i].execution_count = None
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"{name[:2]}-{i:02d}"
        if cell.cell_type == "code":
            cell.metadata = {}
    nbformat.write(nb, NOTEBOOKS / f"{name}.ipynb")
    print("built", name)


def main(argv: list[str]) -> int:
    wanted = argv[1:] or [""]
    for name, cells in BOOKS.items():
        if any(name.startswith(w) for w in wanted):
            build(name, cells)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
