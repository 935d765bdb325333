"""MurmurHash64A as docs/FORMAT.md states it ("Hash id 2"), written from that text alone:
the reference the CLI and Redis tests check RedisBloom's layout against (the library's
own implementation is held to SMHasher's verification value by test_redisbloom.c)."""

_M = 0xC6A4A7935BD1E995
_MASK = (1 << 64) - 1


def murmur64a(data, seed=0):
    h = (seed ^ (len(data) * _M)) & _MASK
    whole = len(data) // 8 * 8
    for i in range(0, whole, 8):
        k = int.from_bytes(data[i:i + 8], "little") * _M & _MASK
        k = (k ^ (k >> 47)) * _M & _MASK
        h = (h ^ k) * _M & _MASK
    if len(data) > whole:
        h = (h ^ int.from_bytes(data[whole:], "little")) * _M & _MASK
    h = (h ^ (h >> 47)) * _M & _MASK
    return h ^ (h >> 47)
