/* The hot path of cassette_hook in C: what rewritten call sites run.  This file is the
 * module: its method table, its multi-phase initialization, configure(), and the helpers
 * every other file uses; internal.h lists the files, one per Python module they mirror.
 *
 * The Python modules hold the reference version of each part, and use this one when it is
 * built (_native.py; CASSETTE_HOOK_PURE_PYTHON=1 keeps the Python ones): runtime.callsites.py
 * (resolve, call, the overdubbed call's steps), runtime.callees.py, runtime.operators.py, runtime.primitives.py,
 * dispatch.py (the walk of a generic's method cache), tagging.py (a wrapper's fields,
 * tag/untag/metadata) and the others internal.h names.  Two reasons, both measured
 * (docs/performance.md):
 *
 *   - Speed.  resolve() runs at every call site under a context; in C its fast case is a
 *     context-variable read, one dict lookup and three pointer compares.
 *   - Frames.  A C function adds no Python frame, so a callee that call() calls has the
 *     program's frame as its f_back: no frame of ours between the program's frames.
 *
 * resolve() returns what the program's frame then calls: under hooks, a Site, which runs
 * runtime.callsites.site's steps here, so that the hooks and the callee have the program's frame
 * below them.  A Python callee called from C runs in a new evaluation loop, on the C stack
 * (and, from 3.12 on, against CPython's C recursion limit of about 1,500-8,000 levels),
 * where the program's own Python-to-Python call would not: so a thread runs only so many
 * Python callees through Sites at once, and deeper recursion gets runtime.callsites.site's Python
 * closure (see SITE_BUDGET).  call() runs the same steps where the caller is C already
 * (3.10 call sites, operator sites through a partial, callbacks from C code).  An
 * overload's call of runtime.callees.recurse runs here too, under the same kind of budget
 * (RECURSE_BUDGET), so that the callee has the overload's frame below it.
 *
 * Everything rare is delegated back to the Python modules (configure() and
 * configure_tagging() hand it over): a Python frame there is only ever on the stack
 * while it works, never under a callee, except where the docstrings of those functions
 * say so.
 *
 * Entry, Plan and Tag are Python classes with __slots__; their slots are read at the
 * offsets of their member descriptors, checked against the exact class (SLOT, internal.h).
 * What the files share lives in one struct, the module's state (state.h says why the hot
 * path reaches it through a static pointer, and what that rules out).
 */
#include "internal.h"

static PyObject *as_dict(PyObject *const *values, PyObject *kwnames);

SpeedupsState *state;

int
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

/* 0 if a function of ours that takes its callee first got one, else -1 and Python's error. */
int
first_argument(Py_ssize_t nargs, const char *function, const char *name)
{
    if (nargs >= 1) {
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "%s() missing 1 required positional argument: '%s'", function, name);
    return -1;
}

PyObject *
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
PyObject *
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

int
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

/* C only: hands over the classes and the Python functions the hot path delegates to. */
PyObject *
configure(PyObject *module, PyObject *args, PyObject *kwargs)
{
    PyObject *entry, *plan;
    if (PyTuple_GET_SIZE(args) != 0 || kwargs == NULL) {
        PyErr_SetString(PyExc_TypeError, "configure() takes keyword arguments");
        return NULL;
    }
    entry = PyDict_GetItemString(kwargs, "entry_type");
    plan = PyDict_GetItemString(kwargs, "plan_type");
    PyObject *id_table = PyDict_GetItemString(kwargs, "id_table_type");
    if (entry == NULL || plan == NULL || id_table == NULL || !PyType_Check(entry) || !PyType_Check(plan)
        || !PyType_Check(id_table)) {
        PyErr_SetString(PyExc_TypeError, "configure() needs entry_type, plan_type and id_table_type");
        return NULL;
    }
    if (slot_offset((PyTypeObject *)entry, "ctx", &state->entry_ctx) < 0
        || slot_offset((PyTypeObject *)entry, "plan", &state->entry_plan) < 0
        || slot_offset((PyTypeObject *)entry, "below", &state->entry_below) < 0
        || slot_offset((PyTypeObject *)entry, "direct_twins", &state->entry_direct_twins) < 0
        || slot_offset((PyTypeObject *)plan, "fast", &state->plan_fast) < 0
        || slot_offset((PyTypeObject *)plan, "named_table", &state->plan_named_table) < 0
        || slot_offset((PyTypeObject *)plan, "named_methods", &state->plan_named_methods) < 0
        || slot_offset((PyTypeObject *)plan, "overloads", &state->plan_overloads) < 0
        || slot_offset((PyTypeObject *)plan, "named_classes", &state->plan_named_classes) < 0
        || slot_offset((PyTypeObject *)plan, "enters", &state->plan_enters) < 0
        || slot_offset((PyTypeObject *)plan, "fallback", &state->plan_fallback) < 0
        || slot_offset((PyTypeObject *)plan, "prehook_call", &state->plan_prehook_call) < 0
        || slot_offset((PyTypeObject *)plan, "overdub_call", &state->plan_overdub_call) < 0
        || slot_offset((PyTypeObject *)plan, "posthook_call", &state->plan_posthook_call) < 0
        || slot_offset((PyTypeObject *)plan, "raisehook_call", &state->plan_raisehook_call) < 0
        || slot_offset((PyTypeObject *)plan, "overdub", &state->plan_overdub) < 0
        || slot_offset((PyTypeObject *)plan, "execute", &state->plan_execute) < 0
        || slot_offset((PyTypeObject *)plan, "operators", &state->plan_operators) < 0
        || slot_offset((PyTypeObject *)plan, "constructors", &state->plan_constructors) < 0
        || slot_offset((PyTypeObject *)plan, "constructions", &state->plan_constructions) < 0
        || slot_offset((PyTypeObject *)plan, "twins", &state->plan_twins) < 0
        || slot_offset((PyTypeObject *)plan, "_modules", &state->plan_modules) < 0
        || slot_offset((PyTypeObject *)plan, "shared", &state->plan_shared) < 0
        || slot_offset((PyTypeObject *)id_table, "values", &state->id_table_values) < 0
        || slot_offset((PyTypeObject *)id_table, "_refs", &state->id_table_refs) < 0) {
        return NULL;
    }
    Py_XSETREF(state->id_table_type, (PyTypeObject *)Py_NewRef(id_table));
    Py_XSETREF(state->entry_type, (PyTypeObject *)Py_NewRef(entry));
    Py_XSETREF(state->plan_type, (PyTypeObject *)Py_NewRef(plan));
    if (keep(kwargs, "resolve_direct", &state->resolve_direct) < 0
        || keep(kwargs, "overload_by_callee", &state->overload_by_callee) < 0
        || keep(kwargs, "guard_type", &state->guard_type) < 0 || keep(kwargs, "site_closure", &state->site_code) < 0 || keep(kwargs, "call_primitive", &state->call_primitive) < 0
        || keep(kwargs, "special", &state->special) < 0 || keep(kwargs, "preparers", &state->preparers) < 0 || keep(kwargs, "indirect_names", &state->indirect_names) < 0
        || keep(kwargs, "indirect_callers", &state->indirect_callers) < 0
        || keep(kwargs, "called_as_is", &state->called_as_is) < 0
        || keep(kwargs, "present", &state->present) < 0 || keep(kwargs, "overdub_default", &state->overload_defaults[0]) < 0
        || keep(kwargs, "execute_default", &state->overload_defaults[1]) < 0
        || keep(kwargs, "fallback_default", &state->fallback_default) < 0
        || keep(kwargs, "plain_operators", &state->plain_operators) < 0 || keep(kwargs, "c_operands", &state->c_operands) < 0
        || keep(kwargs, "runnable", &state->runnable) < 0 || keep(kwargs, "without_body", &state->without_body) < 0
        || keep(kwargs, "operator_dunders", &state->operator_dunders) < 0 || keep(kwargs, "operator_body", &state->operator_body) < 0
        || keep(kwargs, "call_ex", &state->python_call_ex) < 0
        || keep(kwargs, "seen_below", &state->seen_below) < 0 || keep(kwargs, "overdub_instead", &state->overdub_instead) < 0
        || keep(kwargs, "construct", &state->construct) < 0 || keep(kwargs, "own_directory", &state->own_directory) < 0) {
        return NULL;
    }
    if (!PyFunction_Check(state->site_code)) {
        PyErr_SetString(PyExc_TypeError, "configure(): site_closure must be a closure made by callsite.site");
        return NULL;
    }
    PyObject *closure = state->site_code; /* a sample closure: its code, globals and names */
    PyObject *freevars = PyObject_GetAttrString(PyFunction_GET_CODE(closure), "co_freevars");
    if (freevars == NULL) {
        return NULL;
    }
    int shape = PyTuple_Check(freevars) && PyTuple_GET_SIZE(freevars) == 2;
    state->site_entry_first = shape && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(freevars, 0), "entry") == 0;
    shape = shape && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(freevars, state->site_entry_first ? 1 : 0), "f") == 0
            && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(freevars, state->site_entry_first ? 0 : 1), "entry") == 0;
    Py_DECREF(freevars);
    if (!shape) {
        PyErr_SetString(PyExc_TypeError, "configure(): site's closure must have the free variables entry and f");
        return NULL;
    }
    Py_XSETREF(state->site_qualname, Py_NewRef(((PyFunctionObject *)closure)->func_qualname));
    Py_XSETREF(state->site_globals, Py_NewRef(PyFunction_GET_GLOBALS(closure)));
    state->site_code = Py_NewRef(PyFunction_GET_CODE(closure));
    Py_DECREF(closure);
    const char *generics[3] = {"overdub", "execute", "fallback"};
    PyObject **dispatchers[3] = {&state->overload_dispatchers[0], &state->overload_dispatchers[1], &state->fallback_dispatcher};
    for (int i = 0; i < 3; i++) {
        PyObject *generic = PyDict_GetItemString(kwargs, generics[i]);
        PyObject *dispatcher = generic ? PyObject_GetAttrString(generic, "func") : NULL;
        if (dispatcher == NULL || Py_TYPE(dispatcher) != &DispatcherType) {
            Py_XDECREF(dispatcher);
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "configure() needs %s, a Generic that calls a Dispatcher", generics[i]);
            return NULL;
        }
        Py_XSETREF(*dispatchers[i], dispatcher);
    }
    if (!PyAnySet_CheckExact(state->plain_operators) || !PyAnySet_CheckExact(state->c_operands)) {
        PyErr_SetString(PyExc_TypeError, "configure(): plain_operators and c_operands must be sets");
        return NULL;
    }
    if (!PyDict_CheckExact(state->special) || !PyDict_CheckExact(state->preparers) || !PyAnySet_CheckExact(state->indirect_names)
        || !PyDict_CheckExact(state->indirect_callers) || !PyDict_CheckExact(state->called_as_is)) {
        PyErr_SetString(PyExc_TypeError, "configure(): special, preparers, indirect_callers and called_as_is must be "
                                         "dicts, indirect_names a set");
        return NULL;
    }
    if (address_set_fill(&state->plain_operator_set, state->plain_operators) < 0 || dunder_table_fill(state->operator_dunders) < 0
        || fill_indirect_names(state->indirect_names) < 0 || fill_indirect_methods(state->indirect_callers) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"resolve", resolve, METH_O, "What a rewritten call site calls in place of f."},
    {"resolve_star", resolve_star, METH_O, "What a rewritten star call site calls in place of f."},
    {"enter", (PyCFunction)(void (*)(void))enter, METH_FASTCALL,
     "enter(f, *args): what an entering call site calls in place of f, given its arguments."},
    {"set_code", (PyCFunction)(void (*)(void))set_code, METH_FASTCALL,
     "set_code(function, code): function.__code__ = code, calls to it as specializable as before (3.13)."},
    {"version_like", (PyCFunction)(void (*)(void))version_like, METH_FASTCALL,
     "version_like(twin, function): the twin's calls as specializable as the function's (3.13)."},
    {"operator_call", (PyCFunction)(void (*)(void))operator_call, METH_FASTCALL | METH_KEYWORDS,
     "operator_call(op, *args): an operator of switched code (_switch._operator_call)."},
    {"method_of", (PyCFunction)(void (*)(void))method_of, METH_FASTCALL,
     "method_of(obj, name): what a method site of switched code loads, as MethodSite(name)(obj)."},
    {"mirror_builtins", (PyCFunction)(void (*)(void))mirror_builtins, METH_FASTCALL,
     "mirror_builtins(builtins, pinned): a dict that follows builtins, but for pinned's names (3.12+; else None)."},
    {"set_builtins", (PyCFunction)(void (*)(void))set_builtins, METH_FASTCALL,
     "set_builtins(function, builtins): the builtins function's frames read."},
    {"entry_gone", entry_gone, METH_O, "entry_gone(ref): an entry _switch followed has died (a weakref callback)."},
    {"watch_live", (PyCFunction)(void (*)(void))watch_live, METH_FASTCALL,
     "watch_live(live, live_operators, builtins, active_name, operators_name): the sets entry_gone keeps."},
    {"runs_here", runs_here, METH_O, "runs_here(module): should a switched body of module run rewritten now?"},
    {"yield_from", yield_from, METH_O, "yield_from(obj): what `yield from obj` iterates, iter(obj) as a call site."},
    {"call", (PyCFunction)(void (*)(void))call, METH_FASTCALL | METH_KEYWORDS,
     "call(f, /, *args, **kwargs): f(*args, **kwargs) as the innermost active context sees it."},
    {"call_ex", (PyCFunction)(void (*)(void))call_ex, METH_FASTCALL,
     "call_ex(f, args, kwargs=None, /): the star call f(*args, **kwargs) (3.10 call sites)."},
    {"primitive", (PyCFunction)(void (*)(void))primitive, METH_FASTCALL | METH_KEYWORDS,
     "primitive(f, /, *args, **kwargs): the builtin f called as the plain program would call it."},
    {"construct_by_ref", (PyCFunction)(void (*)(void))construct_by_ref, METH_FASTCALL | METH_KEYWORDS,
     "construct_by_ref(ref, /, *args, **kwargs): ref() called, its __init__ overdubbed."},
    {"bind", bind, METH_O, "Use this ContextVar as the stack of active contexts."},
    {"unpop", (PyCFunction)(void (*)(void))unpop, METH_FASTCALL,
     "unpop(ctx, f): put back the popped entry of ctx's running overload, and return what runs f's body; or None."},
    {"install_recurse", (PyCFunction)(void (*)(void))install_recurse, METH_FASTCALL,
     "install_recurse(f, reference): what bodies.recurse is, its calls run in C where they can."},
    {"repop", repop, METH_NOARGS, "repop(): pop again what unpop() put back."},
    {"run_popped", (PyCFunction)(void (*)(void))run_popped_call, METH_FASTCALL | METH_KEYWORDS,
     "run_popped(entry, method, *args, **kwargs): method(*args, **kwargs) run with entry popped, as a Site runs an overload."},
    {"popped_call", (PyCFunction)(void (*)(void))popped_call, METH_FASTCALL,
     "popped_call(entry, method, args, kwargs): run_popped(entry, method, *args, **kwargs)."},
    {"handled_traceback", (PyCFunction)(void (*)(void))handled_traceback, METH_FASTCALL,
     "handled_traceback(exc, tb): tb becomes the traceback of exc, the exception being handled (3.10)."},
    {"exit_method", (PyCFunction)(void (*)(void))exit_method, METH_FASTCALL,
     "exit_method(Context, pop_at_exit): Context.__exit__ for the C path (pop_at_exit, called again after an interrupt)."},
    {"unpopped", unpopped, METH_NOARGS, "unpopped(): is what unpop() put back in force on this thread?"},
    {"top", top, METH_NOARGS, "top(): the innermost active Entry as the running code sees it, or None."},
    {"overload_of", overload_of, METH_O,
     "overload_of(call): the overdub method for (ctx, f, *args), else the execute one, else None."},
    {"present", (PyCFunction)(void (*)(void))present_c, METH_FASTCALL,
     "present(f, args): how hooks see a builtin method call: (type's method, (receiver, *args))."},
    {"tag", (PyCFunction)(void (*)(void))tag, METH_FASTCALL | METH_KEYWORDS,
     "tag(value, ctx, metadata=NoMetaData)\n--\n\nvalue tagged with respect to ctx, carrying metadata."},
    {"untag", (PyCFunction)(void (*)(void))untag, METH_FASTCALL | METH_KEYWORDS,
     "untag(x, ctx)\n--\n\nThe plain value of x if it is tagged for ctx, else x itself."},
    {"metadata", (PyCFunction)(void (*)(void))metadata, METH_FASTCALL | METH_KEYWORDS,
     "metadata(x, ctx)\n--\n\nThe metadata x carries for ctx, or NoMetaData."},
    {"istagged", (PyCFunction)(void (*)(void))istagged, METH_FASTCALL | METH_KEYWORDS,
     "istagged(x, ctx)\n--\n\nIs x tagged for ctx (another context's tag does not count)?"},
    {"hasmetadata", (PyCFunction)(void (*)(void))hasmetadata, METH_FASTCALL | METH_KEYWORDS,
     "hasmetadata(x, ctx)\n--\n\nDoes x carry metadata for ctx?"},
    {"make", (PyCFunction)(void (*)(void))make, METH_FASTCALL,
     "make(value, tag, meta): value wrapped for tag (tagging._make)."},
    {"configure_tagging", (PyCFunction)(void (*)(void))configure_tagging, METH_VARARGS | METH_KEYWORDS,
     "Hand over tagging's classes, tables and the Python functions it delegates to."},
    {"configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS,
     "Hand over the classes and the Python functions the hot path delegates to."},
    {NULL},
};

/* What stands in for each Python function configure() hands over, until it has: an
 * error, rather than a call through NULL from a path that runs with no context active. */
/* C only: stands in for the Python functions configure() hands over, until it has. */
static PyObject *
unconfigured(PyObject *self, PyObject *args, PyObject *kwargs)
{
    PyErr_SetString(PyExc_RuntimeError, "cassette_hook._speedups: called before the runtime set it up");
    return NULL;
}

static PyMethodDef unconfigured_def = {"unconfigured", (PyCFunction)(void (*)(void))unconfigured,
                                       METH_VARARGS | METH_KEYWORDS, NULL};

/* The state's objects, for the collector: every reference the state owns.  (Borrowed ones
 * -- object_new, mirrored, method_wrapper_type, the twin memo's entries -- are not.) */
#define STATE_OBJECTS(X)                                                                                              \
    X(active) X(pop_function) X(entry_type) X(plan_type) X(id_table_type) X(resolve_direct) X(site_code)             \
    X(overload_by_callee) X(guard_type)                                                                               \
    X(site_globals) X(site_qualname) X(call_primitive) X(special) X(preparers) X(indirect_names) X(indirect_callers) \
    X(called_as_is)                                                                                                   \
    X(present) X(overload_dispatchers[0]) X(overload_dispatchers[1]) X(overload_defaults[0])                         \
    X(overload_defaults[1]) X(fallback_dispatcher) X(fallback_default) X(plain_operators) X(c_operands) X(runnable)  \
    X(without_body) X(python_call_ex) X(operator_dunders) X(operator_body) X(seen_below) X(overdub_instead)          \
    X(construct) X(own_directory) X(iter_builtin) X(SpecialType) X(str_twin) X(str_new) X(str_init) X(str_tag)      \
    X(str_call) X(str_runs_module) X(str_generation) X(one) X(live_entries) X(live_operator_entries)                 \
    X(flags_module) X(str_active_flag) X(str_operators_flag) X(mirror) X(pinned) X(recurse_function) X(tag_type)    \
    X(wrapper_classes) X(wrapper_class) X(wrappers) X(tagging_context) X(no_metadata) X(allowed_metadata)           \
    X(allowed_generation) X(dispatch_module) X(check_metadata) X(not_tagging) X(last_tagging_context) X(last_tag)    \
    X(last_untagged_context) X(last_ctx_type) X(last_value_type) X(last_meta_type) X(last_generation)

int
state_traverse(SpeedupsState *st, visitproc visit, void *arg)
{
#define VISIT(field) Py_VISIT(st->field);
    STATE_OBJECTS(VISIT)
#undef VISIT
    for (int i = 0; i < MAX_INDIRECT_METHODS; i++) {
        Py_VISIT(st->indirect_methods[i].caller);
        Py_VISIT(st->indirect_methods[i].descriptor);
    }
    for (int i = 0; i < ADDRESS_SET_SIZE; i++) {
        for (int j = 0; j < st->dunder_table[i].n; j++) {
            Py_VISIT(st->dunder_table[i].name[j]);
        }
        Py_VISIT(st->dunder_table[i].symbol);
    }
    for (int i = 0; i < METHOD_NAMES; i++) {
        Py_VISIT(st->method_names[i].name);
    }
    return 0;
}

void
state_clear(SpeedupsState *st)
{
#define CLEAR(field) Py_CLEAR(st->field);
    STATE_OBJECTS(CLEAR)
#undef CLEAR
    for (int i = 0; i < MAX_INDIRECT_METHODS; i++) {
        Py_CLEAR(st->indirect_methods[i].caller);
        Py_CLEAR(st->indirect_methods[i].descriptor);
    }
    for (int i = 0; i < ADDRESS_SET_SIZE; i++) {
        for (int j = 0; j < st->dunder_table[i].n; j++) {
            Py_CLEAR(st->dunder_table[i].name[j]);
        }
        Py_CLEAR(st->dunder_table[i].symbol);
    }
    for (int i = 0; i < METHOD_NAMES; i++) {
        Py_CLEAR(st->method_names[i].name);
    }
}

static int
module_traverse(PyObject *module, visitproc visit, void *arg)
{
    SpeedupsState *st = PyModule_GetState(module);
    return st == NULL ? 0 : state_traverse(st, visit, arg);
}

/* The collector clears a module only when nothing outside the garbage refers to it, which
 * the reference the exec slot keeps (below) rules out for the one instance: this runs for
 * a module whose exec failed, say. */
static int
module_clear(PyObject *module)
{
    SpeedupsState *st = PyModule_GetState(module);
    if (st != NULL && st != state) {
        state_clear(st);
    }
    return 0;
}

/* The exec slot: the state filled and the static pointer set, once per process.
 *
 * The hot path reaches the state through `state`, a static pointer (state.h says why), so
 * there is one module instance: a second exec -- a second interpreter before 3.12 (3.12+
 * refuses it by the Py_mod_multiple_interpreters slot), or the module imported again
 * after its removal from sys.modules -- raises ImportError, which _native takes as "no
 * accelerator" (the pure-Python path runs).  The module keeps a reference to itself,
 * never given back: the state must outlive every object that may still read it (a Site
 * freed at shutdown puts itself in state->sites_kept), as the statics it replaces did. */
static int
module_exec(PyObject *module)
{
    if (state != NULL) {
        PyErr_SetString(PyExc_ImportError,
                        "cassette_hook._speedups: loaded once per process already (one module instance: its state "
                        "is read through a static pointer; see docs/internals.md, \"The C hot path\")");
        return -1;
    }
    SpeedupsState *st = PyModule_GetState(module);
    if (st == NULL) {
        return -1;
    }
    /* (m_size > 0: CPython zeroed it) */
    st->str_twin = PyUnicode_InternFromString("twin");
    st->str_new = PyUnicode_InternFromString("__new__");
    st->str_init = PyUnicode_InternFromString("__init__");
    st->str_call = PyUnicode_InternFromString("__call__");
    st->str_runs_module = PyUnicode_InternFromString("runs_module");
    st->str_tag = PyUnicode_InternFromString("tag");
    st->str_generation = PyUnicode_InternFromString("generation");
    st->one = PyLong_FromLong(1);
    if (st->str_twin == NULL || st->str_new == NULL || st->str_init == NULL || st->str_call == NULL
        || st->str_runs_module == NULL || st->str_tag == NULL || st->str_generation == NULL || st->one == NULL) {
        return -1;
    }
    st->active = PyContextVar_New("cassette_hook._speedups.unbound", Py_None);
    st->special = PyDict_New(); /* (and no builtin is emulated or prepared: configure() fills them) */
    st->preparers = PyDict_New();
    st->indirect_callers = PyDict_New();
    st->called_as_is = PyDict_New();
    if (st->active == NULL || st->special == NULL || st->preparers == NULL || st->indirect_callers == NULL
        || st->called_as_is == NULL) {
        return -1;
    }
    PyObject *probe = PyObject_GetAttrString(Py_None, "__repr__"); /* None's tp_repr, bound */
    if (probe == NULL) {
        return -1;
    }
    st->method_wrapper_type = Py_TYPE(probe); /* a static type: lives as long as the interpreter */
    Py_DECREF(probe);
    PyObject **delegates[] = {&st->resolve_direct, &st->overload_by_callee, &st->call_primitive, &st->present, &st->runnable,
                              &st->without_body, &st->python_call_ex, &st->operator_body, &st->seen_below,
                              &st->construct};
    for (size_t i = 0; i < sizeof(delegates) / sizeof(delegates[0]); i++) {
        if ((*delegates[i] = PyCFunction_New(&unconfigured_def, NULL)) == NULL) {
            return -1;
        }
    }
    st->object_new = _PyType_Lookup(&PyBaseObject_Type, st->str_new); /* lives as long as object */
    st->iter_builtin = Py_XNewRef(PyDict_GetItemString(PyEval_GetBuiltins(), "iter"));
    if (st->object_new == NULL || st->iter_builtin == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "object has no __new__, or the builtins no iter");
        return -1;
    }
    if (PyType_Ready(&DispatcherType) < 0 || PyType_Ready(&RefinerType) < 0 || PyType_Ready(&TaggedFieldsType) < 0
        || PyType_Ready(&SiteType) < 0 || PyType_Ready(&OperatorSiteType) < 0 || PyType_Ready(&MethodSiteType) < 0
        || PyType_Ready(&ForgetType) < 0 || PyType_Ready(&TwinSlotType) < 0
        || (st->SpecialType = (PyTypeObject *)PyType_FromSpec(&special_spec)) == NULL) {
        return -1;
    }
    if (PyModule_AddObjectRef(module, "Dispatcher", (PyObject *)&DispatcherType) < 0
        || PyModule_AddObjectRef(module, "Refiner", (PyObject *)&RefinerType) < 0
        || PyModule_AddObjectRef(module, "TaggedFields", (PyObject *)&TaggedFieldsType) < 0
        || PyModule_AddObjectRef(module, "Special", (PyObject *)st->SpecialType) < 0
        || PyModule_AddObjectRef(module, "OperatorSite", (PyObject *)&OperatorSiteType) < 0
        || PyModule_AddObjectRef(module, "MethodSite", (PyObject *)&MethodSiteType) < 0
        || PyModule_AddIntConstant(module, "ENTERED_MAX", ENTERED_MAX) < 0) {
        return -1;
    }
    state = st; /* (from here on the functions that read it may run) */
    if (twin_tables_watch() < 0) {
        state = NULL;
        return -1;
    }
    Py_INCREF(module); /* (never given back: see above) */
    return 0;
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
    CH_SLOT_ONE_INTERPRETER /* (3.12+: see compat.h) */
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "cassette_hook._speedups",
    .m_doc = "The hot path of cassette_hook in C (optional; callsite.py has it in Python).",
    .m_size = sizeof(SpeedupsState),
    .m_methods = methods,
    .m_slots = module_slots,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModuleDef_Init(&module_def);
}
