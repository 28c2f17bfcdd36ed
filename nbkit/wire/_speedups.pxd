# The C-level entry points of the compiled core that other compiled modules cimport (Cython).
# nbkit/transport/_writer.pyx (the writer's compiled short route) encodes its frames with encode_into,
# so the frame layout and its CRC live in one place, nbkit/wire/_speedups.pyx (its ENCODE section).
from libc.stdint cimport uint8_t, uint16_t, uint64_t

cdef uint16_t encode_into(uint8_t* o, const uint8_t* key, Py_ssize_t k, uint64_t shard, uint64_t seq, uint64_t ts,
                          const uint8_t* src, Py_ssize_t size) noexcept nogil
