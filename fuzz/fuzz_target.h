/*
 * fuzz_target.h - the libFuzzer entry point, declared for the targets (which define it)
 * and for replay.c (which calls it when the build has no libFuzzer).
 */
#ifndef CF_FUZZ_TARGET_H
#define CF_FUZZ_TARGET_H

#include <stddef.h>
#include <stdint.h>

/* Run one input; returns 0. A broken contract aborts (that is how a fuzzer learns of it). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif /* CF_FUZZ_TARGET_H */
