#include "internal.h"

static int emulated(PyObject *f);
static void fill_in_place(int i, PyMethodDef *method);

/* runtime.primitives.INDIRECT_NAMES as C strings (filled by configure()): a builtin of one of
 * these names may take callbacks, and is not called directly (runtime.callsites._resolve_direct).
 * Asked at every builtin call under a plan that observes nothing, so kept in a hash table, state->indirect_names_by_hash
 * (a scan of the 19 names was 7% of a null context's time on deepcopy). */
static uint32_t
name_hash(const char *name) /* FNV-1a */
{
    uint32_t hash = 2166136261u;
    for (; *name != '\0'; name++) {
        hash = (hash ^ (unsigned char)*name) * 16777619u;
    }
    return hash;
}

int
indirect_name(const char *name)
{
    uint32_t hash = name_hash(name);
    for (uint32_t i = hash % INDIRECT_SLOTS; state->indirect_names_by_hash[i].name != NULL; i = (i + 1) % INDIRECT_SLOTS) {
        if (state->indirect_names_by_hash[i].hash == hash && strcmp(name, state->indirect_names_by_hash[i].name) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Has the builtin function or bound builtin method the name of one that may take callbacks? */
int
has_indirect_name(PyObject *builtin)
{
    return indirect_name(((PyCFunctionObject *)builtin)->m_ml->ml_name);
}

int
fill_indirect_names(PyObject *names)
{
    for (int i = 0; i < INDIRECT_SLOTS; i++) {
        PyMem_Free(state->indirect_names_by_hash[i].name);
        state->indirect_names_by_hash[i].name = NULL;
    }
    Py_ssize_t count = 0;
    PyObject *iterator = PyObject_GetIter(names), *name;
    if (iterator == NULL) {
        return -1;
    }
    while ((name = PyIter_Next(iterator)) != NULL) {
        const char *utf8 = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
        char *copy = utf8 && count < MAX_INDIRECT_NAMES ? PyMem_Malloc(strlen(utf8) + 1) : NULL;
        Py_DECREF(name);
        if (copy == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_ValueError, "configure(): indirect_names must be at most 64 strs");
            }
            break;
        }
        strcpy(copy, utf8);
        uint32_t hash = name_hash(copy), i = hash % INDIRECT_SLOTS;
        while (state->indirect_names_by_hash[i].name != NULL) {
            i = (i + 1) % INDIRECT_SLOTS;
        }
        state->indirect_names_by_hash[i].hash = hash;
        state->indirect_names_by_hash[i].name = copy;
        count++;
    }
    Py_DECREF(iterator);
    return PyErr_Occurred() ? -1 : 0;
}

/* The C methods among indirect_callers' keys (list.sort, re.Pattern.sub), by the method
 * definition their bound forms share (state->indirect_methods): items.sort is list.sort bound, whatever the list. */
int
fill_indirect_methods(PyObject *callers)
{
    Py_ssize_t pos = 0, count = 0;
    PyObject *key, *value;
    for (int i = 0; i < MAX_INDIRECT_METHODS; i++) {
        Py_CLEAR(state->indirect_methods[i].caller);
        Py_CLEAR(state->indirect_methods[i].descriptor);
        state->indirect_methods[i].method = NULL;
    }
    while (PyDict_Next(callers, &pos, &key, &value)) {
        if (Py_TYPE(key) != &PyMethodDescr_Type) {
            continue;
        }
        if (count == MAX_INDIRECT_METHODS) {
            PyErr_SetString(PyExc_ValueError, "configure(): indirect_callers holds more than 8 methods");
            return -1;
        }
        state->indirect_methods[count].method = ((PyMethodDescrObject *)key)->d_method;
        state->indirect_methods[count].descriptor = Py_NewRef(key);
        fill_in_place(count, ((PyMethodDescrObject *)key)->d_method);
        state->indirect_methods[count++].caller = Py_NewRef(value);
    }
    return 0;
}

/* The place of a builtin's method definition among state->indirect_methods (a method
 * that takes callbacks: list.sort), or -1. */
int
indirect_method(PyMethodDef *method)
{
    for (int i = 0; i < MAX_INDIRECT_METHODS && state->indirect_methods[i].method != NULL; i++) {
        if (state->indirect_methods[i].method == method) {
            return i;
        }
    }
    return -1;
}

/* A bound C method that takes callbacks (items.sort), made by the call site's own
 * attribute load and held by nothing else, is made to decide for itself, at its call,
 * what runtime.primitives.primitive decides for it: its method definition is swapped in
 * place for a copy whose function (one of the trampolines below, by the method's index in
 * state->indirect_methods) calls the method's own C function when there is nothing to
 * prepare (run_primitive's test: no keywords, every operand of a builtin value class),
 * and run_primitive otherwise.  What a call site would call for it is otherwise
 * indirect_methods' caller bound to the object: a bound method made and freed, and three
 * calls (the bound method's, the partial's, primitive's) before the method's own
 * (docs/performance.md, "Callee kinds").  The copy keeps the method's name, doc and
 * flags, so the object's vectorcall (chosen by the flags when it was made) and the
 * interpreter's specialized calls of a builtin (which read the definition's function)
 * call the trampoline; the definitions are static, as CPython's are, and the object,
 * which only the site sees, dies after its one call.  Only the two signatures that such
 * methods have are swapped (METH_FASTCALL | METH_KEYWORDS, with or without METH_METHOD);
 * any other keeps the bound caller. */
static PyMethodDef in_place_methods[MAX_INDIRECT_METHODS];

static PyObject *
in_place_call(int i, PyObject *self, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
              PyObject *kwnames)
{
    SpeedupsState *const st = state;
    PyMethodDef *method = st->indirect_methods[i].method;
    PyObject *descriptor = st->indirect_methods[i].descriptor;
    if (kwnames == NULL && all_c_operands(&self, 1) && all_c_operands(args, nargs)) {
        int prepared = has_id(st->preparers, descriptor);
        if (prepared < 0) {
            return NULL;
        }
        if (prepared) { /* nothing to prepare: the method's own function, as the plain call runs it */
            return (method->ml_flags & METH_METHOD)
                ? ((PyCMethod)(void (*)(void))method->ml_meth)(self, cls, args, (CMethodNargs)nargs, NULL)
                : ((PyCFunctionFastWithKeywords)(void (*)(void))method->ml_meth)(self, args, nargs, NULL);
        }
    }
    /* primitive(descriptor, self, *args, **kwargs), as the bound caller would call it */
    Py_ssize_t total = nargs + (kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames));
    PyObject *small[8], **all = total < 8 ? small : PyMem_Malloc((total + 1) * sizeof(PyObject *));
    if (all == NULL) {
        return PyErr_NoMemory();
    }
    all[0] = self;
    if (total > 0) { /* (args may be NULL when there are none) */
        memcpy(all + 1, args, total * sizeof(PyObject *));
    }
    PyObject *out = own_off(run_primitive(descriptor, all, nargs + 1, kwnames));
    if (all != small) {
        PyMem_Free(all);
    }
    return out;
}

#define IN_PLACE(i)                                                                                    \
    static PyObject *in_place_##i(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) \
    {                                                                                                  \
        return in_place_call(i, self, NULL, args, nargs, kwnames);                                      \
    }                                                                                                  \
    static PyObject *in_place_method_##i(PyObject *self, PyTypeObject *cls, PyObject *const *args,     \
                                         CMethodNargs nargs, PyObject *kwnames)                        \
    {                                                                                                  \
        return in_place_call(i, self, cls, args, (Py_ssize_t)nargs, kwnames);                           \
    }
IN_PLACE(0) IN_PLACE(1) IN_PLACE(2) IN_PLACE(3) IN_PLACE(4) IN_PLACE(5) IN_PLACE(6) IN_PLACE(7)
#undef IN_PLACE

static PyCFunctionFastWithKeywords in_place_functions[MAX_INDIRECT_METHODS] = {
    in_place_0, in_place_1, in_place_2, in_place_3, in_place_4, in_place_5, in_place_6, in_place_7};
static PyCMethod in_place_method_functions[MAX_INDIRECT_METHODS] = {
    in_place_method_0, in_place_method_1, in_place_method_2, in_place_method_3,
    in_place_method_4, in_place_method_5, in_place_method_6, in_place_method_7};

/* The copy of indirect_methods' i-th definition that calls its trampoline, or none
 * (ml_meth NULL) for a signature not swapped. */
static void
fill_in_place(int i, PyMethodDef *method)
{
    int flags = method->ml_flags & ~(METH_CLASS | METH_STATIC | METH_COEXIST);
    in_place_methods[i] = *method;
    if (flags == (METH_FASTCALL | METH_KEYWORDS)) {
        in_place_methods[i].ml_meth = (PyCFunction)(void (*)(void))in_place_functions[i];
    }
    else if (flags == (METH_METHOD | METH_FASTCALL | METH_KEYWORDS)) {
        in_place_methods[i].ml_meth = (PyCFunction)(void (*)(void))in_place_method_functions[i];
    }
    else {
        in_place_methods[i].ml_meth = NULL;
    }
}

/* f, a bound C method that takes callbacks (the i-th of state->indirect_methods), which
 * the caller holds the only reference to, made to run as primitive() would run it (see
 * in_place_methods): 1, or 0 where it cannot be (a weak reference to it, a signature not
 * swapped). */
int
primitive_in_place(PyObject *f, int i)
{
    PyCFunctionObject *bound = (PyCFunctionObject *)f;
    if (bound->m_weakreflist != NULL || in_place_methods[i].ml_meth == NULL) {
        return 0;
    }
    bound->m_ml = &in_place_methods[i];
    return 1;
}

/* Is f in a dict keyed by id (special, preparers)?  1, 0, or -1 on error. */
int
has_id(PyObject *table, PyObject *f)
{
    return by_id(table, f) != NULL ? 1 : PyErr_Occurred() ? -1 : 0;
}

/* Does calling the primitive f need runtime.primitives.call_primitive's emulation? */
static int
emulated(PyObject *f)
{
    int found = has_id(state->special, f);
    return found || !is_builtin(f) ? found : has_indirect_name(f);
}

/* A value of a builtin scalar class: every dunder of it is C, so a builtin given only
 * these calls no Python code through them. */
int
is_scalar(PyObject *x)
{
    return PyFloat_CheckExact(x) || PyLong_CheckExact(x) || PyUnicode_CheckExact(x) || PyBool_Check(x)
           || x == Py_None || PyBytes_CheckExact(x) || PyComplex_CheckExact(x);
}

/* A module's builtin function (math.cos, len) that primitives does not emulate. */
int
is_plain_function(PyObject *f)
{
    if (!is_builtin(f) || !PyModule_Check(PyCFunction_GET_SELF(f))) {
        return 0;
    }
    int emulated = has_id(state->special, f);
    return emulated < 0 ? -1 : !emulated;
}

/* runtime.primitives.call_primitive: the primitive f called as the plain program would call it.
 * A builtin that takes callbacks gets its arguments prepared (the callbacks made call
 * sites) and is called from here, so the callbacks have the program's frame below them;
 * the other emulated builtins are runtime.primitives.call_primitive's. */
PyObject *
run_primitive(PyObject *f, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    SpeedupsState *const st = state;
    PyObject *prepare = by_id(st->preparers, f), *out = NULL;
    if (prepare != NULL && kwnames == NULL && all_c_operands(args, nargs)) {
        out = PyObject_Vectorcall(f, args, nargs, NULL); /* nothing to prepare */
    }
    else if (prepare != NULL) {
        PyObject *prepared = call_unpacked(prepare, NULL, NULL, args, nargs, kwnames);
        if (prepared != NULL && PyTuple_CheckExact(prepared) && PyTuple_GET_SIZE(prepared) == 2
            && PyTuple_CheckExact(PyTuple_GET_ITEM(prepared, 0)) && PyDict_CheckExact(PyTuple_GET_ITEM(prepared, 1))) {
            out = PyObject_Call(f, PyTuple_GET_ITEM(prepared, 0), PyTuple_GET_ITEM(prepared, 1));
        }
        else if (prepared != NULL) {
            PyErr_SetString(PyExc_TypeError, "cassette_hook: a preparer must return (args, kwargs)");
        }
        Py_XDECREF(prepared);
    }
    else if (!PyErr_Occurred()) {
        int emulate = emulated(f);
        out = emulate < 0 ? NULL
            : emulate ? call_unpacked(st->call_primitive, f, NULL, args, nargs, kwnames)
                      : PyObject_Vectorcall(f, args, nargs, kwnames);
    }
    return out;
}

/* runtime.primitives.primitive: what the program's frame calls for a builtin it must not call
 * directly (runtime.callsites.callable_for). */
/* Mirrors runtime.primitives.primitive. */
PyObject *
primitive(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (first_argument(nargs, "primitive", "f") < 0) {
        return NULL;
    }
    return own_off(run_primitive(args[0], args + 1, nargs - 1, kwnames));
}
