/*
 * cpu.c - which hot paths a filter made from settings runs, chosen once, when it is made:
 * its kind's (RedisBloom's layout, or the plain kinds' per-shape code of fast.c), and of
 * those the variant compiled for x86-64-v3 where the CPU and the operating system support
 * everything that level allows the compiler to use, else the baseline; each for the
 * filter's bucket mapping. The environment
 * variable CUCKOOFILTER_CPU=baseline forces the baseline (the tests use it to hold both
 * variants to the same bytes and answers).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#if CF__HAVE_V3
/* Through the compiler's runtime (libgcc or compiler-rt), which reads CPUID and the OS's
 * saved-register mask (XGETBV) once per process: CPUID itself is slow in a virtual machine
 * (each one exits to the hypervisor), and cf_new must stay cheap, since a Redis server
 * makes a filter per key. gcc 12 knows the level by name; clang 14 only feature by
 * feature, so it checks the ones that level adds which compilers emit. */
static bool cf__cpu_is_v3(void)
{
    __builtin_cpu_init();
#if defined(__clang__)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi") &&
           __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("popcnt") && __builtin_cpu_supports("avx");
#else
    return __builtin_cpu_supports("x86-64-v3");
#endif
}
#endif

/* The x86-64-v3 variant: built, supported, and not refused by CUCKOOFILTER_CPU=baseline. */
static bool cf__use_v3(void)
{
#if CF__HAVE_V3
    const char *v = getenv("CUCKOOFILTER_CPU");
    return !(v && strcmp(v, "baseline") == 0) && cf__cpu_is_v3();
#else
    return false;
#endif
}

/* The table of ops of the variant this CPU runs, for tables of the mapping with segments
 * or without, and for the hash of 8-byte keys: XXH3, or hash id 3's (ms). */
static const cf__ops_table *cf__ops_here(bool seg, bool ms)
{
#if CF__HAVE_V3
    if (cf__use_v3())
        return ms ? (seg ? &cf__ops_v3_seg_ms : &cf__ops_v3_ms)
                  : (seg ? &cf__ops_v3_seg : &cf__ops_v3);
#endif
    return ms ? (seg ? &cf__ops_base_seg_ms : &cf__ops_base_ms)
              : (seg ? &cf__ops_base_seg : &cf__ops_base);
}

const cf__ops *cf__first_ops(const cf__params *p)
{
    if (p->redisbloom)
        return cf__rb_ops_for(p->concurrent);
    const cf__ops_table *t = cf__ops_here(p->shape.seg != 0, p->fast_hash);
    return &(*t)[p->concurrent ? CF__ROW_CONCURRENT : CF__ROW_GENERAL][0];
}

const char *cf_cpu_variant(void)
{
    return cf__use_v3() ? "x86-64-v3" : "baseline";
}
