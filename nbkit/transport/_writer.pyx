# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The compiled write route of an exclusive :class:`nbkit.transport.file_writer.StreamWriter`, and its state.

An exclusive writer on the compiled core keeps what ``write`` reads on every message in a
:class:`WriterState` and its streams' states in :class:`StreamState` (the pure twins, with the same
attributes, are in :mod:`nbkit.transport.writer_state`). :class:`CompiledRoute` is its write route (the
``compiled`` :class:`~nbkit.transport.write_routes.WriteRoute`): ``CompiledRoute.write`` handles the
common message (a key written before on shard 0, the default sequence number, a bytes payload, a
frame reaching no beacon boundary, checksum fold or size limit) in C: the clock,
the stream bookkeeping, the frame (encoded by the wire's compiled encoder, ``encode_into`` of
nbkit/wire/_speedups.pxd, into a scratch buffer), the ``write(2)`` call (the GIL released as
``os.write`` does when other threads exist, partial writes completed, EINTR retried; with ``flush_every > 1`` or ``fsync`` the frame joins
the pending batch instead) and the ``Written`` result. Every other write, and every
error, is handed to the writer's pure route (:class:`~nbkit.transport.write_routes.PureRoute`) before anything
changed, so both routes give the same files, results and errors (tests/transport/test_file_writer_twins.py).

This module does I/O, so it lives in the transport layer; the wire's compiled core
(``nbkit.wire._speedups``) stays pure codecs.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem
from cpython.exc cimport PyErr_CheckSignals
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_SET_ITEM
from libc.errno cimport EINTR, errno
from libc.stdint cimport uint8_t, uint16_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport strerror

from nbkit.wire._speedups cimport encode_into

import struct

from nbkit.transport.writer_state import FOLD_AT
from nbkit.wire.crc import crc16
from nbkit.wire.limits import MAX_TIMESTAMP_MS

cdef extern from "<time.h>" nogil:
    ctypedef long time_t
    struct timespec:
        time_t tv_sec
        long tv_nsec
    int clock_gettime(int clk, timespec* tp)
    int CLOCK_REALTIME

cdef extern from "<unistd.h>" nogil:
    ssize_t c_write "write"(int fd, const void* buf, size_t count)

cdef extern from "Python.h":
    object PyType_GenericAlloc(type t, Py_ssize_t nitems)
    ctypedef struct PyInterpreterState:
        pass
    ctypedef struct PyThreadState:
        pass
    PyInterpreterState* PyInterpreterState_Head()
    PyInterpreterState* PyInterpreterState_Next(PyInterpreterState* interp)
    PyThreadState* PyInterpreterState_ThreadHead(PyInterpreterState* interp)
    PyThreadState* PyThreadState_Next(PyThreadState* tstate)


cdef inline bint _alone() noexcept:
    """Whether this thread is the process's only Python thread (one interpreter, one thread state):
    then nobody can be waiting for the GIL while ``write(2)`` runs, and releasing it (as ``os.write``
    does) would only cost time. Read holding the GIL, under which thread states are deleted."""
    cdef PyInterpreterState* interp = PyInterpreterState_Head()
    if PyInterpreterState_Next(interp) is not NULL:
        return False
    return PyThreadState_Next(PyInterpreterState_ThreadHead(interp)) is NULL

#: Payload CRCs a stream keeps before folding them into its running checksum (writer_state.FOLD_AT).
cdef Py_ssize_t _FOLD_AT = FOLD_AT
cdef unsigned long long _MAX_SEQ = 0xFFFFFFFFFFFFFFFF
#: The year-9999 bound of a timestamp (nbkit.wire.limits.MAX_TIMESTAMP_MS).
cdef long long _MAX_TS = MAX_TIMESTAMP_MS
#: Frames up to this size are encoded into the route's scratch buffer (larger ones into a bytes object).
cdef Py_ssize_t _SCRATCH = 1 << 16


cdef inline void _set(object items, Py_ssize_t i, object value):
    """Put ``value`` at ``i`` of a new tuple (PyTuple_SET_ITEM takes the reference it is given)."""
    Py_INCREF(value)
    PyTuple_SET_ITEM(items, i, value)


cdef class StreamState:
    """One stream's bookkeeping (the compiled twin of ``writer_state.StreamState``): its last sequence
    number and timestamp, its running checksum and the payload CRCs not yet folded into it."""

    cdef public unsigned long long seq
    cdef public unsigned long long ts
    cdef public unsigned int running
    #: payload CRCs not yet in ``running``; folded in one CRC pass when a beacon needs the checksum
    cdef public list crcs

    def __init__(self, seq, ts, running, crcs=None):
        self.seq = seq
        self.ts = ts
        self.running = running
        self.crcs = [] if crcs is None else crcs

    def note(self, seq, ts, crc):
        """Account one more message of this stream: its seq and timestamp, and its payload CRC."""
        if seq > self.seq:
            self.seq = seq
        if ts > self.ts:
            self.ts = ts
        self.crcs.append(crc)
        if len(self.crcs) >= _FOLD_AT:
            self.checksum()

    def checksum(self):
        """The running checksum over every payload CRC noted so far (spec §5)."""
        cdef list crcs = self.crcs
        if crcs:
            self.running = crc16(struct.pack(f">{len(crcs)}H", *crcs), self.running)
            crcs.clear()
        return self.running


cdef class WriterState:
    """What a writer's ``write`` reads on every message (the compiled twin of ``writer_state.WriterState``:
    the same attributes, which both routes read and set directly)."""

    cdef public int fd
    cdef public long long offset
    cdef public long long stop
    cdef public bint direct
    cdef public object clock
    cdef public dict hot
    cdef public list pending
    cdef public Py_ssize_t pending_count
    cdef public object flush_every  # as given (the writer checks it, as on the pure twin)

    def __init__(self, clock):
        self.fd = -1
        self.offset = 0
        self.stop = 0
        self.direct = False
        self.clock = clock
        self.hot = {}
        self.pending = []
        self.pending_count = 0
        self.flush_every = 1


cdef class CompiledRoute:
    """An exclusive writer's write route in C (see the module doc), on the writer's :class:`WriterState`
    (``state``); ``owner`` is the writer (its ``flush`` and its cut-back of a failed write), ``pure`` its
    pure route, which takes every write this route does not and every frame that reaches a mark."""

    name = "compiled"

    cdef readonly WriterState state
    cdef object _default_clock
    cdef type _written
    cdef object _owner
    cdef object _pure
    cdef uint8_t* _scratch
    cdef long long _ts_value  # the last default clock reading, and its int
    cdef object _ts_obj
    cdef long long _end_value  # the last compiled-route message's end, and its int
    cdef object _end_obj

    def __cinit__(self):
        self._scratch = <uint8_t*>malloc(_SCRATCH)
        if self._scratch is NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self._scratch)

    def __init__(self, WriterState state not None, owner, pure, default_clock, type written not None):
        self.state = state
        self._owner = owner
        self._pure = pure
        self._ts_value = self._end_value = -1
        self._default_clock = default_clock
        self._written = written

    def write(self, stream_key, payload, seq, shard_id, timestamp_ms, /):
        """``StreamWriter.write`` (its arguments, all of them in its order; its result and errors): the
        common message in C, every other write handed to the pure route."""
        cdef PyObject* item
        cdef StreamState state
        cdef unsigned long long next_seq
        cdef long long ts, start, end
        cdef timespec now
        cdef bytes frame, raw_key
        cdef Py_ssize_t k, size
        cdef uint16_t crc
        cdef const char* data
        cdef WriterState st = self.state
        if (seq is not None or type(payload) is not bytes or type(stream_key) is not str
                or type(shard_id) is not int or shard_id != 0):
            return self._pure.write(stream_key, payload, seq, shard_id, timestamp_ms)
        item = PyDict_GetItem(st.hot, stream_key)
        if item is NULL:
            return self._pure.write(stream_key, payload, seq, shard_id, timestamp_ms)
        raw_key = <bytes>(<tuple>item)[0]
        state = <StreamState?>(<tuple>item)[1]
        if state.seq == _MAX_SEQ:  # the next one does not fit: the pure route says so
            return self._pure.write(stream_key, payload, seq, shard_id, timestamp_ms)
        next_seq = state.seq + 1
        if timestamp_ms is None:
            if st.clock is self._default_clock:  # time.time_ns() // 1_000_000, as _now_ms reads it
                clock_gettime(CLOCK_REALTIME, &now)
                ts = <long long>now.tv_sec * 1000 + now.tv_nsec // 1_000_000
            else:
                timestamp_ms = st.clock()  # read once: a bad reading goes to the pure route as given
                if type(timestamp_ms) is not int or not 0 <= timestamp_ms <= _MAX_TS:
                    return self._pure.write(stream_key, payload, seq, shard_id, timestamp_ms)
                ts = timestamp_ms
        elif type(timestamp_ms) is int and 0 <= timestamp_ms <= _MAX_TS:
            ts = timestamp_ms
        else:
            return self._pure.write(stream_key, payload, seq, shard_id, timestamp_ms)
        k = PyBytes_GET_SIZE(raw_key)
        size = PyBytes_GET_SIZE(payload)
        start = st.offset
        end = start + 32 + k + size
        if end >= st.stop or end - start > _SCRATCH or not st.direct:
            # a beacon boundary, a fold or the size limit, a large frame or a batch: the frame as bytes
            # (the marks for the pure route's write_at_mark, a batch for the pending list)
            frame = PyBytes_FromStringAndSize(NULL, end - start)
            crc = encode_into(<uint8_t*>PyBytes_AS_STRING(frame), <const uint8_t*>PyBytes_AS_STRING(raw_key), k,
                              0, next_seq, ts, <const uint8_t*>PyBytes_AS_STRING(payload), size)
            if end >= st.stop:
                return self._pure.write_at_mark(frame, crc, stream_key, 0, next_seq, ts, raw_key, state)
            data = <const char*>PyBytes_AS_STRING(frame)
        else:
            crc = encode_into(self._scratch, <const uint8_t*>PyBytes_AS_STRING(raw_key), k,
                              0, next_seq, ts, <const uint8_t*>PyBytes_AS_STRING(payload), size)
            data = <const char*>self._scratch
        state.seq = next_seq
        if <unsigned long long>ts > state.ts:
            state.ts = ts
        state.crcs.append(crc)  # folded every _FOLD_BYTES (stop) into the running checksum
        st.offset = end
        if st.direct:  # the default: straight to the OS
            self._put(data, end - start, start)
        else:
            st.pending.append(frame)
            st.pending_count += 1
            if st.pending_count >= st.flush_every:
                self._owner.flush()
        return self._result(stream_key, next_seq, ts, timestamp_ms, start, end)

    cdef object _result(self, stream_key, unsigned long long seq, long long ts, object ts_given, long long start,
                        long long end):
        """A ``Written`` built as ``tuple.__new__(Written, ...)`` builds it, without the argument tuple.
        The timestamp given (explicit or the clock's) goes in as it came; a default clock reading that
        repeats (many messages per millisecond) and the start (the last message's end) reuse their ints."""
        cdef object written = PyType_GenericAlloc(self._written, 6)
        if ts_given is None:
            if ts != self._ts_value:
                self._ts_obj = ts
                self._ts_value = ts
            ts_given = self._ts_obj
        _set(written, 0, stream_key)
        _set(written, 1, 0)
        _set(written, 2, seq)
        _set(written, 3, ts_given)
        _set(written, 4, self._end_obj if start == self._end_value else start)
        self._end_obj = end
        self._end_value = end
        _set(written, 5, self._end_obj)
        return written

    cdef int _put(self, const char* data, Py_ssize_t size, long long start) except -1:
        """``write(2)`` the whole frame (the GIL released unless this is the only thread; a short write
        continues, EINTR retries). A failure goes to the
        writer's ``_failed`` (cut back to ``start``, close, FileIOError); a signal handler's exception
        propagates once the frame is out whole, as on the pure route."""
        cdef Py_ssize_t done = 0
        cdef Py_ssize_t got
        cdef int fd = self.state.fd
        cdef int err = 0
        cdef object pending = None
        cdef bint alone = _alone()
        while done < size:
            if alone:
                got = c_write(fd, data + done, size - done)
                if got < 0:
                    err = errno
            else:  # other threads run meanwhile, as they do during os.write
                with nogil:
                    got = c_write(fd, data + done, size - done)
                    if got < 0:
                        err = errno
            if got >= 0:
                done += got
                continue
            if err == EINTR:
                try:
                    PyErr_CheckSignals()
                except BaseException as exc:  # finish the frame first, then raise it
                    if pending is None:
                        pending = exc
                continue
            # the OSError os.write raises (its subclass for err, strerror's text): the pure route's _failed
            self._owner._failed(OSError(err, strerror(err).decode("utf-8", "replace")), 1, start)
        if pending is not None:
            raise pending
        return 0
