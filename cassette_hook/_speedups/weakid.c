/* _weakid in C: the tables by id (WeakIdCache) as the hot path reads them -- a lookup
 * remembered by address, an entry made with its weak reference's callback in C. */
#include "internal.h"


/* A _weakid.WeakIdCache's dict id -> value (borrowed), read at its slot. */
PyObject *
values_of(PyObject *cache)
{
    SpeedupsState *const st = state;
    if (Py_TYPE(cache) != st->id_table_type) {
        PyErr_Format(PyExc_TypeError, "cassette_hook: a %.200s is not a WeakIdCache", Py_TYPE(cache)->tp_name);
        return NULL;
    }
    return slot(cache, st->id_table_values, "values");
}

/* The tables of twins are dicts keyed by id (_weakid.WeakIdCache), and a lookup makes an int
 * of the address and hashes it: an allocation and a free per call, a quarter of what a
 * context that overloads nothing adds to a call.  The last lookups are remembered by
 * address (state->twin_memo), with the table's version: a dict's ma_version_tag
 * (compat.h) changes at every change of what it maps, and no two dicts share one, so an
 * entry whose version is the table's still says what the table says, borrowed from it.
 * (A callee that dies leaves its table first: WeakIdCache's callback, before the address
 * is free.)  Where dicts have no version tag (3.14), the tables are watched instead. */
#if CH_HAVE_DICT_VERSION_TAG
static inline int
twin_memo_watch(PyObject *table)
{
    (void)table; /* (ma_version_tag versions every dict) */
    return 0;
}

int
twin_tables_watch(void)
{
    return 0;
}
#else
/* A dict watcher sees every change of the tables it watches -- an item added, replaced or
 * deleted, a clear, a clone, the table's end -- and each bumps one counter, which stands
 * for the version of every table: an entry made at the counter's value still says what
 * its table says while the counter has not moved.  A change of any table forgets every
 * entry, but the tables change when twins are made or dropped, not per call.  A table is
 * watched from its first lookup through the memo (twin_memo_watch), before the entry is
 * made.  (A dealloc'd table's address may be taken by a new dict: its end bumped the
 * counter.) */
static int
twin_table_changed(PyDict_WatchEvent event, PyObject *dict, PyObject *key, PyObject *new_value)
{
    (void)event, (void)dict, (void)key, (void)new_value;
    state->twin_tables_version++;
    return 0;
}

/* Watch table before its version is read for a new entry; 0, or -1 with an error set. */
static inline int
twin_memo_watch(PyObject *table)
{
    return PyDict_Watch(state->twin_tables_watcher, table);
}

int
twin_tables_watch(void)
{
    state->twin_tables_version = 1;
    state->twin_tables_watcher = PyDict_AddWatcher(twin_table_changed);
    return state->twin_tables_watcher < 0 ? -1 : 0;
}
#endif

/* by_id past its memo (internal.h): table[id(f)], borrowed, or NULL (with an error set if
 * there was one, or if table is not a dict), remembered. */
PyObject *
by_id_lookup(PyObject *table, PyObject *f)
{
    if (!PyDict_CheckExact(table)) {
        PyErr_Format(PyExc_TypeError, "cassette_hook: a table by id is a %.200s, not a dict", Py_TYPE(table)->tp_name);
        return NULL;
    }
    TwinMemo *memo = twin_memo_of(table, f);
    if (twin_memo_watch(table) < 0) {
        return NULL;
    }
    uint64_t version = twin_table_version(table); /* (watched from here on) */
    PyObject *key = PyLong_FromVoidPtr(f);
    if (key == NULL) {
        return NULL;
    }
    PyObject *found = PyDict_GetItemWithError(table, key);
    Py_DECREF(key);
    if (found != NULL || !PyErr_Occurred()) {
        *memo = (TwinMemo){table, f, found, version};
    }
    return found;
}

/* The callback of the weak reference to a function that enter_by_id entered in a
 * WeakIdCache: WeakIdCache._forget in C (its partial and frame cost more than the rest
 * of a closure's twin together). */
typedef struct {
    PyObject_HEAD
    PyObject *cache, *key; /* the WeakIdCache, id(function) */
    vectorcallfunc vectorcall;
} Forget;

static int
forget_one(PyObject *dict, PyObject *key)
{
    if (dict == NULL || !PyDict_CheckExact(dict) || PyDict_DelItem(dict, key) == 0) {
        return 0;
    }
    if (PyErr_ExceptionMatches(PyExc_KeyError)) {
        PyErr_Clear();
        return 0;
    }
    return -1;
}

static PyObject *
forget_call(Forget *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (forget_one(SLOT(self->cache, state->id_table_values), self->key) < 0
        || forget_one(SLOT(self->cache, state->id_table_refs), self->key) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static int
forget_traverse(Forget *self, visitproc visit, void *arg)
{
    Py_VISIT(self->cache);
    return 0;
}

static int
forget_clear(Forget *self)
{
    Py_CLEAR(self->cache);
    return 0;
}

static void
forget_dealloc(Forget *self)
{
    PyObject_GC_UnTrack(self);
    Py_CLEAR(self->cache);
    Py_CLEAR(self->key);
    PyObject_GC_Del(self);
}

static PyMemberDef forget_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Forget, vectorcall), READONLY},
    {NULL},
};

PyTypeObject ForgetType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cassette_hook._speedups.Forget",
    .tp_doc = "Forgets a dead function's entry in a WeakIdCache (the callback of its weak reference).",
    .tp_basicsize = sizeof(Forget),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Forget, vectorcall),
    .tp_traverse = (traverseproc)forget_traverse,
    .tp_clear = (inquiry)forget_clear,
    .tp_dealloc = (destructor)forget_dealloc,
    .tp_members = forget_members,
};

/* WeakIdCache.set(cache, obj, value) in C: 0, or -1 on error. */
int
enter_by_id(PyObject *cache, PyObject *obj, PyObject *value)
{
    PyObject *values = values_of(cache), *refs = SLOT(cache, state->id_table_refs);
    if (values == NULL || !PyDict_CheckExact(values) || refs == NULL || !PyDict_CheckExact(refs)) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "cassette_hook: a WeakIdCache without its dicts");
        }
        return -1;
    }
    PyObject *key = PyLong_FromVoidPtr(obj);
    if (key == NULL) {
        return -1;
    }
    int known = PyDict_Contains(refs, key);
    if (known == 0) {
        Forget *forget = PyObject_GC_New(Forget, &ForgetType);
        if (forget == NULL) {
            Py_DECREF(key);
            return -1;
        }
        forget->cache = Py_NewRef(cache);
        forget->key = Py_NewRef(key);
        forget->vectorcall = (vectorcallfunc)forget_call;
        PyObject_GC_Track(forget);
        PyObject *ref = PyWeakref_NewRef(obj, (PyObject *)forget);
        Py_DECREF(forget);
        known = ref == NULL ? -1 : PyDict_SetItem(refs, key, ref);
        Py_XDECREF(ref);
    }
    int out = known < 0 ? -1 : PyDict_SetItem(values, key, value);
    Py_DECREF(key);
    return out;
}
