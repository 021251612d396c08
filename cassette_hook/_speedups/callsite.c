/* callsite in C: what a rewritten call site calls (resolve, resolve_star, enter, call,
 * call_ex), the overdubbed call's steps (prehook, overloads, body, posthook, raisehook)
 * and the objects call sites hold (Site, OperatorSite, MethodSite).  The names of builtin
 * methods by their PyMethodDef (state->method_names: an interned str made once per
 * method) spare method_descriptor_of a string per call. */
#include "internal.h"

static PyObject *make_site(PyObject *entry, PyObject *f);
static int direct_run(PyObject *entry, PyObject *f, PyObject **run, int sole);
static PyObject *resolve_in(PyObject *entry, PyObject *f);
static PyObject *resolve_active(PyObject *f);
static int take_names(PyObject *closure, PyObject *f);
static PyObject *enter_in(PyObject *entry, PyObject *f, PyObject *const *args, Py_ssize_t nargs);
static PyObject *enter_steps(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
static void run_raisehook(PyObject *entry, PyObject *hook, PyObject **stack, Py_ssize_t nargs, PyObject *kwnames);
static PyObject *overload_for(PyObject *const *call, Py_ssize_t n, int ask);
static PyObject *overloaded(PyObject *entry, int ask, PyObject *const *call, Py_ssize_t nargs, PyObject *kwnames);
static PyObject *overdubbed(PyObject *entry, PyObject *callee, PyObject **stack, Py_ssize_t nargs, PyObject *kwnames);
static int presented_as_method(PyObject *builtin);
static PyObject *method_descriptor_of(PyObject *f);
static int builtin_prehook(PyObject *entry, PyObject *ctx, PyObject *plan, PyObject *f, PyObject *const *args, Py_ssize_t nargs);
static PyObject *enter_builtin(PyObject *entry, PyObject *ctx, PyObject *f, PyObject *const *args, Py_ssize_t nargs);
static PyObject *call_overdubbed(PyObject *entry, PyObject *f, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
static PyObject *site_call(Site *self, PyObject *const *args, size_t nargsf, PyObject *kwnames);
static void site_dealloc(Site *self);
static PyObject *site_name(Site *self, void *name);
static PyObject *overdubbed_site(PyObject *entry, PyObject *f);
static PyObject *operator_site_new(PyTypeObject *type, PyObject *args, PyObject *kwargs);
static PyObject *method_load(PyObject *obj, PyObject *name);
static PyObject *method_site_new(PyTypeObject *type, PyObject *args, PyObject *kwargs);
static PyObject *call_ex_steps(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* runtime.callsites.site(entry, f): its closure, made as MAKE_FUNCTION would make it (calling site()
 * from C would cost a Python frame that CPython cannot inline). */
static PyObject *
make_site(PyObject *entry, PyObject *f)
{
    PyObject *closure = PyTuple_New(2);
    if (closure == NULL) {
        return NULL;
    }
    PyObject *first = PyCell_New(state->site_entry_first ? entry : f), *second = PyCell_New(state->site_entry_first ? f : entry);
    if (first == NULL || second == NULL) {
        Py_XDECREF(first);
        Py_XDECREF(second);
        Py_DECREF(closure);
        return NULL;
    }
    PyTuple_SET_ITEM(closure, 0, first);
    PyTuple_SET_ITEM(closure, 1, second);
    PyObject *function = PyFunction_NewWithQualName(state->site_code, state->site_globals, state->site_qualname);
    if (function != NULL && PyFunction_SetClosure(function, closure) < 0) {
        Py_CLEAR(function);
    }
    Py_DECREF(closure);
    return function;
}

/* Under a plan that is not fast, may a call of f (not a Python function or class) be
 * presented as a callee the plan's overloads name: 1, or 0 for a callee no overload of a
 * sparse plan names (it runs what it runs under a fast plan), -1 on error.
 * runtime.callsites._may_be_named in C: one look-up by address in plan.named_table, and
 * when some overload takes its callee by class, a check of the callee's type. */
static int
named_callee(PyObject *plan, PyObject *f)
{
    SpeedupsState *const st = state;
    PyObject *table = SLOT(plan, st->plan_named_table), *key = f;
    if (table == NULL || table == Py_None) {
        return 1; /* not sparse: every such callee goes through the hooks */
    }
    int methods = SLOT(plan, st->plan_named_methods) == Py_True;
    if (Py_TYPE(f) == &PyMethod_Type) {
        key = PyMethod_GET_FUNCTION(f); /* presented as its function */
        if (!PyFunction_Check(key)) {
            return 1;
        }
    }
    else if (is_builtin(f)) {
        PyObject *self = PyCFunction_GET_SELF(f);
        if (methods && (self == NULL || !PyModule_CheckExact(self))) {
            return 1; /* presented as its method descriptor, which may be named */
        }
    }
    else if (Py_TYPE(f) == st->method_wrapper_type) {
        if (methods) {
            return 1;
        }
    }
    else if (Py_TYPE(f) != &PyMethodDescr_Type && Py_TYPE(f) != &PyWrapperDescr_Type) {
        return 1; /* a callable instance, a partial: left to the hooks */
    }
    if (by_id(table, key) != NULL) {
        return 1;
    }
    if (PyErr_Occurred()) {
        return -1;
    }
    PyObject *classes = SLOT(plan, st->plan_named_classes); /* (plan.names: an instance of a class named) */
    if (classes != NULL && PyTuple_CheckExact(classes) && PyTuple_GET_SIZE(classes) > 0) {
        int is = PyObject_IsSubclass((PyObject *)Py_TYPE(key), classes);
        return is < 0 ? -1 : is > 0;
    }
    return 0;
}

/* What a call site may call in place of f without running hooks: 1 and a new reference
 * in *run (a direct twin, or what runtime.callsites._resolve_direct makes of f), 0 when the call
 * must be overdubbed (runtime.callsites.site), -1 on error.  sole: the caller's reference to f is
 * its only one, dropped once this returns (see resolve). */
static int
direct_run(PyObject *entry, PyObject *f, PyObject **run, int sole)
{
    SpeedupsState *const st = state;
    PyObject *twins = slot(entry, st->entry_direct_twins, "direct_twins"), *twin = NULL;
    if (twins == NULL) {
        return -1;
    }
    if (twins == Py_None) {
        return 0;
    }
    int found = current_twin(twins, f, &twin);
    if (found != 0) {
        if (found == 1) {
            *run = twin;
        }
        return found == 2 ? 0 : found;
    }
    PyObject *plan = slot(entry, st->entry_plan, "plan");
    if (plan == NULL) {
        return -1;
    }
    if (PyFunction_Check(f) && SLOT(plan, st->plan_fast) == Py_True) {
        /* a function of a code the plan has made a twin of: a closure or lambda made anew;
         * one that only the site holds (a lambda called where it is made) dies with this
         * call, and is made its own twin, or its twin not entered in the table.
         * (Asked first: none of the tests below takes a function, and a closure made per
         * call comes here at every call.) */
        int shared = shared_twin(plan, f, sole, run);
        if (shared != 0) {
            return shared;
        }
    }
    if (SLOT(plan, st->plan_fast) != Py_True && !PyFunction_Check(f) && !PyType_Check(f)) {
        /* only these may be direct, or under a sparse plan a callee no overload names */
        int named = named_callee(plan, f);
        if (named != 0) {
            return named < 0 ? -1 : 0;
        }
    }
    /* (from here on the plan is fast, or f a Python function or class, or a callee a
     * sparse plan's overloads do not name) */
    if ((is_builtin(f) && !has_indirect_name(f))
        || (Py_TYPE(f) == &PyMethodDescr_Type /* (unbound, from a method site) */
            && !indirect_name(((PyMethodDescrObject *)f)->d_method->ml_name))) {
        *run = Py_NewRef(f); /* C code with no callbacks: nothing to overdub */
        return 1;
    }
    if (Py_TYPE(f) == st->method_wrapper_type || Py_TYPE(f) == &PyWrapperDescr_Type) {
        *run = Py_NewRef(f); /* a C slot, bound or not (object.__init__ from super().__init__()): no body */
        return 1;
    }
    if (is_builtin(f) || Py_TYPE(f) == &PyMethodDescr_Type) {
        /* min, list.sort: a module's builtin or a class's method that takes callbacks */
        int method = is_builtin(f) ? indirect_method(((PyCFunctionObject *)f)->m_ml) : -1;
        if (method >= 0 && sole && primitive_in_place(f, method)) {
            /* items.sort, made by the site's attribute load: decides at its call */
            *run = Py_NewRef(f);
            return 1;
        }
        PyObject *caller = PyDict_GetItemWithError(st->indirect_callers, f);
        if (caller != NULL) {
            *run = Py_NewRef(caller);
            return 1;
        }
        if (PyErr_Occurred()) {
            return -1;
        }
        if (method >= 0) { /* items.sort: list.sort's caller, bound to the list (as call_primitive binds it) */
            *run = PyMethod_New(st->indirect_methods[method].caller, PyCFunction_GET_SELF(f));
            return *run == NULL ? -1 : 1;
        }
    }
    if (PyType_Check(f) && SLOT(plan, st->plan_fast) == Py_True) { /* a class whose construction the plan made before */
        PyObject *constructors = slot(plan, st->plan_constructors, "constructors"), *constructor = NULL;
        PyObject *cache = constructors ? values_of(constructors) : NULL;
        if (cache != NULL) {
            constructor = by_id(cache, f);
            Py_XINCREF(constructor);
        }
        if (constructor != NULL) {
            *run = constructor;
            return 1;
        }
        if (PyErr_Occurred()) {
            return -1;
        }
    }
    if (Py_TYPE(f) == &PyMethod_Type && PyFunction_Check(PyMethod_GET_FUNCTION(f))) {
        /* a bound method under a fast plan: its function's twin, bound alike (a fresh bound
         * method is in no table; runtime.callsites._resolve_direct makes the twin the first time) */
        found = current_twin(twins, PyMethod_GET_FUNCTION(f), &twin);
        if (found == 1 && sole && ((PyMethodObject *)f)->im_weakreflist == NULL) {
            /* the bound method the site's attribute load just made, which nothing else
             * can see: bound to the twin in place, rather than a second one made */
            Py_SETREF(((PyMethodObject *)f)->im_func, twin);
            *run = Py_NewRef(f);
            return 1;
        }
        if (found == 1) {
            *run = PyMethod_New(twin, PyMethod_GET_SELF(f));
            Py_DECREF(twin);
            return *run == NULL ? -1 : 1;
        }
        if (found < 0) {
            return -1;
        }
    }
    /* an object of a C type every instance of which is called as it is (an lru_cache wrapper),
     * or a bound method of one (an lru_cache on a method): runtime.callees.note_called_as_is */
    PyObject *kind = (PyObject *)(Py_TYPE(f) == &PyMethod_Type ? Py_TYPE(PyMethod_GET_FUNCTION(f)) : Py_TYPE(f));
    if (by_id(st->called_as_is, kind) != NULL) {
        *run = Py_NewRef(f);
        return 1;
    }
    if (PyErr_Occurred()) {
        return -1;
    }
    PyObject *call = PyType_Check(f) ? NULL : python_call(Py_TYPE(f));
    if (call != NULL) { /* a callable instance under a fast plan, as runtime.callees.runnable makes it */
        *run = call_twin(plan, call, f);
        if (*run == NULL) {
            return -1;
        }
        if (*run != Py_None) {
            return 1;
        }
        Py_CLEAR(*run); /* (out of scope: resolve_direct's answer) */
    }
    PyObject *args[2] = {plan, f};
    *run = PyObject_Vectorcall(st->resolve_direct, args, 2, NULL);
    if (*run == NULL) {
        return -1;
    }
    if (*run == Py_None) {
        Py_CLEAR(*run);
        return 0;
    }
    return 1;
}

/* runtime.callsites.resolve under entry: a direct twin, or the overdubbed call (overdubbed_site).
 * A count of 1 is the call site's reference alone (direct_run's sole): the loads that push a
 * callee in rewritten code hold a reference of their own on every version (3.14+: no
 * borrowed load of a callee, Family.borrowed_again; 3.15: no callable constant loaded
 * borrowed, _Py315.counted; docs/internals.md, "CPython 3.14"). */
static PyObject *
resolve_in(PyObject *entry, PyObject *f)
{
    PyObject *run;
    int direct = direct_run(entry, f, &run, Py_REFCNT(f) == 1);
    if (direct != 0) {
        return direct < 0 ? NULL : run;
    }
    return overdubbed_site(entry, f);
}

/* What to call in place of f under the innermost active entry.  When f's reference count
 * is 1, the caller's reference is its only one (a bound method made for this call: a call
 * site's stack slot, a method site's look-up), and f may be reused for the result. */
static PyObject *
resolve_active(PyObject *f)
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

/* runtime.callsites.resolve: what a rewritten call site calls in place of f, which the site's frame
 * hands over taken off its stack, and replaces by what this returns. */
/* Mirrors runtime.callsites.resolve. */
PyObject *
resolve(PyObject *module, PyObject *f)
{
    return resolve_active(f);
}

/* A closure of runtime.callsites.site made for f takes f's names, as a twin and a Site have them:
 * CPython names the callee in the error for a bad * or ** argument.  (An attribute f
 * lacks is no error, as for getattr(f, name, None); a name that is no str is not taken.) */
static int
take_names(PyObject *closure, PyObject *f)
{
    PyObject *qualname = PyObject_GetAttrString(f, "__qualname__");
    if (qualname == NULL || !PyUnicode_CheckExact(qualname)) {
        Py_XDECREF(qualname);
        if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_AttributeError)) {
            return -1;
        }
        PyErr_Clear();
        return 0;
    }
    PyObject *module = PyObject_GetAttrString(f, "__module__");
    if (module == NULL && !PyErr_ExceptionMatches(PyExc_AttributeError)) {
        Py_DECREF(qualname);
        return -1;
    }
    PyErr_Clear();
    int failed = PyObject_SetAttrString(closure, "__qualname__", qualname) < 0
                 || PyObject_SetAttrString(closure, "__module__",
                                           module != NULL && PyUnicode_CheckExact(module) ? module : Py_None) < 0;
    Py_DECREF(qualname);
    Py_XDECREF(module);
    return failed ? -1 : 0;
}

/* runtime.callsites.resolve_star: resolve for a star call f(*args, **kwargs). */
/* Mirrors runtime.callsites.resolve_star. */
PyObject *
resolve_star(PyObject *module, PyObject *f)
{
    PyObject *run = resolve_active(f);
    if (run != NULL && PyFunction_Check(run) && PyFunction_GET_CODE(run) == state->site_code && take_names(run, f) < 0) {
        Py_CLEAR(run);
    }
    return run;
}

/* runtime.callsites.enter under entry: for a Python function or bound method with a twin, under
 * a plan that enters, the prehook run here, popped, and the twin (bound alike) returned
 * for the site's own frame to call; a builtin likewise (enter_builtin); anything else
 * resolve_in's. */
static PyObject *
enter_in(PyObject *entry, PyObject *f, PyObject *const *args, Py_ssize_t nargs)
{
    SpeedupsState *const st = state;
    PyObject *plan = slot(entry, st->entry_plan, "plan"), *ctx = slot(entry, st->entry_ctx, "ctx");
    if (plan == NULL || ctx == NULL) {
        return NULL;
    }
    if (SLOT(plan, st->plan_enters) != Py_True || nargs > ENTERED_MAX) {
        return resolve_in(entry, f);
    }
    if (is_builtin(f)) {
        return enter_builtin(entry, ctx, f, args, nargs);
    }
    int method = Py_TYPE(f) == &PyMethod_Type;
    PyObject *callee = method ? PyMethod_GET_FUNCTION(f) : f;
    if (!PyFunction_Check(callee)) {
        return resolve_in(entry, f);
    }
    PyObject *twin = body_of(plan, callee);
    if (twin == NULL || twin == Py_None) { /* an error, or a function the plan does not recurse into */
        Py_XDECREF(twin);
        return twin == NULL ? NULL : resolve_in(entry, f);
    }
    PyObject *stack[ENTERED_MAX + 3]; /* as the hook sees the call: (ctx, callee, [self,] arguments) */
    Py_ssize_t n = 0;
    stack[n++] = ctx;
    stack[n++] = callee;
    if (method) {
        stack[n++] = PyMethod_GET_SELF(f);
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        stack[n++] = args[i];
    }
    /* The bound method the site's attribute load just made, held by the site's stack slot
     * and the copy handed here alone: bound to the twin in place (as direct_run does), not
     * a second one made.  (Known before the hook runs, which cannot reach it.) */
    int sole = method && Py_REFCNT(f) == 2 && ((PyMethodObject *)f)->im_weakreflist == NULL;
    Py_INCREF(f); /* (the hook may drop every other reference to a bound method) */
    int hooked = run_hook(entry, SLOT(plan, st->plan_prehook_call), stack, n, NULL);
    if (hooked < 0) {
        Py_DECREF(f);
        Py_DECREF(twin);
        return NULL;
    }
    if (!method) {
        Py_DECREF(f);
        return twin;
    }
    if (sole) {
        Py_SETREF(((PyMethodObject *)f)->im_func, twin);
        return f;
    }
    Py_SETREF(twin, PyMethod_New(twin, PyMethod_GET_SELF(f)));
    Py_DECREF(f);
    return twin;
}

/* runtime.callsites.enter: what an entering call site calls with its callee and positional
 * arguments, before calling what this returns with those arguments. */
static PyObject *
enter_steps(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "enter() needs the callee");
        return NULL;
    }
    PyObject *entry;
    if (active_entry(&entry) < 0) {
        return NULL;
    }
    if (entry == NULL) {
        return Py_NewRef(args[0]);
    }
    PyObject *out = enter_in(entry, args[0], args + 1, nargs - 1);
    Py_DECREF(entry);
    return out;
}

/* Mirrors runtime.callsites.enter. */
PyObject *
enter(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    return own_off(enter_steps(module, args, nargs));
}

/* An overdubbed call raised: raisehook(ctx, exc, f, ...) runs popped (stack as for a
 * posthook, stack[1] free), then the exception goes on as it was, its traceback whole.
 * One the hook raises goes on instead, with the call's at the end of its __context__
 * chain, as Python chains it when a hook raises inside an `except` (the pure path). */
static void
run_raisehook(PyObject *entry, PyObject *hook, PyObject **stack, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *exc = fetch_exception();
    stack[1] = exc;
    PyObject *out = run_popped(entry, hook, stack, nargs, kwnames);
    if (out != NULL) {
        Py_DECREF(out);
        restore_exception(exc);
        return;
    }
    PyObject *raised = fetch_exception(), *last = raised;
    for (int steps = 0; last != NULL && last != exc; steps++) {
        if (steps == 1000) { /* a cycle a program made by hand: leave the chain alone */
            last = NULL;
            break;
        }
        PyObject *context = PyException_GetContext(last);
        if (context == NULL) {
            break;
        }
        Py_DECREF(context); /* (last holds it) */
        last = context;
    }
    if (last != NULL && last != exc) {
        PyException_SetContext(last, exc); /* (steals exc) */
    }
    else {
        Py_DECREF(exc); /* the hook re-raised it, or chained it already */
    }
    restore_exception(raised);
}

/* Which of overload_dispatchers overload_for asks: a plan knows whether its context has
 * overdub and execute overloads at all, and a dispatch it can skip is one less walk of a
 * type cache (and of a Refiner's, whose key is made anew at every call). */
enum { ASK_OVERDUB = 1, ASK_EXECUTE = 2 };

/* runtime.callsites.overload_of: the overdub method for call ([ctx, f, arguments...]) if it has
 * one, else the execute one, else NULL without an error (a new reference). */
static PyObject *
overload_for(PyObject *const *call, Py_ssize_t n, int ask)
{
    SpeedupsState *const st = state;
    for (int i = 0; i < 2; i++) {
        if (!(ask & (1 << i))) {
            continue;
        }
        PyObject *method = method_for((Dispatcher *)st->overload_dispatchers[i], call, n);
        if (method == NULL || method != st->overload_defaults[i]) {
            return method;
        }
        Py_DECREF(method);
    }
    return NULL;
}

/* Mirrors runtime.callsites.overload_of. */
PyObject *
overload_of(PyObject *module, PyObject *call)
{
    if (state->overload_dispatchers[0] == NULL || state->overload_dispatchers[1] == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "cassette_hook._speedups.overload_of: called before the runtime set it up");
        return NULL;
    }
    if (!PyTuple_CheckExact(call)) {
        PyErr_SetString(PyExc_TypeError, "overload_of() takes a tuple (ctx, f, *args)");
        return NULL;
    }
    PyObject *method = overload_for(&PyTuple_GET_ITEM(call, 0), PyTuple_GET_SIZE(call), ASK_OVERDUB | ASK_EXECUTE);
    return method != NULL || PyErr_Occurred() ? method : Py_NewRef(Py_None);
}

/* runtime.callsites._overloaded: what an overdub or execute overload makes of the call, or
 * OverdubInstead (a new reference).  call is [ctx, callee, arguments..., keyword values]. */
static PyObject *
overloaded(PyObject *entry, int ask, PyObject *const *call, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *method = overload_for(call, nargs, ask);
    if (method == NULL) {
        return PyErr_Occurred() ? NULL : Py_NewRef(state->overdub_instead);
    }
    PyObject *out = run_popped(entry, method, call, nargs, kwnames);
    Py_DECREF(method);
    return out;
}

/* dispatch.Guard.admits(call, 1): does the one method a named callee may run apply to this
 * call of n positional arguments (its length, and the types of those after the callee)?
 * 1, 0, or -1 on error. */
static int
guard_admits(PyObject *guard, PyObject *const *call, Py_ssize_t n)
{
    PyObject *classes = PyTuple_GET_SIZE(guard) == 5 ? PyTuple_GET_ITEM(guard, 4) : NULL;
    if (classes == NULL || !PyTuple_CheckExact(classes) || PyTuple_GET_SIZE(classes) == 0) {
        PyErr_SetString(PyExc_TypeError, "cassette_hook: a Guard is (func, required, nparams, varargs, classes)");
        return -1;
    }
    Py_ssize_t required = ch_as_ssize(PyTuple_GET_ITEM(guard, 1));
    Py_ssize_t nparams = ch_as_ssize(PyTuple_GET_ITEM(guard, 2));
    if ((required == -1 || nparams == -1) && PyErr_Occurred()) {
        return -1;
    }
    if (n < required || (n > nparams && PyTuple_GET_ITEM(guard, 3) != Py_True)) {
        return 0;
    }
    Py_ssize_t last = PyTuple_GET_SIZE(classes) - 1;
    for (Py_ssize_t i = 2; i < n; i++) {
        PyObject *cls = PyTuple_GET_ITEM(classes, Py_MIN(i - 2, last));
        if (cls != Py_None && (PyObject *)Py_TYPE(call[i]) != cls) { /* (a class is its own subclass) */
            int is = PyObject_IsSubclass((PyObject *)Py_TYPE(call[i]), cls);
            if (is <= 0) {
                return is;
            }
        }
    }
    return 1;
}

/* The overload every call of call[1] runs under plan, when the callee alone decides it
 * (plan.overloads, which runtime.callsites.overload_by_callee fills at a named callee's first
 * call, a Guard's method when it applies to this call): a new reference to the method, or
 * to None when none applies (the callee's body runs); NULL without an error when dispatch
 * decides per call, with one on error. */
static PyObject *
overload_by_callee(PyObject *plan, PyObject *const *call, Py_ssize_t n)
{
    SpeedupsState *const st = state;
    PyObject *table = SLOT(plan, st->plan_overloads);
    if (table == NULL || table == Py_None) {
        return NULL; /* not sparse (or staled): dispatch */
    }
    PyObject *found = by_id(table, call[1]);
    if (found != NULL) {
        Py_INCREF(found);
    }
    else if (PyErr_Occurred()) {
        return NULL;
    }
    else {
        PyObject *named = SLOT(plan, st->plan_named_table), *classes = SLOT(plan, st->plan_named_classes);
        if (named != NULL && PyDict_CheckExact(named) && classes != NULL && PyTuple_CheckExact(classes)
            && PyTuple_GET_SIZE(classes) == 0) { /* (a callable instance, a partial: named by none) */
            if (by_id(named, call[1]) == NULL) {
                return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
            }
        }
        PyObject *tuple = as_tuple(call, n);
        if (tuple == NULL) {
            return NULL;
        }
        PyObject *args[2] = {plan, tuple};
        found = PyObject_Vectorcall(st->overload_by_callee, args, 2, NULL);
        Py_DECREF(tuple);
        if (found == NULL) {
            return NULL;
        }
    }
    if (found == Py_False) {
        Py_DECREF(found);
        return NULL;
    }
    if (Py_TYPE(found) == (PyTypeObject *)st->guard_type) { /* the method, if the later arguments' types admit it */
        int admits = guard_admits(found, call, n);
        PyObject *method = admits > 0 ? Py_NewRef(PyTuple_GET_ITEM(found, 0)) : admits == 0 ? Py_NewRef(Py_None) : NULL;
        Py_DECREF(found);
        return method;
    }
    return found;
}

/* stack: [ctx, <ctx, then the result>, callee, positional arguments..., keyword values...] */
static PyObject *
overdubbed(PyObject *entry, PyObject *callee, PyObject **stack, Py_ssize_t nargs, PyObject *kwnames)
{
    SpeedupsState *const st = state;
    PyObject *plan = slot(entry, st->entry_plan, "plan"), *ctx = slot(entry, st->entry_ctx, "ctx");
    if (plan == NULL || ctx == NULL) {
        return NULL;
    }
    if (Py_TYPE(plan) != st->plan_type) {
        PyErr_SetString(PyExc_TypeError, "cassette_hook: an entry's plan is not a Plan");
        return NULL;
    }
    PyObject *const *args = stack + 3;
    stack[0] = stack[1] = ctx;
    stack[2] = callee;
    PyObject *prehook = SLOT(plan, st->plan_prehook_call), *posthook = SLOT(plan, st->plan_posthook_call);
    if (prehook != NULL && prehook != Py_None && run_hook(entry, prehook, stack + 1, nargs + 2, kwnames) < 0) {
        return NULL;
    }
    PyObject *out, *overload = SLOT(plan, st->plan_overdub_call);
    int ask = overload != NULL && overload != Py_None ? 0 /* the one overload of every call: no dispatch */
            : (SLOT(plan, st->plan_overdub) == Py_True ? ASK_OVERDUB : 0)
              | (SLOT(plan, st->plan_execute) == Py_True ? ASK_EXECUTE : 0);
    PyObject *decided = ask ? overload_by_callee(plan, stack + 1, nargs + 2) : NULL;
    if (decided != NULL) { /* (a named callee's overload, found without dispatch) */
        out = decided == Py_None ? Py_NewRef(st->overdub_instead)
                                 : run_popped(entry, decided, stack + 1, nargs + 2, kwnames);
        Py_DECREF(decided);
    }
    else if (PyErr_Occurred()) {
        out = NULL;
    }
    else if (ask) {
        out = overloaded(entry, ask, stack + 1, nargs + 2, kwnames);
    }
    else {
        out = overload != NULL && overload != Py_None ? run_popped(entry, overload, stack + 1, nargs + 2, kwnames)
                                                      : Py_NewRef(st->overdub_instead);
    }
    if (out == NULL) {
        goto raised;
    }
    if (out == st->overdub_instead) {
        Py_DECREF(out);
        PyObject *run = body_of(plan, callee);
        if (run == NULL) {
            return NULL;
        }
        int plain = run == Py_None ? plain_builtin(entry, plan, stack + 1, nargs + 2, kwnames, &out) : 0;
        if (plain == 0) {
            out = run == Py_None ? no_body(entry, plan, stack + 1, nargs + 2, kwnames)
                                 : PyObject_Vectorcall(run, args, nargs, kwnames);
        }
        Py_DECREF(run);
        if (plain < 0 || out == NULL) {
            goto raised;
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
raised:;
    PyObject *raisehook = SLOT(plan, st->plan_raisehook_call);
    if (raisehook != NULL && raisehook != Py_None) {
        run_raisehook(entry, raisehook, stack, nargs + 3, kwnames);
    }
    return NULL;
}

/* Could hooks see this builtin as an unbound method and its receiver (runtime.callsites.present)?
 * Not when it is a module's function (operator.mul) or a class's (dict.fromkeys). */
static int
presented_as_method(PyObject *builtin)
{
    PyObject *receiver = PyCFunction_GET_SELF(builtin);
    return receiver != NULL && receiver != Py_None && !PyModule_Check(receiver) && !PyType_Check(receiver);
}

/* How hooks see a builtin method bound to an instance, items.append, without
 * runtime.callsites.present's Python: the descriptor type(items).append when that is the method
 * descriptor f was bound from (borrowed from the type), or NULL without an error when
 * it is not -- a subclass overriding the name, say: present() then walks the MRO. */
static PyObject *
method_descriptor_of(PyObject *f)
{
    PyMethodDef *def = ((PyCFunctionObject *)f)->m_ml;
    size_t at = ((uintptr_t)def >> 4) & (METHOD_NAMES - 1);
    if (state->method_names[at].def != def) {
        PyObject *name = PyUnicode_InternFromString(def->ml_name);
        if (name == NULL) {
            return NULL;
        }
        Py_XSETREF(state->method_names[at].name, name);
        state->method_names[at].def = def;
    }
    PyObject *found = _PyType_Lookup(Py_TYPE(PyCFunction_GET_SELF(f)), state->method_names[at].name);
    if (found != NULL && Py_TYPE(found) == &PyMethodDescr_Type && ((PyMethodDescrObject *)found)->d_method == def) {
        return found;
    }
    return NULL;
}

/* The prehook of a call of the builtin function or method f under an entering plan, run
 * here, popped, with the call as hooks see it (items.append(x) as (list.append, items,
 * x)), where a Site would have called f from C with the same arguments and nothing else
 * once the prehook ran: not a builtin the plain program's call needs help with (a
 * frame-sensitive one, one that takes callbacks or iterates its argument: emulated or
 * prepared), nor an operator-like one (iter, operator.add) whose operands may have Python
 * dunders to recurse into.  1 when the prehook ran and f is to be called plainly, 0 when
 * the call needs a Site (nothing run), -1 on error. */
static int
builtin_prehook(PyObject *entry, PyObject *ctx, PyObject *plan, PyObject *f, PyObject *const *args,
                Py_ssize_t nargs)
{
    SpeedupsState *const st = state;
    PyObject *callee = f, *receiver = NULL;
    if (presented_as_method(f)) {
        callee = method_descriptor_of(f); /* (borrowed from the type) */
        if (callee == NULL) {
            return PyErr_Occurred() ? -1 : 0;
        }
        receiver = PyCFunction_GET_SELF(f);
    }
    /* runtime.primitives.call_primitive's own test, by id: f's, or, for a bound method, its
     * descriptor's (what it looks up by name); the preparers are among those. */
    int helped = has_id(st->special, f);
    if (helped == 0 && callee != f) {
        helped = has_id(st->special, callee);
    }
    if (helped == 0 && python_dunders(dunders_of(f), args, nargs)) {
        helped = 1;
    }
    if (helped != 0) {
        return helped < 0 ? -1 : 0;
    }
    PyObject *stack[ENTERED_MAX + 3];
    Py_ssize_t n = 0;
    stack[n++] = ctx;
    stack[n++] = callee;
    if (receiver != NULL) {
        stack[n++] = receiver;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        stack[n++] = args[i];
    }
    Py_INCREF(f); /* (the hook may drop every other reference to them) */
    Py_INCREF(callee);
    int hooked = run_hook(entry, SLOT(plan, st->plan_prehook_call), stack, n, NULL);
    Py_DECREF(callee);
    Py_DECREF(f);
    return hooked < 0 ? -1 : 1;
}

/* enter_in for a builtin function or method f: the prehook run here (builtin_prehook)
 * and f itself returned for the site's frame to call; a call that needs a Site
 * resolve_in's. */
static PyObject *
enter_builtin(PyObject *entry, PyObject *ctx, PyObject *f, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *plan = slot(entry, state->entry_plan, "plan");
    int plain = plan == NULL ? -1 : builtin_prehook(entry, ctx, plan, f, args, nargs);
    return plain < 0 ? NULL : plain ? Py_NewRef(f) : resolve_in(entry, f);
}

/* runtime.callsites.present: (f, args), or what the Python one makes of a builtin method. */
/* Mirrors runtime.callsites.present. */
PyObject *
present_c(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "present(f, args) takes 2 arguments");
        return NULL;
    }
    if (is_builtin(args[0]) && !presented_as_method(args[0])) {
        return PyTuple_Pack(2, args[0], args[1]);
    }
    return PyObject_Vectorcall(state->present, args, 2, NULL);
}

/* runtime.callsites.site's closure, called: the overdubbed call of f (prehook, overdub, posthook). */
static PyObject *
call_overdubbed(PyObject *entry, PyObject *f, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *callee = f, *receiver = NULL, *presented = NULL;
    if (Py_TYPE(callee) == &PyMethod_Type) { /* seen as (type(obj).m, obj, ...) */
        receiver = PyMethod_GET_SELF(callee);
        callee = PyMethod_GET_FUNCTION(callee);
    }
    else if (is_builtin(callee) && presented_as_method(callee)) {
        /* items.append(x): (list.append, items, x) */
        PyObject *descriptor = method_descriptor_of(callee);
        if (descriptor != NULL) {
            presented = Py_NewRef(descriptor); /* (held for the call) */
            receiver = PyCFunction_GET_SELF(callee);
            callee = descriptor;
        }
        else if (PyErr_Occurred()) {
            return NULL;
        }
        else { /* what present() makes of it */
            PyObject *tuple = as_tuple(args, nargs);
            if (tuple == NULL) {
                return NULL;
            }
            PyObject *pair[2] = {callee, tuple};
            presented = PyObject_Vectorcall(state->present, pair, 2, NULL);
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
    }
    int from_present = presented != NULL && receiver == NULL; /* (else it is the descriptor) */
    PyObject *const *positional = from_present ? &PyTuple_GET_ITEM(PyTuple_GET_ITEM(presented, 1), 0) : args;
    Py_ssize_t npositional = from_present ? PyTuple_GET_SIZE(PyTuple_GET_ITEM(presented, 1)) : nargs;
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

/* The overdubbed call at a 3.11+ call site: runtime.callsites.site's closure, in C, so that the
 * hooks, the overloads and the callee itself have the program's frame below them, as when
 * the program calls them plain (no frame of ours in between).
 *
 * The price is the C stack: a Python callee called from here runs in a new evaluation
 * loop, where the program's own call would have been inlined.  Nested without bound, that
 * meets CPython's C recursion limit (3.12: about 1,500 levels) or overflows the stack
 * (3.11) where the plain program recurses on.  So a thread runs at most SITE_BUDGET
 * Python callees through Sites at once; resolve() hands out the Python closure beyond that
 * (its frames are visible, but it recurses as deep as the program).  A builtin callee
 * runs on the C stack whoever calls it, and does not count. */
#define SITE_BUDGET 100

static THREAD_LOCAL int sites_running; /* Python callees called from a Site on this thread, not yet returned */

static PyObject *
site_call(Site *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (is_builtin(self->f)) {
        return own_off(call_overdubbed(self->entry, self->f, args, PyVectorcall_NARGS(nargsf), kwnames));
    }
    sites_running++;
    PyObject *out = call_overdubbed(self->entry, self->f, args, PyVectorcall_NARGS(nargsf), kwnames);
    sites_running--;
    return own_off(out);
}

/* Sites kept for reuse: a call site makes one per call and drops it when the call
 * returns, so a few at hand spare the allocator (state->sites_kept) nearly every one (under the GIL). */
static void
site_dealloc(Site *self)
{
    Py_DECREF(self->entry);
    Py_DECREF(self->f);
    if (state->sites_kept_count < SITES_KEPT) {
        state->sites_kept[state->sites_kept_count++] = self;
        return;
    }
    PyObject_Free(self);
}

/* The callee's names, which CPython puts in the error for a bad * or ** argument. */
static PyObject *
site_name(Site *self, void *name)
{
    return PyObject_GetAttrString(self->f, (const char *)name);
}

static PyGetSetDef site_getset[] = {
    {"__name__", (getter)site_name, NULL, NULL, "__name__"},
    {"__qualname__", (getter)site_name, NULL, NULL, "__qualname__"},
    {"__module__", (getter)site_name, NULL, NULL, "__module__"},
    {NULL},
};

static PyMemberDef site_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Site, vectorcall), READONLY},
    {NULL},
};

PyTypeObject SiteType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cassette_hook._speedups.Site",
    .tp_doc = "The overdubbed call of one callee under one context (made by resolve).",
    .tp_basicsize = sizeof(Site),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Site, vectorcall),
    .tp_dealloc = (destructor)site_dealloc,
    .tp_getset = site_getset,
    .tp_members = site_members,
};

/* runtime.callsites.site(entry, f) for a call site to call: a Site, or the closure once this
 * thread's budget of Sites is spent (see SITE_BUDGET). */
static PyObject *
overdubbed_site(PyObject *entry, PyObject *f)
{
    if (!is_builtin(f) && sites_running >= SITE_BUDGET) {
        return make_site(entry, f);
    }
    return new_site(entry, f, (vectorcallfunc)site_call);
}

/* A Site for (entry, f) that runs `run` when called. */
PyObject *
new_site(PyObject *entry, PyObject *f, vectorcallfunc run)
{
    SpeedupsState *const st = state;
    Site *site;
    if (st->sites_kept_count > 0) {
        site = st->sites_kept[--st->sites_kept_count];
        PyObject_Init((PyObject *)site, &SiteType);
    }
    else {
        site = PyObject_New(Site, &SiteType);
    }
    if (site != NULL) {
        site->entry = Py_NewRef(entry);
        site->f = Py_NewRef(f);
        site->vectorcall = run;
    }
    return (PyObject *)site;
}

/* f(*args, **kwargs) under entry (borrowed; NULL: no context active).  Under an entering
 * plan, a builtin (an operator site's operator, most often) has its prehook run as an
 * entering site would (builtin_prehook) and is called from here, with no Site. */
PyObject *
call_in(PyObject *entry, PyObject *f, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    SpeedupsState *const st = state;
    PyObject *run;
    if (entry == NULL) {
        run = Py_NewRef(f);
    }
    else {
        if (is_builtin(f) && kwnames == NULL && nargs <= ENTERED_MAX) {
            PyObject *plan = slot(entry, st->entry_plan, "plan"), *ctx = slot(entry, st->entry_ctx, "ctx");
            if (plan == NULL || ctx == NULL) {
                return NULL;
            }
            int plain = Py_TYPE(plan) == st->plan_type && SLOT(plan, st->plan_enters) == Py_True
                      ? builtin_prehook(entry, ctx, plan, f, args, nargs) : 0;
            if (plain != 0) {
                return own_off(plain < 0 ? NULL : PyObject_Vectorcall(f, args, nargs, NULL));
            }
        }
        int direct = direct_run(entry, f, &run, 0);
        if (direct <= 0) {
            return own_off(direct < 0 ? NULL : call_overdubbed(entry, f, args, nargs, kwnames));
        }
    }
    PyObject *out = run == f ? run_primitive(f, args, nargs, kwnames) : PyObject_Vectorcall(run, args, nargs, kwnames);
    Py_DECREF(run);
    return own_off(out);
}

/* f(*args, **kwargs) under the innermost active entry. */
PyObject *
call_active(PyObject *f, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *entry;
    if (active_entry(&entry) < 0) {
        return NULL;
    }
    PyObject *out = call_in(entry, f, args, nargs, kwnames);
    Py_XDECREF(entry);
    return out;
}

/* runtime.callsites.call: f(*args, **kwargs) as the innermost active context sees it. */
/* Mirrors runtime.callsites.call. */
PyObject *
call(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    return first_argument(nargs, "call", "f") < 0 ? NULL : call_active(args[0], args + 1, nargs - 1, kwnames);
}

/* runtime.callsites.operator_site(op): what a twin's operator site loads and calls, site(a, b) as
 * call(op, a, b) -- without the functools.partial and the argument check a partial of
 * call would cost at every operator.  Made once per operator, it holds nothing else. */
typedef struct {
    PyObject_HEAD
    PyObject *op;
    vectorcallfunc vectorcall;
} OperatorSite;

static PyObject *
operator_site_call(OperatorSite *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return call_active(self->op, args, PyVectorcall_NARGS(nargsf), kwnames);
}

static PyObject *
operator_site_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *op;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
        PyErr_SetString(PyExc_TypeError, "OperatorSite() takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_UnpackTuple(args, "OperatorSite", 1, 1, &op)) {
        return NULL;
    }
    OperatorSite *self = PyObject_New(OperatorSite, type);
    if (self == NULL) {
        return NULL;
    }
    self->op = Py_NewRef(op); /* (an operator function or iter: no cycle through it) */
    self->vectorcall = (vectorcallfunc)operator_site_call;
    return (PyObject *)self;
}

static void
operator_site_dealloc(OperatorSite *self)
{
    Py_DECREF(self->op);
    PyObject_Free(self);
}

static PyObject *
operator_site_repr(OperatorSite *self)
{
    return PyUnicode_FromFormat("<operator site of %R>", self->op);
}

static PyMemberDef operator_site_members[] = {
    {"op", T_OBJECT, offsetof(OperatorSite, op), READONLY, "the operator it calls as a call site"},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(OperatorSite, vectorcall), READONLY},
    {NULL},
};

PyTypeObject OperatorSiteType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cassette_hook._speedups.OperatorSite",
    .tp_doc = "An operator site's callee: call(op, *operands) (made by callsite.operator_site).",
    .tp_basicsize = sizeof(OperatorSite),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = operator_site_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(OperatorSite, vectorcall),
    .tp_dealloc = (destructor)operator_site_dealloc,
    .tp_repr = (reprfunc)operator_site_repr,
    .tp_members = operator_site_members,
};

/* What runtime.callsites.HOOKS.method_site(name) makes: what a twin's method load obj.name becomes
 * when the call it feeds is a plain call (rewrite._nullslot).  The plain program's method load pushes the
 * function and obj, with no bound method made; a call site that resolves its callee has
 * only one object to hand resolve, so it used to load a bound method instead (an object
 * made and a generic attribute load at every method call).  This site is called with obj
 * as its self, finds the attribute as the method load does (_PyObject_GetMethod), and
 * resolves what it found under the active context, as the call site would have:
 *  - a Python function or a builtin method found on obj's class (hooks are shown those
 *    unbound, obj first, either way): what to call with obj first, returned as it is;
 *  - anything else (a module's function, an instance's attribute, a classmethod, or a
 *    method of another kind, bound here as its load would bind it): what to call without
 *    obj, returned in a 1-tuple, which the site's code tells apart by MATCH_SEQUENCE and
 *    unpacks into the callee-and-NULL pair of a plain call.
 * The callee is thus resolved at the load, not after the arguments, under the context
 * active then: the same but for an argument that enters or leaves a context (a
 * generator's site resumed under another context keeps what it had resolved).
 * (_PyObject_GetMethod: declared in compat.h.) */
typedef struct {
    PyObject_HEAD
    PyObject *name; /* an interned str */
    vectorcallfunc vectorcall;
} MethodSite;

static PyObject *
method_load(PyObject *obj, PyObject *name)
{
    PyObject *found = NULL;
    int unbound = _PyObject_GetMethod(obj, name, &found);
    if (found == NULL) {
        return NULL;
    }
    if (unbound && Py_TYPE(found) != &PyFunction_Type && Py_TYPE(found) != &PyMethodDescr_Type) {
        /* (hooks are shown other descriptors bound, as the attribute load makes them) */
        Py_SETREF(found, Py_TYPE(found)->tp_descr_get(found, obj, (PyObject *)Py_TYPE(obj)));
        if (found == NULL) {
            return NULL;
        }
        unbound = 0;
    }
    PyObject *run = resolve_active(found); /* (found's reference is its only one when the load bound it) */
    Py_DECREF(found);
    if (run == NULL) {
        return NULL;
    }
    if (unbound) { /* (a function, a twin, a Site or a partial: never a sequence, which the
                    * site's code would take for the 1-tuple) */
        return run;
    }
    PyObject *alone = PyTuple_New(1);
    if (alone == NULL) {
        Py_DECREF(run);
        return NULL;
    }
    PyTuple_SET_ITEM(alone, 0, run);
    return alone;
}

static PyObject *
method_site_call(MethodSite *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL) {
        PyErr_Format(PyExc_TypeError, "method site of %R takes one positional argument", self->name);
        return NULL;
    }
    return method_load(args[0], self->name);
}

/* The method site of switched code (rewrite._names.METHOD, among the builtins): its code
 * goes to a .pyc file, which can hold no MethodSite, so it loads this by name and passes
 * the attribute's name, a str constant of its own (interned, as CPython interns names). */
/* C only: the method site of switched code; the pure path loads a bound method instead. */
PyObject *
method_of(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyUnicode_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "method_of(obj, name) takes an object and a str");
        return NULL;
    }
    return method_load(args[0], args[1]);
}

static PyObject *
method_site_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *name;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
        PyErr_SetString(PyExc_TypeError, "MethodSite() takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "U:MethodSite", &name)) {
        return NULL;
    }
    MethodSite *self = PyObject_New(MethodSite, type);
    if (self == NULL) {
        return NULL;
    }
    Py_INCREF(name);
    PyUnicode_InternInPlace(&name);
    self->name = name;
    self->vectorcall = (vectorcallfunc)method_site_call;
    return (PyObject *)self;
}

static void
method_site_dealloc(MethodSite *self)
{
    Py_DECREF(self->name);
    PyObject_Free(self);
}

static PyObject *
method_site_repr(MethodSite *self)
{
    return PyUnicode_FromFormat("<method site of .%U>", self->name);
}

static PyMemberDef method_site_members[] = {
    {"name", T_OBJECT, offsetof(MethodSite, name), READONLY, "the attribute it loads"},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(MethodSite, vectorcall), READONLY},
    {NULL},
};

PyTypeObject MethodSiteType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cassette_hook._speedups.MethodSite",
    .tp_doc = "A method load's site: obj.name resolved for the call it feeds (made by callsite.HOOKS.method_site).",
    .tp_basicsize = sizeof(MethodSite),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = method_site_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(MethodSite, vectorcall),
    .tp_dealloc = (destructor)method_site_dealloc,
    .tp_repr = (reprfunc)method_site_repr,
    .tp_members = method_site_members,
};

/* runtime.callsites.call_ex: a 3.10 star call f(*args, **kwargs), with args a tuple and kwargs a
 * dict (or None), as the call it is; anything else is runtime.callsites.call_ex's (which makes the
 * plain call's errors). */
static PyObject *
call_ex_steps(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 2 || nargs > 3 || !PyTuple_CheckExact(args[1])
        || (nargs == 3 && args[2] != Py_None && !PyDict_CheckExact(args[2]))) {
        return PyObject_Vectorcall(state->python_call_ex, args, nargs, NULL);
    }
    PyObject *positional = args[1], *keywords = nargs == 3 && args[2] != Py_None ? args[2] : NULL;
    Py_ssize_t npositional = PyTuple_GET_SIZE(positional), nkw = keywords ? PyDict_GET_SIZE(keywords) : 0;
    Py_ssize_t total = 1 + npositional + nkw;
    PyObject *small[ARGS_ON_STACK], **stack = small, *kwnames = NULL, *out = NULL;
    if (total > ARGS_ON_STACK && (stack = PyMem_Malloc(total * sizeof(PyObject *))) == NULL) {
        return PyErr_NoMemory();
    }
    stack[0] = args[0];
    for (Py_ssize_t i = 0; i < npositional; i++) {
        stack[1 + i] = PyTuple_GET_ITEM(positional, i);
    }
    if (nkw && (kwnames = PyTuple_New(nkw)) == NULL) {
        goto done;
    }
    Py_ssize_t pos = 0, k = 0;
    PyObject *key, *value;
    while (keywords && PyDict_Next(keywords, &pos, &key, &value)) {
        if (!PyUnicode_Check(key)) { /* the plain call's error */
            Py_CLEAR(kwnames);
            out = PyObject_Vectorcall(state->python_call_ex, args, nargs, NULL);
            goto done;
        }
        PyTuple_SET_ITEM(kwnames, k, Py_NewRef(key));
        stack[1 + npositional + k++] = value;
    }
    out = call(module, stack, 1 + npositional, kwnames);
done:
    Py_XDECREF(kwnames);
    if (stack != small) {
        PyMem_Free(stack);
    }
    return out;
}

/* Mirrors runtime.callsites.call_ex. */
PyObject *
call_ex(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    return own_off(call_ex_steps(module, args, nargs));
}
