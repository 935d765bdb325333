/*
 * kvstore.h - a log-structured key/value store whose in-memory index is a cuckoo table.
 *
 * A store is a directory holding one append-only log, `cuckoo-kv.log` (README.md, next to
 * this file, specifies its bytes). Every put and every delete appends one checksummed record;
 * nothing in the log is ever rewritten except by kv_compact, which writes a new log and renames it
 * over the old one. Memory holds only the index: a cuckoo hash table of 8-byte slots, each
 * a 16-bit tag of the key's hash and the 48-bit offset of the key's newest record (see
 * kvindex.h). A lookup compares tags in memory and reads the log only where a tag matches,
 * to compare the full key, so every answer is exact.
 *
 *     kv_store *s;
 *     char why[KV_ERROR_MAX];
 *     kv_options o = {.create = true};
 *     if (kv_open("data", &o, &s, why) != KV_OK) { fprintf(stderr, "%s\n", why); ... }
 *     kv_put(s, "alice", 5, "42", 2);
 *     void *v; size_t n;
 *     if (kv_get(s, "alice", 5, &v, &n) == KV_OK) { ...; free(v); }
 *     kv_close(s);
 *
 * Crashes: each record is written with one pwrite before the call returns, so a process
 * that is killed loses at most the record it was writing. kv_open scans the log and checks
 * every record. A torn tail (a last record cut short or damaged, or zeros after the
 * records: what a crash mid-append leaves) is left out of the store, but stays in the log
 * file until the store is first written to: then its bytes are copied to a file of their
 * own beside the log (cuckoo-kv.log.torn-OFFSET), synced, and only then cut off the log.
 * Reading never changes the log, so nothing is lost to a look. Damage anywhere else is
 * reported (KV_ECORRUPT) and the store is not opened. Against power loss, data reaches
 * the disk at kv_sync and kv_close, or after every record with kv_options.sync_each.
 *
 * One process at a time: kv_open takes an exclusive lock on the directory (KV_EBUSY).
 * A store is not thread-safe; use one thread, or a lock around every call.
 *
 * Errors: every fallible call returns a kv_status, and kv_error(s) then gives a one-line
 * message naming the file and what went wrong. Nothing here prints or aborts.
 */
#ifndef KVSTORE_H
#define KVSTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kv_store kv_store; /* opaque */

typedef enum kv_status {
    KV_OK = 0,
    KV_NOT_FOUND, /* no such key */
    KV_EINVAL,    /* bad argument: empty or too long key, too long value, NULL */
    KV_ENOMEM,    /* out of memory; the store is as it was */
    KV_EIO,       /* a read, write or sync failed (kv_error says which and why) */
    KV_ECORRUPT,  /* the log is damaged (not a torn last record), or not a store's log */
    KV_EBUSY,     /* another process has the store open */
    KV_ENOSTORE,  /* no store in that directory (and kv_options.create was false) */
    KV_EFULL,     /* the log reached KV_MAX_LOG_BYTES: compact it */
} kv_status;

/* Limits, and why. */
#define KV_MAX_KEY       65536u                  /* keys are names, not payloads */
#define KV_MAX_VALUE     ((size_t)1 << 30)       /* a value is read into memory whole */
#define KV_MAX_LOG_BYTES (UINT64_C(1) << 48)     /* offsets are 48 bits in an index slot */
#define KV_ERROR_MAX     512u                    /* room for a message with a long path */
#define KV_LOG_NAME      "cuckoo-kv.log"         /* the log, inside the store's directory */
#define KV_COMPACT_NAME  "cuckoo-kv.log.compact" /* kv_compact's temporary file */
#define KV_TORN_NAME_MAX 64u /* KV_LOG_NAME ".torn-" OFFSET, and ".N" if that name is taken */

typedef struct kv_options {
    bool create;      /* make the directory and an empty log if there is none */
    bool sync_each;   /* fdatasync after every record (slow; survives power loss) */
    uint64_t seed;    /* hash seed of a new store (kept in its log); 0 = random */
    uint64_t buckets; /* initial index buckets (even); 0 = sized from the log */
} kv_options;

typedef struct kv_stats {
    uint64_t records;      /* records in the log: puts and deletes */
    uint64_t live_keys;    /* keys with a value */
    uint64_t log_bytes;    /* size of the log file */
    uint64_t live_bytes;   /* bytes of the records that hold the live values */
    uint64_t dead_bytes;   /* the rest, but the log's header: what kv_compact reclaims */
    uint64_t index_slots;  /* slots in the index (4 per bucket) */
    uint64_t index_bytes;  /* memory the index holds */
    uint64_t rehashes;     /* times the index doubled since the store was opened */
    uint64_t tag_misses;   /* log reads for a matching tag whose key differed */
    double index_load;     /* live_keys / index_slots */
    double bytes_per_key;  /* index_bytes / live_keys (0 when empty) */
    uint64_t truncated;    /* bytes of the torn tail kv_open found after the records */
    uint64_t torn_offset;  /* where that tail starts in the log */
    uint64_t torn_records; /* records that begin in it (the one a crash cut short; zeros
                              hold none) */
    bool torn_kept;        /* its bytes were moved to torn_name and cut off the log (by the
                              first write, or kv_recover); until then they stay in the log */
    char torn_name[KV_TORN_NAME_MAX]; /* in the store's directory; "" until torn_kept */
} kv_stats;

/* Open (or with o->create, create) the store in directory `dir`. The log is scanned and
 * checked whole, and the index rebuilt from it.
 * o: NULL for the defaults (no create). err: NULL, or KV_ERROR_MAX bytes that receive a
 * message when the call fails.
 * Returns KV_OK and sets *out; KV_ENOSTORE, KV_ECORRUPT, KV_EBUSY, KV_EIO, KV_ENOMEM,
 * KV_EINVAL. */
kv_status kv_open(const char *dir, const kv_options *o, kv_store **out, char *err);

/* Move a torn tail (see kv_stats.truncated) out of the log now, as the first write would:
 * its bytes go to kv_stats.torn_name, synced, then the log is cut. Returns KV_OK (also
 * when there is none); KV_EIO (the log is untouched). */
kv_status kv_recover(kv_store *s);

/* Sync the log and close the store. Returns KV_OK, or KV_EIO if the final sync failed
 * (the store is closed all the same). NULL is fine. */
kv_status kv_close(kv_store *s);

/* Flush the log to disk (fdatasync). */
kv_status kv_sync(kv_store *s);

/* Set key to value (vlen may be 0). Returns KV_OK; KV_EINVAL; KV_EFULL; KV_ENOMEM (the
 * index could not grow; nothing was written); KV_EIO (the write failed; what it wrote is
 * cut off the log again). After a failure the store is as it was. */
kv_status kv_put(kv_store *s, const void *key, size_t klen, const void *value, size_t vlen);

/* The value of key, in a new malloc'd buffer (*value; the caller frees it; a NUL follows
 * the vlen bytes so that text can be used as a string). Returns KV_OK; KV_NOT_FOUND;
 * KV_EINVAL; KV_EIO; KV_ECORRUPT (the record fails its checksum); KV_ENOMEM. */
kv_status kv_get(kv_store *s, const void *key, size_t klen, void **value, size_t *vlen);

/* Does the store hold key? As kv_get, without reading the value. */
kv_status kv_has(kv_store *s, const void *key, size_t klen);

/* Delete key: appends a delete record. Returns KV_OK; KV_NOT_FOUND (nothing appended);
 * KV_EINVAL; KV_EIO; KV_EFULL. */
kv_status kv_del(kv_store *s, const void *key, size_t klen);

/* Call fn for every live key, in the order of their newest records in the log, with the
 * value. The pointers are valid during the call only. fn returns 0 to go on, anything else
 * to stop (kv_foreach then returns KV_OK). The store must not be changed from fn.
 * Returns KV_OK; KV_EIO; KV_ECORRUPT. */
typedef int (*kv_visit_fn)(void *ctx, const void *key, size_t klen, const void *value, size_t vlen);
kv_status kv_foreach(kv_store *s, kv_visit_fn fn, void *ctx);

/* Rewrite the log without dead records, atomically: a new log is written next to the old
 * one (KV_COMPACT_NAME), synced and renamed over it, and the directory synced. A crash at
 * any moment leaves the old log or the new one; kv_open removes a leftover temporary
 * file. Live keys keep their values and their order. Returns KV_OK; KV_EIO (the old log
 * is in place and the store still open); KV_ENOMEM; KV_ECORRUPT. */
kv_status kv_compact(kv_store *s);

void kv_get_stats(const kv_store *s, kv_stats *out);

/* The message of the last failed call on s ("" if none). */
const char *kv_error(const kv_store *s);

/* A short English description of a status. */
const char *kv_strerror(kv_status st);

/* ------------------------------------------------------------------------------------ */
/* Import and export (kvfile.c)                                                         */
/* ------------------------------------------------------------------------------------ */
/* import splits a file into records, in order: each line (its '\n' included) is one
 * record, and a line longer than KV_IMPORT_MAX_RECORD bytes is cut into records of that
 * size. A record's key is its content hash: the 32 lowercase hex digits of its XXH3-128,
 * so equal records are stored once. The order is kept in a manifest, a value under the
 * key KV_MANIFEST_PREFIX + name, holding the 16-byte hashes in order. export writes the
 * records of a manifest back, in order, to a new file (atomically). */
#define KV_IMPORT_MAX_RECORD 65536u
#define KV_MANIFEST_PREFIX   "cuckoo-kv:import:"
#define KV_DEFAULT_NAME      "default"

typedef struct kv_import_result {
    uint64_t records; /* records in the file (the manifest's length) */
    uint64_t stored;  /* of those, records put (the others were already in the store) */
    uint64_t bytes;   /* bytes read */
    const char *why;  /* on failure: what went wrong on the file's side ("cannot read",
                         ...; errno may say more), or NULL when kv_error(s) says it */
} kv_import_result;

/* Import the file at `path` (stdin for "-") under `name` (NULL = KV_DEFAULT_NAME); an
 * earlier manifest of that name is replaced. Returns KV_OK; KV_EIO (the file could not be
 * read; the records already put stay); KV_ECORRUPT (a key held different content: a hash
 * collision, never seen); KV_EINVAL (a bad name, or more records than one manifest can
 * list); errors of kv_get and kv_put. */
kv_status kv_import(kv_store *s, const char *path, const char *name, kv_import_result *r);

typedef struct kv_export_result {
    uint64_t records; /* records in the manifest */
    uint64_t written; /* records written */
    uint64_t missing; /* records deleted since the import: skipped */
    uint64_t bytes;   /* bytes written */
    const char *why;  /* as kv_import_result.why */
} kv_export_result;

/* Write the records of manifest `name` (NULL = KV_DEFAULT_NAME) to `path` ("-" = stdout,
 * not atomic), in order, skipping deleted ones (counted in r->missing). The file is
 * replaced atomically (temporary file, fsync, rename). Returns KV_OK; KV_NOT_FOUND (no
 * such manifest); KV_ECORRUPT (a malformed manifest); KV_EIO; KV_ENOMEM. */
kv_status kv_export(kv_store *s, const char *path, const char *name, kv_export_result *r);

#endif /* KVSTORE_H */
