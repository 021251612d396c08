/* The hot path of cassette_hook in C: what rewritten call sites run (see callsite.py).
 *
 * callsite.py holds the reference version of each function here, in Python; this module
 * replaces two of them when it is built (CASSETTE_HOOK_PURE_PYTHON=1 keeps the Python
 * ones).  Two reasons, both measured (docs/performance.md):
 *
 *   - Speed.  resolve() runs at every call site under a context; in C its fast case is a
 *     context-variable read, one dict lookup and three pointer compares.
 *   - Frames.  A C function adds no Python frame, so a callee that call() calls has the
 *     program's frame as its f_back: no frame of ours between the program's frames.
 *
 * resolve() only ever returns what the program's frame then calls: a callee called from
 * C runs in a new evaluation loop, on the C stack (and, from 3.12 on, against CPython's
 * C recursion limit of about 1,500-8,000 levels), where the program's own Python-to-Python
 * call would not.  So a hooked call at a 3.11+ call site still runs callsite.site's Python
 * closure; call() runs it here, where the caller is C already (3.10 call sites, operator
 * sites through a partial, callbacks from C code).
 *
 * Everything rare is delegated back to callsite.py's Python (configure() hands it over):
 * a Python frame there is only ever on the stack while it works, never under a callee,
 * except where the docstrings of those functions say so.
 *
 * Entry and Plan are Python classes with __slots__; their slots are read here at the
 * offsets of their member descriptors, checked against the exact class.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <structmember.h> /* PyMemberDef (in Python.h from 3.12 on) */

/* What configure() was given. */
static PyObject *active;             /* the ContextVar of the stack (replaced by bind()) */
static PyTypeObject *entry_type, *plan_type;
static Py_ssize_t entry_ctx, entry_plan, entry_below, entry_fast_twins;
static Py_ssize_t plan_prehook_call, plan_posthook_call, plan_overdub, plan_execute, plan_twins;
static PyObject *resolve_fast;       /* (plan, f) -> what to call: past the twin table */
static PyObject *site_code, *site_globals, *site_qualname; /* callsite.site's closure, to make here */
static int site_entry_first;         /* its free variables are (entry, f), not (f, entry) */
static PyObject *call_primitive;     /* (f, args, kwargs): a primitive that needs emulating */
static PyObject *special;            /* id(builtin) -> handler: the primitives emulated */
static PyObject *preparers;          /* id(builtin) -> prepare(args, kwargs) -> (args, kwargs) */
static PyObject *indirect_names;     /* names of builtin methods that may be emulated */
static PyObject *present;            /* (f, args) -> (f, args): how hooks see a builtin method */
static PyObject *overloaded;         /* (entry, f, args, kwargs) -> out or OverdubInstead */
static PyObject *runnable;           /* (plan, f) -> what runs f's body, or None */
static PyObject *without_body;       /* (entry, f, args, kwargs): operator protocol or fallback */
static PyObject *seen_below;         /* (hook, args, kwargs): a hook run under the contexts below */
static PyObject *overdub_instead;    /* generics.OverdubInstead */
static PyObject *construct;          /* generics.construct(cls, *args, **kwargs): type.__call__ overdubbed */
static PyObject *object_new;         /* object.__new__ */
static PyObject *str_values, *str_twin, *str_name, *str_new, *str_init;

#define SLOT(obj, offset) (*(PyObject **)((char *)(obj) + (offset)))
#define ARGS_ON_STACK 12

static int
slot_offset(PyTypeObject *type, const char *name, Py_ssize_t *offset)
{
    PyObject *descr = PyDict_GetItemString(type->tp_dict, name);
    if (descr == NULL || Py_TYPE(descr) != &PyMemberDescr_Type) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not a slot", type->tp_name, name);
        return -1;
    }
    *offset = ((PyMemberDescrObject *)descr)->d_member->offset;
    return 0;
}

static PyObject *
slot(PyObject *obj, Py_ssize_t offset, const char *name)
{
    PyObject *value = SLOT(obj, offset);
    if (value == NULL) {
        PyErr_Format(PyExc_AttributeError, "%s has no %s", Py_TYPE(obj)->tp_name, name);
    }
    return value; /* borrowed */
}

/* The twin of function f in table (a dict id -> (twin, code, defaults, kwdefaults)), if
 * it is current: f still has the code and defaults it was made from.  1 and a borrowed
 * twin, 0 if there is none, -1 on error. */
static int
current_twin(PyObject *table, PyObject *f, PyObject **twin)
{
    if (!PyFunction_Check(f)) {
        return 0;
    }
    PyObject *key = PyLong_FromVoidPtr(f);
    if (key == NULL) {
        return -1;
    }
    PyObject *found = PyDict_GetItemWithError(table, key);
    Py_DECREF(key);
    if (found == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    PyObject *defaults = PyFunction_GET_DEFAULTS(f), *kwdefaults = PyFunction_GET_KW_DEFAULTS(f);
    if (PyTuple_GET_ITEM(found, 1) == PyFunction_GET_CODE(f)
        && PyTuple_GET_ITEM(found, 2) == (defaults ? defaults : Py_None)
        && PyTuple_GET_ITEM(found, 3) == (kwdefaults ? kwdefaults : Py_None)) {
        *twin = PyTuple_GET_ITEM(found, 0);
        return 1;
    }
    return 0;
}

/* *entry: the innermost active entry (a new reference), or NULL when no context is
 * active.  -1 on error. */
static int
active_entry(PyObject **entry)
{
    if (PyContextVar_Get(active, NULL, entry) < 0) {
        return -1;
    }
    if (*entry == Py_None) {
        Py_CLEAR(*entry);
    }
    else if (*entry != NULL && Py_TYPE(*entry) != entry_type) {
        PyErr_SetString(PyExc_TypeError, "cassette_hook: the context stack holds something else than an Entry");
        Py_CLEAR(*entry);
        return -1;
    }
    return 0;
}

/* callsite.site(entry, f): its closure, made as MAKE_FUNCTION would make it (calling site()
 * from C would cost a Python frame that CPython cannot inline). */
static PyObject *
make_site(PyObject *entry, PyObject *f)
{
    PyObject *closure = PyTuple_New(2);
    if (closure == NULL) {
        return NULL;
    }
    PyObject *first = PyCell_New(site_entry_first ? entry : f), *second = PyCell_New(site_entry_first ? f : entry);
    if (first == NULL || second == NULL) {
        Py_XDECREF(first);
        Py_XDECREF(second);
        Py_DECREF(closure);
        return NULL;
    }
    PyTuple_SET_ITEM(closure, 0, first);
    PyTuple_SET_ITEM(closure, 1, second);
    PyObject *function = PyFunction_NewWithQualName(site_code, site_globals, site_qualname);
    if (function != NULL && PyFunction_SetClosure(function, closure) < 0) {
        Py_CLEAR(function);
    }
    Py_DECREF(closure);
    return function;
}

/* callsite.resolve under entry: the twin, or what callsite's Python makes of f. */
static PyObject *
resolve_in(PyObject *entry, PyObject *f)
{
    PyObject *twins = slot(entry, entry_fast_twins, "fast_twins"), *twin;
    if (twins == NULL) {
        return NULL;
    }
    if (twins == Py_None) {
        return make_site(entry, f);
    }
    int found = current_twin(twins, f, &twin);
    if (found) {
        return found < 0 ? NULL : Py_NewRef(twin);
    }
    PyObject *plan = slot(entry, entry_plan, "plan");
    PyObject *args[2] = {plan, f};
    return plan ? PyObject_Vectorcall(resolve_fast, args, 2, NULL) : NULL;
}

/* callsite.resolve: what a rewritten call site calls in place of f. */
static PyObject *
resolve(PyObject *module, PyObject *f)
{
    PyObject *entry;
    if (active_entry(&entry) < 0) {
        return NULL;
    }
    if (entry == NULL) {
        return Py_NewRef(f);
    }
    PyObject *out = resolve_in(entry, f);
    Py_DECREF(entry);
    return out;
}

static PyObject *
as_tuple(PyObject *const *items, Py_ssize_t n)
{
    PyObject *tuple = PyTuple_New(n);
    if (tuple != NULL) {
        for (Py_ssize_t i = 0; i < n; i++) {
            PyTuple_SET_ITEM(tuple, i, Py_NewRef(items[i]));
        }
    }
    return tuple;
}

/* The keyword arguments of a vectorcall (their values follow the positional ones). */
static PyObject *
as_dict(PyObject *const *values, PyObject *kwnames)
{
    PyObject *dict = PyDict_New();
    if (dict == NULL || kwnames == NULL) {
        return dict;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
        if (PyDict_SetItem(dict, PyTuple_GET_ITEM(kwnames, i), values[i]) < 0) {
            Py_DECREF(dict);
            return NULL;
        }
    }
    return dict;
}

/* Call fn the Python way: fn([first, [second,]] args tuple, kwargs dict), from a
 * vectorcall's arguments (nargs positional, then the values of kwnames). */
static PyObject *
call_unpacked(PyObject *fn, PyObject *first, PyObject *second, PyObject *const *args, Py_ssize_t nargs,
              PyObject *kwnames)
{
    PyObject *tuple = as_tuple(args, nargs);
    if (tuple == NULL) {
        return NULL;
    }
    PyObject *dict = as_dict(args + nargs, kwnames);
    if (dict == NULL) {
        Py_DECREF(tuple);
        return NULL;
    }
    PyObject *out;
    if (first == NULL) {
        PyObject *stack[2] = {tuple, dict};
        out = PyObject_Vectorcall(fn, stack, 2, NULL);
    }
    else if (second == NULL) {
        PyObject *stack[3] = {first, tuple, dict};
        out = PyObject_Vectorcall(fn, stack, 3, NULL);
    }
    else {
        PyObject *stack[4] = {first, second, tuple, dict};
        out = PyObject_Vectorcall(fn, stack, 4, NULL);
    }
    Py_DECREF(tuple);
    Py_DECREF(dict);
    return out;
}

/* Does calling the primitive f (whose id is key) need primitives.call_primitive's
 * emulation? */
static int
emulated(PyObject *f, PyObject *key)
{
    int found = PyDict_Contains(special, key);
    if (found || Py_TYPE(f) != &PyCFunction_Type) {
        return found;
    }
    PyObject *name = PyObject_GetAttr(f, str_name);
    if (name == NULL) {
        return -1;
    }
    found = PySet_Contains(indirect_names, name);
    Py_DECREF(name);
    return found;
}

/* Run a hook (prehook or posthook) with the context popped: under the entry below, or
 * plain when there is none.  stack holds the hook's positional arguments, then the
 * call's keyword values. */
static int
run_hook(PyObject *entry, PyObject *hook, PyObject *const *stack, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *below = slot(entry, entry_below, "below");
    if (below == NULL) {
        return -1;
    }
    PyObject *token = PyContextVar_Set(active, below);
    if (token == NULL) {
        return -1;
    }
    PyObject *out = below == Py_None ? PyObject_Vectorcall(hook, stack, nargs, kwnames)
                                     : call_unpacked(seen_below, hook, NULL, stack, nargs, kwnames);
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    int reset = PyContextVar_Reset(active, token);
    Py_DECREF(token);
    if (reset < 0) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(traceback);
        Py_XDECREF(out);
        return -1;
    }
    PyErr_Restore(type, value, traceback);
    if (out == NULL) {
        return -1;
    }
    Py_DECREF(out);
    return 0;
}

/* What runs the callee's own body under the plan, or None (a new reference). */
static PyObject *
body_of(PyObject *plan, PyObject *callee)
{
    if (PyFunction_Check(callee)) {
        PyObject *twins = slot(plan, plan_twins, "twins"), *twin;
        if (twins == NULL) {
            return NULL;
        }
        PyObject *table = PyObject_GetAttr(twins, str_values);
        if (table == NULL) {
            return NULL;
        }
        int found = current_twin(table, callee, &twin);
        Py_DECREF(table);
        if (found) {
            return found < 0 ? NULL : Py_NewRef(twin);
        }
        return PyObject_CallMethodOneArg(plan, str_twin, callee);
    }
    PyObject *args[2] = {plan, callee};
    return PyObject_Vectorcall(runnable, args, 2, NULL);
}

/* stack: [ctx, <ctx, then the result>, callee, positional arguments..., keyword values...] */
static PyObject *
overdubbed(PyObject *entry, PyObject *callee, PyObject **stack, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *plan = slot(entry, entry_plan, "plan"), *ctx = slot(entry, entry_ctx, "ctx");
    if (plan == NULL || ctx == NULL) {
        return NULL;
    }
    if (Py_TYPE(plan) != plan_type) {
        PyErr_SetString(PyExc_TypeError, "cassette_hook: an entry's plan is not a Plan");
        return NULL;
    }
    PyObject *const *args = stack + 3;
    stack[0] = stack[1] = ctx;
    stack[2] = callee;
    PyObject *prehook = SLOT(plan, plan_prehook_call), *posthook = SLOT(plan, plan_posthook_call);
    if (prehook != NULL && prehook != Py_None && run_hook(entry, prehook, stack + 1, nargs + 2, kwnames) < 0) {
        return NULL;
    }
    PyObject *out;
    if (SLOT(plan, plan_overdub) == Py_True || SLOT(plan, plan_execute) == Py_True) {
        out = call_unpacked(overloaded, entry, callee, args, nargs, kwnames);
        if (out == NULL) {
            return NULL;
        }
    }
    else {
        out = Py_NewRef(overdub_instead);
    }
    if (out == overdub_instead) {
        Py_DECREF(out);
        PyObject *run = body_of(plan, callee);
        if (run == NULL) {
            return NULL;
        }
        out = run == Py_None ? call_unpacked(without_body, entry, callee, args, nargs, kwnames)
                             : PyObject_Vectorcall(run, args, nargs, kwnames);
        Py_DECREF(run);
        if (out == NULL) {
            return NULL;
        }
    }
    if (posthook != NULL && posthook != Py_None) {
        stack[1] = out;
        if (run_hook(entry, posthook, stack, nargs + 3, kwnames) < 0) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}

/* callsite.site's closure, called: the overdubbed call of f (prehook, overdub, posthook). */
static PyObject *
call_overdubbed(PyObject *entry, PyObject *f, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *callee = f, *receiver = NULL, *presented = NULL;
    if (Py_TYPE(callee) == &PyMethod_Type) { /* seen as (type(obj).m, obj, ...) */
        receiver = PyMethod_GET_SELF(callee);
        callee = PyMethod_GET_FUNCTION(callee);
    }
    else if (Py_TYPE(callee) == &PyCFunction_Type) { /* items.append(x): (list.append, items, x) */
        PyObject *tuple = as_tuple(args, nargs);
        if (tuple == NULL) {
            return NULL;
        }
        PyObject *pair[2] = {callee, tuple};
        presented = PyObject_Vectorcall(present, pair, 2, NULL);
        Py_DECREF(tuple);
        if (presented == NULL) {
            return NULL;
        }
        if (!PyTuple_CheckExact(presented) || PyTuple_GET_SIZE(presented) != 2
            || !PyTuple_CheckExact(PyTuple_GET_ITEM(presented, 1))) {
            Py_DECREF(presented);
            PyErr_SetString(PyExc_TypeError, "cassette_hook: present() must return (f, args)");
            return NULL;
        }
        callee = PyTuple_GET_ITEM(presented, 0);
    }
    PyObject *const *positional = presented ? &PyTuple_GET_ITEM(PyTuple_GET_ITEM(presented, 1), 0) : args;
    Py_ssize_t npositional = presented ? PyTuple_GET_SIZE(PyTuple_GET_ITEM(presented, 1)) : nargs;
    Py_ssize_t total = 3 + (receiver != NULL) + npositional + nkw;
    PyObject *small[ARGS_ON_STACK], **stack = small;
    if (total > ARGS_ON_STACK) {
        stack = PyMem_Malloc(total * sizeof(PyObject *));
        if (stack == NULL) {
            Py_XDECREF(presented);
            return PyErr_NoMemory();
        }
    }
    Py_ssize_t at = 3;
    if (receiver != NULL) {
        stack[at++] = receiver;
    }
    for (Py_ssize_t i = 0; i < npositional; i++) {
        stack[at++] = positional[i];
    }
    for (Py_ssize_t i = 0; i < nkw; i++) {
        stack[at++] = args[nargs + i];
    }
    /* The caller holds the entry and f (and `presented` holds what replaced f) for the call. */
    PyObject *out = overdubbed(entry, callee, stack, (receiver != NULL) + npositional, kwnames);
    if (stack != small) {
        PyMem_Free(stack);
    }
    Py_XDECREF(presented);
    return out;
}

/* primitives.call_primitive: the primitive f called as the plain program would call it.
 * A builtin that takes callbacks gets its arguments prepared (the callbacks made call
 * sites) and is called from here, so the callbacks have the program's frame below them;
 * the other emulated builtins are primitives.call_primitive's. */
static PyObject *
run_primitive(PyObject *f, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *key = PyLong_FromVoidPtr(f);
    if (key == NULL) {
        return NULL;
    }
    PyObject *prepare = PyDict_GetItemWithError(preparers, key), *out = NULL;
    if (prepare != NULL) {
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
        int emulate = emulated(f, key);
        out = emulate < 0 ? NULL
            : emulate ? call_unpacked(call_primitive, f, NULL, args, nargs, kwnames)
                      : PyObject_Vectorcall(f, args, nargs, kwnames);
    }
    Py_DECREF(key);
    return out;
}

/* primitives.primitive: what the program's frame calls for a builtin it must not call
 * directly (primitives.callable_for). */
static PyObject *
primitive(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "primitive() missing 1 required positional argument: 'f'");
        return NULL;
    }
    return run_primitive(args[0], args + 1, nargs - 1, kwnames);
}

/* callsite.call: f(*args, **kwargs) as the innermost active context sees it. */
static PyObject *
call(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "call() missing 1 required positional argument: 'f'");
        return NULL;
    }
    PyObject *f = args[0], *entry, *run, *out;
    if (active_entry(&entry) < 0) {
        return NULL;
    }
    if (entry == NULL) {
        run = Py_NewRef(f);
    }
    else if (SLOT(entry, entry_fast_twins) == Py_None) {
        out = call_overdubbed(entry, f, args + 1, nargs - 1, kwnames);
        Py_DECREF(entry);
        return out;
    }
    else {
        run = resolve_in(entry, f);
        Py_DECREF(entry);
        if (run == NULL) {
            return NULL;
        }
    }
    if (run == f) {
        out = run_primitive(f, args + 1, nargs - 1, kwnames);
    }
    else {
        out = PyObject_Vectorcall(run, args + 1, nargs - 1, kwnames);
    }
    Py_DECREF(run);
    return out;
}

/* generics.construct for the common class -- object's __new__, a Python __init__ -- in C,
 * so that no frame of ours is between the program's and __init__'s (type.__call__ calls
 * __init__ from C too).  Any other class is generics.construct's. */
static PyObject *
construct_by_ref(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "construct_by_ref() missing 1 required positional argument: 'ref'");
        return NULL;
    }
    PyObject *cls = PyObject_CallNoArgs(args[0]); /* alive: it is being called */
    if (cls == NULL) {
        return NULL;
    }
    if (!PyType_Check(cls)) {
        PyErr_Format(PyExc_TypeError, "construct_by_ref(): %R is not a class", cls);
        Py_DECREF(cls);
        return NULL;
    }
    Py_ssize_t total = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
    PyObject *small[ARGS_ON_STACK], **stack = small, *out = NULL;
    if (total > ARGS_ON_STACK) {
        stack = PyMem_Malloc(total * sizeof(PyObject *));
        if (stack == NULL) {
            Py_DECREF(cls);
            return PyErr_NoMemory();
        }
    }
    for (Py_ssize_t i = 1; i < total; i++) {
        stack[i] = args[i];
    }
    PyObject *init = _PyType_Lookup((PyTypeObject *)cls, str_init); /* borrowed, as type.__call__ finds it */
    if (_PyType_Lookup((PyTypeObject *)cls, str_new) != object_new || init == NULL || !PyFunction_Check(init)) {
        stack[0] = cls;
        out = PyObject_Vectorcall(construct, stack, nargs, kwnames);
        goto done;
    }
    Py_INCREF(init);
    PyObject *obj = PyObject_Vectorcall(object_new, &cls, 1, NULL);
    PyObject *run = obj ? resolve(NULL, init) : NULL;
    Py_DECREF(init);
    if (run != NULL) {
        stack[0] = obj;
        PyObject *result = PyObject_Vectorcall(run, stack, nargs, kwnames);
        Py_DECREF(run);
        if (result == Py_None) {
            out = Py_NewRef(obj);
        }
        else if (result != NULL) {
            PyErr_Format(PyExc_TypeError, "__init__() should return None, not '%.200s'", Py_TYPE(result)->tp_name);
        }
        Py_XDECREF(result);
    }
    Py_XDECREF(obj);
done:
    if (stack != small) {
        PyMem_Free(stack);
    }
    Py_DECREF(cls);
    return out;
}

static PyObject *
bind(PyObject *module, PyObject *variable)
{
    if (!PyContextVar_CheckExact(variable)) {
        PyErr_SetString(PyExc_TypeError, "bind() takes a ContextVar");
        return NULL;
    }
    Py_XSETREF(active, Py_NewRef(variable));
    Py_RETURN_NONE;
}

static int
keep(PyObject *kwargs, const char *name, PyObject **into)
{
    PyObject *value = PyDict_GetItemString(kwargs, name);
    if (value == NULL) {
        PyErr_Format(PyExc_TypeError, "configure() needs %s", name);
        return -1;
    }
    Py_XSETREF(*into, Py_NewRef(value));
    return 0;
}

static PyObject *
configure(PyObject *module, PyObject *args, PyObject *kwargs)
{
    PyObject *entry, *plan;
    if (PyTuple_GET_SIZE(args) != 0 || kwargs == NULL) {
        PyErr_SetString(PyExc_TypeError, "configure() takes keyword arguments");
        return NULL;
    }
    entry = PyDict_GetItemString(kwargs, "entry_type");
    plan = PyDict_GetItemString(kwargs, "plan_type");
    if (entry == NULL || plan == NULL || !PyType_Check(entry) || !PyType_Check(plan)) {
        PyErr_SetString(PyExc_TypeError, "configure() needs entry_type and plan_type");
        return NULL;
    }
    if (slot_offset((PyTypeObject *)entry, "ctx", &entry_ctx) < 0
        || slot_offset((PyTypeObject *)entry, "plan", &entry_plan) < 0
        || slot_offset((PyTypeObject *)entry, "below", &entry_below) < 0
        || slot_offset((PyTypeObject *)entry, "fast_twins", &entry_fast_twins) < 0
        || slot_offset((PyTypeObject *)plan, "prehook_call", &plan_prehook_call) < 0
        || slot_offset((PyTypeObject *)plan, "posthook_call", &plan_posthook_call) < 0
        || slot_offset((PyTypeObject *)plan, "overdub", &plan_overdub) < 0
        || slot_offset((PyTypeObject *)plan, "execute", &plan_execute) < 0
        || slot_offset((PyTypeObject *)plan, "twins", &plan_twins) < 0) {
        return NULL;
    }
    Py_XSETREF(entry_type, (PyTypeObject *)Py_NewRef(entry));
    Py_XSETREF(plan_type, (PyTypeObject *)Py_NewRef(plan));
    if (keep(kwargs, "resolve_fast", &resolve_fast) < 0 || keep(kwargs, "site_closure", &site_code) < 0 || keep(kwargs, "call_primitive", &call_primitive) < 0
        || keep(kwargs, "special", &special) < 0 || keep(kwargs, "preparers", &preparers) < 0 || keep(kwargs, "indirect_names", &indirect_names) < 0
        || keep(kwargs, "present", &present) < 0 || keep(kwargs, "overloaded", &overloaded) < 0
        || keep(kwargs, "runnable", &runnable) < 0 || keep(kwargs, "without_body", &without_body) < 0
        || keep(kwargs, "seen_below", &seen_below) < 0 || keep(kwargs, "overdub_instead", &overdub_instead) < 0
        || keep(kwargs, "construct", &construct) < 0) {
        return NULL;
    }
    if (!PyFunction_Check(site_code)) {
        PyErr_SetString(PyExc_TypeError, "configure(): site_closure must be a closure made by callsite.site");
        return NULL;
    }
    PyObject *closure = site_code; /* a sample closure: its code, globals and names */
    PyObject *freevars = PyObject_GetAttrString(PyFunction_GET_CODE(closure), "co_freevars");
    if (freevars == NULL) {
        return NULL;
    }
    int shape = PyTuple_Check(freevars) && PyTuple_GET_SIZE(freevars) == 2;
    site_entry_first = shape && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(freevars, 0), "entry") == 0;
    shape = shape && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(freevars, site_entry_first ? 1 : 0), "f") == 0
            && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(freevars, site_entry_first ? 0 : 1), "entry") == 0;
    Py_DECREF(freevars);
    if (!shape) {
        PyErr_SetString(PyExc_TypeError, "configure(): site's closure must have the free variables entry and f");
        return NULL;
    }
    Py_XSETREF(site_qualname, Py_NewRef(((PyFunctionObject *)closure)->func_qualname));
    Py_XSETREF(site_globals, Py_NewRef(PyFunction_GET_GLOBALS(closure)));
    site_code = Py_NewRef(PyFunction_GET_CODE(closure));
    Py_DECREF(closure);
    if (!PyDict_CheckExact(special) || !PyDict_CheckExact(preparers) || !PyAnySet_CheckExact(indirect_names)) {
        PyErr_SetString(PyExc_TypeError, "configure(): special must be a dict, indirect_names a set");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"resolve", resolve, METH_O, "What a rewritten call site calls in place of f."},
    {"call", (PyCFunction)(void (*)(void))call, METH_FASTCALL | METH_KEYWORDS,
     "call(f, /, *args, **kwargs): f(*args, **kwargs) as the innermost active context sees it."},
    {"primitive", (PyCFunction)(void (*)(void))primitive, METH_FASTCALL | METH_KEYWORDS,
     "primitive(f, /, *args, **kwargs): the builtin f called as the plain program would call it."},
    {"construct_by_ref", (PyCFunction)(void (*)(void))construct_by_ref, METH_FASTCALL | METH_KEYWORDS,
     "construct_by_ref(ref, /, *args, **kwargs): ref() called, its __init__ overdubbed."},
    {"bind", bind, METH_O, "Use this ContextVar as the stack of active contexts."},
    {"configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS,
     "Hand over the classes and the Python functions the hot path delegates to."},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "cassette_hook._speedups",
    .m_doc = "The hot path of cassette_hook in C (optional; callsite.py has it in Python).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    str_values = PyUnicode_InternFromString("values");
    str_twin = PyUnicode_InternFromString("twin");
    str_name = PyUnicode_InternFromString("__name__");
    str_new = PyUnicode_InternFromString("__new__");
    str_init = PyUnicode_InternFromString("__init__");
    if (str_values == NULL || str_twin == NULL || str_name == NULL || str_new == NULL || str_init == NULL) {
        return NULL;
    }
    object_new = _PyType_Lookup(&PyBaseObject_Type, str_new); /* lives as long as object */
    if (object_new == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "object has no __new__");
        return NULL;
    }
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) {
        return NULL;
    }
    return module;
}
