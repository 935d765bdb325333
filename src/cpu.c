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
#include <cpuid.h>

/* CPUID leaf 1, ECX: the x86-64-v2 and v3 features it reports. */
#define CF__ECX1_SSE3    (1u << 0)
#define CF__ECX1_SSSE3   (1u << 9)
#define CF__ECX1_FMA     (1u << 12)
#define CF__ECX1_CX16    (1u << 13)
#define CF__ECX1_SSE41   (1u << 19)
#define CF__ECX1_SSE42   (1u << 20)
#define CF__ECX1_MOVBE   (1u << 22)
#define CF__ECX1_POPCNT  (1u << 23)
#define CF__ECX1_OSXSAVE (1u << 27)
#define CF__ECX1_AVX     (1u << 28)
#define CF__ECX1_F16C    (1u << 29)
/* CPUID leaf 7, EBX. */
#define CF__EBX7_BMI1    (1u << 3)
#define CF__EBX7_AVX2    (1u << 5)
#define CF__EBX7_BMI2    (1u << 8)
/* CPUID leaf 0x80000001, ECX. */
#define CF__ECX81_LAHF   (1u << 0)
#define CF__ECX81_LZCNT  (1u << 5)
/* XCR0: the OS saves the SSE and AVX registers on a context switch. */
#define CF__XCR0_SSE_AVX 6u

static bool cf__cpu_is_v3(void)
{
    unsigned a, b, c, d;
    const unsigned ecx1 = CF__ECX1_SSE3 | CF__ECX1_SSSE3 | CF__ECX1_FMA | CF__ECX1_CX16 |
                          CF__ECX1_SSE41 | CF__ECX1_SSE42 | CF__ECX1_MOVBE | CF__ECX1_POPCNT |
                          CF__ECX1_OSXSAVE | CF__ECX1_AVX | CF__ECX1_F16C;
    const unsigned ebx7 = CF__EBX7_BMI1 | CF__EBX7_AVX2 | CF__EBX7_BMI2;
    const unsigned ecx81 = CF__ECX81_LAHF | CF__ECX81_LZCNT;
    if (!__get_cpuid(1, &a, &b, &c, &d) || (c & ecx1) != ecx1)
        return false;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || (b & ebx7) != ebx7)
        return false;
    if (!__get_cpuid(0x80000001u, &a, &b, &c, &d) || (c & ecx81) != ecx81)
        return false;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0u));
    (void)hi;
    return (lo & CF__XCR0_SSE_AVX) == CF__XCR0_SSE_AVX;
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

const cf__variant *cf__variant_here(void)
{
#if CF__HAVE_V3
    if (cf__use_v3())
        return &cf__ops_v3;
#endif
    return &cf__ops_base;
}

const char *cf_cpu_variant(void)
{
    return cf__use_v3() ? "x86-64-v3" : "baseline";
}
