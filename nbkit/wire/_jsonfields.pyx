# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The compiled twin of :func:`nbkit.wire.jsonfields.flat_columns` (Cython; built by setup.py when a C
compiler exists).

One pass over the payload bytes with the GIL released: each payload is tokenised as JSON and its values
go straight into one buffer per field (int64, double, bool, or UTF-8 text with int32 offsets). Every
input the pure twin would turn down is turned down here too (None); arguments off the common shape (an
``ends`` that is not ``array("q")``, offsets out of range) are handed to the pure twin, which answers.
Numbers: integers are exact in int64; a decimal with at most 15 significant digits and a power of ten
within 10**22 is one exact IEEE operation (Clinger's fast path), anything else goes to glibc's
correctly rounded ``strtod_l`` in the C locale, so a value equals what Python's ``float()`` makes of it.
"""

from cpython cimport array
from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcmp, memcpy, memset


cdef extern from "<locale.h>" nogil:
    ctypedef void* locale_t
    int LC_ALL_MASK
    locale_t newlocale(int mask, const char* locale, locale_t base)

cdef extern from "<stdlib.h>" nogil:
    double strtod_l(const char* text, char** end, locale_t loc)

cdef extern from "<math.h>" nogil:
    bint isinf(double x)

cdef locale_t _C_LOCALE = newlocale(LC_ALL_MASK, "C", NULL)

cdef enum:
    MAX_FIELDS = 64
    NUMBER_LIMIT = 100
    K_INT = 1
    K_DOUBLE = 2
    K_BOOL = 3
    K_STR = 4

cdef double _POW10[23]
cdef int _i
_POW10[0] = 1.0
for _i in range(1, 23):
    _POW10[_i] = _POW10[_i - 1] * 10.0  # exact: 10**22 is the largest power of ten a double holds exactly

# _PLAIN[c]: byte c goes into a string's text as it is (not a quote, a backslash, a control or non-ASCII byte)
cdef uint8_t _PLAIN[256]
for _i in range(256):
    _PLAIN[_i] = 0x20 <= _i < 0x80 and _i != 34 and _i != 92

# Eight bytes at once (SWAR): a byte of a 64-bit word is below 0x20 where ``(x - 0x20..) & ~x`` sets its high
# bit, equal to c where ``x ^ c..`` has a zero byte, non-ASCII where its own high bit is set; these tests
# are exact for "any byte of the word", so a word that passes is eight plain bytes.
cdef uint64_t _ONES = 0x0101010101010101
cdef uint64_t _HIGH = 0x8080808080808080
cdef uint64_t _SPACES = 0x2020202020202020
cdef uint64_t _QUOTES = 0x2222222222222222
cdef uint64_t _SLASHES = 0x5C5C5C5C5C5C5C5C


cdef inline bint _plain8(const uint8_t* p) noexcept nogil:
    """Whether the eight bytes at ``p`` are all plain string text (``_PLAIN``), in one word's arithmetic."""
    cdef uint64_t x, q, b
    memcpy(&x, p, 8)
    q = x ^ _QUOTES
    b = x ^ _SLASHES
    return ((x | ((x - _SPACES) & ~x) | ((q - _ONES) & ~q) | ((b - _ONES) & ~b)) & _HIGH) == 0

_KINDS = {K_INT: "int64", K_DOUBLE: "double", K_BOOL: "bool", K_STR: "string"}


cdef struct Buf:
    char* p
    Py_ssize_t size
    Py_ssize_t cap


cdef struct Col:
    int kind
    Py_ssize_t name_at  # the name's bytes in the names buffer
    Py_ssize_t name_size
    int64_t* ints
    double* doubles
    uint8_t* bools
    int32_t* offsets
    Buf text


cdef int _reserve(Buf* b, Py_ssize_t more) noexcept nogil:
    """Room for ``more`` bytes at the end of ``b``; -1 when memory runs out."""
    cdef Py_ssize_t cap
    cdef char* p
    if b.size + more <= b.cap:
        return 0
    cap = b.cap * 2 if b.cap else 4096
    while cap < b.size + more:
        cap *= 2
    p = <char*>realloc(b.p, cap)
    if p == NULL:
        return -1
    b.p = p
    b.cap = cap
    return 0


cdef inline int _append(Buf* b, const uint8_t* src, Py_ssize_t n) noexcept nogil:
    if _reserve(b, n) < 0:
        return -1
    memcpy(b.p + b.size, src, n)
    b.size += n
    return 0


cdef inline int _append_byte(Buf* b, uint8_t c) noexcept nogil:
    if _reserve(b, 1) < 0:
        return -1
    b.p[b.size] = <char>c
    b.size += 1
    return 0


cdef inline const uint8_t* _space(const uint8_t* p, const uint8_t* end) noexcept nogil:
    """Past JSON whitespace (space, tab, newline, carriage return)."""
    while p < end and (p[0] == 32 or p[0] == 10 or p[0] == 13 or p[0] == 9):
        p += 1
    return p


cdef inline int _hex4(const uint8_t* p, const uint8_t* end) noexcept nogil:
    """The value of four hex digits at ``p``, or -1."""
    cdef int value = 0, k, d
    cdef uint8_t c
    if end - p < 4:
        return -1
    for k in range(4):
        c = p[k]
        if 48 <= c <= 57:
            d = c - 48
        elif 97 <= c <= 102:
            d = c - 87
        elif 65 <= c <= 70:
            d = c - 55
        else:
            return -1
        value = value * 16 + d
    return value


cdef inline Py_ssize_t _utf8_sequence(const uint8_t* p, const uint8_t* end) noexcept nogil:
    """The length of the valid UTF-8 sequence (lead byte >= 0x80) at ``p`` as Python's strict decoder
    judges it (no overlong forms, no surrogates, at most U+10FFFF), or 0."""
    cdef uint8_t c = p[0]
    cdef Py_ssize_t n
    cdef uint8_t lo = 0x80, hi = 0xBF
    if 0xC2 <= c <= 0xDF:
        n = 2
    elif 0xE0 <= c <= 0xEF:
        n = 3
        if c == 0xE0:
            lo = 0xA0
        elif c == 0xED:
            hi = 0x9F
    elif 0xF0 <= c <= 0xF4:
        n = 4
        if c == 0xF0:
            lo = 0x90
        elif c == 0xF4:
            hi = 0x8F
    else:
        return 0
    if end - p < n or not (lo <= p[1] <= hi):
        return 0
    if n > 2 and not (0x80 <= p[2] <= 0xBF):
        return 0
    if n > 3 and not (0x80 <= p[3] <= 0xBF):
        return 0
    return n


cdef int _code_point(Buf* out, uint32_t cp) noexcept nogil:
    """Append ``cp`` as UTF-8."""
    cdef uint8_t b[4]
    cdef Py_ssize_t n
    if cp < 0x80:
        b[0] = <uint8_t>cp
        n = 1
    elif cp < 0x800:
        b[0] = <uint8_t>(0xC0 | (cp >> 6))
        b[1] = <uint8_t>(0x80 | (cp & 0x3F))
        n = 2
    elif cp < 0x10000:
        b[0] = <uint8_t>(0xE0 | (cp >> 12))
        b[1] = <uint8_t>(0x80 | ((cp >> 6) & 0x3F))
        b[2] = <uint8_t>(0x80 | (cp & 0x3F))
        n = 3
    else:
        b[0] = <uint8_t>(0xF0 | (cp >> 18))
        b[1] = <uint8_t>(0x80 | ((cp >> 12) & 0x3F))
        b[2] = <uint8_t>(0x80 | ((cp >> 6) & 0x3F))
        b[3] = <uint8_t>(0x80 | (cp & 0x3F))
        n = 4
    return _append(out, b, n)


cdef const uint8_t* _string(const uint8_t* p, const uint8_t* end, Buf* out) noexcept nogil:
    """A JSON string's text (``p`` is just past its opening quote) appended to ``out`` as UTF-8; returns
    the position past the closing quote, or NULL (bad escape, raw control character, invalid UTF-8, a
    lone surrogate, no end, out of memory)."""
    cdef const uint8_t* run
    cdef uint8_t c
    cdef int cp, low
    cdef Py_ssize_t n
    while True:
        run = p
        while end - p >= 8 and _plain8(p):
            p += 8
        while p < end and _PLAIN[p[0]]:
            p += 1
        if p > run and _append(out, run, p - run) < 0:
            return NULL
        if p >= end:
            return NULL
        c = p[0]
        if c == 34:  # the closing quote
            return p + 1
        if c < 0x20:
            return NULL
        if c >= 0x80:
            n = _utf8_sequence(p, end)
            if n == 0 or _append(out, p, n) < 0:
                return NULL
            p += n
            continue
        p += 1  # a backslash
        if p >= end:
            return NULL
        c = p[0]
        p += 1
        if c == 34 or c == 92 or c == 47:
            pass
        elif c == 98:
            c = 8
        elif c == 102:
            c = 12
        elif c == 110:
            c = 10
        elif c == 114:
            c = 13
        elif c == 116:
            c = 9
        elif c == 117:  # \uXXXX, a surrogate pair as one code point
            cp = _hex4(p, end)
            if cp < 0 or 0xDC00 <= cp <= 0xDFFF:
                return NULL
            p += 4
            if 0xD800 <= cp <= 0xDBFF:
                if end - p < 6 or p[0] != 92 or p[1] != 117:
                    return NULL
                low = _hex4(p + 2, end)
                if not (0xDC00 <= low <= 0xDFFF):
                    return NULL
                p += 6
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)
            if _code_point(out, <uint32_t>cp) < 0:
                return NULL
            continue
        else:
            return NULL
        if _append_byte(out, c) < 0:
            return NULL


cdef inline bint _digit(const uint8_t* p, const uint8_t* end) noexcept nogil:
    return p < end and 48 <= p[0] <= 57


cdef const uint8_t* _number(const uint8_t* p, const uint8_t* end, int* kind, int64_t* integer,
                            double* real) noexcept nogil:
    """A JSON number at ``p``: ``kind`` K_INT with ``integer`` (exact in int64) or K_DOUBLE with ``real``;
    returns the position past it, or NULL (not JSON's grammar, longer than NUMBER_LIMIT, an integer
    beyond int64, a value beyond double's range or one that rounds to zero)."""
    cdef const uint8_t* start = p
    cdef bint negative = p[0] == 45
    cdef bint fraction = False, exponent = False, nonzero = False
    cdef uint64_t mantissa = 0, whole = 0
    cdef int digits = 0, scale = 0, exp_value = 0
    cdef bint exp_negative = False, exact = True
    cdef uint8_t d
    cdef char text[NUMBER_LIMIT + 1]
    cdef double value
    if negative:
        p += 1
    if not _digit(p, end):
        return NULL
    if p[0] == 48:  # a leading zero stands alone
        p += 1
        if _digit(p, end):
            return NULL
    else:
        while _digit(p, end):
            d = p[0] - 48
            if whole > (<uint64_t>0xFFFFFFFFFFFFFFFF - d) // 10:
                exact = False  # beyond uint64: not an int64 anyway
            else:
                whole = whole * 10 + d
            if digits or d:
                nonzero = nonzero or d != 0
                if digits < 19:
                    mantissa = mantissa * 10 + d
                    digits += 1
                else:
                    scale += 1  # a digit the mantissa cannot hold: exactness is strtod's job
                    exact = False
            p += 1
    if p < end and p[0] == 46:  # .
        fraction = True
        p += 1
        if not _digit(p, end):
            return NULL
        while _digit(p, end):
            d = p[0] - 48
            if digits or d:
                nonzero = nonzero or d != 0
                if digits < 19:
                    mantissa = mantissa * 10 + d
                    digits += 1
                    scale -= 1
                else:
                    exact = False
            else:
                scale -= 1  # a leading zero after the point
            p += 1
    if p < end and (p[0] == 101 or p[0] == 69):  # e E
        exponent = True
        p += 1
        if p < end and (p[0] == 43 or p[0] == 45):
            exp_negative = p[0] == 45
            p += 1
        if not _digit(p, end):
            return NULL
        while _digit(p, end):
            if exp_value < 100000:
                exp_value = exp_value * 10 + (p[0] - 48)
            p += 1
    if p - start > NUMBER_LIMIT:
        return NULL
    if not fraction and not exponent:
        if not exact or whole > (<uint64_t>1 << 63) - (0 if negative else 1):
            return NULL
        kind[0] = K_INT
        integer[0] = -<int64_t>(whole - 1) - 1 if negative and whole else <int64_t>whole
        return p
    scale += -exp_value if exp_negative else exp_value
    if exact and digits <= 15 and -22 <= scale <= 22:  # Clinger: both operands exact, one rounding
        value = <double>mantissa
        if scale >= 0:
            value = value * _POW10[scale]
        else:
            value = value / _POW10[-scale]
    else:
        start += negative  # the magnitude: the sign is put back below
        memcpy(text, start, p - start)
        text[p - start] = 0
        value = strtod_l(text, NULL, _C_LOCALE)
    if isinf(value) or (value == 0.0 and nonzero):
        return NULL
    kind[0] = K_DOUBLE
    real[0] = -value if negative else value
    return p


cdef class _Columns:
    """The field buffers being filled (freed with the object)."""

    cdef Col cols[MAX_FIELDS]
    cdef int count
    cdef Py_ssize_t rows
    cdef Buf names
    cdef Buf scratch

    def __dealloc__(self):
        cdef int j
        for j in range(self.count):
            free(self.cols[j].ints)
            free(self.cols[j].doubles)
            free(self.cols[j].bools)
            free(self.cols[j].offsets)
            free(self.cols[j].text.p)
        free(self.names.p)
        free(self.scratch.p)

    cdef int add_field(self, const char* name, Py_ssize_t size) noexcept nogil:
        """A new field named ``name`` (from the first payload); its index, or -1 (too many, a duplicate)."""
        cdef int j
        cdef Col* col
        if self.count >= MAX_FIELDS:
            return -1
        for j in range(self.count):
            if self.cols[j].name_size == size and memcmp(self.names.p + self.cols[j].name_at, name, size) == 0:
                return -1
        col = &self.cols[self.count]
        memset(col, 0, sizeof(Col))
        col.name_at = self.names.size
        col.name_size = size
        if _append(&self.names, <const uint8_t*>name, size) < 0:
            return -1
        self.count += 1
        return self.count - 1

    cdef int find(self, const char* name, Py_ssize_t size, int guess) noexcept nogil:
        """The index of field ``name``, trying ``guess`` first (fields usually come in the same order)."""
        cdef int j
        if guess < self.count and self.cols[guess].name_size == size and (
                memcmp(self.names.p + self.cols[guess].name_at, name, size) == 0):
            return guess
        for j in range(self.count):
            if self.cols[j].name_size == size and memcmp(self.names.p + self.cols[j].name_at, name, size) == 0:
                return j
        return -1

    cdef const uint8_t* value(self, int j, Py_ssize_t row, const uint8_t* p, const uint8_t* end) noexcept nogil:
        """Read the value at ``p`` into field ``j``'s row ``row``; the position past it, or NULL."""
        cdef Col* col = &self.cols[j]
        cdef int kind = 0
        cdef int64_t integer = 0
        cdef double real = 0.0
        cdef Py_ssize_t r
        cdef uint8_t c = p[0]
        if c == 34:
            if col.kind == 0:
                col.kind = K_STR
                col.offsets = <int32_t*>malloc((self.rows + 1) * sizeof(int32_t))
                if col.offsets == NULL:
                    return NULL
                col.offsets[0] = 0
            elif col.kind != K_STR:
                return NULL
            p = _string(p + 1, end, &col.text)
            if p == NULL or col.text.size > 0x7FFFFFFF:
                return NULL
            col.offsets[row + 1] = <int32_t>col.text.size
            return p
        if c == 116 or c == 102:  # true, false
            if c == 116 and end - p >= 4 and memcmp(p, b"true", 4) == 0:
                p += 4
                c = 1
            elif c == 102 and end - p >= 5 and memcmp(p, b"false", 5) == 0:
                p += 5
                c = 0
            else:
                return NULL
            if col.kind == 0:
                col.kind = K_BOOL
                col.bools = <uint8_t*>malloc(self.rows)
                if col.bools == NULL:
                    return NULL
            elif col.kind != K_BOOL:
                return NULL
            col.bools[row] = c
            return p
        if c != 45 and not (48 <= c <= 57):
            return NULL  # an object, an array, a null, or not JSON
        p = _number(p, end, &kind, &integer, &real)
        if p == NULL:
            return NULL
        if col.kind == 0:
            col.kind = kind
            if kind == K_INT:
                col.ints = <int64_t*>malloc(self.rows * sizeof(int64_t))
            else:
                col.doubles = <double*>malloc(self.rows * sizeof(double))
            if col.ints == NULL and col.doubles == NULL:
                return NULL
        if col.kind == K_INT and kind == K_DOUBLE:  # an int field meets a float: it becomes double
            col.doubles = <double*>malloc(self.rows * sizeof(double))
            if col.doubles == NULL:
                return NULL
            for r in range(row):
                col.doubles[r] = <double>col.ints[r]
            free(col.ints)
            col.ints = NULL
            col.kind = K_DOUBLE
        if col.kind == K_INT:
            col.ints[row] = integer
        elif col.kind == K_DOUBLE:
            col.doubles[row] = <double>integer if kind == K_INT else real
        else:
            return NULL
        return p

    cdef int payload(self, Py_ssize_t row, const uint8_t* p, const uint8_t* end) noexcept nogil:
        """Read one payload (one flat object) into row ``row``; 0, or -1 where it is off the shape."""
        cdef int seen_count = 0, j
        cdef uint64_t seen = 0
        cdef const uint8_t* after
        p = _space(p, end)
        if p >= end or p[0] != 123:  # {
            return -1
        p = _space(p + 1, end)
        if p >= end or p[0] != 34:  # an empty object, or not JSON
            return -1
        while True:
            if p >= end or p[0] != 34:
                return -1
            self.scratch.size = 0
            p = _string(p + 1, end, &self.scratch)
            if p == NULL:
                return -1
            if row == 0:
                j = self.add_field(self.scratch.p, self.scratch.size)
            else:
                j = self.find(self.scratch.p, self.scratch.size, seen_count)
            if j < 0 or (seen >> j) & 1:
                return -1
            seen |= (<uint64_t>1) << j
            seen_count += 1
            p = _space(p, end)
            if p >= end or p[0] != 58:  # :
                return -1
            p = _space(p + 1, end)
            if p >= end:
                return -1
            p = self.value(j, row, p, end)
            if p == NULL:
                return -1
            p = _space(p, end)
            if p >= end:
                return -1
            if p[0] == 44:  # ,
                p = _space(p + 1, end)
                continue
            if p[0] != 125:  # }
                return -1
            p = _space(p + 1, end)
            if p != end or seen_count != self.count:  # more after the object, or a field missing
                return -1
            return 0

    cdef object result(self):
        """The ``(name, kind, buffers)`` list of :func:`flat_columns`."""
        cdef list out = []
        cdef Col* col
        cdef int j
        cdef Py_ssize_t n = self.rows
        for j in range(self.count):
            col = &self.cols[j]
            name = (self.names.p + col.name_at)[:col.name_size].decode("utf-8")
            if col.kind == K_INT:
                data = PyBytes_FromStringAndSize(<char*>col.ints, n * 8)
            elif col.kind == K_DOUBLE:
                data = PyBytes_FromStringAndSize(<char*>col.doubles, n * 8)
            elif col.kind == K_BOOL:
                data = PyBytes_FromStringAndSize(<char*>col.bools, n)
            else:
                data = (PyBytes_FromStringAndSize(<char*>col.offsets, (n + 1) * 4),
                        PyBytes_FromStringAndSize(col.text.p, col.text.size))
            out.append((name, _KINDS[col.kind], data))
        return out


def flat_columns(object data, object ends, Py_ssize_t first, Py_ssize_t last, Py_ssize_t gap):
    """The compiled :func:`nbkit.wire.jsonfields.flat_columns` (same arguments, same result)."""
    cdef array.array marks
    if (not isinstance(ends, array.array) or (<array.array>ends).ob_descr.typecode != b'q'
            or gap < 0 or not (0 <= first <= last <= len(ends))):
        from nbkit.wire.jsonfields import flat_columns_pure  # the twin answers what is off the common shape
        return flat_columns_pure(data, ends, first, last, gap)
    marks = ends
    cdef const uint8_t[::1] view = data
    cdef Py_ssize_t size = view.shape[0], row, start, stop
    cdef long long* e = marks.data.as_longlongs
    if last == first:
        return None
    start = 0 if first == 0 else <Py_ssize_t>e[first - 1] + gap
    for row in range(first, last):  # every payload inside the buffer, or the twin decides
        stop = <Py_ssize_t>e[row]
        if start < 0 or stop < start or stop > size:
            from nbkit.wire.jsonfields import flat_columns_pure
            return flat_columns_pure(data, ends, first, last, gap)
        start = stop + gap
    cdef _Columns columns = _Columns()
    columns.rows = last - first
    cdef const uint8_t* base = &view[0] if size else <const uint8_t*>b""
    cdef int failed = 0
    with nogil:
        start = 0 if first == 0 else <Py_ssize_t>e[first - 1] + gap
        for row in range(first, last):
            stop = <Py_ssize_t>e[row]
            if columns.payload(row - first, base + start, base + stop) < 0:
                failed = 1
                break
            start = stop + gap
    if failed:
        return None
    return columns.result()
