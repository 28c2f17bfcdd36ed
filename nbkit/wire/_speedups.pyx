# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The compiled twin of nbkit's byte-level hot loops (Cython; built by setup.py when a C compiler exists).

Same signatures, results and errors as the pure-Python reference twin:

- :func:`scan_frames` as :func:`nbkit.wire.scan.scan_frames` (the frame scanner),
- :func:`scan_columns` as :func:`nbkit.wire.scan.scan_columns` (the scanner into column buffers) and
  :func:`split_payloads` / :func:`compact_payloads` / :func:`payload_lines` as their :mod:`nbkit.wire.scan`
  twins,
- :func:`encode_frame` as :func:`nbkit.wire.ssformat.encode_frame` (the writer's frame encoding),
- :func:`parse_fields` and :func:`format_line` as ``nbkit.wire.stdio_line.parse_fields`` and
  :func:`nbkit.wire.stdio_line.format_line` (stdio lines),
- :func:`new_record` as :func:`nbkit.runtime.events.new_record` (a named tuple from its values),
- :func:`text_lines` as :func:`nbkit.transport.pipe_io.text_lines` (a chunk of stdin's lines),
- :func:`file_deliveries` as :func:`nbkit.wire.deliveries.file_deliveries` (a file subscription's deliveries),
- :func:`new_slotted` as :func:`nbkit.runtime.delivery.new_slotted` (a Delivery from its fields),

Identical errors by construction: every input off the hot path (a field out of range, a header that is
not the canonical ``[ts | key | seq]``) is handed to the pure twin,
which raises or answers. :mod:`nbkit.wire.core` chooses between the twins once, at import.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython cimport array
from cpython.long cimport PyLong_FromLongLong, PyLong_FromUnsignedLongLong
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memchr, memcmp, memcpy

# Slicing-by-16 tables: _T[k][b] is the CRC register after byte b then k zero bytes (from register 0).
# Sixteen bytes a step halve the register's chain of dependent look-ups against eight (about 2x on 1 KB
# payloads, 1.6x on 200 bytes); the 8 KB of tables stay in the L1 cache.
cdef uint16_t _T[16][256]
cdef int _t, _b, _k
cdef uint16_t _c
for _t in range(256):
    _c = <uint16_t>(_t << 8)
    for _b in range(8):
        if _c & 0x8000:
            _c = <uint16_t>((_c << 1) ^ 0xC867)
        else:
            _c = <uint16_t>(_c << 1)
    _T[0][_t] = _c
for _k in range(1, 16):
    for _t in range(256):
        _T[_k][_t] = <uint16_t>((_T[_k - 1][_t] << 8) ^ _T[0][_T[_k - 1][_t] >> 8])

from nbkit.wire.limits import MAX_PAYLOAD, MAX_TIMESTAMP_MS, SEQUENCE_HEADER

#: The format's bounds (nbkit.wire.limits, as the pure twins read them).
cdef int64_t _MAX_TS = MAX_TIMESTAMP_MS
cdef uint64_t _MAX_PAYLOAD = MAX_PAYLOAD
#: The header every delivery gets (envelope.SEQUENCE_HEADER), held in a C variable for the per-message loops.
cdef str _SEQUENCE_HEADER = SEQUENCE_HEADER


cdef inline uint16_t _crc(const uint8_t* p, Py_ssize_t n, uint16_t crc) noexcept nogil:
    """CRC-16/CDMA2000 (poly 0xC867, not reflected) of ``p[:n]`` from register ``crc``, 16 bytes a step."""
    cdef uint16_t c
    while n >= 16:
        c = crc ^ <uint16_t>((<uint16_t>p[0] << 8) | p[1])
        crc = <uint16_t>(_T[15][c >> 8] ^ _T[14][c & 0xFF] ^ _T[13][p[2]] ^ _T[12][p[3]]
                         ^ _T[11][p[4]] ^ _T[10][p[5]] ^ _T[9][p[6]] ^ _T[8][p[7]]
                         ^ _T[7][p[8]] ^ _T[6][p[9]] ^ _T[5][p[10]] ^ _T[4][p[11]]
                         ^ _T[3][p[12]] ^ _T[2][p[13]] ^ _T[1][p[14]] ^ _T[0][p[15]])
        p += 16
        n -= 16
    if n >= 8:
        c = crc ^ <uint16_t>((<uint16_t>p[0] << 8) | p[1])
        crc = <uint16_t>(_T[7][c >> 8] ^ _T[6][c & 0xFF] ^ _T[5][p[2]] ^ _T[4][p[3]]
                         ^ _T[3][p[4]] ^ _T[2][p[5]] ^ _T[1][p[6]] ^ _T[0][p[7]])
        p += 8
        n -= 8
    while n > 0:
        crc = <uint16_t>((crc << 8) ^ _T[0][((crc >> 8) ^ p[0]) & 0xFF])
        p += 1
        n -= 1
    return crc


cdef inline uint64_t _be64(const uint8_t* p) noexcept nogil:
    return ((<uint64_t>p[0] << 56) | (<uint64_t>p[1] << 48) | (<uint64_t>p[2] << 40) | (<uint64_t>p[3] << 32)
            | (<uint64_t>p[4] << 24) | (<uint64_t>p[5] << 16) | (<uint64_t>p[6] << 8) | <uint64_t>p[7])


cdef inline void _put64(uint8_t* p, uint64_t v) noexcept nogil:
    cdef int k
    for k in range(8):
        p[k] = <uint8_t>(v >> (56 - 8 * k))


cdef extern from "Python.h":
    long long PyLong_AsLongLongAndOverflow(object o, int* overflow) except? -1
    object PyUnicode_New(Py_ssize_t size, unsigned int maxchar)
    void* PyUnicode_DATA(object)


cdef str _decimal(object n):
    """``str(n)``: an int from 0 to 2**63 - 1 (a sequence number) written in decimal here, without the general
    conversion of ``str``; anything else is ``str``'s."""
    cdef int overflow = 0
    cdef long long v
    cdef char digits[20]
    cdef Py_ssize_t i = 20
    if type(n) is not int:
        return str(n)
    v = PyLong_AsLongLongAndOverflow(n, &overflow)
    if overflow or v < 0:
        return str(n)
    while True:
        i -= 1
        digits[i] = 48 + v % 10
        v //= 10
        if v == 0:
            break
    text = PyUnicode_New(20 - i, 127)
    memcpy(PyUnicode_DATA(text), &digits[i], 20 - i)
    return text


cdef struct _Frame:
    Py_ssize_t klen  # the key's length (its bytes start one past the frame's start)
    Py_ssize_t p  # where the payload starts
    Py_ssize_t e  # where the frame ends
    uint64_t shard, seq, ts
    uint32_t size


cdef inline bint _frame_at(const uint8_t* b, Py_ssize_t i, Py_ssize_t stop, _Frame* f) noexcept nogil:
    """Read the frame starting at ``b[i]`` into ``f``: False if it does not end before ``stop`` (the next
    beacon), its timestamp is out of range, or its checksum is wrong; both scanners stop there."""
    cdef Py_ssize_t h
    f.klen = b[i]
    h = i + 1 + f.klen
    f.p = h + 28
    if f.p > stop:
        return False
    f.shard = _be64(b + h)
    f.seq = _be64(b + h + 8)
    f.ts = _be64(b + h + 16)
    f.size = <uint32_t>((<uint32_t>b[h + 24] << 24) | (<uint32_t>b[h + 25] << 16)
                        | (<uint32_t>b[h + 26] << 8) | <uint32_t>b[h + 27])
    f.e = f.p + <Py_ssize_t>f.size + 3
    if f.e > stop or f.ts > <uint64_t>_MAX_TS:
        return False
    return _crc(b + f.p, f.size, 0xFFFF) == ((<uint16_t>b[f.e - 3] << 8) | b[f.e - 2])


cdef inline bint _span(bytes buf, long long base, long long pos, long long until, long long interval,
                       Py_ssize_t* i, Py_ssize_t* stop, Py_ssize_t* limit) noexcept:
    """Where a scan of ``buf`` (file offset ``base``) from ``pos`` runs: ``i`` its start in the buffer,
    ``stop`` the next beacon boundary (or the buffer's end), ``limit`` where frames may no longer start.
    False when there is nothing to scan (``pos`` on a boundary, or outside the buffer)."""
    cdef long long off = pos % interval
    cdef Py_ssize_t n = PyBytes_GET_SIZE(buf)
    i[0] = <Py_ssize_t>(pos - base)
    if off == 0 or i[0] < 0 or i[0] >= n:
        return False
    stop[0] = n if i[0] + interval - off > n else <Py_ssize_t>(i[0] + interval - off)
    limit[0] = n if until < 0 else <Py_ssize_t>(until - base)
    return True


_MISSING = object()


def scan_frames(bytes buf not None, long long base, long long pos, long long until, long long interval,
                dict keymap not None, object cols, list ends):
    """The compiled :func:`nbkit.wire.scan.scan_frames` (see there): same arguments, same result."""
    cdef Py_ssize_t i, stop, limit
    if not _span(buf, base, pos, until, interval, &i, &stop, &limit):
        return pos
    cdef const uint8_t* b = <const uint8_t*>PyBytes_AS_STRING(buf)
    cdef list ks = cols[0], shards = cols[1], seqs = cols[2], tss = cols[3], pays = cols[4], offs = cols[5]
    cdef _Frame f
    cdef const uint8_t* last_raw = NULL  # the previous frame's key bytes, and what keymap said of them
    cdef Py_ssize_t last_len = -1
    cdef object key = None
    cdef object payload
    while i < limit:
        if not _frame_at(b, i, stop, &f):
            break
        if not (last_len == f.klen and memcmp(last_raw, b + i + 1, f.klen) == 0):
            key = keymap.get(PyBytes_FromStringAndSize(<const char*>(b + i + 1), f.klen), _MISSING)
            if key is _MISSING:
                break
            last_raw = b + i + 1
            last_len = f.klen
        if key is not None:
            payload = PyBytes_FromStringAndSize(<const char*>(b + f.p), f.size)
            ks.append(key)
            shards.append(PyLong_FromUnsignedLongLong(f.shard))
            seqs.append(PyLong_FromUnsignedLongLong(f.seq))
            tss.append(PyLong_FromLongLong(<long long>f.ts))
            pays.append(payload)
            offs.append(PyLong_FromLongLong(base + i))
            if ends is not None:
                ends.append(PyLong_FromLongLong(base + f.e))
        i = f.e
        if i >= stop:
            break
    return base + i


cdef extern from "Python.h":
    int PyByteArray_Resize(object bytearray, Py_ssize_t len) except -1
    char* PyByteArray_AS_STRING(object bytearray)
    Py_ssize_t PyByteArray_GET_SIZE(object bytearray)


cdef enum:
    _SEEN = 16  # keys scan_columns remembers per call


def scan_columns(bytes buf not None, long long base, long long pos, long long until, long long interval,
                 dict keymap not None, object cols):
    """The compiled :func:`nbkit.wire.scan.scan_columns` (see there): same arguments, same result."""
    cdef Py_ssize_t i, stop, limit
    if not _span(buf, base, pos, until, interval, &i, &stop, &limit):
        return pos
    cdef const uint8_t* b = <const uint8_t*>PyBytes_AS_STRING(buf)
    cdef array.array codes = cols.key_code, shards = cols.shard_id, seqs = cols.seq
    cdef array.array tss = cols.timestamp_ms, offs = cols.offset, dends = cols.data_end
    cdef object data = cols.data
    cdef Py_ssize_t gap = len(cols.separator)
    # room for every frame the span can hold (32 bytes at least each), trimmed to what was taken at the end
    cdef Py_ssize_t have = len(offs), room = (stop - i) // 32 + 1
    cdef Py_ssize_t dlen = PyByteArray_GET_SIZE(data)
    for arr in (codes, shards, seqs, tss, offs, dends):
        array.resize_smart(arr, have + room)
    PyByteArray_Resize(data, dlen + (stop - i))
    cdef uint8_t* d = <uint8_t*>PyByteArray_AS_STRING(data)
    cdef int* code_p = codes.data.as_ints
    cdef unsigned long long* shard_p = shards.data.as_ulonglongs
    cdef unsigned long long* seq_p = seqs.data.as_ulonglongs
    cdef long long* ts_p = tss.data.as_longlongs
    cdef long long* off_p = offs.data.as_longlongs
    cdef long long* end_p = dends.data.as_longlongs
    cdef Py_ssize_t k = have
    cdef _Frame f
    cdef const uint8_t* last_raw = NULL
    cdef Py_ssize_t last_len = -1
    cdef long code = -1
    cdef object found, raw_key
    # the keys met so far in this call and their codes (keys alternate: a look-up without a bytes object
    # and a dict look-up per frame); ``seen`` keeps the key objects the pointers point into alive
    cdef const char* seen_raw[_SEEN]
    cdef Py_ssize_t seen_len[_SEEN]
    cdef long seen_code[_SEEN]
    cdef int nseen = 0, s
    cdef list seen = []
    try:
        while i < limit:
            if not _frame_at(b, i, stop, &f):
                break
            if not (last_len == f.klen and memcmp(last_raw, b + i + 1, f.klen) == 0):
                for s in range(nseen):
                    if seen_len[s] == f.klen and memcmp(seen_raw[s], b + i + 1, f.klen) == 0:
                        break
                else:
                    s = -1
                if s >= 0:
                    code = seen_code[s]
                else:
                    raw_key = PyBytes_FromStringAndSize(<const char*>(b + i + 1), f.klen)
                    found = keymap.get(raw_key)
                    if found is None:
                        break
                    code = found
                    if nseen < _SEEN:
                        seen.append(raw_key)
                        seen_raw[nseen] = PyBytes_AS_STRING(raw_key)
                        seen_len[nseen] = f.klen
                        seen_code[nseen] = code
                        nseen += 1
                last_raw = b + i + 1
                last_len = f.klen
            if code >= 0:
                code_p[k] = <int>code
                shard_p[k] = f.shard
                seq_p[k] = f.seq
                ts_p[k] = <long long>f.ts
                off_p[k] = base + i
                memcpy(d + dlen, b + f.p, f.size)
                dlen += f.size
                end_p[k] = dlen
                if gap:
                    d[dlen] = 10
                    dlen += 1
                k += 1
            i = f.e
            if i >= stop:
                break
    finally:
        for arr in (codes, shards, seqs, tss, offs, dends):
            array.resize_smart(arr, k)
        PyByteArray_Resize(data, dlen)
    return base + i


def split_payloads(object data, array.array ends not None, Py_ssize_t gap):
    """The compiled :func:`nbkit.wire.scan.split_payloads`: one bytes object per payload of ``data``."""
    if ends.ob_descr.typecode != b'q' or not (gap == 0 or gap == 1):
        from nbkit.wire.scan import split_payloads_pure  # the twin says what is wrong
        return split_payloads_pure(data, ends, gap)
    cdef const uint8_t[::1] view = data
    cdef Py_ssize_t n = len(ends), k, start = 0, end, size = view.shape[0]
    cdef long long* e = ends.data.as_longlongs
    cdef list out = [None] * n
    cdef const char* base = <const char*>&view[0] if size else <const char*>b""
    for k in range(n):
        end = <Py_ssize_t>e[k]
        if end < start or end > size:
            from nbkit.wire.scan import split_payloads_pure
            return split_payloads_pure(data, ends, gap)
        out[k] = PyBytes_FromStringAndSize(base + start, end - start)
        start = end + gap
    return out


def compact_payloads(object data, array.array ends not None, Py_ssize_t gap):
    """The compiled :func:`nbkit.wire.scan.compact_payloads`: the payloads back to back, no separators."""
    if ends.ob_descr.typecode != b'q' or not (gap == 0 or gap == 1):
        from nbkit.wire.scan import compact_payloads_pure  # the twin says what is wrong
        return compact_payloads_pure(data, ends, gap)
    cdef const uint8_t[::1] view = data
    cdef Py_ssize_t n = len(ends), k, start = 0, end, size = view.shape[0], total = 0
    cdef long long* e = ends.data.as_longlongs
    for k in range(n):
        end = <Py_ssize_t>e[k]
        if end < start or end > size:
            from nbkit.wire.scan import compact_payloads_pure
            return compact_payloads_pure(data, ends, gap)
        total += end - start
        start = end + gap
    cdef bytes out = PyBytes_FromStringAndSize(NULL, total)
    cdef char* o = PyBytes_AS_STRING(out)
    cdef const char* base = <const char*>&view[0] if size else <const char*>b""
    start = 0
    for k in range(n):
        end = <Py_ssize_t>e[k]
        memcpy(o, base + start, end - start)
        o += end - start
        start = end + gap
    return out


cdef extern from "string.h":
    const void* memchr(const void* s, int c, size_t n) nogil


def payload_lines(object data, array.array ends not None, Py_ssize_t first, Py_ssize_t last, Py_ssize_t gap):
    """The compiled :func:`nbkit.wire.scan.payload_lines`: payloads ``first:last`` as NDJSON, or None when
    one holds a newline; the copy runs with the GIL released."""
    if (ends.ob_descr.typecode != b'q' or not (gap == 0 or gap == 1)
            or not (0 <= first <= last <= len(ends))):
        from nbkit.wire.scan import payload_lines_pure  # the twin says what is wrong
        return payload_lines_pure(data, ends, first, last, gap)
    cdef const uint8_t[::1] view = data
    cdef Py_ssize_t k, end, size = view.shape[0], total = 0
    cdef Py_ssize_t start0 = 0 if first == 0 else <Py_ssize_t>ends.data.as_longlongs[first - 1] + gap
    cdef Py_ssize_t start = start0
    cdef long long* e = ends.data.as_longlongs
    for k in range(first, last):
        end = <Py_ssize_t>e[k]
        if end < start or end > size or start < 0:
            from nbkit.wire.scan import payload_lines_pure
            return payload_lines_pure(data, ends, first, last, gap)
        total += end - start + 1
        start = end + gap
    cdef bytes out = PyBytes_FromStringAndSize(NULL, total)
    cdef char* o = PyBytes_AS_STRING(out)
    cdef const char* base = <const char*>&view[0] if size else <const char*>b""
    cdef bint newline = False
    start = start0
    with nogil:
        for k in range(first, last):
            end = <Py_ssize_t>e[k]
            if memchr(base + start, 10, end - start) != NULL:
                newline = True
                break
            memcpy(o, base + start, end - start)
            o += end - start
            o[0] = 10
            o += 1
            start = end + gap
    if newline:
        return None
    return out


_pure_encode_frame = None


def encode_frame(key, shard_id, seq, timestamp_ms, payload):
    """The compiled :func:`nbkit.wire.ssformat.encode_frame`: (frame bytes, payload CRC)."""
    global _pure_encode_frame
    if (type(key) is bytes and type(payload) is bytes and type(shard_id) is int and type(seq) is int
            and type(timestamp_ms) is int and 0 <= shard_id <= 0xFFFFFFFFFFFFFFFF
            and 0 <= seq <= 0xFFFFFFFFFFFFFFFF and 0 <= timestamp_ms <= _MAX_TS
            and len(payload) <= 0xFFFFFFFF and len(key) <= 255):
        return _encode(<bytes>key, <uint64_t>shard_id, <uint64_t>seq, <uint64_t>timestamp_ms, <bytes>payload)
    if _pure_encode_frame is None:
        from nbkit.wire.ssformat import encode_frame_pure
        _pure_encode_frame = encode_frame_pure
    return _pure_encode_frame(key, shard_id, seq, timestamp_ms, payload)


cdef tuple _encode(bytes key, uint64_t shard, uint64_t seq, uint64_t ts, bytes payload):
    cdef Py_ssize_t k = PyBytes_GET_SIZE(key)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(payload)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, 32 + k + size)
    cdef uint16_t c = encode_into(<uint8_t*>PyBytes_AS_STRING(out), <const uint8_t*>PyBytes_AS_STRING(key), k,
                                  shard, seq, ts, <const uint8_t*>PyBytes_AS_STRING(payload), size)
    return out, c


cdef uint16_t encode_into(uint8_t* o, const uint8_t* key, Py_ssize_t k, uint64_t shard, uint64_t seq, uint64_t ts,
                          const uint8_t* src, Py_ssize_t size) noexcept nogil:
    """Encode one frame (its 32 + k + size bytes) at ``o``; returns the payload CRC. The fields are in
    range (the caller checked them as :func:`encode_frame` does). Declared in _speedups.pxd: the C
    entry point of the writer's compiled short route (nbkit/transport/_writer.pyx)."""
    cdef uint16_t c = _crc(src, size, 0xFFFF)
    o[0] = <uint8_t>k
    memcpy(o + 1, key, k)
    _put64(o + 1 + k, shard)
    _put64(o + 9 + k, seq)
    _put64(o + 17 + k, ts)
    o[25 + k] = <uint8_t>(size >> 24)
    o[26 + k] = <uint8_t>(size >> 16)
    o[27 + k] = <uint8_t>(size >> 8)
    o[28 + k] = <uint8_t>size
    memcpy(o + 29 + k, src, size)
    o[29 + k + size] = <uint8_t>(c >> 8)
    o[30 + k + size] = <uint8_t>c
    o[31 + k + size] = 13
    return c


# ------------------------------------------------------------------------------------- stdio lines

_stdio = None


cdef object _stdio_module():
    global _stdio
    if _stdio is None:
        from nbkit.wire import stdio_line
        _stdio = stdio_line
    return _stdio


cdef inline bint _digit(Py_UCS4 c) noexcept:
    return c >= u'0' and c <= u'9'


cdef inline bint _keychar(Py_UCS4 c) noexcept:
    return ((c >= u'a' and c <= u'z') or (c >= u'A' and c <= u'Z') or (c >= u'0' and c <= u'9')
            or c == u'.' or c == u'_' or c == u'-')


cdef Py_ssize_t _u64_end(str line, Py_ssize_t j, Py_ssize_t n):
    """End of ``\\+?[0-9]+`` at ``j`` (-1 if none)."""
    if j < n and line[j] == u'+':
        j += 1
    cdef Py_ssize_t s = j
    while j < n and _digit(line[j]):
        j += 1
    return j if j > s else -1


cdef str _ts_text = None  # the timestamp text parse_fields read last, and its value
cdef object _ts_value = None


def parse_fields(str line, lineno):
    """The compiled ``stdio_line.parse_fields``: (timestamp_ms, key, seq, shard, payload) of a line.

    The canonical header ``[ts | key | seq]`` / ``[ts | key | seq | shard]`` is read here; any other
    line goes to the pure twin (which also raises every error)."""
    cdef Py_ssize_t n = len(line)
    cdef Py_ssize_t j, ts_end, k0, k1, s0, s1, h0 = -1, h1 = -1
    cdef Py_ssize_t t
    cdef Py_UCS4 c
    mod = _stdio_module()
    if n < 30 or line[0] != u'[':
        return mod.parse_general(line, lineno)
    # timestamp: [+-]?YYYY-MM-DDTHH:MM:SS(.f{1,9})?
    j = 1
    if line[j] == u'+' or line[j] == u'-':
        j += 1
    if j + 19 > n:
        return mod.parse_general(line, lineno)
    for t in range(19):
        c = line[j + t]
        if t == 4 or t == 7:
            if c != u'-':
                return mod.parse_general(line, lineno)
        elif t == 10:
            if c != u'T':
                return mod.parse_general(line, lineno)
        elif t == 13 or t == 16:
            if c != u':':
                return mod.parse_general(line, lineno)
        elif not _digit(c):
            return mod.parse_general(line, lineno)
    j += 19
    if j < n and line[j] == u'.':
        k0 = j + 1
        j = k0
        while j < n and j - k0 < 9 and _digit(line[j]):
            j += 1
        if j == k0:
            return mod.parse_general(line, lineno)
    ts_end = j
    if line[j:j + 3] != u" | ":
        return mod.parse_general(line, lineno)
    k0 = j + 3
    j = k0
    while j < n and j - k0 < 249 and _keychar(line[j]):
        j += 1
    k1 = j
    if k1 == k0 or line[j:j + 3] != u" | ":
        return mod.parse_general(line, lineno)
    s0 = j + 3
    s1 = _u64_end(line, s0, n)
    if s1 < 0:
        return mod.parse_general(line, lineno)
    j = s1
    if line[j:j + 3] == u" | ":
        h0 = j + 3
        h1 = _u64_end(line, h0, n)
        if h1 < 0:
            return mod.parse_general(line, lineno)
        j = h1
    if j >= n or line[j] != u']':
        return mod.parse_general(line, lineno)
    global _ts_text, _ts_value
    if _ts_text is not None and ts_end - 1 == len(_ts_text) and line.startswith(_ts_text, 1):
        ts = _ts_value  # the same time as the line before (a stage reads runs of lines of one second)
    else:
        text = line[1:ts_end]
        ts = mod.parse_timestamp(text)
        if ts is not None:
            _ts_text = text
            _ts_value = ts
    seq = int(line[s0:s1])
    shard = None if h0 < 0 else int(line[h0:h1])
    if ts is None or seq > 0xFFFFFFFFFFFFFFFF or (shard is not None and shard > 0xFFFFFFFFFFFFFFFF):
        return mod.parse_general(line, lineno)
    rest = line[j + 1:]
    return ts, line[k0:k1], seq, shard, rest.lstrip(mod.RUST_WHITESPACE) or rest


cdef long long _cached_sec = 0
cdef str _cached_text = u"1970-01-01T00:00:00"


def format_line(timestamp_ms, str stream_key, seq, str payload):
    """The compiled :func:`nbkit.wire.stdio_line.format_line`: ``[YYYY-MM-DDTHH:MM:SS | key | seq] payload\\n``."""
    return _format_line(timestamp_ms, stream_key, seq, payload)


cdef str _format_line(timestamp_ms, str stream_key, seq, str payload):
    return u"[" + _second(timestamp_ms) + u" | " + stream_key + u" | " + _decimal(seq) + u"] " + payload + u"\n"


cdef str _second(timestamp_ms):
    """The line's time, ``YYYY-MM-DDTHH:MM:SS`` (the last one made is kept: lines come in runs of a second)."""
    global _cached_sec, _cached_text
    sec = timestamp_ms // 1000
    if type(sec) is int and -(1 << 62) < sec < (1 << 62) and <long long>sec == _cached_sec:
        return _cached_text
    text = _stdio_module().second_text(sec)
    if type(sec) is int and -(1 << 62) < sec < (1 << 62):
        _cached_sec = <long long>sec
        _cached_text = text
    return text


# ------------------------------------------------------------------------------------- envelope

cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object)
    void* PyUnicode_DATA(object)
    Py_ssize_t PyUnicode_GET_LENGTH(object)
    void* PyMem_Malloc(size_t)
    void PyMem_Free(void*)

cdef const char* _B64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
# the two characters of every 12 bits: _B64_PAIRS[v] is _B64[v >> 6], _B64[v & 63] (two lookups per 3 bytes, not 4)
cdef uint8_t _B64_PAIRS[4096][2]
cdef int _v
for _v in range(4096):
    _B64_PAIRS[_v][0] = _B64[_v >> 6]
    _B64_PAIRS[_v][1] = _B64[_v & 63]
_pure_envelope_encode = None


cdef inline bint _plain_header_text(object text, bint name) noexcept:
    """True for a str of printable ASCII, not starting or ending with a space; a name also has no
    ``:`` and no uppercase letter (what the envelope's ASCII-lowercasing would change)."""
    cdef Py_ssize_t n, i
    cdef const uint8_t* p
    cdef uint8_t c
    if type(text) is not str or not PyUnicode_IS_ASCII(text):
        return False
    n = PyUnicode_GET_LENGTH(text)
    p = <const uint8_t*>PyUnicode_DATA(text)
    if n and (p[0] == 32 or p[n - 1] == 32):
        return False
    for i in range(n):
        c = p[i]
        if c < 32 or c > 126 or (name and (c == 58 or (c >= 65 and c <= 90))):
            return False
    return True


cdef inline bint _plain_line_payload(bytes payload) noexcept:
    """True for an ASCII payload a stdio line carries verbatim: no ``\\n``, no whitespace at either end."""
    cdef Py_ssize_t n = PyBytes_GET_SIZE(payload), i
    cdef const uint8_t* p = <const uint8_t*>PyBytes_AS_STRING(payload)
    if n and ((9 <= p[0] <= 13) or p[0] == 32 or (9 <= p[n - 1] <= 13) or p[n - 1] == 32):
        return False
    for i in range(n):
        if p[i] > 127 or p[i] == 10:
            return False
    return True


cdef void _b64(const uint8_t* src, Py_ssize_t n, uint8_t* dst) noexcept nogil:
    """Standard base64 with padding, no newline (``binascii.b2a_base64(..., newline=False)``)."""
    cdef Py_ssize_t i = 0
    cdef uint32_t v
    while i + 3 <= n:
        v = (<uint32_t>src[i] << 16) | (<uint32_t>src[i + 1] << 8) | src[i + 2]
        memcpy(dst, _B64_PAIRS[v >> 12], 2)
        memcpy(dst + 2, _B64_PAIRS[v & 0xFFF], 2)
        i += 3
        dst += 4
    if n - i == 1:
        v = <uint32_t>src[i] << 16
        dst[0] = _B64[v >> 18]
        dst[1] = _B64[(v >> 12) & 63]
        dst[2] = 61
        dst[3] = 61
    elif n - i == 2:
        v = (<uint32_t>src[i] << 16) | (<uint32_t>src[i + 1] << 8)
        dst[0] = _B64[v >> 18]
        dst[1] = _B64[(v >> 12) & 63]
        dst[2] = _B64[(v >> 6) & 63]
        dst[3] = 61


def envelope_encode(headers, payload, *, force_text):
    """The compiled :func:`nbkit.wire.envelope.encode`: the payload verbatim, or its ``rs1:`` envelope.

    Compiled: no headers and a bytes payload that needs no envelope (returned as is), and a dict of
    headers whose names are lowercase printable ASCII without ``:`` and whose values are printable
    ASCII str, neither padded with spaces (the ``rs1:`` text block as is). Everything else goes to
    the pure twin, which builds the other envelopes and raises every error."""
    return _envelope_encode(headers, payload, force_text)


cdef Py_ssize_t _plain_block_len(dict headers):
    """The length of the ``rs1:`` text block of ``headers`` when every name and value is plain (see
    :func:`envelope_encode`) and it fits its u32 length; else -1."""
    cdef Py_ssize_t block_len = 0
    for name, value in headers.items():
        if not (_plain_header_text(name, True) and _plain_header_text(value, False)):
            return -1
        block_len += PyUnicode_GET_LENGTH(name) + PyUnicode_GET_LENGTH(value) + 3
    return block_len if block_len <= 0xFFFFFFFF else -1


cdef int _write_rs1(dict headers, Py_ssize_t block_len, const uint8_t* p, Py_ssize_t plen, uint8_t* out) except -1:
    """Write ``rs1:`` and the base64 of (u32 block length, the text block of plain ``headers``, the payload)
    at ``out``: 4 + (4 + block_len + plen + 2) // 3 * 4 bytes."""
    cdef Py_ssize_t raw_len = 4 + block_len + plen, k
    cdef uint8_t* raw = <uint8_t*>PyMem_Malloc(raw_len)
    cdef uint8_t* w
    if raw == NULL:
        raise MemoryError()
    try:
        raw[0] = <uint8_t>(block_len >> 24)
        raw[1] = <uint8_t>(block_len >> 16)
        raw[2] = <uint8_t>(block_len >> 8)
        raw[3] = <uint8_t>block_len
        w = raw + 4
        for name, value in headers.items():
            k = PyUnicode_GET_LENGTH(name)
            memcpy(w, PyUnicode_DATA(name), k)
            w[k] = 58
            w[k + 1] = 32
            w += k + 2
            k = PyUnicode_GET_LENGTH(value)
            memcpy(w, PyUnicode_DATA(value), k)
            w[k] = 10
            w += k + 1
        memcpy(w, p, plen)
        memcpy(out, b"rs1:", 4)
        _b64(raw, raw_len, out + 4)
    finally:
        PyMem_Free(raw)
    return 0


cdef object _envelope_encode(headers, payload, bint force_text):
    global _pure_envelope_encode
    cdef Py_ssize_t block_len, plen
    cdef const uint8_t* p
    cdef bytes out
    if type(payload) is bytes and (headers is None or type(headers) is dict):
        plen = PyBytes_GET_SIZE(payload)
        p = <const uint8_t*>PyBytes_AS_STRING(payload)
        if not headers:
            if not (plen >= 4 and p[0] == 114 and p[1] == 115 and (p[2] == 49 or p[2] == 50) and p[3] == 58):
                if not force_text or _plain_line_payload(<bytes>payload):
                    return payload
        else:
            block_len = _plain_block_len(<dict>headers)
            if block_len >= 0:
                out = PyBytes_FromStringAndSize(NULL, 4 + (4 + block_len + plen + 2) // 3 * 4)
                _write_rs1(<dict>headers, block_len, p, plen, <uint8_t*>PyBytes_AS_STRING(out))
                return out
    if _pure_envelope_encode is None:
        from nbkit.wire.envelope import encode_pure
        _pure_envelope_encode = encode_pure
    return _pure_envelope_encode(headers, payload, force_text=force_text)


# ------------------------------------------------------------------------------- lines <-> deliveries

_pure_envelope_decode = None


cdef str _last_key = None  # the key _ascii_fields read last (the same str object again: its hash is kept)


cdef inline bint _ascii_ws(uint8_t c) noexcept:
    return c == 32 or 9 <= c <= 13


cdef inline Py_ssize_t _digits_end(const uint8_t* b, Py_ssize_t j, Py_ssize_t n) noexcept:
    """End of ``\\+?[0-9]+`` at ``j`` (-1 if none)."""
    if j < n and b[j] == 43:
        j += 1
    cdef Py_ssize_t s = j
    while j < n and 48 <= b[j] <= 57:
        j += 1
    return j if j > s else -1


cdef object _u64_at(const uint8_t* b, Py_ssize_t s0, Py_ssize_t s1):
    """The u64 written at b[s0:s1] (``+?digits``), or None when it is over 2**64-1."""
    cdef uint64_t v = 0
    if b[s0] == 43:
        s0 += 1
    while s0 < s1 and b[s0] == 48:  # leading zeros
        s0 += 1
    if s1 - s0 > 20:
        return None
    if s1 - s0 == 20 and memcmp(b + s0, b"18446744073709551615", 20) > 0:
        return None
    while s0 < s1:
        v = v * 10 + (b[s0] - 48)
        s0 += 1
    return PyLong_FromUnsignedLongLong(v)


cdef tuple _ascii_fields(str line):
    """(timestamp_ms, key, seq, shard or None, payload bytes) of an ASCII line with the canonical header
    ``[ts | key | seq]`` / ``[ts | key | seq | shard]`` followed by one space and a payload that starts with
    no whitespace; None for any other line (the caller then takes the general way, which gives the same)."""
    global _ts_text, _ts_value, _last_key
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(line)
    cdef const uint8_t* b
    cdef Py_ssize_t j, t, k0, k1, s0, s1, h0 = -1, h1 = -1, ts_end
    cdef uint8_t c
    if n < 32 or not PyUnicode_IS_ASCII(line):
        return None
    b = <const uint8_t*>PyUnicode_DATA(line)
    if b[0] != 91:  # [
        return None
    j = 1
    if b[j] == 43 or b[j] == 45:
        j += 1
    if j + 19 > n:
        return None
    for t in range(19):
        c = b[j + t]
        if t == 4 or t == 7:
            if c != 45:
                return None
        elif t == 10:
            if c != 84:
                return None
        elif t == 13 or t == 16:
            if c != 58:
                return None
        elif not (48 <= c <= 57):
            return None
    j += 19
    if j < n and b[j] == 46:  # a fraction: 1 to 9 digits
        k0 = j + 1
        j = k0
        while j < n and j - k0 < 9 and 48 <= b[j] <= 57:
            j += 1
        if j == k0:
            return None
    ts_end = j
    if j + 3 > n or memcmp(b + j, b" | ", 3) != 0:
        return None
    k0 = j + 3
    j = k0
    while j < n and j - k0 < 249 and ((97 <= b[j] <= 122) or (65 <= b[j] <= 90) or (48 <= b[j] <= 57)
                                       or b[j] == 46 or b[j] == 95 or b[j] == 45):
        j += 1
    k1 = j
    if k1 == k0 or j + 3 > n or memcmp(b + j, b" | ", 3) != 0:
        return None
    s0 = j + 3
    s1 = _digits_end(b, s0, n)
    if s1 < 0:
        return None
    j = s1
    if j + 3 <= n and memcmp(b + j, b" | ", 3) == 0:
        h0 = j + 3
        h1 = _digits_end(b, h0, n)
        if h1 < 0:
            return None
        j = h1
    # "] " and a payload starting with no whitespace (what Rust's trim leaves of it, as it is)
    if j + 2 >= n or b[j] != 93 or b[j + 1] != 32 or _ascii_ws(b[j + 2]):
        return None
    if (_ts_text is not None and ts_end - 1 == PyUnicode_GET_LENGTH(_ts_text)
            and memcmp(b + 1, PyUnicode_DATA(_ts_text), ts_end - 1) == 0):
        ts = _ts_value  # the same time as the line before
    else:
        text = line[1:ts_end]
        ts = _stdio_module().parse_timestamp(text)
        if ts is None:
            return None
        _ts_text = text
        _ts_value = ts
    seq = _u64_at(b, s0, s1)
    if seq is None:
        return None
    if h0 < 0:
        shard = None
    else:
        shard = _u64_at(b, h0, h1)
        if shard is None:
            return None
    if _last_key is not None and PyUnicode_GET_LENGTH(_last_key) == k1 - k0 and memcmp(
            PyUnicode_DATA(_last_key), b + k0, k1 - k0) == 0:
        key = _last_key
    else:
        key = line[k0:k1]
        _last_key = key
    return ts, key, seq, shard, PyBytes_FromStringAndSize(<const char*>b + j + 2, n - j - 2)


from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE, PyTuple_SET_ITEM
from cpython.type cimport PyType_IsSubtype


cdef extern from "Python.h":
    object PyType_GenericAlloc(type t, Py_ssize_t nitems)
    bint PyType_HasFeature(type t, unsigned long feature)
    unsigned long Py_TPFLAGS_HEAPTYPE
    bint PyObject_IS_GC(object o)
    bint PyObject_GC_IsTracked(object o)
    void PyObject_GC_UnTrack(void* o)
    ctypedef struct PyTypeObject:
        Py_ssize_t tp_dictoffset


cdef object _named(type cls, tuple values):
    """``tuple.__new__(cls, values)`` for a named tuple class ``cls`` (a tuple subclass made in Python), without
    the Python call: the record is allocated as ``cls`` and ``values`` are put in it, as ``tuple.__new__`` does.

    A record that cannot be part of a reference cycle (no ``__dict__``, and only values that hold no
    references: strings, numbers, None, untracked tuples) is untracked, as CPython untracks such plain tuples: a run keeps one
    event per settlement, and the collector's full passes would otherwise walk every one of them."""
    cdef Py_ssize_t i, n = PyTuple_GET_SIZE(values)
    cdef bint may_cycle = (<PyTypeObject*>cls).tp_dictoffset != 0
    record = PyType_GenericAlloc(cls, n)
    for i in range(n):
        item = <object>PyTuple_GET_ITEM(values, i)
        Py_INCREF(item)  # (SET_ITEM takes the reference it is given)
        PyTuple_SET_ITEM(record, i, item)
        # (as CPython's rule for tuples: a container may be changed later, only a tuple untracked is final)
        if not may_cycle and PyObject_IS_GC(item) and (type(item) is not tuple or PyObject_GC_IsTracked(item)):
            may_cycle = True
    if not may_cycle:
        PyObject_GC_UnTrack(<void*>record)
    return record


def new_record(cls, values):
    """The compiled :func:`nbkit.runtime.events.new_record`: ``tuple.__new__(cls, values)``.

    A tuple of values for a tuple subclass made in Python (a named tuple) goes straight into a record allocated
    as ``cls``; anything else is ``tuple.__new__``'s, which answers or raises as the pure twin does."""
    if (type(values) is tuple and type(cls) is type and PyType_IsSubtype(<type>cls, tuple)
            and PyType_HasFeature(<type>cls, Py_TPFLAGS_HEAPTYPE)):
        return _named(<type>cls, <tuple>values)
    return tuple.__new__(cls, values)


cdef extern from "Python.h":
    object PyUnicode_DecodeUTF8(const char* s, Py_ssize_t size, const char* errors)


def text_lines(bytes data not None):
    """The compiled :func:`nbkit.transport.pipe_io.text_lines`: ``data.decode("utf-8").split("\\n")``, or None
    when ``data`` is not UTF-8. Each ``\\n`` is found with ``memchr`` and each line decoded on its own (a ``\\n``
    byte is never inside a multi-byte sequence: the same lines)."""
    cdef const char* p = PyBytes_AS_STRING(data)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(data), start = 0, end
    cdef const char* q
    cdef list lines = []
    while True:
        q = <const char*>memchr(p + start, 10, n - start)
        end = n if q == NULL else q - p
        try:
            line = PyUnicode_DecodeUTF8(p + start, end - start, NULL)
        except UnicodeDecodeError:
            return None
        lines.append(line)
        if q == NULL:
            return lines
        start = end + 1


cdef type _LineDelivery = None  # stdio_line.LineDelivery, looked up on first use


def line_delivery(str line, lineno, dict counters not None):
    """The compiled :func:`nbkit.wire.stdio_line.line_delivery`: a pipe delivery's fields from one line.

    A :class:`~nbkit.wire.stdio_line.LineDelivery` (timestamp_ms or None, stream_key, seq, shard_id, payload,
    headers, broadcast). A canonical ASCII line
    is read straight to the payload's bytes (:func:`_ascii_fields`); any other through :func:`parse_fields`.
    A payload that does not start with ``rs`` has no envelope: its UTF-8 bytes and no headers; any other
    goes to :func:`nbkit.wire.envelope.decode`."""
    global _pure_envelope_decode, _LineDelivery
    cdef bytes data
    fields = _ascii_fields(line)
    if fields is not None:
        ts, key, seq, shard, data = fields
    else:
        ts, key, seq, shard, text = parse_fields(line, lineno)
        data = (<str>text).encode("utf-8")
    stream_key = _stdio_module().BROADCAST_KEY if key is None else key
    if shard is None:
        shard = 0
    slot = (stream_key, shard)
    if seq is None:
        seq = counters.get(slot, 0)
        counters[slot] = (seq + 1) & 0xFFFFFFFFFFFFFFFF  # u64 arithmetic, wrapping like release Rust
    else:
        counters[slot] = seq
    cdef dict headers
    if PyBytes_GET_SIZE(data) >= 2 and PyBytes_AS_STRING(data)[0] == 114 and PyBytes_AS_STRING(data)[1] == 115:
        if _pure_envelope_decode is None:
            from nbkit.wire.envelope import decode
            _pure_envelope_decode = decode
        headers, payload = _pure_envelope_decode(data)
    else:
        headers, payload = {}, data
    headers[_SEQUENCE_HEADER] = _decimal(seq)
    if _LineDelivery is None:
        _LineDelivery = _stdio_module().LineDelivery
    return _named(_LineDelivery, (ts, stream_key, seq, shard, payload, headers, key is None))


cdef inline Py_ssize_t _put(uint8_t* w, str text) noexcept:
    """Copy an ASCII str's characters to ``w``; returns how many."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
    memcpy(w, PyUnicode_DATA(text), n)
    return n


def copy_line(timestamp_ms, str stream_key, seq, headers, payload):
    """The compiled :func:`nbkit.wire.stdio_line.copy_line`: the line of a payload's ``rs1:`` envelope (or of
    the payload itself).

    Plain headers (as :func:`envelope_encode` compiles them) with a bytes payload, under an ASCII key: the
    line is written in one piece, the envelope's base64 straight into it; anything else is
    ``format_line(..., envelope_encode(...).decode())``."""
    cdef Py_ssize_t block_len, plen, b64_len, total
    cdef uint8_t* w
    if type(payload) is bytes and type(headers) is dict and headers and PyUnicode_IS_ASCII(stream_key):
        block_len = _plain_block_len(<dict>headers)
        if block_len >= 0:
            second = _second(timestamp_ms)
            seq_text = _decimal(seq)
            if PyUnicode_IS_ASCII(second) and PyUnicode_IS_ASCII(seq_text):
                plen = PyBytes_GET_SIZE(payload)
                b64_len = (4 + block_len + plen + 2) // 3 * 4
                total = (1 + PyUnicode_GET_LENGTH(second) + 3 + PyUnicode_GET_LENGTH(stream_key) + 3
                         + PyUnicode_GET_LENGTH(seq_text) + 2 + 4 + b64_len + 1)
                out = PyUnicode_New(total, 127)
                w = <uint8_t*>PyUnicode_DATA(out)
                w[0] = 91  # [
                w += 1
                w += _put(w, second)
                memcpy(w, b" | ", 3)
                w += 3
                w += _put(w, stream_key)
                memcpy(w, b" | ", 3)
                w += 3
                w += _put(w, seq_text)
                memcpy(w, b"] ", 2)
                w += 2
                _write_rs1(<dict>headers, block_len, <const uint8_t*>PyBytes_AS_STRING(payload), plen, w)
                w[4 + b64_len] = 10  # \n
                return out
    return _format_line(timestamp_ms, stream_key, seq, _envelope_encode(headers, payload, True).decode("utf-8"))


def decode_delivery(data, seq):
    """The compiled :func:`nbkit.wire.envelope.decode_delivery`: a payload that does not start with ``rs`` has no
    envelope (no headers, the bytes as they are); any other goes to :func:`nbkit.wire.envelope.decode`."""
    global _pure_envelope_decode
    cdef dict headers
    if type(data) is bytes and not (PyBytes_GET_SIZE(data) >= 2 and PyBytes_AS_STRING(data)[0] == 114
                                    and PyBytes_AS_STRING(data)[1] == 115):
        headers, payload = {}, data
    else:
        if _pure_envelope_decode is None:
            from nbkit.wire.envelope import decode
            _pure_envelope_decode = decode
        headers, payload = _pure_envelope_decode(data)
    headers[_SEQUENCE_HEADER] = _decimal(seq)
    return headers, payload


# ------------------------------------------------------------------------------------- file deliveries

from cpython.tuple cimport PyTuple_Check, PyTuple_GET_ITEM, PyTuple_GET_SIZE


_pure_deliveries = None


cdef object _pure_file_deliveries():
    """:func:`nbkit.wire.deliveries.file_deliveries_pure`, imported on first use."""
    global _pure_deliveries
    if _pure_deliveries is None:
        from nbkit.wire.deliveries import file_deliveries_pure
        _pure_deliveries = file_deliveries_pure
    return _pure_deliveries


cdef class _FileDeliveries:
    """The iterator :func:`file_deliveries` returns: one ``make(...)`` per message, taken as it is asked for."""

    cdef object _messages
    cdef object _subscription
    cdef object _make

    def __cinit__(self, messages, subscription, make):
        self._messages = iter(messages)
        self._subscription = subscription
        self._make = make

    def __iter__(self):
        return self

    def __next__(self):
        cdef object msg = next(self._messages)
        if PyTuple_Check(msg) and PyTuple_GET_SIZE(msg) == 7:  # a Message: its fields, without unpacking
            stream_key = <object>PyTuple_GET_ITEM(msg, 0)
            shard_id = <object>PyTuple_GET_ITEM(msg, 1)
            seq = <object>PyTuple_GET_ITEM(msg, 2)
            timestamp_ms = <object>PyTuple_GET_ITEM(msg, 3)
            data = <object>PyTuple_GET_ITEM(msg, 4)
            offset = <object>PyTuple_GET_ITEM(msg, 5)
        else:  # not a 7-tuple: the pure twin answers (or raises) for it
            return next(_pure_file_deliveries()((msg,), self._subscription, self._make))
        if type(data) is bytes and not (PyBytes_GET_SIZE(data) >= 2 and PyBytes_AS_STRING(data)[0] == 114
                                        and PyBytes_AS_STRING(data)[1] == 115):  # no envelope: decode_delivery's
            headers, payload = {_SEQUENCE_HEADER: _decimal(seq)}, data
        else:
            headers, payload = decode_delivery(data, seq)
        values = (payload, headers, stream_key, shard_id, seq, timestamp_ms, u"file", self._subscription, offset)
        if type(self._make) is type:  # a Delivery: made as new_slotted makes it
            delivery = _new_slotted(<type>self._make, values)
            if delivery is not None:
                return delivery
        return self._make(*values)


def file_deliveries(messages, subscription, make):
    """The compiled :func:`nbkit.wire.deliveries.file_deliveries`: the same deliveries, each made in one C call
    (a payload without an envelope gets its headers here; any other goes to :func:`decode_delivery`), ``make``
    a slots dataclass (a Delivery) made as :func:`new_slotted` makes it."""
    return _FileDeliveries(messages, subscription, make)


# ------------------------------------------------------------------------------------- slotted objects

from cpython.object cimport PyObject
from types import MemberDescriptorType as _MemberDescriptor


cdef extern from "Python.h":
    ctypedef struct PyMemberDef:
        int type
        Py_ssize_t offset
        int flags
    ctypedef struct PyMemberDescrObject:
        PyMemberDef* d_member

DEF _MAX_SLOTS = 32
DEF _T_OBJECT_EX = 16  # structmember.h: a slot that raises AttributeError while unset
DEF _READONLY = 1

cdef object _slotted_cls = None  # the class whose slots are described below (one at a time: Delivery)
cdef Py_ssize_t _slot_offsets[_MAX_SLOTS]
cdef Py_ssize_t _slot_count = -1  # -1: _slotted_cls is not one whose __init__ only sets its slots
cdef Py_ssize_t _slot_least = 0  # the values it takes at least: the fields after them have defaults
cdef tuple _slot_defaults = ()  # each field's default (where it has one)


cdef Py_ssize_t _slots_of(type cls) except -2:
    """Describe ``cls`` in ``_slotted_cls`` and the globals after it: how many slots it has (-1 when ``cls(*values)``
    may do more than set its slots in order), their offsets, the values it takes at least and its fields'
    defaults. Only a dataclass of ``__slots__`` (``slots=True``) straight on ``object``, every field an
    ``__init__`` parameter in slot order with a plain default or none, with no ``__post_init__``, qualifies.
    The globals are set together at the end, with no Python code run between (another thread, or a finalizer
    run by an allocation, may describe another class meanwhile)."""
    global _slotted_cls, _slot_count, _slot_least, _slot_defaults
    cdef Py_ssize_t n = -1, i, least = 0
    cdef Py_ssize_t offsets[_MAX_SLOTS]
    cdef PyMemberDef* member
    own = cls.__dict__
    fields = own.get("__dataclass_fields__")
    slots = own.get("__slots__")
    defaults = []
    if (PyType_HasFeature(cls, Py_TPFLAGS_HEAPTYPE) and cls.__mro__ == (cls, object) and type(fields) is dict
            and type(slots) is tuple and tuple(fields) == slots and len(slots) <= _MAX_SLOTS
            and not hasattr(cls, "__post_init__")):
        from dataclasses import MISSING
        n = len(slots)
        for i, f in enumerate(fields.values()):
            descr = own.get(slots[i])
            if (not f.init or f.default_factory is not MISSING or f.kw_only is not False
                    or type(descr) is not _MemberDescriptor):
                n = -1
                break
            member = (<PyMemberDescrObject*><void*>descr).d_member
            if member.type != _T_OBJECT_EX or member.flags & _READONLY:
                n = -1
                break
            if f.default is MISSING:
                least = i + 1
            defaults.append(f.default)
            offsets[i] = member.offset
    described = tuple(defaults)
    # (from here on, C only: the description changes in one piece)
    if n > 0:
        memcpy(_slot_offsets, offsets, n * sizeof(Py_ssize_t))
    _slot_count, _slot_least, _slot_defaults = n, least, described
    _slotted_cls = cls
    return n


cdef object _new_slotted(type cls, tuple values):
    """``cls(*values)`` with the values (then the defaults of the fields after them) put straight in the slots,
    when ``cls`` qualifies (:func:`_slots_of`) and ``values`` are as many as it takes; else None."""
    cdef Py_ssize_t i, n, least, given = PyTuple_GET_SIZE(values)
    cdef Py_ssize_t offsets[_MAX_SLOTS]
    cdef PyObject* item
    if cls is not _slotted_cls:
        _slots_of(cls)
    # the description of cls, copied (an allocation may run Python code that describes another class)
    n, least, defaults = _slot_count, _slot_least, _slot_defaults
    if n < 0 or given < least or given > n:
        return None
    memcpy(offsets, _slot_offsets, n * sizeof(Py_ssize_t))
    obj = PyType_GenericAlloc(cls, 0)
    for i in range(n):
        item = PyTuple_GET_ITEM(values, i) if i < given else PyTuple_GET_ITEM(defaults, i)
        Py_INCREF(<object>item)  # (the slot takes the reference; a new object's slots are all empty)
        (<PyObject**>((<char*><void*>obj) + offsets[i]))[0] = item
    return obj


def new_slotted(cls, values):
    """The compiled :func:`nbkit.runtime.delivery.new_slotted`: ``cls(*values)``, an object of a slots dataclass
    (a :class:`~nbkit.Delivery`) made without the Python call of its ``__init__``: allocated as ``cls``, the
    values put in its slots in order, as that ``__init__`` sets them. Any other class or values: ``cls(*values)``,
    which answers or raises as the pure twin does."""
    if type(cls) is type and type(values) is tuple:
        obj = _new_slotted(<type>cls, <tuple>values)
        if obj is not None:
            return obj
    return cls(*values)
