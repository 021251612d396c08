#include "internal.h"

static int no_keywords(const char *name, PyObject *kwargs);
static PyObject *call_method(PyObject *method, PyObject *const *args, size_t nargsf, PyObject *kwnames);
static PyObject *dispatcher_call(Dispatcher *self, PyObject *const *args, size_t nargsf, PyObject *kwnames);
static PyObject *dispatcher_new(PyTypeObject *type, PyObject *args, PyObject *kwargs);
static int dispatcher_traverse(Dispatcher *self, visitproc visit, void *arg);
static int dispatcher_clear(Dispatcher *self);
static void dispatcher_dealloc(Dispatcher *self);
static PyObject *dispatcher_get_miss(Dispatcher *self, void *closure);
static int dispatcher_set_miss(Dispatcher *self, PyObject *value, void *closure);
static PyObject *dispatcher_resolve(Dispatcher *self, PyObject *args);
static PyObject *refiner_new(PyTypeObject *type, PyObject *args, PyObject *kwargs);

/* -- dispatch: dispatch.Generic's type cache, walked in C ------------------------------
 *
 * A Generic's cache is a tree of dicts, roots[len(args)][type(args[0])][type(args[1])]...
 * (dispatch._walk), ending in a method or a refiner.  A Dispatcher is what a Generic (a
 * functools.partial) calls: it walks the tree and calls the method, so a cached dispatch
 * costs no Python frame.  A Refiner is the cache for one argument position where the
 * type alone does not decide (an Is[...] pattern names an object of that type): keyed by
 * the argument's id when the patterns there are all Is[...], else by what the Python
 * spec's key() makes of it.  What is not cached yet is Python's: miss() and fill(). */

#define REFINER_RECENT 16

typedef struct {
    PyObject_HEAD
    Py_ssize_t position;
    PyObject *ids;    /* the ids some Is[...] names here (a frozenset), or None: key_of decides */
    PyObject *key_of; /* _KeySpec.key */
    PyObject *fill;   /* args tuple -> the entry for a new key: a method or the next Refiner */
    PyObject *cache;  /* key -> entry */
    /* In front of ``cache`` for an ids refiner: the entry last found for an object at
     * this address (see refined()). */
    struct {
        PyObject *object; /* borrowed, compared by address only, never read */
        PyObject *entry;
    } recent[REFINER_RECENT];
    vectorcallfunc vectorcall;
} Refiner;

static int
no_keywords(const char *name, PyObject *kwargs)
{
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
        PyErr_Format(PyExc_TypeError, "%s() takes no keyword arguments", name);
        return 0;
    }
    return 1;
}

/* The cache's key for args under this refiner (a new reference). */
static PyObject *
refiner_key(Refiner *self, PyObject *const *args, Py_ssize_t n)
{
    if (self->position >= n) {
        PyErr_SetString(PyExc_TypeError, "cassette_hook: a refiner got too few arguments");
        return NULL;
    }
    PyObject *value = args[self->position];
    if (self->ids == Py_None) {
        return PyObject_CallOneArg(self->key_of, value);
    }
    PyObject *key = PyLong_FromVoidPtr(value);
    if (key == NULL) {
        return NULL;
    }
    int named = PySet_Contains(self->ids, key);
    if (named <= 0) {
        Py_DECREF(key);
        return named < 0 ? NULL : Py_NewRef(Py_None);
    }
    return key;
}

/* The method these arguments get (a new reference): the entry for their key, refined
 * further when it is the next Refiner.
 *
 * An ids refiner keys its cache by the argument's id, an int made and hashed at every
 * call; ``recent`` answers first, by the argument's address alone.  That is sound without
 * holding the argument: every object some Is[...] names is alive as long as the refiner
 * (registration holds it, and changing the methods makes new refiners), so an address
 * that held a named object still holds it, and one that held another object holds another
 * object again, which gets the same entry (the key of every unnamed object is None). */
static PyObject *
refined(Refiner *self, PyObject *const *args, Py_ssize_t n)
{
    PyObject *entry = NULL;
    size_t slot = 0;
    if (self->ids != Py_None && self->position < n) {
        uintptr_t address = (uintptr_t)args[self->position];
        slot = (size_t)((address >> 4) ^ (address >> 10)) % REFINER_RECENT;
        if (self->recent[slot].object == args[self->position] && self->recent[slot].entry != NULL) {
            entry = Py_NewRef(self->recent[slot].entry);
        }
    }
    if (entry == NULL) {
        PyObject *key = refiner_key(self, args, n);
        if (key == NULL) {
            return NULL;
        }
        entry = PyDict_GetItemWithError(self->cache, key);
        if (entry != NULL) {
            Py_INCREF(entry);
        }
        else if (!PyErr_Occurred()) {
            PyObject *tuple = as_tuple(args, n);
            entry = tuple ? PyObject_CallOneArg(self->fill, tuple) : NULL;
            Py_XDECREF(tuple);
            if (entry != NULL && PyDict_SetItem(self->cache, key, entry) < 0) {
                Py_CLEAR(entry);
            }
        }
        Py_DECREF(key);
        if (entry != NULL && self->ids != Py_None) {
            self->recent[slot].object = args[self->position];
            Py_XSETREF(self->recent[slot].entry, Py_NewRef(entry));
        }
    }
    if (entry != NULL && Py_TYPE(entry) == &RefinerType) {
        PyObject *method = refined((Refiner *)entry, args, n);
        Py_DECREF(entry);
        return method;
    }
    return entry;
}

/* Call the method dispatch found (a new reference, consumed; NULL: its error) with the
 * call's own arguments. */
static PyObject *
call_method(PyObject *method, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (method == NULL) {
        return NULL;
    }
    PyObject *out = PyObject_Vectorcall(method, args, nargsf, kwnames);
    Py_DECREF(method);
    return out;
}

/* The method a generic whose dispatcher this is runs for these arguments (a new
 * reference): Generic.resolve. */
PyObject *
method_for(Dispatcher *self, PyObject *const *args, Py_ssize_t n)
{
    PyObject *entry = NULL;
    if (PyList_CheckExact(self->roots) && n < PyList_GET_SIZE(self->roots)) {
        entry = PyList_GET_ITEM(self->roots, n);
        for (Py_ssize_t i = 0; i < n && entry != NULL; i++) {
            entry = PyDict_CheckExact(entry) ? PyDict_GetItemWithError(entry, (PyObject *)Py_TYPE(args[i])) : NULL;
        }
        if (entry == NULL && PyErr_Occurred()) {
            return NULL;
        }
    }
    if (entry == NULL || entry == Py_None) {
        PyObject *tuple = as_tuple(args, n);
        entry = tuple ? PyObject_CallOneArg(self->miss, tuple) : NULL;
        Py_XDECREF(tuple);
        if (entry == NULL) {
            return NULL;
        }
    }
    else {
        Py_INCREF(entry);
    }
    if (Py_TYPE(entry) == &RefinerType) {
        PyObject *method = refined((Refiner *)entry, args, n);
        Py_DECREF(entry);
        return method;
    }
    return entry;
}

static PyObject *
dispatcher_call(Dispatcher *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return call_method(method_for(self, args, PyVectorcall_NARGS(nargsf)), args, nargsf, kwnames);
}

static PyObject *
dispatcher_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *roots;
    if (!no_keywords("Dispatcher", kwargs) || !PyArg_UnpackTuple(args, "Dispatcher", 1, 1, &roots)) {
        return NULL;
    }
    if (!PyList_CheckExact(roots)) {
        PyErr_SetString(PyExc_TypeError, "Dispatcher(roots): roots must be a list");
        return NULL;
    }
    Dispatcher *self = PyObject_GC_New(Dispatcher, type);
    if (self == NULL) {
        return NULL;
    }
    self->roots = Py_NewRef(roots);
    self->miss = Py_NewRef(Py_None);
    self->vectorcall = (vectorcallfunc)dispatcher_call;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static int
dispatcher_traverse(Dispatcher *self, visitproc visit, void *arg)
{
    Py_VISIT(self->roots);
    Py_VISIT(self->miss);
    return 0;
}

static int
dispatcher_clear(Dispatcher *self)
{
    Py_CLEAR(self->roots);
    Py_CLEAR(self->miss);
    return 0;
}

static void
dispatcher_dealloc(Dispatcher *self)
{
    PyObject_GC_UnTrack(self);
    dispatcher_clear(self);
    PyObject_GC_Del(self);
}

static PyObject *
dispatcher_get_miss(Dispatcher *self, void *closure)
{
    return Py_NewRef(self->miss);
}

static int
dispatcher_set_miss(Dispatcher *self, PyObject *value, void *closure)
{
    if (value == NULL || !PyCallable_Check(value)) {
        PyErr_SetString(PyExc_TypeError, "Dispatcher.miss must be callable");
        return -1;
    }
    Py_XSETREF(self->miss, Py_NewRef(value));
    return 0;
}

/* Mirrors dispatch.Generic.resolve. */
static PyObject *
dispatcher_resolve(Dispatcher *self, PyObject *args)
{
    if (!PyTuple_Check(args)) {
        PyErr_SetString(PyExc_TypeError, "Dispatcher.resolve() takes the arguments as a tuple");
        return NULL;
    }
    return method_for(self, &PyTuple_GET_ITEM(args, 0), PyTuple_GET_SIZE(args));
}

static PyMethodDef dispatcher_methods[] = {
    {"resolve", (PyCFunction)dispatcher_resolve, METH_O, "resolve(args): the method these arguments get."},
    {NULL},
};

static PyGetSetDef dispatcher_getset[] = {
    {"miss", (getter)dispatcher_get_miss, (setter)dispatcher_set_miss,
     "Generic._miss: what fills the cache for arguments not in it."},
    {NULL},
};

static PyMemberDef dispatcher_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Dispatcher, vectorcall), READONLY},
    {NULL},
};

PyTypeObject DispatcherType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cassette_hook._speedups.Dispatcher",
    .tp_doc = "Dispatcher(roots): calls the method a Generic's type cache holds for the arguments.",
    .tp_basicsize = sizeof(Dispatcher),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = dispatcher_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Dispatcher, vectorcall),
    .tp_traverse = (traverseproc)dispatcher_traverse,
    .tp_clear = (inquiry)dispatcher_clear,
    .tp_dealloc = (destructor)dispatcher_dealloc,
    .tp_methods = dispatcher_methods,
    .tp_getset = dispatcher_getset,
    .tp_members = dispatcher_members,
};

static PyObject *
refiner_call(Refiner *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return call_method(refined(self, args, PyVectorcall_NARGS(nargsf)), args, nargsf, kwnames);
}

/* C only: the resolve each dispatch._Refiner carries (a closure per refiner, no name of the module). */
static PyObject *
refiner_resolve(Refiner *self, PyObject *args)
{
    if (!PyTuple_Check(args)) {
        PyErr_SetString(PyExc_TypeError, "Refiner.resolve() takes the arguments as a tuple");
        return NULL;
    }
    return refined(self, &PyTuple_GET_ITEM(args, 0), PyTuple_GET_SIZE(args));
}

static PyObject *
refiner_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    Py_ssize_t position;
    PyObject *ids, *key_of, *fill;
    if (!no_keywords("Refiner", kwargs) || !PyArg_ParseTuple(args, "nOOO:Refiner", &position, &ids, &key_of, &fill)) {
        return NULL;
    }
    if (position < 0 || (ids != Py_None && !PyFrozenSet_CheckExact(ids)) || !PyCallable_Check(key_of)
        || !PyCallable_Check(fill)) {
        PyErr_SetString(PyExc_TypeError, "Refiner(position >= 0, ids: frozenset | None, key_of, fill)");
        return NULL;
    }
    Refiner *self = PyObject_GC_New(Refiner, type);
    if (self == NULL) {
        return NULL;
    }
    self->position = position;
    self->ids = Py_NewRef(ids);
    self->key_of = Py_NewRef(key_of);
    self->fill = Py_NewRef(fill);
    self->cache = PyDict_New();
    memset(self->recent, 0, sizeof(self->recent));
    self->vectorcall = (vectorcallfunc)refiner_call;
    PyObject_GC_Track(self);
    if (self->cache == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int
refiner_traverse(Refiner *self, visitproc visit, void *arg)
{
    Py_VISIT(self->ids);
    Py_VISIT(self->key_of);
    Py_VISIT(self->fill);
    Py_VISIT(self->cache);
    for (int i = 0; i < REFINER_RECENT; i++) {
        Py_VISIT(self->recent[i].entry);
    }
    return 0;
}

static int
refiner_clear(Refiner *self)
{
    Py_CLEAR(self->ids);
    Py_CLEAR(self->key_of);
    Py_CLEAR(self->fill);
    Py_CLEAR(self->cache);
    for (int i = 0; i < REFINER_RECENT; i++) {
        Py_CLEAR(self->recent[i].entry);
    }
    return 0;
}

static void
refiner_dealloc(Refiner *self)
{
    PyObject_GC_UnTrack(self);
    refiner_clear(self);
    PyObject_GC_Del(self);
}

static PyMethodDef refiner_methods[] = {
    {"resolve", (PyCFunction)refiner_resolve, METH_O, "resolve(args): the method these arguments get."},
    {NULL},
};

static PyMemberDef refiner_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Refiner, vectorcall), READONLY},
    {NULL},
};

PyTypeObject RefinerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cassette_hook._speedups.Refiner",
    .tp_doc = "Refiner(position, ids, key_of, fill): the cache for one position where types do not decide.",
    .tp_basicsize = sizeof(Refiner),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = refiner_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Refiner, vectorcall),
    .tp_traverse = (traverseproc)refiner_traverse,
    .tp_clear = (inquiry)refiner_clear,
    .tp_dealloc = (destructor)refiner_dealloc,
    .tp_methods = refiner_methods,
    .tp_members = refiner_members,
};
