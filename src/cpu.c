/*
 * cpu.c - which compiled variant of the hot paths (fast.c) a filter runs: the x86-64-v3
 * one where the CPU and the operating system support everything that level allows the
 * compiler to use, else the baseline. Chosen once per filter, when it is made; the
 * environment variable CUCKOOFILTER_CPU=baseline forces the baseline (the tests use it to
 * hold both variants to the same bytes and answers).
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

unsigned cf__variant_here(void)
{
    return cf__use_v3() ? CF__B_V3 : 0u;
}

const cf__variant *cf__variant_of(const cf_filter *f)
{
#if CF__HAVE_V3
    if (f->bits & CF__B_V3)
        return &cf__ops_v3;
#else
    (void)f;
#endif
    return &cf__ops_base;
}

const char *cf_cpu_variant(void)
{
    return cf__use_v3() ? "x86-64-v3" : "baseline";
}
