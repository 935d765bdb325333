/*
 * mapping.c - the segmented mapping's offset tables (mapping.h, cf__seg_off_fb), the one
 * copy every compilation of the hot paths reads.
 */
#include "mapping.h"

#include "seg_table.inc"
