#include "internal.h"

static PyObject *make_wrapper(PyObject *value, PyObject *tag, PyObject *meta);
static int arguments(const char *function, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, const char *const *names, Py_ssize_t n, Py_ssize_t optional, PyObject **out);
static int is_last_tagging_context(PyObject *ctx);
static PyObject *context_tag(PyObject *ctx);
static int tagging_unconfigured(const char *function);
static int metadata_allowed(PyObject *ctx_type, PyObject *value_type, PyObject *meta);

/* -- tagging: the wrappers and the functions an overload runs per operation --------------
 *
 * tagging.py holds the reference (a Python base class with slots and a __del__).  Here
 * the fields of a wrapper are a C base class, whose deallocation does the __del__'s
 * accounting without running Python, and tag/untag/metadata/istagged/hasmetadata -- a
 * few per overloaded operation in forward-mode AD -- are C functions.  What is rare
 * (a metadata type not checked yet, a context without tagging, a new wrapper class) is
 * tagging.py's, handed over by configure_tagging(). */

typedef struct {
    PyObject_HEAD
    PyObject *value, *tag, *meta, *generation;
} TaggedFields;

/* x's fields if x is a wrapper of this tag, else NULL. */
static TaggedFields *
tagged_for(PyObject *x, PyObject *tag)
{
    int wrapper = PySet_Contains(state->wrappers, (PyObject *)Py_TYPE(x));
    if (wrapper <= 0) {
        return NULL; /* (a set of classes: a lookup cannot fail) */
    }
    TaggedFields *fields = (TaggedFields *)x;
    return fields->tag == tag ? fields : NULL;
}

/* tagging._plain: x's value, however deeply wrapped (borrowed; x itself if not a wrapper). */
PyObject *
plain_value(PyObject *x)
{
    while (state->wrappers != NULL && PySet_Contains(state->wrappers, (PyObject *)Py_TYPE(x)) == 1) {
        x = ((TaggedFields *)x)->value;
    }
    return x;
}

/* tagging._make: value wrapped for tag, carrying meta (a new reference). */
static PyObject *
make_wrapper(PyObject *value, PyObject *tag, PyObject *meta)
{
    if (Py_TYPE(tag) != state->tag_type) {
        PyErr_Format(PyExc_TypeError, "cassette_hook: a context's tag is a %.200s, not a Tag", Py_TYPE(tag)->tp_name);
        return NULL;
    }
    PyObject *cls = PyDict_GetItemWithError(state->wrapper_classes, (PyObject *)Py_TYPE(value));
    if (cls != NULL) {
        Py_INCREF(cls);
    }
    else if (PyErr_Occurred() || (cls = PyObject_CallOneArg(state->wrapper_class, (PyObject *)Py_TYPE(value))) == NULL) {
        return NULL;
    }
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &TaggedFieldsType)) {
        PyErr_SetString(PyExc_TypeError, "cassette_hook: a wrapper class is not made on TaggedFields");
        Py_DECREF(cls);
        return NULL;
    }
    TaggedFields *wrapper = (TaggedFields *)((PyTypeObject *)cls)->tp_alloc((PyTypeObject *)cls, 0);
    Py_DECREF(cls);
    if (wrapper == NULL) {
        return NULL;
    }
    wrapper->value = Py_NewRef(value);
    wrapper->tag = Py_NewRef(tag);
    wrapper->meta = Py_NewRef(meta);
    PyObject *depth = SLOT(tag, state->tag_depth), *generation = SLOT(tag, state->tag_generation), *live = SLOT(tag, state->tag_live);
    int inside = depth ? PyObject_IsTrue(depth) : 0;
    if (inside < 0) {
        Py_DECREF(wrapper);
        return NULL;
    }
    if (inside && generation != NULL && live != NULL) { /* made inside the extent: counted */
        PyObject *more = PyNumber_Add(live, state->one);
        if (more == NULL) {
            Py_DECREF(wrapper);
            return NULL;
        }
        Py_SETREF(SLOT(tag, state->tag_live), more);
        wrapper->generation = Py_NewRef(generation);
    }
    else { /* made by the caller outside: the caller's own */
        wrapper->generation = Py_NewRef(Py_None);
    }
    return (PyObject *)wrapper;
}

/* A wrapper made inside its tag's extent, of the tag's current generation, is gone:
 * one live wrapper less for the extent's end to find (tagging.Tagged.__del__). */
static void
uncount(TaggedFields *self)
{
    PyObject *tag = self->tag, *generation = self->generation;
    if (tag == NULL || generation == NULL || generation == Py_None || Py_TYPE(tag) != state->tag_type) {
        return;
    }
    PyObject *current = SLOT(tag, state->tag_generation), *live = SLOT(tag, state->tag_live);
    if (current == NULL || live == NULL || !PyLong_CheckExact(current) || !PyLong_CheckExact(generation)) {
        return;
    }
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    if (PyObject_RichCompareBool(current, generation, Py_EQ) == 1) {
        PyObject *fewer = PyNumber_Subtract(live, state->one);
        if (fewer != NULL) {
            Py_SETREF(SLOT(tag, state->tag_live), fewer);
        }
    }
    PyErr_Clear();
    PyErr_Restore(type, value, traceback);
}

static int
tagged_traverse(TaggedFields *self, visitproc visit, void *arg)
{
    Py_VISIT(self->value);
    Py_VISIT(self->tag);
    Py_VISIT(self->meta);
    Py_VISIT(self->generation);
    return 0;
}

static int
tagged_clear(TaggedFields *self)
{
    Py_CLEAR(self->value);
    Py_CLEAR(self->tag);
    Py_CLEAR(self->meta);
    Py_CLEAR(self->generation);
    return 0;
}

static void
tagged_dealloc(TaggedFields *self)
{
    PyObject_GC_UnTrack(self);
    uncount(self);
    tagged_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef tagged_members[] = {
    {"_ch_value", T_OBJECT_EX, offsetof(TaggedFields, value), 0, "the plain value"},
    {"_ch_tag", T_OBJECT_EX, offsetof(TaggedFields, tag), 0, "the Tag of the context it is tagged for"},
    {"_ch_meta", T_OBJECT_EX, offsetof(TaggedFields, meta), 0, "its metadata, or NoMetaData"},
    {"_ch_generation", T_OBJECT_EX, offsetof(TaggedFields, generation), 0,
     "the tag's generation it was made in, or None when made outside the extent"},
    {NULL},
};

PyTypeObject TaggedFieldsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cassette_hook._speedups.TaggedFields",
    .tp_doc = "The fields of a tagged value (tagging.Tagged's base).",
    .tp_basicsize = sizeof(TaggedFields),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)tagged_traverse,
    .tp_clear = (inquiry)tagged_clear,
    .tp_dealloc = (destructor)tagged_dealloc,
    .tp_members = tagged_members,
};

/* Positional-or-keyword arguments named names[0..n), the last `optional` of them may be
 * missing (left NULL).  0 on success. */
static int
arguments(const char *function, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
          const char *const *names, Py_ssize_t n, Py_ssize_t optional, PyObject **out)
{
    if (nargs > n) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %zd arguments (%zd given)", function, n, nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        out[i] = i < nargs ? args[i] : NULL;
    }
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        Py_ssize_t i = 0;
        while (i < n && PyUnicode_CompareWithASCIIString(name, names[i]) != 0) {
            i++;
        }
        if (i == n) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", function, name);
            return -1;
        }
        if (out[i] != NULL) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", function, names[i]);
            return -1;
        }
        out[i] = args[nargs + k];
    }
    for (Py_ssize_t i = 0; i < n - optional; i++) {
        if (out[i] == NULL) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", function, names[i]);
            return -1;
        }
    }
    return 0;
}

/* The last context whose tag was read, by a weak reference, and that tag (state->last_tagging_context, last_tag) (held: a dead
 * context's tag lives on until another tagging context is read). */
static int
is_last_tagging_context(PyObject *ctx)
{
    return state->last_tagging_context != NULL && ((PyWeakReference *)state->last_tagging_context)->wr_object == ctx;
}

/* ctx.tag (a new reference).  tag, untag and metadata each need it, and AD calls them
 * five times per operation, always for one context: the last context read answers
 * without an attribute lookup.  Sound because enabletagging binds a context's tag before
 * the context is handed out, and nothing rebinds it; and a weak reference, since its
 * referent is cleared when the context dies, never matches another context that later
 * gets the same address. */
static PyObject *
context_tag(PyObject *ctx)
{
    if (is_last_tagging_context(ctx)) {
        return Py_NewRef(state->last_tag);
    }
    PyObject *tag = PyObject_GetAttr(ctx, state->str_tag);
    if (tag != NULL && Py_TYPE(tag) == state->tag_type) {
        PyObject *ref = PyWeakref_NewRef(ctx, NULL);
        if (ref == NULL) { /* (a context class without weak references: not remembered) */
            PyErr_Clear();
        }
        else {
            Py_XSETREF(state->last_tagging_context, ref);
            Py_XSETREF(state->last_tag, Py_NewRef(tag));
        }
    }
    return tag;
}

/* Does ctx tag values (has enabletagging given it a tag)?  1, 0, or -1 on error.  An
 * overload's recurse asks at every call (unpop_for), where the attribute read was about
 * 180 instructions, a fifth of what a matched identity overload adds to a call
 * (docs/performance.md, "A matched identity overload at the price of a prehook"): the last
 * context found untagged is remembered by a weak reference (state->last_untagged_context),
 * sound for the reasons context_tag gives -- a context handed out keeps the tag it has,
 * and a dead one never matches. */
int
is_tagging(PyObject *ctx)
{
    SpeedupsState *const st = state;
    if (is_last_tagging_context(ctx)) {
        return 1;
    }
    if (st->last_untagged_context != NULL && ((PyWeakReference *)st->last_untagged_context)->wr_object == ctx) {
        return 0;
    }
    PyObject *tag = PyObject_GetAttr(ctx, st->str_tag);
    if (tag == NULL) {
        return -1;
    }
    int tagging = tag != Py_None;
    Py_DECREF(tag);
    if (!tagging) {
        PyObject *ref = PyWeakref_NewRef(ctx, NULL);
        if (ref == NULL) { /* (a context class without weak references: not remembered) */
            PyErr_Clear();
        }
        else {
            Py_XSETREF(st->last_untagged_context, ref);
        }
    }
    return tagging;
}

/* Has configure_tagging() not run yet (tagging's functions then raise: they would read
 * its tables)?  Only a direct import of this private module can call them before. */
static int
tagging_unconfigured(const char *function)
{
    if (state->wrappers != NULL) {
        return 0;
    }
    PyErr_Format(PyExc_RuntimeError, "cassette_hook._speedups.%s: called before cassette_hook.tagging set it up",
                 function);
    return 1;
}

/* (x, ctx) of untag/metadata/istagged/hasmetadata, and x's fields if tagged for ctx. */
static int
x_and_ctx(const char *function, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **x,
          TaggedFields **fields)
{
    static const char *const names[] = {"x", "ctx"};
    PyObject *parsed[2];
    if (tagging_unconfigured(function) || arguments(function, args, nargs, kwnames, names, 2, 0, parsed) < 0) {
        return -1;
    }
    *x = parsed[0];
    *fields = NULL;
    if (PySet_Contains(state->wrappers, (PyObject *)Py_TYPE(*x)) != 1) {
        return 0;
    }
    PyObject *tag = context_tag(parsed[1]);
    if (tag == NULL) {
        return -1;
    }
    *fields = tagged_for(*x, tag);
    Py_DECREF(tag);
    return 0;
}

/* Mirrors tagging.untag. */
PyObject *
untag(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *x;
    TaggedFields *fields;
    if (x_and_ctx("untag", args, nargs, kwnames, &x, &fields) < 0) {
        return NULL;
    }
    return Py_NewRef(fields ? fields->value : x);
}

/* Mirrors tagging.metadata. */
PyObject *
metadata(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *x;
    TaggedFields *fields;
    if (x_and_ctx("metadata", args, nargs, kwnames, &x, &fields) < 0) {
        return NULL;
    }
    return Py_NewRef(fields ? fields->meta : state->no_metadata);
}

/* Mirrors tagging.istagged. */
PyObject *
istagged(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *x;
    TaggedFields *fields;
    if (x_and_ctx("istagged", args, nargs, kwnames, &x, &fields) < 0) {
        return NULL;
    }
    return PyBool_FromLong(fields != NULL);
}

/* Mirrors tagging.hasmetadata. */
PyObject *
hasmetadata(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *x;
    TaggedFields *fields;
    if (x_and_ctx("hasmetadata", args, nargs, kwnames, &x, &fields) < 0) {
        return NULL;
    }
    return PyBool_FromLong(fields != NULL && fields->meta != state->no_metadata);
}

/* The last answer of metadata_allowed, for the classes of (context, value, metadata)
 * and dispatch's generation it was given in: AD tags every result with the same classes,
 * so one entry answers nearly every call without a tuple to hash (state->last_ctx_type ...). */

/* May values of this class carry this metadata in this context class?  1 yes, 0 not
 * known yet (check_metadata decides, and remembers), -1 on error. */
static int
metadata_allowed(PyObject *ctx_type, PyObject *value_type, PyObject *meta)
{
    PyObject *generation = PyDict_GetItemWithError(PyModule_GetDict(state->dispatch_module), state->str_generation);
    if (generation == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_AttributeError, "cassette_hook: dispatch has no generation");
        }
        return -1;
    }
    if (generation == state->last_generation && ctx_type == state->last_ctx_type && value_type == state->last_value_type
        && (PyObject *)Py_TYPE(meta) == state->last_meta_type) {
        return 1;
    }
    int current = PyObject_RichCompareBool(PyList_GET_ITEM(state->allowed_generation, 0), generation, Py_EQ);
    if (current <= 0) {
        return current;
    }
    PyObject *key = PyTuple_Pack(2, ctx_type, value_type);
    if (key == NULL) {
        return -1;
    }
    PyObject *allowed = PyDict_GetItemWithError(state->allowed_metadata, key);
    Py_DECREF(key);
    if (allowed == NULL || allowed == state->no_metadata) {
        return PyErr_Occurred() ? -1 : 0;
    }
    int ok = PyObject_IsInstance(meta, allowed);
    if (ok == 1 && PyObject_IsSubclass((PyObject *)Py_TYPE(meta), allowed) == 1) { /* (not for a __class__ that lies) */
        Py_XSETREF(state->last_generation, Py_NewRef(generation));
        Py_XSETREF(state->last_ctx_type, Py_NewRef(ctx_type));
        Py_XSETREF(state->last_value_type, Py_NewRef(value_type));
        Py_XSETREF(state->last_meta_type, Py_NewRef((PyObject *)Py_TYPE(meta)));
    }
    return ok;
}

/* Mirrors tagging.tag. */
PyObject *
tag(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"value", "ctx", "metadata"};
    PyObject *parsed[3];
    if (tagging_unconfigured("tag") || arguments("tag", args, nargs, kwnames, names, 3, 1, parsed) < 0) {
        return NULL;
    }
    PyObject *value = parsed[0], *ctx = parsed[1], *meta = parsed[2] ? parsed[2] : state->no_metadata;
    int tagging = is_last_tagging_context(ctx) ? 1 : PyObject_IsInstance(ctx, state->tagging_context);
    PyObject *tag = tagging > 0 ? context_tag(ctx) : NULL;
    if (tag == NULL || tag == Py_None) {
        if (tagging >= 0 && !PyErr_Occurred()) {
            PyObject *out = PyObject_CallOneArg(state->not_tagging, ctx);
            Py_XDECREF(out);
            if (out != NULL) {
                PyErr_SetString(PyExc_TypeError, "tag(): tagging is not enabled for this context");
            }
        }
        Py_XDECREF(tag);
        return NULL;
    }
    TaggedFields *fields = tagged_for(value, tag);
    if (fields != NULL) { /* already tagged for this context: its plain value, tagged anew */
        value = fields->value;
    }
    if (meta != state->no_metadata) {
        int allowed = metadata_allowed((PyObject *)Py_TYPE(ctx), (PyObject *)Py_TYPE(value), meta);
        if (allowed == 0) {
            PyObject *stack[3] = {(PyObject *)Py_TYPE(ctx), value, meta};
            PyObject *checked = PyObject_Vectorcall(state->check_metadata, stack, 3, NULL);
            Py_XDECREF(checked);
            allowed = checked ? 1 : -1;
        }
        if (allowed < 0) {
            Py_DECREF(tag);
            return NULL;
        }
    }
    Py_INCREF(value); /* fields may go with the wrapper it was read from */
    PyObject *out = make_wrapper(value, tag, meta);
    Py_DECREF(value);
    Py_DECREF(tag);
    return out;
}

/* Mirrors tagging._make. */
PyObject *
make(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "make(value, tag, meta) takes 3 arguments");
        return NULL;
    }
    return make_wrapper(args[0], args[1], args[2]);
}

/* C only: hands over tagging's classes, tables and the Python functions it delegates to. */
PyObject *
configure_tagging(PyObject *module, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args) != 0 || kwargs == NULL) {
        PyErr_SetString(PyExc_TypeError, "configure_tagging() takes keyword arguments");
        return NULL;
    }
    PyObject *type = PyDict_GetItemString(kwargs, "tag_type");
    if (type == NULL || !PyType_Check(type) || slot_offset((PyTypeObject *)type, "depth", &state->tag_depth) < 0
        || slot_offset((PyTypeObject *)type, "live", &state->tag_live) < 0
        || slot_offset((PyTypeObject *)type, "generation", &state->tag_generation) < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "configure_tagging() needs tag_type, a class with slots");
        }
        return NULL;
    }
    Py_XSETREF(state->tag_type, (PyTypeObject *)Py_NewRef(type));
    if (keep(kwargs, "classes", &state->wrapper_classes) < 0 || keep(kwargs, "wrapper_class", &state->wrapper_class) < 0
        || keep(kwargs, "wrappers", &state->wrappers) < 0 || keep(kwargs, "tagging_context", &state->tagging_context) < 0
        || keep(kwargs, "no_metadata", &state->no_metadata) < 0 || keep(kwargs, "allowed", &state->allowed_metadata) < 0
        || keep(kwargs, "allowed_generation", &state->allowed_generation) < 0 || keep(kwargs, "dispatch", &state->dispatch_module) < 0
        || keep(kwargs, "check_metadata", &state->check_metadata) < 0 || keep(kwargs, "not_tagging", &state->not_tagging) < 0) {
        return NULL;
    }
    if (!PyDict_CheckExact(state->wrapper_classes) || !PySet_CheckExact(state->wrappers) || !PyDict_CheckExact(state->allowed_metadata)
        || !PyList_CheckExact(state->allowed_generation) || PyList_GET_SIZE(state->allowed_generation) != 1
        || !PyModule_Check(state->dispatch_module)) {
        PyErr_SetString(PyExc_TypeError,
                        "configure_tagging(): classes and allowed must be dicts, wrappers a set, "
                        "allowed_generation a list of one, dispatch a module");
        return NULL;
    }
    Py_RETURN_NONE;
}
