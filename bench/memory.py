"""Memory: peak RSS of ``nbkit cat`` and of a replaying service on a 1 GiB file; read_stream's peak.

1. A stream file of ``--size-mb`` MiB (default 1024: about 4 million messages of about 200 bytes over
   4 keys). ``python -m nbkit cat FILE > /dev/null`` and ``python -m nbkit run service:app`` (a
   FileBroker subscriber on "orders", replay=True, acking; ``--log-level ERROR``) each run as a
   child process; their peak RSS comes from ``os.wait4``. Target: under 150 MB each.
2. ``read_stream`` on a file of ``--messages`` messages, in a child process: its peak RSS (VmHWM)
   minus the RSS just before the call, against the DataFrame's ``memory_usage(deep=True)``.
   Target: at most 2x, for the default payload mode and payload="json" (also shown for "objects").

    python bench/memory.py                      # 1 GiB file, 1,000,000 messages for read_stream
    python bench/memory.py --messages 2000 --size-mb 8 --repeat 1
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's nbkit

import _common as c  # noqa: E402

from nbkit.transport.file_writer import StreamWriter  # noqa: E402

RSS_TARGET_MB = 150
READ_TARGET = 2.0
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SERVICE = """\
from nbkit import App, FileBroker, HandlerOutcome
import os

broker = FileBroker(os.environ["BENCH_FILE"], existing_only=True)


@broker.subscriber("orders", replay=True)
def handle(delivery):
    return HandlerOutcome.ack()


app = App(broker)
"""

READER = """\
import json, sys
from nbkit.tabular.frames import read_stream


def status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024


path, tiny, mode = sys.argv[1], sys.argv[2], sys.argv[3]
read_stream(tiny, payload=mode, progress=False)  # warm on a few messages: lazy imports, first-call caches
before = status("VmRSS")
with open("/proc/self/clear_refs", "w") as f:  # reset VmHWM to the current RSS
    f.write("5")
df = read_stream(path, payload=mode, progress=False)
peak = status("VmHWM")
after = status("VmRSS")
print(json.dumps({"rows": len(df), "before": before, "peak": peak, "after": after,
                  "deep": int(df.memory_usage(deep=True).sum())}))
"""


def write_big(path: str, size: int) -> int:
    """About ``size`` bytes of messages over 4 keys, from a pool of 4096 payloads (fast to write)."""
    pool = [c.message_fields(i)[3] for i in range(4096)]
    n = 0
    with StreamWriter(path, file_name="big.ss", created_at_ms=c.T0_MS, flush_every=4096) as w:
        while w.offset < size:
            for i in range(4096):
                key = c.KEYS[(n + i) % 4]
                w.write(key, pool[i], seq=(n + i) // 4 + 1, timestamp_ms=c.T0_MS + n + i)
            n += 4096
    return n


#: Runs a command with output to /dev/null and prints its peak RSS (KiB) from wait4. It is started
#: first, and small, because a child's ru_maxrss also counts the image it was forked from: forked
#: from this process (pandas loaded) every child would seem to need 100+ MB.
LAUNCHER = """
import os, sys
null = os.open(os.devnull, os.O_WRONLY)
pid = os.fork()
if pid == 0:
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def peak_rss(cmd: list[str], cwd: str, env: dict) -> tuple[int, float]:
    """(peak RSS in bytes, seconds) of a child process whose output goes to /dev/null."""
    t = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-S", "-c", LAUNCHER, *cmd], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout
    seconds = time.perf_counter() - t
    code, kib = map(int, out.split())
    if code:
        raise SystemExit(f"{' '.join(cmd)} exited with {code}")
    return kib * 1024, seconds


def main(argv: list[str] | None = None) -> int:
    p = c.parser(__doc__.splitlines()[0])
    p.add_argument("--size-mb", type=int, default=1024, metavar="MB", help="size of the big file (default 1024)")
    args = p.parse_args(argv)
    c.banner("memory: peak RSS of cat and a replaying service; read_stream's peak", args)
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    results = []
    with c.workdir(args, "memory") as tmp:
        big = os.path.join(tmp, "big.ss")
        n_big = write_big(big, args.size_mb << 20)
        print(f"   big file: {os.path.getsize(big) / (1 << 20):,.0f} MiB, {n_big:,} messages")
        with open(os.path.join(tmp, "service.py"), "w") as f:
            f.write(SERVICE)
        env["BENCH_FILE"] = big
        runs = [
            ("nbkit cat FILE > /dev/null", [sys.executable, "-m", "nbkit", "cat", big]),
            (
                "nbkit run service:app (replay, acks)",
                [sys.executable, "-m", "nbkit", "run", "service:app", "--log-level", "ERROR"],
            ),
            ("python -c pass (the interpreter alone)", [sys.executable, "-c", "pass"]),
        ]
        for label, cmd in runs:
            peaks = [peak_rss(cmd, tmp, env) for _ in range(max(1, args.repeat))]
            peak = max(rss for rss, _ in peaks)
            secs = sorted(s for _, s in peaks)[len(peaks) // 2]
            print(f"   {label:<50} peak RSS {peak / 1e6:7.1f} MB   ({c.fmt_s(secs)})")
            if "pass" not in label:
                results.append(
                    c.verdict(f"{label} under {RSS_TARGET_MB} MB", peak < RSS_TARGET_MB * 1e6, f"{peak / 1e6:.1f} MB")
                )

        small = os.path.join(tmp, "small.ss")
        c.write_stream(small, args.messages)
        tiny = os.path.join(tmp, "tiny.ss")
        c.write_stream(tiny, 8)
        reader = os.path.join(tmp, "reader.py")
        with open(reader, "w") as f:
            f.write(READER)
        for mode in ("auto", "json", "objects"):
            out = subprocess.run(
                [sys.executable, reader, small, tiny, mode],
                cwd=tmp,
                env=env,
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            m = json.loads(out)
            used = m["peak"] - m["before"]
            ratio = used / m["deep"]
            print(
                f'   read_stream(payload="{mode}"), {m["rows"]:,} rows: peak {used / 1e6:,.1f} MB over the '
                f"baseline ({(m['after'] - m['before']) / 1e6:,.1f} MB still held with the frame), "
                f"memory_usage(deep=True) {m['deep'] / 1e6:,.1f} MB: ratio {ratio:.2f}"
            )
            if mode in ("auto", "json"):
                results.append(
                    c.verdict(
                        f"read_stream(payload={mode!r}) peak at most {READ_TARGET:g}x the frame's deep size",
                        ratio <= READ_TARGET,
                        f"{ratio:.2f}x",
                    )
                )
    return c.finish(results)


if __name__ == "__main__":
    sys.exit(main())
