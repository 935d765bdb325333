/*
 * _cuckoofilter.c - the CPython extension behind `import cuckoofilter`: the CuckooFilter
 * type over the public header <cuckoofilter.h> alone, and the package's exceptions.
 *
 * Keys: bytes and other buffers are their bytes, str its UTF-8, an int in [0, 2**64) its
 * 8 bytes little-endian; a buffer of uint64 (a numpy array) is a batch of such ints.
 *
 * Threads: a filter is made with CF_CONCURRENT unless concurrent=False (the constructor,
 * load, from_bytes, from_chunks; copies and pickles keep it), so the batch calls release
 * the GIL while the library works (lookups take no lock there, writers hold only the
 * stripes of the buckets they write), and any thread may call anything at any time. A
 * batch's keys are hashed with the GIL held, as they are read; the library then probes
 * or inserts the hashes. A filter made with concurrent=False keeps the GIL in every call,
 * which serializes them; a memory-mapped one (open()) never changes, so its lookups
 * release the GIL too.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cuckoofilter.h>

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* Keys per library call in the batch paths: the pointer and length arrays stay small
 * (64 KiB) however long the batch, and the library overlaps the memory reads of this
 * many lookups. */
#define PYCF_CHUNK 4096

/* Key objects a batch's hashing loop fetches ahead of the one it hashes: a list's objects
 * lie all over the heap, and reading them one miss at a time cost a third of a batch
 * (bench/python_bench.py; docs/PERFORMANCE.md, "Tuned constants"). */
#define PYCF_KEYS_AHEAD 8
#if defined(__GNUC__)
#define PYCF_PREFETCH(p) __builtin_prefetch(p)
#else
#define PYCF_PREFETCH(p) ((void)(p))
#endif

/* The Redis module's fields in front of the header chunk of CF.SCANDUMP and CF.LOADCHUNK
 * (the library's cf_module_prefix_write and cf_module_prefix_read). */
#define PYCF_REDIS_PREFIX CF_MODULE_PREFIX_BYTES

_Static_assert(sizeof(bool) == 1, "contains_many writes the library's bools into a bytearray");

/* ------------------------------------------------------------------------------------ */
/* Module state: the exception types                                                    */
/* ------------------------------------------------------------------------------------ */

typedef struct pycf_state {
    PyObject *error;     /* cuckoofilter.Error */
    PyObject *full;      /* FilterFull(Error) */
    PyObject *read_only; /* ReadOnlyFilter(Error) */
    PyObject *corrupt;   /* CorruptFilter(Error, ValueError) */
    PyObject *file;      /* FileError(Error, OSError) */
    /* FileError's subclasses, made on first use, one per OSError subclass that an errno
     * selects (FileNotFoundError, IsADirectoryError, ...): a dict from that class. */
    PyObject *file_kinds;
    PyTypeObject *filter_type;
    PyTypeObject *chunk_iter_type; /* what chunks() returns */
} pycf_state;

static struct PyModuleDef pycf_module;

static pycf_state *pycf_state_of_type(PyTypeObject *type)
{
    return (pycf_state *)PyType_GetModuleState(type);
}

/* ------------------------------------------------------------------------------------ */
/* The object                                                                           */
/* ------------------------------------------------------------------------------------ */

typedef struct pycf_filter {
    PyObject ob_base; /* PyObject_HEAD, written out */
    cf_filter *f;
    bool concurrent; /* made with CF_CONCURRENT: calls may run without the GIL */
    bool mapped;     /* open(): read-only, answers from the file's pages */
    PyObject *clock; /* a windowed filter's clock (seconds), or NULL: advance() only */
    uint64_t due;    /* the generation the clock last brought it to */
} pycf_filter;

/* A windowed filter with a clock: brought to the generation due at the clock's time (in
 * ms, the unit of the `cuckoo` tool's files and of the Redis module) before a call reads
 * or changes it. A clock that went back advances nothing: keys then stay longer, never
 * shorter. 0, or -1 with the clock's exception. */
static int pycf_tick(pycf_filter *self)
{
    PyObject *t = PyObject_CallNoArgs(self->clock);
    if (!t)
        return -1;
    double sec = PyFloat_AsDouble(t);
    Py_DECREF(t);
    if (sec == -1.0 && PyErr_Occurred())
        return -1;
    if (!(sec >= 0.0 && sec < 1e15)) { /* NaN too */
        PyErr_SetString(PyExc_ValueError, "the filter's clock gave no time in seconds from 0");
        return -1;
    }
    uint64_t due = cf_generation_at(self->f, (uint64_t)(sec * 1000.0));
    if (due > self->due) {
        /* CF_EINVAL: the filter is past it already (a file written later); CF_EREADONLY:
         * open()'s filter answers as its file is. Neither is the caller's error. */
        (void)cf_advance_to(self->f, due);
        self->due = due;
    }
    return 0;
}

/* Every call that reads or changes the filter begins with this. */
#define PYCF_TICK(self, fail)                                                                      \
    do {                                                                                           \
        if ((self)->clock && pycf_tick(self) < 0)                                                  \
            return fail;                                                                           \
    } while (0)

/* May a call on this filter run without the GIL? Lookups: when the filter is concurrent
 * or never changes. */
static bool pycf_lookups_free(const pycf_filter *self)
{
    return self->concurrent || self->mapped;
}

/* The FileError for errno err: the subclass of FileError and of the OSError subclass
 * that OSError itself picks for err (FileNotFoundError for ENOENT...), so that a refusal
 * is caught by `except cuckoofilter.Error` and by `except FileNotFoundError` alike. Sets
 * the exception; NULL. */
static PyObject *pycf_raise_file(pycf_state *s, int err, PyObject *path)
{
    PyObject *probe =
        PyObject_CallFunction(PyExc_OSError, "isO", err, strerror(err), path ? path : Py_None);
    if (!probe)
        return NULL;
    PyObject *kind = (PyObject *)Py_TYPE(probe), *cls = s->file;
    if (kind != PyExc_OSError) {
        cls = PyDict_GetItemWithError(s->file_kinds, kind); /* borrowed */
        if (!cls && !PyErr_Occurred()) {
            char name[128];
            snprintf(name, sizeof name, "cuckoofilter.%s", ((PyTypeObject *)kind)->tp_name);
            PyObject *bases = PyTuple_Pack(2, s->file, kind);
            cls = bases ? PyErr_NewException(name, bases, NULL) : NULL;
            Py_XDECREF(bases);
            if (cls && PyDict_SetItem(s->file_kinds, kind, cls) < 0)
                Py_CLEAR(cls);
            Py_XDECREF(cls); /* the dict holds it */
        }
    }
    Py_DECREF(probe);
    if (!cls)
        return NULL;
    PyObject *e = PyObject_CallFunction(cls, "isO", err, strerror(err), path ? path : Py_None);
    if (e) {
        PyErr_SetObject(cls, e);
        Py_DECREF(e);
    }
    return NULL;
}

/* Sets the exception for status st (not CF_OK) and returns NULL. path: the file, for
 * OSError and messages (or NULL); err: errno as the call left it; reason: the library's
 * account of a refused file or buffer (cf_validate's), or NULL for cf_strerror's. */
static PyObject *pycf_raise_reason(PyTypeObject *type, cf_status st, PyObject *path, int err,
                                   const char *reason)
{
    pycf_state *s = pycf_state_of_type(type);
    if (!reason)
        reason = cf_strerror(st);
    switch (st) {
    case CF_FULL:
        PyErr_SetString(s->full, "the filter is full");
        break;
    case CF_EREADONLY:
        PyErr_SetString(s->read_only, "the filter is read-only (memory-mapped)");
        break;
    case CF_ECORRUPT:
    case CF_EVERSION:
        if (path)
            PyErr_Format(s->corrupt, "%R: %s", path, reason);
        else
            PyErr_SetString(s->corrupt, reason);
        break;
    case CF_ENOMEM:
        PyErr_NoMemory();
        break;
    case CF_EIO:
        return pycf_raise_file(s, err ? err : EIO, path);
    case CF_EINVAL:
        PyErr_SetString(PyExc_ValueError, cf_strerror(st));
        break;
    default:
        PyErr_SetString(s->error, cf_strerror(st));
        break;
    }
    return NULL;
}

static PyObject *pycf_raise(PyTypeObject *type, cf_status st, PyObject *path, int err)
{
    return pycf_raise_reason(type, st, path, err, NULL);
}

/* A new Python object owning f (which it frees on failure). */
/* FilterFull with `added`, the keys that went in, and (if not NULL) `filter`, the filter
 * that holds them; NULL. */
static PyObject *pycf_raise_full(PyTypeObject *type, unsigned long long added, PyObject *filter)
{
    pycf_raise(type, CF_FULL, NULL, 0);
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyErr_NormalizeException(&et, &ev, &tb);
    PyObject *n = PyLong_FromUnsignedLongLong(added);
    if (ev && n) {
        PyObject_SetAttrString(ev, "added", n);
        if (filter)
            PyObject_SetAttrString(ev, "filter", filter);
    }
    Py_XDECREF(n);
    PyErr_Restore(et, ev, tb);
    return NULL;
}

static PyObject *pycf_wrap(PyTypeObject *type, cf_filter *f, bool concurrent, bool mapped)
{
    pycf_filter *self = (pycf_filter *)type->tp_alloc(type, 0);
    if (!self) {
        cf_free(f);
        return NULL;
    }
    self->f = f;
    self->concurrent = concurrent;
    self->mapped = mapped;
    self->clock = NULL;
    self->due = 0;
    cf_stats s;
    cf_get_stats(f, &s);
    if (s.generations && s.window) { /* a file's window: Unix time, as it was written */
        PyObject *time = PyImport_ImportModule("time");
        self->clock = time ? PyObject_GetAttrString(time, "time") : NULL;
        Py_XDECREF(time);
        if (!self->clock) {
            Py_DECREF(self);
            return NULL;
        }
    }
    return (PyObject *)self;
}

/* ------------------------------------------------------------------------------------ */
/* Keys                                                                                 */
/* ------------------------------------------------------------------------------------ */

typedef struct pycf_key {
    const void *p;
    size_t n;
    unsigned char num[8]; /* an int's bytes */
    Py_buffer view;       /* a buffer's, while has_view */
    bool has_view;
} pycf_key;

static void pycf_le64(unsigned char out[8], uint64_t v)
{
    for (int i = 0; i < 8; i++)
        out[i] = (unsigned char)(v >> (8 * i));
}

/* The bytes of key o in k (pycf_key_release after); 0, or -1 with an exception. */
static int pycf_key_get(PyObject *o, pycf_key *k)
{
    k->has_view = false;
    if (PyBytes_Check(o)) {
        k->p = PyBytes_AS_STRING(o);
        k->n = (size_t)PyBytes_GET_SIZE(o);
        return 0;
    }
    if (PyUnicode_Check(o)) {
        Py_ssize_t n;
        const char *p = PyUnicode_AsUTF8AndSize(o, &n);
        if (!p)
            return -1;
        k->p = p;
        k->n = (size_t)n;
        return 0;
    }
    if (PyLong_Check(o)) {
        unsigned long long v = PyLong_AsUnsignedLongLong(o);
        if (v == (unsigned long long)-1 && PyErr_Occurred()) {
            if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
                PyErr_Clear();
                PyErr_SetString(PyExc_ValueError, "an int key must be in [0, 2**64)");
            }
            return -1;
        }
        pycf_le64(k->num, (uint64_t)v);
        k->p = k->num;
        k->n = 8;
        return 0;
    }
    if (PyObject_CheckBuffer(o)) {
        if (PyObject_GetBuffer(o, &k->view, PyBUF_SIMPLE) < 0)
            return -1;
        k->has_view = true;
        k->p = k->view.buf;
        k->n = (size_t)k->view.len;
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "a key is bytes, str or an int in [0, 2**64), not %.100s",
                 Py_TYPE(o)->tp_name);
    return -1;
}

static void pycf_key_release(pycf_key *k)
{
    if (k->has_view)
        PyBuffer_Release(&k->view);
}

/* ------------------------------------------------------------------------------------ */
/* Batches: an iterable of keys, or a buffer of uint64                                  */
/* ------------------------------------------------------------------------------------ */

/* A batch's keys as the library takes them, PYCF_CHUNK at a time: the arrays stay in the
 * caches however long the batch. For an iterable (a list or tuple, or any iterable made
 * into a list), each chunk's keys are hashed (cf_hash) with the GIL held, as they are
 * read: the library then works on the hashes alone without the GIL, and nothing of a key
 * object is held or touched again (another thread may empty the list meanwhile). For a
 * buffer of uint64, its elements, each 8 bytes, which the library hashes; the buffer is
 * held while the batch is. */
typedef struct pycf_batch {
    Py_ssize_t n;
    PyObject *seq; /* the iterable as a list or tuple, or NULL for a buffer */
    Py_buffer u64; /* the buffer of uint64, while is_u64 */
    bool is_u64;
    unsigned char *swapped; /* a big-endian host's copy of u64 in little-endian */
    size_t cap;             /* keys in a chunk: PYCF_CHUNK, or fewer for a shorter batch */
    const void **keys;      /* a buffer batch's keys */
    size_t *lens;           /* their lengths, each 8 */
    uint64_t *hashes;       /* an iterable batch's hashes */
} pycf_batch;

/* The chunk arrays, in one allocation after the struct, for `cap` keys. */
static pycf_batch *pycf_batch_alloc(Py_ssize_t n)
{
    size_t cap = n < (Py_ssize_t)PYCF_CHUNK ? (size_t)(n > 0 ? n : 1) : PYCF_CHUNK;
    size_t each = sizeof(const void *) + sizeof(size_t) + sizeof(uint64_t);
    pycf_batch *b = PyMem_Malloc(sizeof *b + cap * each);
    if (!b) {
        PyErr_NoMemory();
        return NULL;
    }
    char *p = (char *)(b + 1);
    b->keys = (const void **)(void *)p;
    b->lens = (size_t *)(void *)(p + cap * sizeof(const void *));
    b->hashes = (uint64_t *)(void *)(p + cap * (sizeof(const void *) + sizeof(size_t)));
    b->cap = cap;
    b->n = n;
    b->seq = NULL;
    b->is_u64 = false;
    b->swapped = NULL;
    return b;
}

static void pycf_batch_close(pycf_batch *b)
{
    if (!b)
        return;
    PyMem_Free(b->swapped);
    if (b->is_u64)
        PyBuffer_Release(&b->u64);
    Py_XDECREF(b->seq);
    PyMem_Free(b);
}

/* Is format (struct module syntax) one 8-byte unsigned integer? */
static bool pycf_format_u64(const char *format, Py_ssize_t itemsize)
{
    if (!format || itemsize != 8)
        return false;
    if (*format == '@' || *format == '=' || *format == '<')
        format++;
    return (format[0] == 'Q' || format[0] == 'L' || format[0] == 'K') && format[1] == '\0';
}

/* A batch over o, or NULL with an exception. */
static pycf_batch *pycf_batch_open(PyObject *o)
{
    if (PyBytes_Check(o) || PyUnicode_Check(o) || PyByteArray_Check(o)) {
        PyErr_SetString(PyExc_TypeError, "a batch is an iterable of keys or a buffer of "
                                         "uint64, not one bytes or str key");
        return NULL;
    }
    if (PyObject_CheckBuffer(o) && !PyList_Check(o) && !PyTuple_Check(o)) {
        Py_buffer view;
        if (PyObject_GetBuffer(o, &view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0)
            return NULL;
        if (!pycf_format_u64(view.format, view.itemsize)) {
            PyErr_Format(PyExc_TypeError, "a buffer batch holds uint64 (format 'Q'), not '%s'",
                         view.format ? view.format : "B");
            PyBuffer_Release(&view);
            return NULL;
        }
        pycf_batch *b = pycf_batch_alloc(view.len / 8);
        if (!b) {
            PyBuffer_Release(&view);
            return NULL;
        }
        b->u64 = view;
        b->is_u64 = true;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        b->swapped = PyMem_Malloc((size_t)b->u64.len ? (size_t)b->u64.len : 1u);
        if (!b->swapped) {
            pycf_batch_close(b);
            PyErr_NoMemory();
            return NULL;
        }
        for (Py_ssize_t i = 0; i < b->n; i++) {
            uint64_t v;
            memcpy(&v, (const char *)b->u64.buf + 8 * i, 8);
            pycf_le64(b->swapped + 8 * i, v);
        }
#endif
        for (size_t i = 0; i < b->cap; i++)
            b->lens[i] = 8;
        return b;
    }
    PyObject *seq = PySequence_Fast(o, "a batch is an iterable of keys or a buffer of uint64");
    if (!seq)
        return NULL;
    pycf_batch *b = pycf_batch_alloc(PySequence_Fast_GET_SIZE(seq));
    if (!b) {
        Py_DECREF(seq);
        return NULL;
    }
    b->seq = seq;
    return b;
}

/* Makes the keys from `first` on (at most PYCF_CHUNK) the current chunk, hashed for
 * filter f: their count, or -1 with an exception (a key of a bad type). For an iterable,
 * a list that another thread shortened meanwhile ends the batch where it now ends. */
static Py_ssize_t pycf_batch_chunk(pycf_batch *b, const cf_filter *f, Py_ssize_t first)
{
    Py_ssize_t left = b->n - first;
    size_t count = left < (Py_ssize_t)b->cap ? (size_t)left : b->cap;
    if (b->is_u64) {
        const unsigned char *base = b->swapped ? b->swapped : (const unsigned char *)b->u64.buf;
        for (size_t i = 0; i < count; i++)
            b->keys[i] = base + 8 * ((size_t)first + i);
        return (Py_ssize_t)count;
    }
    Py_ssize_t size = PySequence_Fast_GET_SIZE(b->seq);
    if (first + (Py_ssize_t)count > size)
        count = first < size ? (size_t)(size - first) : 0;
    PyObject **items = PySequence_Fast_ITEMS(b->seq) + first;
    for (size_t i = 0; i < count; i++) {
        PyObject *o = items[i];
        if (i + PYCF_KEYS_AHEAD < count)
            PYCF_PREFETCH(items[i + PYCF_KEYS_AHEAD]);
        if (PyBytes_Check(o)) {
            b->hashes[i] = cf_hash(f, PyBytes_AS_STRING(o), (size_t)PyBytes_GET_SIZE(o));
            continue;
        }
        /* Other keys may run Python code (a buffer's own methods), which may change the
         * list: the key is held while it is read, and the list read again after it. */
        pycf_key k;
        Py_INCREF(o);
        int got = pycf_key_get(o, &k);
        if (got == 0) {
            b->hashes[i] = cf_hash(f, k.p, k.n);
            pycf_key_release(&k);
        }
        Py_DECREF(o);
        if (got < 0)
            return -1;
        size = PySequence_Fast_GET_SIZE(b->seq);
        items = PySequence_Fast_ITEMS(b->seq) + first;
        if (first + (Py_ssize_t)count > size) /* shortened: it ends after this key */
            count = first + (Py_ssize_t)i + 1 < size ? (size_t)(size - first) : i + 1;
    }
    return (Py_ssize_t)count;
}

/* ------------------------------------------------------------------------------------ */
/* Construction                                                                         */
/* ------------------------------------------------------------------------------------ */

/* Generations of a window given without them (as the `cuckoo` tool's default). */
#define PYCF_GENERATIONS 8u

/* The longest window taken: 100 years, as the tool and the module take (far past any
 * use: past it a number of seconds is more likely a timestamp or a typo). */
#define PYCF_MAX_WINDOW_MS (100.0 * 365 * 24 * 3600 * 1000)

/* A window in seconds (an int or a float) as milliseconds, 1 ms to 100 years; 0, or -1
 * with ValueError/TypeError. */
static int pycf_window_arg(PyObject *o, uint64_t *ms)
{
    double sec = PyFloat_AsDouble(o);
    if (sec == -1.0 && PyErr_Occurred())
        return -1;
    if (!(sec * 1000.0 >= 1.0 && sec * 1000.0 <= PYCF_MAX_WINDOW_MS)) {
        PyErr_SetString(PyExc_ValueError, "window must be seconds, from 0.001 to 100 years");
        return -1;
    }
    *ms = (uint64_t)(sec * 1000.0 + 0.5);
    return 0;
}

/* An unsigned argument in [min, max] (None: dflt); 0, or -1 with ValueError/TypeError. */
static int pycf_uint_arg(PyObject *o, const char *name, unsigned long long min,
                         unsigned long long max, unsigned long long dflt, unsigned long long *out)
{
    if (!o || o == Py_None) {
        *out = dflt;
        return 0;
    }
    if (!PyLong_Check(o) || PyBool_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, not %.100s", name, Py_TYPE(o)->tp_name);
        return -1;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if ((v == (unsigned long long)-1 && PyErr_Occurred()) || v < min || v > max) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s must be in [%llu, %llu]", name, min, max);
        return -1;
    }
    *out = v;
    return 0;
}

/* The constructor's arguments as a config (checked by the library), whether the filter is
 * to be concurrent, and its clock (NULL: time.time; Py_None: none); 0, or -1 with an
 * exception. */
static int pycf_parse(PyObject *args, PyObject *kwargs, cf_config *out, int *concurrent_out,
                      PyObject **clock_out)
{
    /* Writable copies: the keyword list is char ** before Python 3.13. */
    char k_cap[] = "capacity", k_fpr[] = "fpr", k_f[] = "fingerprint_bits", k_b[] = "bucket_size",
         k_e[] = "expansion", k_seed[] = "seed", k_max[] = "max_sub_filters",
         k_semi[] = "semi_sort", k_cc[] = "concurrent", k_rb[] = "redisbloom", k_w[] = "window",
         k_g[] = "generations", k_clock[] = "clock", k_seg[] = "segmented", k_fast[] = "fast_hash";
    char *names[] = {k_cap, k_fpr, k_f, k_b, k_e,     k_seed, k_max,  k_semi,
                     k_cc,  k_rb,  k_w, k_g, k_clock, k_seg,  k_fast, NULL};
    PyObject *capacity = NULL, *fbits = NULL, *bsize = NULL, *expansion = NULL, *seed = NULL,
             *max_subs = NULL, *fpr = NULL, *window = NULL, *gens = NULL, *clock = NULL,
             *segmented = NULL;
    int semi = 0, concurrent = 1, redisbloom = 0, fast = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$OOOOOOpppOOOOp", names, &capacity, &fpr,
                                     &fbits, &bsize, &expansion, &seed, &max_subs, &semi,
                                     &concurrent, &redisbloom, &window, &gens, &clock, &segmented,
                                     &fast))
        return -1;
    /* segmented: None chooses by size (CF_SEGMENTED_MIN_BUCKETS), True or False asks */
    int seg = segmented && segmented != Py_None ? PyObject_IsTrue(segmented) : -1;
    if (segmented && segmented != Py_None && seg < 0)
        return -1;
    unsigned long long cap, f, b, e, s, m, g;
    uint64_t window_ms = 0;
    if (window && window != Py_None && pycf_window_arg(window, &window_ms) < 0)
        return -1;
    if (pycf_uint_arg(gens, "generations", 0, CF_MAX_GENERATIONS, window_ms ? PYCF_GENERATIONS : 0,
                      &g) < 0)
        return -1;
    if (g && (!window_ms || g < 2)) {
        PyErr_SetString(PyExc_ValueError, window_ms ? "generations must be at least 2"
                                                    : "generations is for a window: give window");
        return -1;
    }
    if (clock && clock != Py_None && !PyCallable_Check(clock)) {
        PyErr_SetString(PyExc_TypeError, "clock must be a callable giving seconds, or None");
        return -1;
    }
    /* capacity None is refused as a missing capacity would be (min 1, default 0) */
    if (pycf_uint_arg(capacity, "capacity", 1, UINT64_MAX, 0, &cap) < 0 ||
        pycf_uint_arg(fbits, "fingerprint_bits", 0, UINT_MAX, 0, &f) < 0 ||
        pycf_uint_arg(bsize, "bucket_size", 0, UINT_MAX, 0, &b) < 0 ||
        pycf_uint_arg(expansion, "expansion", 0, UINT_MAX, 0, &e) < 0 ||
        pycf_uint_arg(seed, "seed", 0, UINT64_MAX, 0, &s) < 0 ||
        pycf_uint_arg(max_subs, "max_sub_filters", 0, UINT_MAX, 0, &m) < 0)
        return -1;
    cf_config cfg = {
        .capacity = cap,
        .fingerprint_bits = (unsigned)f,
        .bucket_size = (unsigned)b,
        .expansion = (unsigned)e,
        .seed = s,
        .max_sub_filters = (unsigned)m,
        .flags = (concurrent ? CF_CONCURRENT : 0u) |
                 (seed && seed != Py_None ? CF_FIXED_SEED : 0u) | (semi ? CF_SEMI_SORT : 0u) |
                 (redisbloom ? CF_REDISBLOOM : 0u) | (seg == 1 ? CF_SEGMENTED : 0u) |
                 (seg == 0 ? CF_UNSEGMENTED : 0u) | (fast ? CF_FAST_HASH : 0u),
        .generations = (unsigned)g,
        .window = window_ms,
    };
    if (window_ms && (e || redisbloom)) {
        PyErr_SetString(PyExc_ValueError, "a window's generations keep one size and this "
                                          "library's layout: no expansion, no redisbloom");
        return -1;
    }
    if (fpr && fpr != Py_None) {
        double p = PyFloat_AsDouble(fpr);
        if (p == -1.0 && PyErr_Occurred())
            return -1;
        if (!(p > 0.0 && p < 1.0)) {
            PyErr_SetString(PyExc_ValueError, "fpr must be between 0 and 1");
            return -1;
        }
        if (f) {
            PyErr_SetString(PyExc_ValueError, "give fpr or fingerprint_bits, not both");
            return -1;
        }
        cfg.target_fpr = p;
    }
    if (cap == 0) {
        PyErr_Format(PyExc_ValueError, "capacity must be in [1, %llu]",
                     (unsigned long long)UINT64_MAX);
        return -1;
    }
    const char *why = NULL;
    if (cf_config_check(&cfg, &why) != CF_OK) { /* the library's own words for its rules */
        PyErr_SetString(PyExc_ValueError, why);
        return -1;
    }
    *out = cfg;
    *concurrent_out = concurrent;
    *clock_out = clock;
    return 0;
}

static PyObject *pycf_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    cf_config cfg;
    int concurrent;
    PyObject *clock;
    if (pycf_parse(args, kwargs, &cfg, &concurrent, &clock) < 0)
        return NULL;
    unsigned long long cap = cfg.capacity;
    cf_filter *out;
    cf_status st = cf_new(&cfg, &out);
    size_t need;
    if (st == CF_ENOMEM && cf_bytes_needed(&cfg, &need) == CF_OK)
        return PyErr_Format(PyExc_MemoryError,
                            "a filter of capacity %llu needs %zu bytes, which could not be "
                            "allocated",
                            cap, need);
    if (st != CF_OK)
        return pycf_raise(type, st, NULL, errno);
    pycf_filter *self = (pycf_filter *)pycf_wrap(type, out, concurrent != 0, false);
    if (self && clock) { /* given: its own (None: advance() only) instead of time.time */
        Py_XSETREF(self->clock, clock == Py_None ? NULL : Py_NewRef(clock));
    }
    if (self && self->clock && pycf_tick(self) < 0) /* the first generation is the one due */
        Py_CLEAR(self);
    return (PyObject *)self;
}

static PyObject *pycf_advance(pycf_filter *self, PyObject *unused)
{
    (void)unused;
    cf_stats s;
    cf_get_stats(self->f, &s);
    if (!s.generations) {
        PyErr_SetString(PyExc_ValueError, "advance() is for filters made with a window");
        return NULL;
    }
    cf_status st = cf_advance(self->f);
    if (st != CF_OK)
        return pycf_raise(Py_TYPE(self), st, NULL, 0);
    Py_RETURN_NONE;
}

static int pycf_filter_traverse(pycf_filter *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->clock);
    return 0;
}

static int pycf_clear_refs(pycf_filter *self)
{
    Py_CLEAR(self->clock);
    return 0;
}

static void pycf_dealloc(pycf_filter *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    Py_CLEAR(self->clock);
    cf_free(self->f);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

/* ------------------------------------------------------------------------------------ */
/* One key at a time                                                                    */
/* ------------------------------------------------------------------------------------ */

/* One key through a call that changes the filter: True when it did, False when the call
 * answered `no` (CF_EXISTS for add_unique, CF_NOT_FOUND for discard; CF_OK for add, whose
 * every answer but CF_OK is an error), an exception for any other status. */
static PyObject *pycf_change(pycf_filter *self, PyObject *key,
                             cf_status (*op)(cf_filter *, const void *, size_t), cf_status no)
{
    PYCF_TICK(self, NULL);
    pycf_key k;
    if (pycf_key_get(key, &k) < 0)
        return NULL;
    cf_status st = op(self->f, k.p, k.n);
    pycf_key_release(&k);
    if (st == CF_OK)
        Py_RETURN_TRUE;
    if (st == no)
        Py_RETURN_FALSE;
    return pycf_raise(Py_TYPE(self), st, NULL, 0);
}

static PyObject *pycf_add(pycf_filter *self, PyObject *key)
{
    return pycf_change(self, key, cf_add, CF_OK);
}

static PyObject *pycf_add_unique(pycf_filter *self, PyObject *key)
{
    return pycf_change(self, key, cf_add_unique, CF_EXISTS);
}

static PyObject *pycf_discard(pycf_filter *self, PyObject *key)
{
    return pycf_change(self, key, cf_delete, CF_NOT_FOUND);
}

static PyObject *pycf_remove(pycf_filter *self, PyObject *key)
{
    PyObject *r = pycf_change(self, key, cf_delete, CF_NOT_FOUND);
    if (!r)
        return NULL;
    bool removed = r == Py_True;
    Py_DECREF(r);
    if (!removed) { /* as set.remove: no such key */
        PyErr_SetObject(PyExc_KeyError, key);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *pycf_count(pycf_filter *self, PyObject *key)
{
    PYCF_TICK(self, NULL);
    pycf_key k;
    if (pycf_key_get(key, &k) < 0)
        return NULL;
    uint64_t n = cf_count(self->f, k.p, k.n);
    pycf_key_release(&k);
    return PyLong_FromUnsignedLongLong(n);
}

static int pycf_contains(pycf_filter *self, PyObject *key)
{
    PYCF_TICK(self, -1);
    if (PyBytes_Check(key)) /* the common case, without the general path's branches */
        return cf_contains(self->f, PyBytes_AS_STRING(key), (size_t)PyBytes_GET_SIZE(key));
    pycf_key k;
    if (pycf_key_get(key, &k) < 0)
        return -1;
    bool hit = cf_contains(self->f, k.p, k.n);
    pycf_key_release(&k);
    return hit;
}

static Py_ssize_t pycf_len(pycf_filter *self)
{
    PYCF_TICK(self, -1);
    cf_stats s;
    cf_get_stats(self->f, &s);
    return s.items > (uint64_t)PY_SSIZE_T_MAX ? PY_SSIZE_T_MAX : (Py_ssize_t)s.items;
}

/* ------------------------------------------------------------------------------------ */
/* Batches                                                                              */
/* ------------------------------------------------------------------------------------ */

static PyObject *pycf_bool(bool v)
{
    PyObject *o = v ? Py_True : Py_False;
    Py_INCREF(o);
    return o;
}

static PyObject *pycf_contains_many(pycf_filter *self, PyObject *keys)
{
    PYCF_TICK(self, NULL);
    pycf_batch *b = pycf_batch_open(keys);
    if (!b)
        return NULL;
    bool free_gil = pycf_lookups_free(self);
    /* A bytearray of 0 and 1 for a buffer, a list of bools for an iterable (filled from a
     * bytearray's worth of answers, chunk by chunk). */
    PyObject *bytes = PyByteArray_FromStringAndSize(NULL, b->n);
    PyObject *out = bytes && !b->is_u64 ? PyList_New(b->n) : NULL;
    if (!bytes || (!b->is_u64 && !out))
        goto fail;
    bool *found = (bool *)(void *)PyByteArray_AS_STRING(bytes);
    Py_ssize_t i = 0;
    while (i < b->n) {
        Py_ssize_t count = pycf_batch_chunk(b, self->f, i);
        if (count < 0)
            goto fail;
        if (count == 0)
            break; /* the list was shortened meanwhile */
        PyThreadState *ts = free_gil ? PyEval_SaveThread() : NULL;
        if (b->is_u64)
            cf_contains_keys(self->f, b->keys, b->lens, (size_t)count, found + i);
        else
            cf_contains_many(self->f, b->hashes, (size_t)count, found + i);
        if (ts)
            PyEval_RestoreThread(ts);
        if (out)
            for (Py_ssize_t j = i; j < i + count; j++)
                PyList_SET_ITEM(out, j, pycf_bool(found[j]));
        i += count;
    }
    if (out && i < b->n) { /* shortened: the answers it has */
        for (Py_ssize_t j = i; j < b->n; j++)
            PyList_SET_ITEM(out, j, pycf_bool(false));
        if (PyList_SetSlice(out, i, b->n, NULL) < 0)
            goto fail;
    }
    pycf_batch_close(b);
    if (out) {
        Py_DECREF(bytes);
        return out;
    }
    return bytes;
fail:
    pycf_batch_close(b);
    Py_XDECREF(bytes);
    Py_XDECREF(out);
    return NULL;
}

/* Adds the batch in order; returns how many were added. Keys that found no room (a full
 * fixed-size filter) are left out, and then FilterFull is raised with `added` set. A key
 * of a bad type raises TypeError or ValueError; the keys of earlier chunks are in. */
static PyObject *pycf_add_many(pycf_filter *self, PyObject *keys)
{
    PYCF_TICK(self, NULL);
    pycf_batch *b = pycf_batch_open(keys);
    if (!b)
        return NULL;
    cf_status status[PYCF_CHUNK]; /* 16 KiB on the stack */
    size_t added = 0;
    cf_status first_bad = CF_OK;
    for (Py_ssize_t i = 0; i < b->n;) {
        Py_ssize_t count = pycf_batch_chunk(b, self->f, i);
        if (count <= 0)
            break;
        /* A concurrent filter's writers run beside each other (stripe locks). */
        PyThreadState *ts = self->concurrent ? PyEval_SaveThread() : NULL;
        added += b->is_u64 ? cf_add_keys(self->f, b->keys, b->lens, (size_t)count, 0, status)
                           : cf_add_many(self->f, b->hashes, (size_t)count, 0, status);
        if (ts)
            PyEval_RestoreThread(ts);
        for (Py_ssize_t j = 0; j < count && first_bad == CF_OK; j++)
            if (status[j] != CF_OK)
                first_bad = status[j];
        i += count;
        if (first_bad != CF_OK && first_bad != CF_FULL)
            break; /* read-only, out of memory: the rest would fail alike */
    }
    pycf_batch_close(b);
    if (PyErr_Occurred())
        return NULL;
    if (first_bad != CF_OK) {
        if (first_bad == CF_FULL)
            return pycf_raise_full(Py_TYPE(self), added, NULL);
        return pycf_raise(Py_TYPE(self), first_bad, NULL, 0);
    }
    return PyLong_FromSize_t(added);
}

/* ------------------------------------------------------------------------------------ */
/* Whole filter                                                                         */
/* ------------------------------------------------------------------------------------ */

static PyObject *pycf_clear(pycf_filter *self, PyObject *unused)
{
    (void)unused;
    if (self->mapped)
        return pycf_raise(Py_TYPE(self), CF_EREADONLY, NULL, 0);
    cf_clear(self->f);
    Py_RETURN_NONE;
}

/* Adds key = value (a new reference, consumed) to dict d; -1 on error. */
static int pycf_put(PyObject *d, const char *key, PyObject *value)
{
    if (!value)
        return -1;
    int r = PyDict_SetItemString(d, key, value);
    Py_DECREF(value);
    return r;
}

static PyObject *pycf_get_stats(pycf_filter *self, void *unused)
{
    (void)unused;
    PYCF_TICK(self, NULL);
    cf_stats s;
    cf_config c;
    cf_get_stats(self->f, &s);
    cf_get_config(self->f, &c);
    PyObject *d = PyDict_New();
    if (!d)
        return NULL;
    if (pycf_put(d, "capacity", PyLong_FromUnsignedLongLong(s.capacity)) < 0 ||
        pycf_put(d, "items", PyLong_FromUnsignedLongLong(s.items)) < 0 ||
        pycf_put(d, "load_factor", PyFloat_FromDouble(s.load_factor)) < 0 ||
        pycf_put(d, "bits_per_item",
                 PyFloat_FromDouble(s.items ? 8.0 * (double)s.bytes / (double)s.items
                                            : 8.0 * (double)s.bytes / (double)s.capacity)) < 0 ||
        pycf_put(d, "fpr", PyFloat_FromDouble(s.fpr)) < 0 ||
        pycf_put(d, "fpr_bound", PyFloat_FromDouble(s.fpr_bound)) < 0 ||
        pycf_put(d, "bytes", PyLong_FromUnsignedLongLong(s.bytes)) < 0 ||
        pycf_put(d, "slots", PyLong_FromUnsignedLongLong(s.slots)) < 0 ||
        pycf_put(d, "buckets", PyLong_FromUnsignedLongLong(s.buckets)) < 0 ||
        pycf_put(d, "sub_filters", PyLong_FromUnsignedLong(s.sub_filters)) < 0 ||
        pycf_put(d, "fingerprint_bits", PyLong_FromUnsignedLong(s.fingerprint_bits)) < 0 ||
        pycf_put(d, "bucket_size", PyLong_FromUnsignedLong(s.bucket_size)) < 0 ||
        pycf_put(d, "stashed", PyLong_FromUnsignedLongLong(s.stashed)) < 0 ||
        pycf_put(d, "expansion", PyLong_FromUnsignedLong(c.expansion)) < 0 ||
        pycf_put(d, "max_sub_filters", PyLong_FromUnsignedLong(c.max_sub_filters)) < 0 ||
        pycf_put(d, "semi_sort", PyBool_FromLong((c.flags & CF_SEMI_SORT) != 0)) < 0 ||
        pycf_put(d, "segmented", PyBool_FromLong((c.flags & CF_SEGMENTED) != 0)) < 0 ||
        pycf_put(d, "redisbloom", PyBool_FromLong((c.flags & CF_REDISBLOOM) != 0)) < 0 ||
        pycf_put(d, "fast_hash", PyBool_FromLong((c.flags & CF_FAST_HASH) != 0)) < 0 ||
        pycf_put(d, "concurrent", PyBool_FromLong(self->concurrent)) < 0 ||
        pycf_put(d, "read_only", PyBool_FromLong(self->mapped)) < 0 ||
        (s.generations &&
         (pycf_put(d, "window", PyFloat_FromDouble((double)s.window / 1000.0)) < 0 ||
          pycf_put(d, "generations", PyLong_FromUnsignedLong(s.generations)) < 0 ||
          pycf_put(d, "generation", PyLong_FromUnsignedLongLong(s.generation)) < 0))) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

static PyObject *pycf_to_bytes(pycf_filter *self, PyObject *unused)
{
    (void)unused;
    PYCF_TICK(self, NULL);
    /* Another thread may grow a concurrent filter between its size and its copy: the
     * copy then refuses the short buffer, and the size is asked again (each retry means a
     * growth, which max_sub_filters bounds). */
    for (;;) {
        size_t n = cf_serialized_size(self->f);
        if (n > (size_t)PY_SSIZE_T_MAX)
            return PyErr_NoMemory();
        PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
        if (!out)
            return NULL;
        size_t written = 0;
        cf_status st = cf_serialize(self->f, PyBytes_AS_STRING(out), n, &written);
        if (st == CF_OK && written == n)
            return out;
        Py_DECREF(out);
        if (!(st == CF_EINVAL && self->concurrent && cf_serialized_size(self->f) > n))
            return pycf_raise(Py_TYPE(self), st != CF_OK ? st : CF_EINVAL, NULL, 0);
    }
}

/* The filter serialized in buf, made concurrent or not; a new object or NULL. */
static PyObject *pycf_from_buffer(PyTypeObject *type, const void *buf, size_t len, bool concurrent)
{
    cf_filter *f = NULL;
    PyThreadState *ts = PyEval_SaveThread();
    cf_status st = cf_deserialize_flags(buf, len, concurrent ? CF_CONCURRENT : 0u, NULL, &f);
    const char *reason = NULL;
    if (st == CF_ECORRUPT || st == CF_EVERSION) /* what is wrong: validation again says */
        (void)cf_validate(buf, len, &reason);
    PyEval_RestoreThread(ts);
    if (st != CF_OK)
        return pycf_raise_reason(type, st, NULL, 0, reason);
    return pycf_wrap(type, f, concurrent, false);
}

static PyObject *pycf_from_bytes(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    char k_data[] = "data", k_cc[] = "concurrent";
    char *names[] = {k_data, k_cc, NULL};
    Py_buffer view;
    int concurrent = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*|p", names, &view, &concurrent))
        return NULL;
    PyObject *out = pycf_from_buffer(type, view.buf, (size_t)view.len, concurrent != 0);
    PyBuffer_Release(&view);
    return out;
}

/* What a copy or an unpickled filter is: concurrent, unless the filter was made without
 * (a read-only mapped one gives a writable copy, concurrent as a new filter is). */
static bool pycf_copy_concurrent(const pycf_filter *self)
{
    return self->concurrent || self->mapped;
}

static PyObject *pycf_copy(pycf_filter *self, PyObject *unused)
{
    PyObject *b = pycf_to_bytes(self, unused);
    if (!b)
        return NULL;
    PyObject *out = pycf_from_buffer(Py_TYPE(self), PyBytes_AS_STRING(b),
                                     (size_t)PyBytes_GET_SIZE(b), pycf_copy_concurrent(self));
    Py_DECREF(b);
    if (out) { /* a window's copy keeps its clock */
        pycf_filter *copy = (pycf_filter *)out;
        Py_XSETREF(copy->clock, Py_XNewRef(self->clock));
        copy->due = self->due;
    }
    return out;
}

/* f == g: the same settings, seed and contents, as their bytes say (concurrency, which
 * the bytes do not hold, aside: a filter equals its copy made either way). */
static PyObject *pycf_richcompare(PyObject *a, PyObject *b, int op)
{
    if ((op != Py_EQ && op != Py_NE) || !PyObject_TypeCheck(b, Py_TYPE(a)) ||
        !PyObject_TypeCheck(a, pycf_state_of_type(Py_TYPE(a))->filter_type))
        Py_RETURN_NOTIMPLEMENTED;
    int same = 1;
    if (a != b) {
        PyObject *x = pycf_to_bytes((pycf_filter *)a, NULL);
        PyObject *y = x ? pycf_to_bytes((pycf_filter *)b, NULL) : NULL;
        same = y ? PyObject_RichCompareBool(x, y, Py_EQ) : -1;
        Py_XDECREF(x);
        Py_XDECREF(y);
        if (same < 0)
            return NULL;
    }
    return PyBool_FromLong(op == Py_EQ ? same : !same);
}

/* The read-only properties, from cf_get_stats and cf_get_config. */
typedef enum {
    PYCF_CAPACITY,
    PYCF_FINGERPRINT_BITS,
    PYCF_BUCKET_SIZE,
    PYCF_FPR,
    PYCF_LOAD_FACTOR,
    PYCF_CONCURRENT
} pycf_property;

static PyObject *pycf_get_property(pycf_filter *self, void *which)
{
    PYCF_TICK(self, NULL);
    cf_stats st;
    cf_config c;
    cf_get_stats(self->f, &st);
    cf_get_config(self->f, &c);
    switch ((pycf_property)(uintptr_t)which) {
    case PYCF_CAPACITY:
        return PyLong_FromUnsignedLongLong(c.capacity);
    case PYCF_FINGERPRINT_BITS:
        return PyLong_FromUnsignedLong(st.fingerprint_bits);
    case PYCF_BUCKET_SIZE:
        return PyLong_FromUnsignedLong(st.bucket_size);
    case PYCF_FPR:
        return PyFloat_FromDouble(st.fpr);
    case PYCF_LOAD_FACTOR:
        return PyFloat_FromDouble(st.load_factor);
    case PYCF_CONCURRENT:
        return PyBool_FromLong(self->concurrent);
    }
    Py_RETURN_NONE;
}

/* Is o a CuckooFilter (of this module, or a subclass)? */
static bool pycf_is_filter(PyTypeObject *type, PyObject *o)
{
    return PyObject_TypeCheck(o, pycf_state_of_type(type)->filter_type);
}

/* Merge other's keys into self (cf_merge_threads): 0, or -1 with the exception set. */
static int pycf_merge_into(pycf_filter *self, pycf_filter *other, unsigned threads)
{
    PyTypeObject *type = Py_TYPE(self);
    if (self->mapped) {
        pycf_raise(type, CF_EREADONLY, NULL, 0);
        return -1;
    }
    PYCF_TICK(self, -1);
    PYCF_TICK(other, -1);
    const char *why = NULL;
    cf_status st;
    /* Without the GIL only where nothing else relies on it: a concurrent destination (the
     * library takes its lock) and a source that is concurrent or never changes. */
    if (self->concurrent && pycf_lookups_free(other)) {
        PyThreadState *ts = PyEval_SaveThread();
        st = cf_merge_threads(self->f, other->f, threads, &why);
        PyEval_RestoreThread(ts);
    } else {
        st = cf_merge_threads(self->f, other->f, threads, &why);
    }
    if (st == CF_OK)
        return 0;
    if (st == CF_EINVAL)
        PyErr_SetString(PyExc_ValueError, why ? why : cf_strerror(st));
    else if (st == CF_FULL)
        PyErr_SetString(pycf_state_of_type(type)->full, why ? why : cf_strerror(st));
    else
        pycf_raise(type, st, NULL, 0);
    return -1;
}

/* Threads merge(), |= and | use unless told: one per processor, as build() (the bytes are
 * the same for any number). */
#define PYCF_MERGE_THREADS 0u

static PyObject *pycf_merge(pycf_filter *self, PyObject *args, PyObject *kwargs)
{
    char k_other[] = "other", k_threads[] = "threads";
    char *names[] = {k_other, k_threads, NULL};
    PyObject *other, *threads_o = NULL;
    unsigned long long threads;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$O:merge", names, &other, &threads_o) ||
        pycf_uint_arg(threads_o, "threads", 0, 256, PYCF_MERGE_THREADS, &threads) < 0)
        return NULL;
    if (!pycf_is_filter(Py_TYPE(self), other))
        return PyErr_Format(PyExc_TypeError, "merge() takes a CuckooFilter, not %.100s",
                            Py_TYPE(other)->tp_name);
    if (pycf_merge_into(self, (pycf_filter *)other, (unsigned)threads) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* f |= g */
static PyObject *pycf_ior(PyObject *a, PyObject *b)
{
    if (!pycf_is_filter(Py_TYPE(a), b))
        Py_RETURN_NOTIMPLEMENTED;
    if (pycf_merge_into((pycf_filter *)a, (pycf_filter *)b, PYCF_MERGE_THREADS) < 0)
        return NULL;
    return Py_NewRef(a);
}

/* f | g: a copy of f (concurrent as copy() makes it) with g's keys. */
static PyObject *pycf_or(PyObject *a, PyObject *b)
{
    PyTypeObject *mine = PyObject_TypeCheck(a, Py_TYPE(b)) ? Py_TYPE(b) : Py_TYPE(a);
    if (!pycf_is_filter(mine, a) || !pycf_is_filter(mine, b))
        Py_RETURN_NOTIMPLEMENTED;
    PyObject *out = pycf_copy((pycf_filter *)a, NULL);
    if (out && pycf_merge_into((pycf_filter *)out, (pycf_filter *)b, PYCF_MERGE_THREADS) < 0)
        Py_CLEAR(out);
    return out;
}

/* The hashes of the keys of batch b (as filter f hashes them) into a new array of b->n;
 * NULL with an exception. */
static uint64_t *pycf_batch_hashes(pycf_batch *b, const cf_filter *f, Py_ssize_t *n)
{
    uint64_t *h = PyMem_Malloc((size_t)(b->n > 0 ? b->n : 1) * sizeof *h);
    if (!h) {
        PyErr_NoMemory();
        return NULL;
    }
    Py_ssize_t i = 0;
    while (i < b->n) {
        Py_ssize_t count = pycf_batch_chunk(b, f, i);
        if (count < 0) {
            PyMem_Free(h);
            return NULL;
        }
        if (count == 0) /* a list another thread shortened */
            break;
        for (Py_ssize_t j = 0; j < count; j++)
            h[i + j] = b->is_u64 ? cf_hash(f, b->keys[j], 8) : b->hashes[j];
        i += count;
    }
    *n = i;
    return h;
}

/* The filter cls(capacity, **opts), or NULL with an exception. */
static pycf_filter *pycf_make(PyTypeObject *type, uint64_t capacity, PyObject *opts)
{
    PyObject *cap = PyLong_FromUnsignedLongLong(capacity);
    PyObject *args = cap ? PyTuple_Pack(1, cap) : NULL;
    Py_XDECREF(cap);
    if (!args)
        return NULL;
    PyObject *f = pycf_new(type, args, opts);
    Py_DECREF(args);
    return (pycf_filter *)f;
}

/* The filter's bytes loaded again as a concurrent filter (the library's threads fill a
 * plain one only); NULL with an exception. */
static PyObject *pycf_as_concurrent(PyTypeObject *type, pycf_filter *plain)
{
    size_t n = cf_serialized_size(plain->f);
    void *buf = PyMem_Malloc(n ? n : 1);
    if (!buf)
        return PyErr_NoMemory();
    cf_status st = cf_serialize(plain->f, buf, n, NULL);
    PyObject *out =
        st == CF_OK ? pycf_from_buffer(type, buf, n, true) : pycf_raise(type, st, NULL, 0);
    PyMem_Free(buf);
    return out;
}

static PyObject *pycf_build(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args) != 1) {
        PyErr_SetString(PyExc_TypeError, "build() takes the keys, then keyword options");
        return NULL;
    }
    PyObject *opts = kwargs ? PyDict_Copy(kwargs) : PyDict_New();
    if (!opts)
        return NULL;
    PyObject *result = NULL, *filter = NULL;
    pycf_filter *probe = NULL, *built = NULL;
    pycf_batch *b = NULL;
    uint64_t *h = NULL;
    /* The options build() takes besides the constructor's. */
    PyObject *cap_o = PyDict_GetItemString(opts, "capacity");
    PyObject *threads_o = PyDict_GetItemString(opts, "threads");
    PyObject *cc_o = PyDict_GetItemString(opts, "concurrent");
    PyObject *window_o = PyDict_GetItemString(opts, "window");
    unsigned long long capacity, threads;
    int concurrent = cc_o ? PyObject_IsTrue(cc_o) : 1;
    bool windowed = window_o && window_o != Py_None;
    if (concurrent < 0 || pycf_uint_arg(cap_o, "capacity", 1, UINT64_MAX, 0, &capacity) < 0 ||
        pycf_uint_arg(threads_o, "threads", 0, 256, 0, &threads) < 0)
        goto done;
    if ((cap_o && PyDict_DelItemString(opts, "capacity") < 0) ||
        (threads_o && PyDict_DelItemString(opts, "threads") < 0))
        goto done;
    /* The seed first: the keys are hashed before the filter, sized by them, is made. */
    PyObject *seed_o = PyDict_GetItemString(opts, "seed");
    if (!seed_o || seed_o == Py_None) {
        uint64_t seed;
        if (cf_random_seed(&seed) != CF_OK) {
            PyErr_SetString(PyExc_OSError, "the system gave no random seed (give seed=)");
            goto done;
        }
        PyObject *v = PyLong_FromUnsignedLongLong(seed);
        if (!v || PyDict_SetItemString(opts, "seed", v) < 0) {
            Py_XDECREF(v);
            goto done;
        }
        Py_DECREF(v);
    }
    /* A plain filter is filled by threads; a concurrent one is its copy afterwards. A
     * window's generations are filled one key after another anyway. */
    if (!windowed && PyDict_SetItemString(opts, "concurrent", Py_False) < 0)
        goto done;
    probe = pycf_make(type, 1, opts); /* the options checked, and the keys' hash */
    if (!probe || !(b = pycf_batch_open(PyTuple_GET_ITEM(args, 0))))
        goto done;
    Py_ssize_t n = 0;
    if (!(h = pycf_batch_hashes(b, probe->f, &n)))
        goto done;
    cf_config c;
    cf_get_config(probe->f, &c);
    size_t distinct = 0;
    PyThreadState *ts = PyEval_SaveThread();
    cf_status st = cf_sort_hashes(h, (size_t)n, c.fingerprint_bits, (unsigned)threads, &distinct);
    PyEval_RestoreThread(ts);
    if (st != CF_OK) {
        pycf_raise(type, st, NULL, 0);
        goto done;
    }
    built = pycf_make(type, capacity ? capacity : (distinct ? distinct : 1u), opts);
    if (!built)
        goto done;
    cf_build_report r;
    ts = PyEval_SaveThread();
    st = cf_build_hashes(built->f, h, distinct, (unsigned)threads, &r);
    PyEval_RestoreThread(ts);
    if (st != CF_OK) {
        pycf_raise(type, st, NULL, 0);
        goto done;
    }
    filter = concurrent && !windowed ? pycf_as_concurrent(type, built) : Py_NewRef(built);
    if (!filter)
        goto done;
    if (r.full) { /* FilterFull, with the keys that fit in `filter` and their count */
        pycf_raise_full(type, r.added, filter);
        goto done;
    }
    result = Py_NewRef(filter);
done:
    Py_XDECREF(filter);
    Py_XDECREF((PyObject *)built);
    Py_XDECREF((PyObject *)probe);
    PyMem_Free(h);
    pycf_batch_close(b);
    Py_DECREF(opts);
    return result;
}

/* The hashes h[0 .. n) as bytes, 8 little-endian each. */
static PyObject *pycf_le_bytes(const uint64_t *h, size_t n)
{
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n * 8);
    if (out)
        for (size_t i = 0; i < n; i++)
            pycf_le64((unsigned char *)PyBytes_AS_STRING(out) + 8 * i, h[i]);
    return out;
}

/* f.hashes(keys) -> bytes: each key's hash by f. */
static PyObject *pycf_hashes(pycf_filter *self, PyObject *keys)
{
    pycf_batch *b = pycf_batch_open(keys);
    if (!b)
        return NULL;
    Py_ssize_t n = 0;
    uint64_t *h = pycf_batch_hashes(b, self->f, &n);
    pycf_batch_close(b);
    if (!h)
        return NULL;
    PyObject *out = pycf_le_bytes(h, (size_t)n);
    PyMem_Free(h);
    return out;
}

/* The uint64 values of a bytes-like object of little-endian hashes, as a new array;
 * NULL with an exception. */
static uint64_t *pycf_hash_array(PyObject *o, size_t *n)
{
    Py_buffer v;
    if (PyObject_GetBuffer(o, &v, PyBUF_SIMPLE) < 0)
        return NULL;
    if (v.len % 8) {
        PyBuffer_Release(&v);
        PyErr_SetString(PyExc_ValueError, "hashes are 8 bytes each");
        return NULL;
    }
    *n = (size_t)v.len / 8;
    uint64_t *h = PyMem_Malloc(*n ? *n * 8 : 1);
    if (!h) {
        PyBuffer_Release(&v);
        PyErr_NoMemory();
        return NULL;
    }
    for (size_t i = 0; i < *n; i++) {
        const unsigned char *p = (const unsigned char *)v.buf + 8 * i;
        uint64_t x = 0;
        for (unsigned j = 0; j < 8; j++)
            x |= (uint64_t)p[j] << (8 * j);
        h[i] = x;
    }
    PyBuffer_Release(&v);
    return h;
}

/* The config of the constructor's keyword options with capacity `capacity` (kwargs may
 * hold it; it is the segments' arguments that are positional); 0, or -1. */
static int pycf_config_of(PyObject *capacity, PyObject *kwargs, cf_config *c)
{
    PyObject *args = PyTuple_Pack(1, capacity);
    if (!args)
        return -1;
    int concurrent;
    PyObject *clock;
    int r = pycf_parse(args, kwargs, c, &concurrent, &clock);
    Py_DECREF(args);
    c->flags &= ~(unsigned)CF_CONCURRENT;
    return r;
}

/* CuckooFilter._segment_plan(capacity, **options) -> (segment_bits, segments, tag_bits):
 * how the filter of those settings is cut (segment_bits 0: it is not). */
static PyObject *pycf_segment_plan(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    (void)type;
    PyObject *capacity;
    if (!PyArg_ParseTuple(args, "O", &capacity))
        return NULL;
    cf_config c;
    if (pycf_config_of(capacity, kwargs, &c) < 0)
        return NULL;
    cf_mapping m;
    if (cf_config_mapping(&c, &m) != CF_OK) {
        PyErr_SetString(PyExc_ValueError, "no mapping: a window or RedisBloom's layout");
        return NULL;
    }
    return Py_BuildValue("(IKI)", m.segment_bits,
                         (unsigned long long)(m.segment_bits ? m.buckets >> m.segment_bits : 0),
                         m.tag_bits);
}

/* CuckooFilter._sort_hashes(hashes, tag_bits, threads) -> bytes: build order, repeats
 * dropped. */
static PyObject *pycf_sort_hashes_py(PyTypeObject *type, PyObject *args)
{
    (void)type;
    PyObject *o;
    unsigned bits, threads;
    if (!PyArg_ParseTuple(args, "OII", &o, &bits, &threads))
        return NULL;
    size_t n, d = 0;
    uint64_t *h = pycf_hash_array(o, &n);
    if (!h)
        return NULL;
    PyThreadState *ts = PyEval_SaveThread();
    cf_status st = cf_sort_hashes(h, n, bits, threads, &d);
    PyEval_RestoreThread(ts);
    PyObject *out = st == CF_OK ? pycf_le_bytes(h, d) : pycf_raise(type, st, NULL, 0);
    PyMem_Free(h);
    return out;
}

/* CuckooFilter._build_segments(first, end, hashes, capacity, **options) -> (table,
 * unplaced, first_unplaced, items): the table of segments [first, end) holding the hashes
 * (build order), the count of those that found no room, the first of them (as hashes),
 * and the fingerprints the table holds. */
static PyObject *pycf_build_segments_py(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    unsigned long long first, end;
    PyObject *o, *capacity;
    if (!PyArg_ParseTuple(args, "KKOO", &first, &end, &o, &capacity))
        return NULL;
    cf_config c;
    size_t len, n;
    if (pycf_config_of(capacity, kwargs, &c) < 0)
        return NULL;
    if (cf_segments_size(&c, first, end, &len) != CF_OK) {
        PyErr_SetString(PyExc_ValueError, "not a range of the segments of that filter");
        return NULL;
    }
    uint64_t *h = pycf_hash_array(o, &n);
    if (!h)
        return NULL;
    PyObject *table = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)len);
    if (!table) {
        PyMem_Free(h);
        return NULL;
    }
    cf_segments_report r;
    PyThreadState *ts = PyEval_SaveThread();
    cf_status st = cf_build_segments(&c, first, end, h, n, PyBytes_AS_STRING(table), len, &r);
    PyEval_RestoreThread(ts);
    PyMem_Free(h);
    if (st != CF_OK) {
        Py_DECREF(table);
        return pycf_raise(type, st, NULL, 0);
    }
    PyObject *firsts = pycf_le_bytes(
        r.first_unplaced, r.unplaced < CF_STASH_SLOTS ? (size_t)r.unplaced : CF_STASH_SLOTS);
    PyObject *out = firsts ? Py_BuildValue("(NKNK)", table, (unsigned long long)r.unplaced, firsts,
                                           (unsigned long long)r.items)
                           : NULL;
    if (!out) {
        Py_DECREF(table);
        Py_XDECREF(firsts);
    }
    return out;
}

/* f._stash_unplaced(hashes) -> stashed: the first keys that found no room in their
 * segments, into the stash while it has room. */
static PyObject *pycf_stash_unplaced_py(pycf_filter *self, PyObject *o)
{
    size_t n;
    uint64_t *h = pycf_hash_array(o, &n);
    if (!h)
        return NULL;
    uint64_t stashed = 0;
    cf_status st = cf_stash_unplaced(self->f, h, n, &stashed);
    PyMem_Free(h);
    if (st != CF_OK)
        return pycf_raise(Py_TYPE(self), st, NULL, 0);
    return PyLong_FromUnsignedLongLong(stashed);
}

/* CuckooFilter._split_hashes(keys, ranges, capacity, **options) -> list of bytes: the
 * keys' hashes by the filter of those settings, split by the range of segments their
 * first bucket lies in, range r being segments [S r / R, S (r + 1) / R). */
static PyObject *pycf_split_hashes(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *keys, *capacity;
    unsigned long long ranges;
    if (!PyArg_ParseTuple(args, "OKO", &keys, &ranges, &capacity))
        return NULL;
    cf_config c;
    cf_mapping m;
    if (pycf_config_of(capacity, kwargs, &c) < 0)
        return NULL;
    uint64_t segments = 0;
    if (cf_config_mapping(&c, &m) == CF_OK && m.segment_bits)
        segments = m.buckets >> m.segment_bits;
    if (ranges < 1 || ranges > segments) {
        PyErr_SetString(PyExc_ValueError, "ranges must be 1 to the filter's segments");
        return NULL;
    }
    cf_config small = c; /* the same hash, in a small table */
    small.capacity = 1;
    small.flags &= ~(unsigned)CF_SEGMENTED;
    cf_filter *probe;
    cf_status st = cf_new(&small, &probe);
    if (st != CF_OK)
        return pycf_raise(type, st, NULL, 0);
    pycf_batch *b = pycf_batch_open(keys);
    Py_ssize_t n = 0;
    uint64_t *h = b ? pycf_batch_hashes(b, probe, &n) : NULL;
    pycf_batch_close(b);
    cf_free(probe);
    if (!h)
        return NULL;
    size_t *count = PyMem_Calloc((size_t)ranges, sizeof *count);
    unsigned *which = PyMem_Malloc((size_t)(n ? n : 1) * sizeof *which);
    PyObject *out = count && which ? PyList_New((Py_ssize_t)ranges) : NULL;
    if (!count || !which)
        PyErr_NoMemory();
    for (Py_ssize_t i = 0; out && i < n; i++) {
        cf_place pl;
        (void)cf_place_in(&m, h[i], &pl); /* the mapping is cf_config_mapping's: valid */
        uint64_t seg = pl.bucket[0] >> m.segment_bits;
        which[i] = (unsigned)(((seg + 1) * ranges - 1) / segments);
        count[which[i]]++;
    }
    for (unsigned long long r = 0; out && r < ranges; r++) {
        PyObject *piece = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)count[r] * 8);
        if (!piece) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, (Py_ssize_t)r, piece);
        count[r] = 0; /* now: the piece's hashes so far */
    }
    for (Py_ssize_t i = 0; out && i < n; i++) {
        PyObject *piece = PyList_GET_ITEM(out, which[i]);
        pycf_le64((unsigned char *)PyBytes_AS_STRING(piece) + 8 * count[which[i]]++, h[i]);
    }
    PyMem_Free(count);
    PyMem_Free(which);
    PyMem_Free(h);
    return out;
}

/* f._build_hashes(hashes, threads) -> (added, full): cf_build_hashes of hashes in build
 * order. */
static PyObject *pycf_build_hashes_py(pycf_filter *self, PyObject *args)
{
    PyObject *o;
    unsigned threads;
    if (!PyArg_ParseTuple(args, "OI", &o, &threads))
        return NULL;
    size_t n;
    uint64_t *h = pycf_hash_array(o, &n);
    if (!h)
        return NULL;
    cf_build_report r;
    PyThreadState *ts = PyEval_SaveThread();
    cf_status st = cf_build_hashes(self->f, h, n, threads, &r);
    PyEval_RestoreThread(ts);
    PyMem_Free(h);
    if (st != CF_OK)
        return pycf_raise(Py_TYPE(self), st, NULL, 0);
    return Py_BuildValue("(KK)", (unsigned long long)r.added, (unsigned long long)r.full);
}

/* f._put_segments(first, end, data): the table bytes of segments [first, end) into f. */
static PyObject *pycf_put_segments_py(pycf_filter *self, PyObject *args)
{
    unsigned long long first, end;
    Py_buffer v;
    if (!PyArg_ParseTuple(args, "KKy*", &first, &end, &v))
        return NULL;
    cf_status st = cf_put_segments(self->f, first, end, v.buf, (size_t)v.len);
    PyBuffer_Release(&v);
    if (st != CF_OK)
        return pycf_raise(Py_TYPE(self), st, NULL, 0);
    Py_RETURN_NONE;
}

/* f._get_segments(first, end) -> bytes: the table bytes of segments [first, end). */
static PyObject *pycf_get_segments_py(pycf_filter *self, PyObject *args)
{
    unsigned long long first, end;
    if (!PyArg_ParseTuple(args, "KK", &first, &end))
        return NULL;
    cf_config c;
    size_t len;
    cf_get_config(self->f, &c);
    if (cf_segments_size(&c, first, end, &len) != CF_OK) {
        PyErr_SetString(PyExc_ValueError, "not a range of the segments of this filter");
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)len);
    if (!out)
        return NULL;
    cf_status st = cf_get_segments(self->f, first, end, PyBytes_AS_STRING(out), len);
    if (st != CF_OK) {
        Py_DECREF(out);
        return pycf_raise(Py_TYPE(self), st, NULL, 0);
    }
    return out;
}

/* f._stash_hashes() -> [(hash, segment), ...]: its stash entries as hashes, in stash
 * order, each with the segment of its first bucket. */
static PyObject *pycf_stash_hashes_py(pycf_filter *self, PyObject *unused)
{
    (void)unused;
    uint64_t h[CF_STASH_SLOTS];
    size_t n = 0;
    cf_mapping m;
    cf_status st = cf_stash_hashes(self->f, h, CF_STASH_SLOTS, &n);
    if (st == CF_OK)
        st = cf_get_mapping(self->f, &m);
    if (st != CF_OK)
        return pycf_raise(Py_TYPE(self), st, NULL, 0);
    PyObject *out = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; out && i < n; i++) {
        cf_place p;
        (void)cf_place_in(&m, h[i], &p); /* (the filter's own mapping) */
        PyObject *pair = Py_BuildValue("(KK)", (unsigned long long)h[i],
                                       (unsigned long long)(p.bucket[0] >> m.segment_bits));
        if (!pair)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, (Py_ssize_t)i, pair);
    }
    return out;
}

/* f._mapping() -> (buckets, tag_bits, segment_bits): its first sub-filter's mapping. */
static PyObject *pycf_mapping_py(pycf_filter *self, PyObject *unused)
{
    (void)unused;
    cf_mapping m;
    cf_status st = cf_get_mapping(self->f, &m);
    if (st != CF_OK)
        return pycf_raise(Py_TYPE(self), st, NULL, 0);
    return Py_BuildValue("(KII)", (unsigned long long)m.buckets, m.tag_bits, m.segment_bits);
}

/* f._merge_check(other) -> None: ValueError with cf_merge's reason where the two do not
 * merge as they are made. */
static PyObject *pycf_merge_check_py(pycf_filter *self, PyObject *other)
{
    if (!pycf_is_filter(Py_TYPE(self), other))
        return PyErr_Format(PyExc_TypeError, "takes a CuckooFilter, not %.100s",
                            Py_TYPE(other)->tp_name);
    const char *why = NULL;
    if (cf_merge_check(self->f, ((pycf_filter *)other)->f, &why) != CF_OK)
        return PyErr_Format(PyExc_ValueError, "%s", why ? why : "these filters do not merge");
    Py_RETURN_NONE;
}

/* f._merge_segments(first, end, dst, src, hashes) -> (unplaced, first_unplaced, items):
 * src's fingerprints (bytes of the same range, or None), then the keys of `hashes`, added
 * to the writable dst, the table bytes of segments [first, end) of filters made like f;
 * items: the fingerprints dst holds after. */
static PyObject *pycf_merge_segments_py(pycf_filter *self, PyObject *args)
{
    unsigned long long first, end;
    Py_buffer dst, src = {0};
    PyObject *src_o, *hashes_o;
    if (!PyArg_ParseTuple(args, "KKw*OO", &first, &end, &dst, &src_o, &hashes_o))
        return NULL;
    if (src_o != Py_None && PyObject_GetBuffer(src_o, &src, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&dst);
        return NULL;
    }
    size_t n = 0;
    uint64_t *h = pycf_hash_array(hashes_o, &n);
    PyObject *out = NULL;
    if (h && src_o != Py_None && src.len != dst.len) {
        PyErr_SetString(PyExc_ValueError, "the source range's length differs");
    } else if (h) {
        cf_config c;
        cf_get_config(self->f, &c);
        c.flags &= ~(unsigned)CF_CONCURRENT;
        cf_segments_report r;
        PyThreadState *ts = PyEval_SaveThread();
        cf_status st = cf_merge_segments(&c, first, end, dst.buf, (size_t)dst.len,
                                         src_o != Py_None ? src.buf : NULL, h, n, &r);
        PyEval_RestoreThread(ts);
        if (st != CF_OK) {
            pycf_raise(Py_TYPE(self), st, NULL, 0);
        } else {
            PyObject *firsts =
                pycf_le_bytes(r.first_unplaced,
                              r.unplaced < CF_STASH_SLOTS ? (size_t)r.unplaced : CF_STASH_SLOTS);
            out = firsts ? Py_BuildValue("(KNK)", (unsigned long long)r.unplaced, firsts,
                                         (unsigned long long)r.items)
                         : NULL;
        }
    }
    PyMem_Free(h);
    if (src_o != Py_None)
        PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    return out;
}

/* The head of the file of a fixed segmented filter of config c holding `items`
 * fingerprints, its stash made of the hashes `unplaced`: (head, segment_bytes, total,
 * stashed), as cf_segments_file_head gives them. */
static PyObject *pycf_file_head(PyTypeObject *type, const cf_config *c, unsigned long long items,
                                PyObject *unplaced)
{
    size_t n;
    uint64_t *h = pycf_hash_array(unplaced, &n);
    if (!h)
        return NULL;
    uint8_t head[CF_SEGMENTS_HEAD_MAX];
    cf_segments_file info;
    cf_status st = cf_segments_file_head(c, items, h, n, head, sizeof head, &info);
    PyMem_Free(h);
    if (st == CF_EINVAL)
        return PyErr_Format(PyExc_ValueError,
                            "no file head: not a fixed segmented filter, or %llu items are more "
                            "than it has slots",
                            items);
    if (st != CF_OK)
        return pycf_raise(type, st, NULL, 0);
    return Py_BuildValue("(y#KKK)", (const char *)head, (Py_ssize_t)info.head_len,
                         (unsigned long long)info.segment_bytes, (unsigned long long)info.total,
                         (unsigned long long)info.stashed);
}

/* CuckooFilter._segments_file_head(capacity, items, unplaced, **options): the head of the
 * file of the filter of those settings (pycf_file_head). */
static PyObject *pycf_segments_file_head_py(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *capacity, *unplaced;
    unsigned long long items;
    if (!PyArg_ParseTuple(args, "OKO", &capacity, &items, &unplaced))
        return NULL;
    cf_config c;
    if (pycf_config_of(capacity, kwargs, &c) < 0)
        return NULL;
    return pycf_file_head(type, &c, items, unplaced);
}

/* f._file_head(items, unplaced): the head of the file of a filter made like f
 * (pycf_file_head). */
static PyObject *pycf_file_head_like(pycf_filter *self, PyObject *args)
{
    PyObject *unplaced;
    unsigned long long items;
    if (!PyArg_ParseTuple(args, "KO", &items, &unplaced))
        return NULL;
    cf_config c;
    cf_get_config(self->f, &c);
    c.flags &= ~(unsigned)CF_CONCURRENT;
    return pycf_file_head(Py_TYPE(self), &c, items, unplaced);
}

static int pycf_path(PyObject *o, PyObject **bytes);

/* CuckooFilter._file_begin(path, head, total) -> str: a new temporary file next to path
 * holding head, total bytes long (cf_file_begin); its name. */
static PyObject *pycf_file_begin_py(PyTypeObject *type, PyObject *args)
{
    PyObject *path, *p;
    Py_buffer head;
    unsigned long long total;
    if (!PyArg_ParseTuple(args, "Oy*K", &path, &head, &total))
        return NULL;
    if (pycf_path(path, &p) < 0) {
        PyBuffer_Release(&head);
        return NULL;
    }
    size_t cap = PATH_MAX + CF_FILE_TEMP_EXTRA; /* (a symbolic link's target may be longer) */
    char *tmp = PyMem_Malloc(cap);
    PyObject *out = NULL;
    if (!tmp) {
        PyErr_NoMemory();
    } else {
        PyThreadState *ts = PyEval_SaveThread();
        cf_status st =
            cf_file_begin(PyBytes_AS_STRING(p), head.buf, (size_t)head.len, total, tmp, cap);
        int err = errno;
        PyEval_RestoreThread(ts);
        out = st == CF_OK ? PyUnicode_DecodeFSDefault(tmp) : pycf_raise(type, st, path, err);
        PyMem_Free(tmp);
    }
    Py_DECREF(p);
    PyBuffer_Release(&head);
    return out;
}

/* CuckooFilter._file_commit(tmp, path): the temporary file, its parts written, checked,
 * summed and renamed over path (cf_file_commit); CorruptFilter with the reason, tmp left
 * as it was, if it is no whole filter file. */
static PyObject *pycf_file_commit_py(PyTypeObject *type, PyObject *args)
{
    PyObject *tmp_o, *path, *t, *p;
    if (!PyArg_ParseTuple(args, "OO", &tmp_o, &path))
        return NULL;
    if (pycf_path(tmp_o, &t) < 0)
        return NULL;
    if (pycf_path(path, &p) < 0) {
        Py_DECREF(t);
        return NULL;
    }
    const char *reason = NULL;
    PyThreadState *ts = PyEval_SaveThread();
    cf_status st = cf_file_commit(PyBytes_AS_STRING(t), PyBytes_AS_STRING(p), &reason);
    int err = errno;
    PyEval_RestoreThread(ts);
    Py_DECREF(t);
    Py_DECREF(p);
    if (st != CF_OK)
        return pycf_raise_reason(type, st, st == CF_ECORRUPT ? tmp_o : path, err, reason);
    Py_RETURN_NONE;
}

static PyObject *pycf_empty_like(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    char k_model[] = "model", k_cc[] = "concurrent";
    char *names[] = {k_model, k_cc, NULL};
    PyObject *model, *cc_o = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$O:empty_like", names, &model, &cc_o))
        return NULL;
    if (!pycf_is_filter(type, model))
        return PyErr_Format(PyExc_TypeError, "empty_like() takes a CuckooFilter, not %.100s",
                            Py_TYPE(model)->tp_name);
    pycf_filter *m = (pycf_filter *)model;
    int concurrent = cc_o && cc_o != Py_None ? PyObject_IsTrue(cc_o) : -1;
    if (cc_o && cc_o != Py_None && concurrent < 0)
        return NULL;
    cf_filter *f = NULL;
    cf_status st;
    if (concurrent < 0) {
        st = cf_new_like(m->f, NULL, &f);
    } else { /* the model's settings and seed, concurrent as asked */
        cf_config c;
        cf_get_config(m->f, &c);
        c.flags = concurrent ? c.flags | CF_CONCURRENT : c.flags & ~(unsigned)CF_CONCURRENT;
        st = cf_new(&c, &f);
    }
    if (st != CF_OK)
        return pycf_raise(type, st, NULL, 0);
    /* A new filter is concurrent as a copy would be, unless asked, and changes: a model
     * from open() gives one made as new filters are. */
    PyObject *out =
        pycf_wrap(type, f, concurrent < 0 ? pycf_copy_concurrent(m) : concurrent != 0, false);
    if (out) /* a window keeps its model's clock */
        ((pycf_filter *)out)->clock = Py_XNewRef(m->clock);
    return out;
}

static PyObject *pycf_reduce(pycf_filter *self, PyObject *unused)
{
    PyObject *b = pycf_to_bytes(self, unused);
    if (!b)
        return NULL;
    PyObject *from = PyObject_GetAttrString((PyObject *)Py_TYPE(self), "from_bytes");
    if (!from) {
        Py_DECREF(b);
        return NULL;
    }
    return Py_BuildValue("(N(NO))", from, b, pycf_copy_concurrent(self) ? Py_True : Py_False);
}

/* A path argument as the file system's bytes (os.fspath, then encoded). */
static int pycf_path(PyObject *o, PyObject **bytes)
{
    return PyUnicode_FSConverter(o, bytes) ? 0 : -1;
}

static PyObject *pycf_save(pycf_filter *self, PyObject *path)
{
    PYCF_TICK(self, NULL);
    PyObject *p;
    if (pycf_path(path, &p) < 0)
        return NULL;
    /* A filter that others may change keeps the GIL: the file is then one state. */
    PyThreadState *ts = pycf_lookups_free(self) ? PyEval_SaveThread() : NULL;
    cf_status st = cf_save(self->f, PyBytes_AS_STRING(p));
    int err = errno;
    if (ts)
        PyEval_RestoreThread(ts);
    Py_DECREF(p);
    if (st != CF_OK)
        return pycf_raise(Py_TYPE(self), st, path, err);
    Py_RETURN_NONE;
}

/* load() and open(): a file's filter, copied into memory (flags: CF_CONCURRENT or 0) or
 * mapped read-only (flags: those of cf_open_mapped). */
static PyObject *pycf_from_file(PyTypeObject *type, PyObject *path, unsigned flags, bool map)
{
    PyObject *p;
    if (pycf_path(path, &p) < 0)
        return NULL;
    cf_filter *f = NULL;
    PyThreadState *ts = PyEval_SaveThread();
    cf_status st = map ? cf_open_mapped(PyBytes_AS_STRING(p), flags, NULL, &f)
                       : cf_load_flags(PyBytes_AS_STRING(p), flags, NULL, &f);
    int err = errno;
    const char *reason = NULL;
    if (st == CF_ECORRUPT || st == CF_EVERSION) /* it maps the file, allocating nothing */
        (void)cf_validate_file(PyBytes_AS_STRING(p), &reason);
    PyEval_RestoreThread(ts);
    Py_DECREF(p);
    if (st != CF_OK)
        return pycf_raise_reason(type, st, path, err, reason);
    return pycf_wrap(type, f, !map && (flags & CF_CONCURRENT), map);
}

static PyObject *pycf_load(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    char k_path[] = "path", k_cc[] = "concurrent";
    char *names[] = {k_path, k_cc, NULL};
    PyObject *path;
    int concurrent = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$p", names, &path, &concurrent))
        return NULL;
    return pycf_from_file(type, path, concurrent ? CF_CONCURRENT : 0u, false);
}

static PyObject *pycf_open(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    char k_path[] = "path", k_verify[] = "verify";
    char *names[] = {k_path, k_verify, NULL};
    PyObject *path;
    int verify = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$p", names, &path, &verify))
        return NULL;
    return pycf_from_file(type, path, verify ? CF_MAP_VERIFY : 0u, true);
}

/* The module's fields for f (no deletes counted; f's eviction budget), with their check. */
static cf_status pycf_redis_prefix(const cf_filter *f, unsigned char out[PYCF_REDIS_PREFIX])
{
    cf_config c;
    cf_get_config(f, &c);
    return cf_module_prefix_write(f, 0, c.max_kicks, out);
}

/* chunks(): an iterator of the (cursor, bytes) pairs of CF.SCANDUMP, one chunk made per
 * step, so that a dump holds one chunk's memory at a time, not the filter's again. As
 * with CF.SCANDUMP, a filter that changes between two steps gives a dump that does not
 * load (from_chunks raises CorruptFilter); one that grew meanwhile may end it at once
 * with RuntimeError, as a dict changed during iteration does. */
typedef struct pycf_chunk_iter {
    PyObject ob_base;
    pycf_filter *filter; /* a reference; NULL once the dump has ended */
    uint64_t cursor;
    unsigned char *buf; /* a chunk's room, grown with cf_dump_chunk_max */
    size_t cap;
    /* A step is making a chunk without the GIL: another thread's step on the same
     * iterator would write the same room and cursor, or free the room under it. */
    bool running;
} pycf_chunk_iter;

static PyObject *pycf_chunks(pycf_filter *self, PyObject *unused)
{
    (void)unused;
    PYCF_TICK(self, NULL);
    PyTypeObject *type = pycf_state_of_type(Py_TYPE(self))->chunk_iter_type;
    pycf_chunk_iter *it = (pycf_chunk_iter *)type->tp_alloc(type, 0);
    if (!it)
        return NULL;
    Py_INCREF(self);
    it->filter = self;
    it->cursor = 0;
    it->buf = NULL;
    it->cap = 0;
    it->running = false;
    return (PyObject *)it;
}

static PyObject *pycf_chunk_next(pycf_chunk_iter *it)
{
    pycf_filter *self = it->filter;
    if (!self)
        return NULL;   /* exhausted: StopIteration */
    if (it->running) { /* as a generator that another thread is running */
        PyErr_SetString(PyExc_ValueError, "chunks() iterator already executing");
        return NULL;
    }
    /* A growth between two steps makes the largest chunk larger. */
    size_t cap = cf_dump_chunk_max(self->f) + PYCF_REDIS_PREFIX;
    if (cap > it->cap) {
        unsigned char *buf = PyMem_Realloc(it->buf, cap);
        if (!buf)
            return PyErr_NoMemory();
        it->buf = buf;
        it->cap = cap;
    }
    size_t len = 0, skip = it->cursor == 0 ? PYCF_REDIS_PREFIX : 0;
    /* The chunk dump takes a concurrent filter's lock: it may run beside other threads. */
    it->running = true;
    PyThreadState *ts = self->concurrent ? PyEval_SaveThread() : NULL;
    cf_status st = cf_dump_chunk(self->f, &it->cursor, it->buf + skip, cap - skip, &len);
    if (ts)
        PyEval_RestoreThread(ts);
    it->running = false;
    PyObject *pair = NULL;
    if (st == CF_EINVAL) /* the cursor is no chunk's of the filter as it is now */
        PyErr_SetString(PyExc_RuntimeError, "the filter changed size during chunks()");
    else if (st != CF_OK)
        pycf_raise(Py_TYPE(self), st, NULL, 0);
    else if (len > 0 && skip && (st = pycf_redis_prefix(self->f, it->buf)) != CF_OK)
        pycf_raise(Py_TYPE(self), st, NULL, 0);
    else if (len > 0) {
        pair = Py_BuildValue("(Ky#)", (unsigned long long)it->cursor, (const char *)it->buf,
                             (Py_ssize_t)(len + skip));
    }
    if (!pair || it->cursor == 0) { /* the last chunk, or an error: the dump ends */
        PyMem_Free(it->buf);
        it->buf = NULL;
        it->cap = 0;
        Py_CLEAR(it->filter);
    }
    return pair;
}

static void pycf_chunk_iter_dealloc(pycf_chunk_iter *it)
{
    PyTypeObject *tp = Py_TYPE(it);
    PyMem_Free(it->buf);
    Py_XDECREF(it->filter);
    tp->tp_free((PyObject *)it);
    Py_DECREF(tp);
}

/* Do the module's fields in `prefix` belong with the complete filter f? */
static bool pycf_check_prefix(const cf_filter *f, const unsigned char prefix[PYCF_REDIS_PREFIX])
{
    uint64_t deletes, kicks, check;
    return cf_module_prefix_read(prefix, PYCF_REDIS_PREFIX, &deletes, &kicks, &check) == CF_OK &&
           check == cf_module_fields_check(f, deletes, kicks);
}

/* The header chunk into *f: as CF.SCANDUMP gives it (the module's fields in front, whose
 * check must then match the header), or bare, as cf_dump_chunk gives it. A window's
 * seed comes with its first generation, not its header: its prefix is copied to `prefix`
 * (*pending set) for pycf_check_prefix once it is complete. */
static cf_status pycf_take_header(cf_filter **f, uint64_t cursor, const unsigned char *data,
                                  size_t len, unsigned char prefix[PYCF_REDIS_PREFIX],
                                  bool *pending)
{
    cf_status st = cf_load_chunk(f, cursor, data, len, NULL);
    if (st != CF_ECORRUPT || len < PYCF_REDIS_PREFIX)
        return st;
    uint64_t deletes, kicks, check;
    if (cf_module_prefix_read(data, len, &deletes, &kicks, &check) != CF_OK)
        return CF_ECORRUPT;
    st = cf_load_chunk(f, cursor, data + PYCF_REDIS_PREFIX, len - PYCF_REDIS_PREFIX, NULL);
    if (st != CF_OK)
        return st;
    cf_config c;
    cf_get_config(*f, &c);
    memcpy(prefix, data, PYCF_REDIS_PREFIX);
    *pending = c.generations != 0;
    if (!*pending && !pycf_check_prefix(*f, prefix)) {
        cf_free(*f); /* the fields do not belong with this header */
        *f = NULL;
        st = CF_ECORRUPT;
    }
    return st;
}

/* A filter that cf_load_chunk completed, made concurrent: the chunk loader makes plain
 * filters only, so it goes through its bytes once (and is freed before the copy). */
static PyObject *pycf_wrap_concurrent(PyTypeObject *type, cf_filter *f)
{
    size_t n = cf_serialized_size(f);
    void *buf = PyMem_Malloc(n ? n : 1u);
    if (!buf) {
        cf_free(f);
        return PyErr_NoMemory();
    }
    cf_status st = cf_serialize(f, buf, n, NULL);
    cf_free(f);
    PyObject *out =
        st == CF_OK ? pycf_from_buffer(type, buf, n, true) : pycf_raise(type, st, NULL, 0);
    PyMem_Free(buf);
    return out;
}

static PyObject *pycf_from_chunks(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    char k_pairs[] = "pairs", k_cc[] = "concurrent";
    char *names[] = {k_pairs, k_cc, NULL};
    PyObject *pairs;
    int concurrent = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$p", names, &pairs, &concurrent))
        return NULL;
    PyObject *it = PyObject_GetIter(pairs);
    if (!it)
        return NULL;
    cf_filter *f = NULL;
    unsigned char prefix[PYCF_REDIS_PREFIX];
    bool pending = false;
    PyObject *item;
    while ((item = PyIter_Next(it)) != NULL) {
        /* A pair as chunks() gives it, or a list as a Redis client gives CF.SCANDUMP's reply. */
        PyObject *pair = PySequence_Check(item) && !PyBytes_Check(item) && !PyUnicode_Check(item)
                             ? PySequence_Fast(item, "")
                             : NULL;
        Py_DECREF(item);
        if (!pair || PySequence_Fast_GET_SIZE(pair) != 2) {
            Py_XDECREF(pair);
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError, "a chunk is a (cursor, bytes) pair");
            break;
        }
        PyObject *c = PySequence_Fast_GET_ITEM(pair, 0), *d = PySequence_Fast_GET_ITEM(pair, 1);
        unsigned long long cursor = PyLong_Check(c) ? PyLong_AsUnsignedLongLong(c) : 0;
        Py_buffer data;
        if (!PyLong_Check(c) || PyErr_Occurred() ||
            PyObject_GetBuffer(d, &data, PyBUF_SIMPLE) < 0) {
            Py_DECREF(pair);
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError, "a chunk is a (cursor, bytes) pair: an int in "
                                             "[0, 2**64) and a bytes-like object");
            break;
        }
        cf_status st =
            f ? cf_load_chunk(&f, cursor, data.buf, (size_t)data.len, NULL)
              : pycf_take_header(&f, cursor, data.buf, (size_t)data.len, prefix, &pending);
        PyBuffer_Release(&data);
        Py_DECREF(pair);
        if (st != CF_OK) {
            pycf_raise(type, st, NULL, 0);
            break;
        }
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) {
        cf_free(f);
        return NULL;
    }
    if (!f || cf_is_loading(f) || (pending && !pycf_check_prefix(f, prefix))) {
        PyErr_SetString(pycf_state_of_type(type)->corrupt,
                        !f                 ? "no chunks"
                        : cf_is_loading(f) ? "the chunks end before the filter is complete"
                                           : "the module's fields do not belong with the filter");
        cf_free(f);
        return NULL;
    }
    return concurrent ? pycf_wrap_concurrent(type, f) : pycf_wrap(type, f, false, false);
}

static PyObject *pycf_repr(pycf_filter *self)
{
    cf_stats s;
    cf_get_stats(self->f, &s);
    return PyUnicode_FromFormat("<cuckoofilter.CuckooFilter items=%llu capacity=%llu "
                                "fingerprint_bits=%u bucket_size=%u%s>",
                                (unsigned long long)s.items, (unsigned long long)s.capacity,
                                s.fingerprint_bits, s.bucket_size,
                                self->mapped ? " read-only" : "");
}

/* ------------------------------------------------------------------------------------ */
/* The type and the module                                                              */
/* ------------------------------------------------------------------------------------ */

PyDoc_STRVAR(pycf_add_doc, "add(key) -> True\n\n"
                           "Add one copy of key. A fixed-size filter (expansion=0) with no room\n"
                           "raises FilterFull and is left unchanged; a growing one adds a\n"
                           "sub-filter. A key is bytes (or any buffer), str (its UTF-8) or an int\n"
                           "in [0, 2**64) (its 8 bytes, little-endian).");
PyDoc_STRVAR(pycf_add_unique_doc,
             "add_unique(key) -> bool\n\n"
             "Add key unless the filter (probably) holds it already: False, and nothing\n"
             "added, if it does. A false positive can make this skip a key never added.");
PyDoc_STRVAR(pycf_discard_doc,
             "discard(key) -> bool\n\n"
             "Remove one copy of key: True if one was removed, False if none matched.\n"
             "Only discard keys that were added: removing a key never added can remove the\n"
             "fingerprint of another key that shares it.");
PyDoc_STRVAR(pycf_remove_doc,
             "remove(key) -> None\n\n"
             "Remove one copy of key; KeyError if none matched (discard() says False).\n"
             "Only remove keys that were added (see discard).");
PyDoc_STRVAR(pycf_bytes_doc, "bytes(f): the same as f.to_bytes().");
PyDoc_STRVAR(pycf_count_doc, "count(key) -> int\n\n"
                             "Fingerprints matching key: at least the times it was added minus\n"
                             "the times it was discarded (false positives can add to it).");
PyDoc_STRVAR(pycf_add_many_doc,
             "add_many(keys) -> int\n\n"
             "Add every key of an iterable, in order, or every element of a buffer of uint64\n"
             "(a numpy array of dtype uint64; each is the key its int would be). Returns how\n"
             "many were added. If some found no room (a full fixed-size filter), the others\n"
             "are still added and FilterFull is raised, its `added` attribute the count.");
PyDoc_STRVAR(pycf_contains_many_doc,
             "contains_many(keys) -> list[bool] | bytearray\n\n"
             "`key in filter` for every key, batched (several times faster on a large\n"
             "filter). For an iterable, a list of bools; for a buffer of uint64, a bytearray\n"
             "of 0 and 1, one per element (numpy.frombuffer(r, dtype=bool) views it).");
PyDoc_STRVAR(pycf_clear_doc, "clear() -> None\n\nRemove every key; the size and seed stay.");
PyDoc_STRVAR(pycf_advance_doc,
             "advance() -> None\n\n"
             "A windowed filter: drop the oldest generation and start a new one now, whatever\n"
             "the clock says (for a filter made with clock=None, the only way it advances).");
PyDoc_STRVAR(pycf_to_bytes_doc,
             "to_bytes() -> bytes\n\n"
             "The filter in the file format of the cuckoo tool and the C library\n"
             "(versioned, little-endian, checksummed).");
PyDoc_STRVAR(pycf_from_bytes_doc,
             "from_bytes(data, concurrent=True) -> CuckooFilter\n\n"
             "The filter that to_bytes() gave, checked completely first: damaged or forged\n"
             "bytes raise CorruptFilter. concurrent: as for the constructor.");
PyDoc_STRVAR(pycf_copy_doc, "copy() -> CuckooFilter\n\n"
                            "An independent copy, concurrent unless this filter was made\n"
                            "with concurrent=False (a copy of an open() one is writable).");
PyDoc_STRVAR(pycf_merge_doc,
             "merge(other, *, threads=0) -> None\n\n"
             "Add every key of `other` to this filter (also f |= other; f | other makes a\n"
             "new one): each is found, counts add up (a key in both counts twice), and the\n"
             "false-positive rate is the formula's at the merged load. Filters merge when\n"
             "made alike: from one model with empty_like(), or with the same settings and\n"
             "seed. Give them the capacity of all their keys together: a key keeps its place\n"
             "only in the first sub-filter (or one of its size). All or nothing.\n"
             "threads: segmented filters made with concurrent=False merge with that many\n"
             "threads (0: one per processor), each its own segments, to the same bytes as\n"
             "one; a concurrent filter merges with one (its lookups run meanwhile).\n"
             "Raises ValueError saying what differs (\"seeds differ\", ...) or that a filter\n"
             "cannot merge with itself, FilterFull if the keys do not fit, ReadOnlyFilter\n"
             "for an open() one, TypeError for anything but a CuckooFilter.");
PyDoc_STRVAR(pycf_hashes_doc,
             "hashes(keys) -> bytes\n\n"
             "Each key's hash as this filter makes it (its seed; RedisBloom's hash for that\n"
             "layout), 8 bytes little-endian each: what a program that places keys itself\n"
             "(the segments of a filter built apart) starts from.");
PyDoc_STRVAR(pycf_build_doc,
             "build(keys, *, capacity=None, threads=0, **options) -> CuckooFilter\n\n"
             "A filter of the distinct keys (bytes, str, buffers, or a numpy uint64 array),\n"
             "sized for them unless capacity is given, made with the constructor's options.\n"
             "A segmented filter (segmented=True, or by default one of at least 2^22\n"
             "buckets, about 16M keys) is filled by `threads` threads (0: one per\n"
             "processor), each its own segments: the same bytes for any number of them, the\n"
             "bytes `cuckoo build --seed S --capacity N` writes for the same keys. Without a\n"
             "seed, a secret one is drawn. A concurrent filter (the default) is the plain one\n"
             "the threads fill, copied. FilterFull if some keys did not fit, with `added` and\n"
             "`filter` (the keys that fit) set.");
PyDoc_STRVAR(pycf_empty_like_doc,
             "empty_like(model, *, concurrent=None) -> CuckooFilter\n\n"
             "An empty filter that merges with `model`: its settings and seed (a window, its\n"
             "clock), concurrent as model.copy() would be, or as `concurrent` says.");
PyDoc_STRVAR(pycf_save_doc,
             "save(path) -> None\n\n"
             "Write the filter to path atomically (a temporary file, flushed, renamed over\n"
             "path), in the format of the cuckoo tool. FileError (an OSError) if that\n"
             "fails.");
PyDoc_STRVAR(pycf_load_doc, "load(path, *, concurrent=True) -> CuckooFilter\n\n"
                            "Read a filter file (the cuckoo tool's, or save()'s), checked\n"
                            "completely: a damaged file raises CorruptFilter, one that cannot\n"
                            "be read FileError (an OSError: a missing one is also a\n"
                            "FileNotFoundError). concurrent: as for the constructor.");
PyDoc_STRVAR(pycf_open_doc,
             "open(path, *, verify=True) -> CuckooFilter\n\n"
             "Map a filter file read-only: lookups answer from the file's pages, shared by\n"
             "every process that maps it, with no load. Changes raise ReadOnlyFilter.\n"
             "verify=False skips the tables' checksum (one read of the file) for an instant\n"
             "open; a damaged table then gives wrong answers, never a crash. The one\n"
             "thing a mapping cannot survive is the file cut short in place while mapped\n"
             "(truncate, or > in a shell): the process then dies of SIGBUS, as with any\n"
             "mmap. save() and the cuckoo tool replace files by rename, which is safe: the\n"
             "mapping keeps the old file until it is opened again.");
PyDoc_STRVAR(pycf_chunks_doc,
             "chunks() -> iterator of (cursor, bytes)\n\n"
             "The filter in pieces of at most 16 MiB, as the Redis module's CF.SCANDUMP\n"
             "gives them: from_chunks(), or CF.LOADCHUNK key cursor bytes for each pair in\n"
             "order, rebuilds it. Each step makes one chunk, so a dump holds one chunk's\n"
             "memory at a time; as with CF.SCANDUMP, a filter changed between two steps\n"
             "gives a dump that from_chunks() refuses (CorruptFilter), or one that grew\n"
             "meanwhile ends the iteration with RuntimeError. Like a generator, the\n"
             "iterator takes one step at a time: a step while another thread's runs\n"
             "raises ValueError.");
PyDoc_STRVAR(pycf_from_chunks_doc,
             "from_chunks(pairs, *, concurrent=True) -> CuckooFilter\n\n"
             "The filter from an iterable of (cursor, bytes): chunks(), the Redis module's\n"
             "CF.SCANDUMP replies until the cursor is 0, or the C library's cf_dump_chunk.\n"
             "A damaged, missing or reordered chunk raises CorruptFilter. concurrent: as\n"
             "for the constructor.");
PyDoc_STRVAR(pycf_stats_doc,
             "A dict of figures: capacity, items, load_factor, bits_per_item (table bits per\n"
             "item held, or per unit of capacity while empty), fpr (the expected\n"
             "false-positive rate now), fpr_bound (the most it can reach), bytes, slots,\n"
             "buckets, sub_filters, fingerprint_bits, bucket_size, stashed, expansion,\n"
             "max_sub_filters, semi_sort, segmented, redisbloom, fast_hash, concurrent,\n"
             "read_only.");

static PyMethodDef pycf_methods[] = {
    {"add", (PyCFunction)pycf_add, METH_O, pycf_add_doc},
    {"add_unique", (PyCFunction)pycf_add_unique, METH_O, pycf_add_unique_doc},
    {"discard", (PyCFunction)pycf_discard, METH_O, pycf_discard_doc},
    {"remove", (PyCFunction)pycf_remove, METH_O, pycf_remove_doc},
    {"__bytes__", (PyCFunction)pycf_to_bytes, METH_NOARGS, pycf_bytes_doc},
    {"count", (PyCFunction)pycf_count, METH_O, pycf_count_doc},
    {"add_many", (PyCFunction)pycf_add_many, METH_O, pycf_add_many_doc},
    {"contains_many", (PyCFunction)pycf_contains_many, METH_O, pycf_contains_many_doc},
    {"clear", (PyCFunction)pycf_clear, METH_NOARGS, pycf_clear_doc},
    {"advance", (PyCFunction)pycf_advance, METH_NOARGS, pycf_advance_doc},
    {"to_bytes", (PyCFunction)pycf_to_bytes, METH_NOARGS, pycf_to_bytes_doc},
    {"from_bytes", (PyCFunction)(void (*)(void))pycf_from_bytes,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS, pycf_from_bytes_doc},
    {"copy", (PyCFunction)pycf_copy, METH_NOARGS, pycf_copy_doc},
    {"merge", (PyCFunction)(void (*)(void))pycf_merge, METH_VARARGS | METH_KEYWORDS,
     pycf_merge_doc},
    {"empty_like", (PyCFunction)(void (*)(void))pycf_empty_like,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS, pycf_empty_like_doc},
    {"build", (PyCFunction)(void (*)(void))pycf_build, METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     pycf_build_doc},
    {"hashes", (PyCFunction)pycf_hashes, METH_O, pycf_hashes_doc},
    {"_segment_plan", (PyCFunction)(void (*)(void))pycf_segment_plan,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS, NULL},
    {"_sort_hashes", (PyCFunction)pycf_sort_hashes_py, METH_VARARGS | METH_CLASS, NULL},
    {"_build_segments", (PyCFunction)(void (*)(void))pycf_build_segments_py,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS, NULL},
    {"_put_segments", (PyCFunction)pycf_put_segments_py, METH_VARARGS, NULL},
    {"_stash_unplaced", (PyCFunction)pycf_stash_unplaced_py, METH_O, NULL},
    {"_get_segments", (PyCFunction)pycf_get_segments_py, METH_VARARGS, NULL},
    {"_stash_hashes", (PyCFunction)pycf_stash_hashes_py, METH_NOARGS, NULL},
    {"_merge_check", (PyCFunction)pycf_merge_check_py, METH_O, NULL},
    {"_mapping", (PyCFunction)pycf_mapping_py, METH_NOARGS, NULL},
    {"_merge_segments", (PyCFunction)pycf_merge_segments_py, METH_VARARGS, NULL},
    {"_segments_file_head", (PyCFunction)(void (*)(void))pycf_segments_file_head_py,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS, NULL},
    {"_file_head", (PyCFunction)pycf_file_head_like, METH_VARARGS, NULL},
    {"_file_begin", (PyCFunction)pycf_file_begin_py, METH_VARARGS | METH_CLASS, NULL},
    {"_file_commit", (PyCFunction)pycf_file_commit_py, METH_VARARGS | METH_CLASS, NULL},
    {"_split_hashes", (PyCFunction)(void (*)(void))pycf_split_hashes,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS, NULL},
    {"_build_hashes", (PyCFunction)pycf_build_hashes_py, METH_VARARGS, NULL},
    {"__copy__", (PyCFunction)pycf_copy, METH_NOARGS, pycf_copy_doc},
    {"__reduce__", (PyCFunction)pycf_reduce, METH_NOARGS, NULL},
    {"save", (PyCFunction)pycf_save, METH_O, pycf_save_doc},
    {"load", (PyCFunction)(void (*)(void))pycf_load, METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     pycf_load_doc},
    {"open", (PyCFunction)(void (*)(void))pycf_open, METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     pycf_open_doc},
    {"chunks", (PyCFunction)pycf_chunks, METH_NOARGS, pycf_chunks_doc},
    {"from_chunks", (PyCFunction)(void (*)(void))pycf_from_chunks,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS, pycf_from_chunks_doc},
    {NULL, NULL, 0, NULL},
};

#define PYCF_PROPERTY(name, which, doc)                                                            \
    {                                                                                              \
        name, (getter)pycf_get_property, NULL, doc, (void *)(uintptr_t)(which)                     \
    }
static PyGetSetDef pycf_getset[] = {
    {"stats", (getter)pycf_get_stats, NULL, pycf_stats_doc, NULL},
    PYCF_PROPERTY("capacity", PYCF_CAPACITY, "The capacity it was made with (keys to hold)."),
    PYCF_PROPERTY("fingerprint_bits", PYCF_FINGERPRINT_BITS,
                  "Bits of each fingerprint (of the first sub-filter)."),
    PYCF_PROPERTY("bucket_size", PYCF_BUCKET_SIZE, "Slots per bucket."),
    PYCF_PROPERTY("fpr", PYCF_FPR, "The expected false-positive rate at the current load."),
    PYCF_PROPERTY("load_factor", PYCF_LOAD_FACTOR, "Items over slots."),
    PYCF_PROPERTY("concurrent", PYCF_CONCURRENT,
                  "Made with CF_CONCURRENT: threads may call it without the GIL."),
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(
    pycf_type_doc,
    "CuckooFilter(capacity, *, fpr=None, fingerprint_bits=None, bucket_size=4, expansion=0,\n"
    "             seed=None, max_sub_filters=32, semi_sort=False, concurrent=True,\n"
    "             redisbloom=False, window=None, generations=8, clock=time.time,\n"
    "             segmented=None, fast_hash=False)\n\n"
    "A set of keys that answers `key in f` with no false negatives and a small,\n"
    "tunable rate of false positives, in a few bytes per key, and that can delete.\n\n"
    "capacity: keys to hold. fpr: the false-positive rate wanted at full load (sets the\n"
    "fingerprint width); or fingerprint_bits, 4..32 (default 12: about 0.2 %).\n"
    "bucket_size: slots per bucket. expansion: 0 keeps the size fixed (add raises\n"
    "FilterFull once full); n >= 1 appends a sub-filter n times larger when full, up to\n"
    "max_sub_filters. seed: None draws a secret one; an int makes the filter\n"
    "reproducible. semi_sort: sorted buckets, one bit less per slot at the same rate.\n"
    "redisbloom: RedisBloom's layout (its hash, 8-bit fingerprints, power-of-two\n"
    "sub-filters, bucket_size 2 and 20 kicks by default, no seed), answering as\n"
    "RedisBloom's CF.*\n"
    "commands would; files of that layout load as it, whatever this says.\n"
    "segmented: tables of segments of 65536 buckets that threads and Dask workers fill\n"
    "apart (build()); None: from 2^22 buckets (about 16M keys) on; True, False: always,\n"
    "never (False: format version 2, the tables of any size).\n"
    "fast_hash: int keys (and 8-byte bytes) hashed by multiply-shift with words from\n"
    "the seed instead of XXH3: faster lookups of ids. Other keys keep XXH3.\n"
    "Not with window or redisbloom; its files need this version or later to load.\n\n"
    "window: a filter that forgets: a key is found for at least `window` seconds after\n"
    "its last add, and is gone within window * G / (G - 1) for G `generations` (default\n"
    "8), each a filter of `capacity` keys (fpr then counts all of them; no expansion).\n"
    "Every call first drops the generations that fell out of the window by `clock` (a\n"
    "callable giving seconds; default time.time, whose Unix time the files of the cuckoo\n"
    "tool and the Redis module count generations in; time.monotonic for a filter that\n"
    "never leaves the process and must not follow the wall clock's steps; None: only\n"
    "advance() moves it). add_unique() refreshes a key that only older generations hold.\n"
    "A loaded windowed filter runs on time.time.\n\n"
    "Keys: bytes (or any buffer), str (UTF-8), int in [0, 2**64) (8 bytes little-endian).\n"
    "Files: save(), load(), open() use the format of the `cuckoo` command-line tool.\n\n"
    "Threads: any filter may be used by any number of threads at once. A concurrent\n"
    "one (the default here and for load(), from_bytes(), from_chunks(); copies and\n"
    "pickles keep it) releases the GIL in its batch calls, dumps and file writes, and\n"
    "its lookups never wait for writers. concurrent=False gives a filter whose calls\n"
    "keep the GIL, with lookups about a third faster. One from open() never changes\n"
    "and releases the GIL for lookups.");

/* CPython's slot tables hold functions as void *, which ISO C does not define (POSIX
 * does): the one place the pedantic warning is off. */
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#endif
static PyType_Slot pycf_type_slots[] = {
    {Py_tp_new, pycf_new},
    {Py_tp_dealloc, pycf_dealloc},
    {Py_tp_traverse, pycf_filter_traverse},
    {Py_tp_clear, pycf_clear_refs},
    {Py_tp_repr, pycf_repr},
    {Py_tp_doc, (void *)(uintptr_t)pycf_type_doc}, /* read only, as CPython copies it */
    {Py_tp_methods, pycf_methods},
    {Py_tp_getset, pycf_getset},
    {Py_sq_contains, pycf_contains},
    {Py_tp_richcompare, pycf_richcompare},
    {Py_tp_hash, PyObject_HashNotImplemented}, /* mutable, as set is */
    {Py_nb_or, pycf_or},
    {Py_nb_inplace_or, pycf_ior},
    {Py_sq_length, pycf_len},
    {0, NULL},
};
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#endif
static PyType_Slot pycf_chunk_iter_slots[] = {
    {Py_tp_dealloc, pycf_chunk_iter_dealloc},
    {Py_tp_iter, PyObject_SelfIter},
    {Py_tp_iternext, pycf_chunk_next},
    {0, NULL},
};
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

static PyType_Spec pycf_chunk_iter_spec = {
    .name = "cuckoofilter.ChunkIterator",
    .basicsize = sizeof(pycf_chunk_iter),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = pycf_chunk_iter_slots,
};

static PyType_Spec pycf_type_spec = {
    .name = "cuckoofilter.CuckooFilter",
    .basicsize = sizeof(pycf_filter),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = pycf_type_slots,
};

static int pycf_exec(PyObject *m)
{
    pycf_state *s = PyModule_GetState(m);
    s->error = PyErr_NewExceptionWithDoc("cuckoofilter.Error",
                                         "Base class of the errors of cuckoofilter.", NULL, NULL);
    if (!s->error)
        return -1;
    s->full = PyErr_NewExceptionWithDoc(
        "cuckoofilter.FilterFull", "A fixed-size filter has no room for a key.", s->error, NULL);
    s->read_only = PyErr_NewExceptionWithDoc("cuckoofilter.ReadOnlyFilter",
                                             "A change to a filter opened read-only (open()).",
                                             s->error, NULL);
    PyObject *bases = s->full && s->read_only ? PyTuple_Pack(2, s->error, PyExc_ValueError) : NULL;
    s->corrupt =
        bases ? PyErr_NewExceptionWithDoc(
                    "cuckoofilter.CorruptFilter",
                    "Bytes, a file or chunks that are not a whole, undamaged filter.", bases, NULL)
              : NULL;
    Py_XDECREF(bases);
    if (!s->corrupt)
        return -1;
    bases = PyTuple_Pack(2, s->error, PyExc_OSError);
    s->file = bases ? PyErr_NewExceptionWithDoc(
                          "cuckoofilter.FileError",
                          "A file that could not be read or written (an OSError): each errno's "
                          "raises a subclass\nthat is also the OSError subclass Python picks "
                          "for it (FileNotFoundError, ...).",
                          bases, NULL)
                    : NULL;
    Py_XDECREF(bases);
    s->file_kinds = s->file ? PyDict_New() : NULL;
    if (!s->file_kinds)
        return -1;
    s->filter_type = (PyTypeObject *)PyType_FromModuleAndSpec(m, &pycf_type_spec, NULL);
    if (!s->filter_type)
        return -1;
    s->chunk_iter_type = (PyTypeObject *)PyType_FromModuleAndSpec(m, &pycf_chunk_iter_spec, NULL);
    if (!s->chunk_iter_type)
        return -1;
    if (PyModule_AddObjectRef(m, "Error", s->error) < 0 ||
        PyModule_AddObjectRef(m, "FilterFull", s->full) < 0 ||
        PyModule_AddObjectRef(m, "ReadOnlyFilter", s->read_only) < 0 ||
        PyModule_AddObjectRef(m, "CorruptFilter", s->corrupt) < 0 ||
        PyModule_AddObjectRef(m, "FileError", s->file) < 0 ||
        PyModule_AddType(m, s->filter_type) < 0 ||
        PyModule_AddStringConstant(m, "library_version", cf_version()) < 0)
        return -1;
    return 0;
}

static int pycf_traverse(PyObject *m, visitproc visit, void *arg)
{
    pycf_state *s = PyModule_GetState(m);
    Py_VISIT(s->error);
    Py_VISIT(s->full);
    Py_VISIT(s->read_only);
    Py_VISIT(s->corrupt);
    Py_VISIT(s->file);
    Py_VISIT(s->file_kinds);
    Py_VISIT(s->filter_type);
    Py_VISIT(s->chunk_iter_type);
    return 0;
}

static int pycf_clear_module(PyObject *m)
{
    pycf_state *s = PyModule_GetState(m);
    Py_CLEAR(s->error);
    Py_CLEAR(s->full);
    Py_CLEAR(s->read_only);
    Py_CLEAR(s->corrupt);
    Py_CLEAR(s->file);
    Py_CLEAR(s->file_kinds);
    Py_CLEAR(s->filter_type);
    Py_CLEAR(s->chunk_iter_type);
    return 0;
}

static void pycf_free_module(void *m)
{
    pycf_clear_module((PyObject *)m);
}

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#endif
static PyModuleDef_Slot pycf_module_slots[] = {
    {Py_mod_exec, pycf_exec},
    {0, NULL},
};
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

static struct PyModuleDef pycf_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "cuckoofilter._cuckoofilter",
    .m_doc = "The C extension of the cuckoofilter package (import cuckoofilter).",
    .m_size = sizeof(pycf_state),
    .m_slots = pycf_module_slots,
    .m_traverse = pycf_traverse,
    .m_clear = pycf_clear_module,
    .m_free = pycf_free_module,
};

PyMODINIT_FUNC PyInit__cuckoofilter(void); /* the one exported symbol */

PyMODINIT_FUNC PyInit__cuckoofilter(void)
{
    return PyModuleDef_Init(&pycf_module);
}
