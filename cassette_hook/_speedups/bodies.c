/* bodies in C: what runs a callee's body under a plan (body_of), what runs in place of
 * one without (plain_builtin, no_body: runtime.callees.without_body's steps), recurse and its
 * unpop, and construct. */
#include "internal.h"

static int fallback_overload(PyObject *entry, PyObject *plan, PyObject *const *call, Py_ssize_t n, PyObject *kwnames, PyObject **out);
static PyObject *bodyless_steps(PyObject *entry, PyObject *plan, PyObject *const *call, Py_ssize_t n, PyObject *kwnames);
static PyObject *bodyless_run(PyObject *entry, PyObject *f, PyObject *const *args, size_t nargsf, PyObject *kwnames);
static PyObject *bodyless_call(Site *self, PyObject *const *args, size_t nargsf, PyObject *kwnames);
static PyObject *unpop_for(PyObject *ctx, PyObject *f, PyObject **plan_out);
static PyObject *recurse_in_c(PyObject *func, vectorcallfunc otherwise, PyObject *const *args, size_t nargsf,
                              PyObject *kwnames);
#ifndef CH_CALL_INLINES_ANY_FUNCTION
static PyObject *recurse_deep(PyObject *func, PyObject *const *args, size_t nargsf, PyObject *kwnames);
static PyObject *recurse_vectorcall(PyObject *func, PyObject *const *args, size_t nargsf, PyObject *kwnames);
#endif
static int init_in_c(PyObject *obj, PyObject *const *stack, Py_ssize_t nargs, PyObject *kwnames);
static PyObject *construct_by_ref_steps(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);

/* The Python __call__ of an instance of kind, as the interpreter finds it (along the MRO),
 * or NULL: a callable instance's body (borrowed). */
PyObject *
python_call(PyTypeObject *kind)
{
    if (!PyType_HasFeature(kind, Py_TPFLAGS_HEAPTYPE)) {
        return NULL;
    }
    PyObject *call = _PyType_Lookup(kind, state->str_call);
    return call != NULL && PyFunction_Check(call) ? call : NULL;
}

/* The twin of call (an instance's python_call) bound to the instance, or None. */
PyObject *
call_twin(PyObject *plan, PyObject *call, PyObject *instance)
{
    Py_INCREF(call); /* (making its twin may run Python, which may change the class) */
    PyObject *twin = body_of(plan, call);
    Py_DECREF(call);
    if (twin == NULL || twin == Py_None) {
        return twin;
    }
    Py_SETREF(twin, PyMethod_New(twin, instance));
    return twin;
}

/* What runs the callee's own body under the plan, or None (a new reference). */
PyObject *
body_of(PyObject *plan, PyObject *callee)
{
    SpeedupsState *const st = state;
    if (PyFunction_Check(callee)) {
        PyObject *twins = slot(plan, st->plan_twins, "twins"), *twin = NULL;
        if (twins == NULL) {
            return NULL;
        }
        PyObject *table = values_of(twins);
        if (table == NULL) {
            return NULL;
        }
        int found = current_twin(table, callee, &twin);
        if (found == 1 || found < 0) { /* (this table lists no None) */
            return found < 0 ? NULL : twin;
        }
        found = shared_twin(plan, callee, 0, &twin);
        if (found != 0) {
            return found < 0 ? NULL : twin;
        }
        return PyObject_CallMethodOneArg(plan, st->str_twin, callee);
    }
    PyTypeObject *kind = Py_TYPE(callee);
    if (kind == &PyCFunction_Type || kind == &PyCMethod_Type || kind == &PyMethodDescr_Type || kind == &PyWrapperDescr_Type) {
        return Py_NewRef(Py_None); /* C code (len, list.append, object.__init__): no body (runtime.callees.runnable) */
    }
    if (PyType_Check(callee)) { /* how runtime.callees._construction decided to construct it, the second time on */
        PyObject *constructions = slot(plan, st->plan_constructions, "constructions");
        PyObject *table = constructions ? values_of(constructions) : NULL;
        PyObject *how = table ? by_id(table, callee) : NULL;
        if (how != NULL && PyUnicode_Check(how) && PyUnicode_CompareWithASCIIString(how, "primitive") == 0) {
            return Py_NewRef(Py_None);
        }
        if (how != NULL && PyUnicode_Check(how) && PyUnicode_CompareWithASCIIString(how, "python") == 0) {
            PyObject *constructors = slot(plan, st->plan_constructors, "constructors");
            PyObject *made = constructors ? values_of(constructors) : NULL;
            PyObject *constructor = made ? by_id(made, callee) : NULL;
            if (constructor != NULL) {
                return Py_NewRef(constructor);
            }
        }
        if (PyErr_Occurred()) {
            return NULL;
        }
    }
    else { /* an instance: a Python __call__ is its body */
        PyObject *call = python_call(kind);
        if (call != NULL) {
            return call_twin(plan, call, callee);
        }
    }
    PyObject *args[2] = {plan, callee};
    return PyObject_Vectorcall(st->runnable, args, 2, NULL);
}

/* A fallback overload's answer to call ([ctx, f, arguments..., keyword values...]), when
 * the plan has fallback overloads and one takes the call: 1 and the result in *out, 0
 * when none does, -1 on error. */
static int
fallback_overload(PyObject *entry, PyObject *plan, PyObject *const *call, Py_ssize_t n, PyObject *kwnames,
                  PyObject **out)
{
    SpeedupsState *const st = state;
    if (SLOT(plan, st->plan_fallback) != Py_True) {
        return 0;
    }
    PyObject *method = method_for((Dispatcher *)st->fallback_dispatcher, call, n);
    if (method == NULL) {
        return -1;
    }
    int taken = method != st->fallback_default;
    if (taken) {
        *out = run_popped(entry, method, call, n, kwnames);
    }
    Py_DECREF(method);
    return !taken ? 0 : *out == NULL ? -1 : 1;
}

/* runtime.callees.without_body for a call with nothing of Python to recurse into: an operator of
 * runtime.operators.PLAIN_OPERATORS whose operands are all of runtime.operators.C_OPERANDS once unwrapped
 * (a tagging context's primitives get plain values), or a module's builtin function that
 * primitives does not emulate, given plain scalars only (so that tagging has nothing to
 * unwrap).  The callee is called on the plain operands, unless a fallback overload takes
 * the call.  1 and the result in *out, 0 when the call is not such a call
 * (runtime.callees.without_body decides), -1 on error.  call is [ctx, f, operands...]. */
int
plain_builtin(PyObject *entry, PyObject *plan, PyObject *const *call, Py_ssize_t n, PyObject *kwnames,
              PyObject **out)
{
    SpeedupsState *const st = state;
    PyObject *f = call[1], *plain[2];
    PyObject *const *operands = plain;
    if (kwnames != NULL || !is_builtin(f)) {
        return 0;
    }
    if (n >= 3 && n <= 4 && address_set_has(&st->plain_operator_set, f)) {
        int unwrap = -1; /* does the context tag values (read once, if an operand needs it)? */
        for (Py_ssize_t i = 2; i < n; i++) {
            PyObject *operand = call[i];
            int c = PySet_Contains(st->c_operands, (PyObject *)Py_TYPE(operand));
            if (c == 0 && unwrap != 0) {
                if (unwrap < 0 && (unwrap = is_tagging(call[0])) < 0) {
                    return -1;
                }
                if (unwrap) {
                    operand = plain_value(operand);
                    c = PySet_Contains(st->c_operands, (PyObject *)Py_TYPE(operand));
                }
            }
            if (c <= 0) {
                return c;
            }
            plain[i - 2] = operand;
        }
    }
    else {
        for (Py_ssize_t i = 2; i < n; i++) {
            if (!is_scalar(call[i])) {
                return 0;
            }
        }
        int function = is_plain_function(f);
        if (function <= 0) {
            return function;
        }
        operands = call + 2;
    }
    int taken = fallback_overload(entry, plan, call, n, NULL, out);
    if (taken != 0) {
        return taken;
    }
    *out = PyObject_Vectorcall(f, operands, n - 2, NULL);
    return *out == NULL ? -1 : 1;
}

/* runtime.callees.without_body, in C where it needs no Python of its own: a builtin function,
 * method (list.extend, as hooks see items.extend) or class (map) under a context that does
 * not tag (a tagging context's primitives get unwrapped arguments,
 * tagging.for_primitive's) runs an operator's Python dunders if runtime.operators.body finds any,
 * else a fallback overload if one takes the call, else the primitive (run_primitive).
 * The builtin then has the program's frame below it, and so have the callbacks it makes
 * (a generator resumed by next(), a key function).  So has a Python function or class
 * outside the context's scope (a library's, under libraries = False), which no operator
 * concerns: the fallback overload, else the call itself, or runtime.primitives'
 * emulation for the few it has (threading.Thread.start, which hands the thread's target
 * over as a call site; weakref.ref).  Anything else is runtime.callees.without_body's.
 * call is [ctx, f, arguments..., keyword values...]. */
PyObject *
no_body(PyObject *entry, PyObject *plan, PyObject *const *call, Py_ssize_t n, PyObject *kwnames)
{
    SpeedupsState *const st = state;
    PyObject *f = call[1], *const *args = call + 2;
    Py_ssize_t nargs = n - 2;
    int c_class = PyType_Check(f) && !PyType_HasFeature((PyTypeObject *)f, Py_TPFLAGS_HEAPTYPE);
    int python = Py_TYPE(f) == &PyFunction_Type || (PyType_Check(f) && !c_class);
    if (!python && !is_builtin(f) && Py_TYPE(f) != &PyMethodDescr_Type && !c_class) {
        return call_unpacked(st->without_body, entry, f, args, nargs, kwnames);
    }
    int tagging = is_tagging(call[0]);
    if (tagging != 0) {
        return tagging < 0 ? NULL : call_unpacked(st->without_body, entry, f, args, nargs, kwnames);
    }
    const OperatorDunders *dunders = is_builtin(f) ? dunders_of(f) : NULL;
    if (python_dunders(dunders, args, nargs)) { /* runtime.operators.body may find some */
        PyObject *out;
        int ran = kwnames == NULL ? one_python_dunder(entry, dunders, args, nargs, &out) : 0;
        if (ran != 0) {
            return ran < 0 ? NULL : out;
        }
        PyObject *tuple = as_tuple(args, nargs);
        PyObject *pair[2] = {f, tuple};
        PyObject *body = tuple ? PyObject_Vectorcall(st->operator_body, pair, 2, NULL) : NULL;
        Py_XDECREF(tuple);
        if (body == NULL) {
            return NULL;
        }
        if (body != Py_None) {
            PyObject *out = PyObject_Vectorcall(body, args, nargs, kwnames);
            Py_DECREF(body);
            return out;
        }
        Py_DECREF(body);
    }
    PyObject *out;
    int taken = fallback_overload(entry, plan, call, n, kwnames, &out);
    if (taken != 0) {
        return taken < 0 ? NULL : out;
    }
    int emulated = python ? has_id(st->special, f) : 1;
    if (emulated < 0) {
        return NULL;
    }
    return emulated ? run_primitive(f, args, nargs, kwnames) : PyObject_Vectorcall(f, args, nargs, kwnames);
}

/* What recurse runs for a callee with no Python body (unpop's answer for one):
 * runtime.callees.without_body's steps, in C -- a plain operator on builtin values, else
 * no_body (an operator's Python dunders, a fallback overload, or the primitive) -- for
 * the entry unpop put back; call is [ctx, f, arguments...]. */
static PyObject *
bodyless_steps(PyObject *entry, PyObject *plan, PyObject *const *call, Py_ssize_t n, PyObject *kwnames)
{
    PyObject *out = NULL;
    int plain = plain_builtin(entry, plan, call, n, kwnames, &out);
    if (plain == 0) {
        out = no_body(entry, plan, call, n, kwnames);
    }
    return plain < 0 ? NULL : out;
}

static PyObject *
bodyless_run(PyObject *entry, PyObject *f, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    SpeedupsState *const st = state;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *plan = slot(entry, st->entry_plan, "plan"), *ctx = slot(entry, st->entry_ctx, "ctx");
    if (plan == NULL || ctx == NULL) {
        return NULL;
    }
    PyObject *small[ARGS_ON_STACK], **call = small;
    if (2 + nargs + nkw > ARGS_ON_STACK && (call = PyMem_Malloc((2 + nargs + nkw) * sizeof(PyObject *))) == NULL) {
        return PyErr_NoMemory();
    }
    call[0] = ctx;
    call[1] = f;
    for (Py_ssize_t i = 0; i < nargs + nkw; i++) {
        call[2 + i] = args[i];
    }
    PyObject *out = bodyless_steps(entry, plan, call, 2 + nargs, kwnames);
    if (call != small) {
        PyMem_Free(call);
    }
    return out;
}

static PyObject *
bodyless_call(Site *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return own_off(bodyless_run(self->entry, self->f, args, nargsf, kwnames));
}

/* runtime.callees.recurse's common case: called by an overload (or hook) of ctx's own entry,
 * running popped on this thread.  runtime.callees._recurse pushes a new entry for ctx (the popped
 * one is not on the stack), runs the body and pops it: an Entry made per call.
 * unpop_for(ctx, f) puts the popped entry back instead (the thread's Popped record says,
 * until repop(), that the top is the entry itself) and returns what runs f's body, or,
 * for a callee without one, the entry itself (its plan in *plan_out): bodyless_run's
 * steps run it.  None (nothing changed) when it is not that case: no overload running,
 * another context's, a with-block since, or a tagging context (its results are unwrapped
 * as they leave); runtime.callees._recurse then runs.  unpop(ctx, f), the Python path's, hands a
 * Site for the bodyless steps. */
static PyObject *
unpop_for(PyObject *ctx, PyObject *f, PyObject **plan_out)
{
    SpeedupsState *const st = state;
    Popped *now = &popped;
    PyObject *entry = now->entry;
    if (entry == NULL || now->to == entry || SLOT(entry, st->entry_ctx) != ctx) {
        Py_RETURN_NONE;
    }
    PyObject *held, *plan = slot(entry, st->entry_plan, "plan");
    if (plan == NULL || PyContextVar_Get(st->active, NULL, &held) < 0) {
        return NULL;
    }
    Py_XDECREF(held); /* (compared only: the record holds its own) */
    if (held != now->from) { /* a with-block since the overload began */
        Py_RETURN_NONE;
    }
    int tagging = is_tagging(ctx);
    if (tagging != 0) {
        return tagging < 0 ? NULL : Py_NewRef(Py_None);
    }
    PyObject *run = body_of(plan, f);
    if (run == Py_None) { /* no body: without_body's steps, run for this entry */
        Py_SETREF(run, Py_NewRef(entry));
    }
    if (run != NULL) {
        Py_SETREF(now->to, Py_NewRef(entry));
        *plan_out = plan;
    }
    return run;
}

/* C only: runtime.callees.recurse puts back the popped entry instead of pushing a new one (the pure path pushes). */
PyObject *
unpop(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "unpop(ctx, f) takes 2 arguments");
        return NULL;
    }
    PyObject *plan, *run = unpop_for(args[0], args[1], &plan);
    if (run != NULL && Py_TYPE(run) == state->entry_type) {
        Py_SETREF(run, new_site(run, args[1], (vectorcallfunc)bodyless_call));
    }
    return run;
}

/* After unpop's callee returns: the entry is popped again. */
/* C only: undoes unpop for runtime.callees.recurse. */
PyObject *
repop(PyObject *module, PyObject *unused)
{
    Popped *now = &popped;
    if (now->entry == NULL || now->to != now->entry) {
        PyErr_SetString(PyExc_RuntimeError, "cassette_hook: repop() without unpop()");
        return NULL;
    }
    PyObject *below = slot(now->entry, state->entry_below, "below");
    if (below == NULL) {
        return NULL;
    }
    Py_SETREF(now->to, Py_NewRef(below));
    Py_RETURN_NONE;
}

/* unpopped(): is an entry put back by unpop() in force on this thread (not yet repopped)?
 * runtime.callees.recurse's Python code asks before and after its unpop(), so that it repops
 * exactly when its own unpop happened, even when an interrupt arrives right after it. */
/* C only: asked by runtime.callees.recurse around unpop and repop. */
PyObject *
unpopped(PyObject *module, PyObject *unused)
{
    Popped *now = &popped;
    return PyBool_FromLong(now->entry != NULL && now->to == now->entry);
}

/* runtime.callees.recurse on the C path: its own Python code, with this for its vectorcall, so that
 * an overload's ch.recurse(ctx, f, ...) calls f's twin from here and the callee has the
 * overload's frame below it (no frame of ours).  Calling the twin from C costs a level of
 * C stack, so a thread makes at most RECURSE_BUDGET such calls at once (a budget of its
 * own: under an overload each level of recursion is a Site's call and one of these, and
 * sharing SITE_BUDGET would halve the depth Sites reach); a thread past it switches
 * recurse to its Python code (CPython's own vectorcall, which call sites inline) until
 * no thread is that deep any more: its recursion then costs no C stack, and shows
 * recurse's frame, as the Python closure of a Site does.  Anything but the common case
 * (an overload of ctx's own entry, unpop's) runs the Python code too.  (The function and
 * its Python vectorcall: state->recurse_function, state->recurse_python.)
 *
 * On 3.11 (CH_CALL_INLINES_ANY_FUNCTION) a call site inlines the function whatever its
 * vectorcall, so recurse is instead an object of RecurseType below, whose vectorcall runs
 * recurse_in_c, with no budget: there the Python code is no cheaper in C stack, since its
 * own call of the body, run(*args), is a CALL_FUNCTION_EX, which 3.11 does not inline. */
static PyObject *
recurse_in_c(PyObject *func, vectorcallfunc otherwise, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    SpeedupsState *const st = state;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *plan = NULL, *run = nargs >= 2 ? unpop_for(args[0], args[1], &plan) : Py_NewRef(Py_None);
    if (run == NULL) {
        return NULL;
    }
    PyObject *out;
    if (run == Py_None) {
        out = otherwise(func, args, nargsf, kwnames);
    }
    else {
        out = Py_TYPE(run) != st->entry_type ? PyObject_Vectorcall(run, args + 2, nargs - 2, kwnames)
                                         : bodyless_steps(run, plan, args, nargs, kwnames); /* (no body) */
        PyObject *exc = out == NULL ? fetch_exception() : NULL;
        PyObject *popped_again = repop(NULL, NULL);
        if (popped_again == NULL) {
            Py_CLEAR(out);
            Py_XDECREF(exc);
        }
        else {
            Py_DECREF(popped_again);
            if (exc != NULL) {
                restore_exception(exc);
            }
        }
    }
    Py_DECREF(run);
    return own_off(out);
}

#ifndef CH_CALL_INLINES_ANY_FUNCTION
#define RECURSE_BUDGET 100
static THREAD_LOCAL int recurses_running; /* twins called from here on this thread, not yet returned */

static void
set_recurse_vectorcall(vectorcallfunc vectorcall)
{
    ch_function_set_vectorcall((PyFunctionObject *)state->recurse_function, vectorcall);
}

static PyObject *
recurse_deep(PyObject *func, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (state->recurse_deep_calls++ == 0) {
        set_recurse_vectorcall(state->recurse_python);
    }
    PyObject *out = state->recurse_python(func, args, nargsf, kwnames);
    if (--state->recurse_deep_calls == 0) {
        set_recurse_vectorcall(recurse_vectorcall);
    }
    return out;
}

static PyObject *
recurse_vectorcall(PyObject *func, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (recurses_running >= RECURSE_BUDGET) {
        return recurse_deep(func, args, nargsf, kwnames);
    }
    recurses_running++;
    PyObject *out = recurse_in_c(func, state->recurse_python, args, nargsf, kwnames);
    recurses_running--;
    return out;
}

#else
/* recurse on 3.11: an object that looks like the Python function it calls through
 * (its attributes, repr, binding as a method, pickling by name: what users see of
 * ch.recurse is the function's), and is called through recurse_in_c. */
typedef struct {
    PyObject_HEAD
    PyObject *function;  /* runtime.callees.recurse's Python function (state->recurse_function) */
    PyObject *reference; /* the Python reference it calls where unpop does not apply */
    vectorcallfunc vectorcall;
    PyObject *weakrefs;
} Recurse;

static PyObject *
recurse_object_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *reference = ((Recurse *)self)->reference; /* (from C, as the function's code would: no frame more) */
    if (Py_EnterRecursiveCall("")) { /* (a level of the limit, as the function's frame was: see RecurseType) */
        return NULL;
    }
    PyObject *out = recurse_in_c(reference, ((PyFunctionObject *)reference)->vectorcall, args, nargsf, kwnames);
    Py_LeaveRecursiveCall();
    return out;
}

/* The function's attributes (__name__, __module__, __code__, __annotations__ ...: so
 * inspect.signature reads the function's), but for what the type itself has. */
static PyObject *
recurse_getattro(PyObject *self, PyObject *name)
{
    PyObject *found = PyObject_GenericGetAttr(self, name);
    if (found != NULL || !PyErr_ExceptionMatches(PyExc_AttributeError)) {
        return found;
    }
    PyErr_Clear();
    return PyObject_GetAttr(((Recurse *)self)->function, name);
}

/* __doc__, the function's: a descriptor of the type's, as pydoc reads it past getattro. */
static PyObject *
recurse_get_doc(PyObject *self, void *unused)
{
    return PyObject_GetAttrString(((Recurse *)self)->function, "__doc__");
}

static int
recurse_set_doc(PyObject *self, PyObject *value, void *unused)
{
    return PyObject_SetAttrString(((Recurse *)self)->function, "__doc__", value);
}

static PyGetSetDef recurse_getset[] = {
    {"__doc__", recurse_get_doc, recurse_set_doc, NULL, NULL},
    {NULL},
};

static int
recurse_setattro(PyObject *self, PyObject *name, PyObject *value)
{
    return PyObject_SetAttr(((Recurse *)self)->function, name, value);
}

static PyObject *
recurse_repr(PyObject *self)
{
    PyObject *qualname = PyObject_GetAttrString(((Recurse *)self)->function, "__qualname__");
    PyObject *out = qualname == NULL ? NULL : PyUnicode_FromFormat("<function %S at %p>", qualname, self);
    Py_XDECREF(qualname);
    return out;
}

/* A method when found on a class, as a function is. */
static PyObject *
recurse_descr_get(PyObject *self, PyObject *obj, PyObject *type)
{
    return obj == NULL || obj == Py_None ? Py_NewRef(self) : PyMethod_New(self, obj);
}

/* Pickled by name, as a function is (its module's recurse). */
/* C only: 3.11's recurse pickles as the function it stands for. */
static PyObject *
recurse_reduce(PyObject *self, PyObject *unused)
{
    return PyObject_GetAttrString(((Recurse *)self)->function, "__qualname__");
}

static void
recurse_dealloc(PyObject *self)
{
    if (((Recurse *)self)->weakrefs != NULL) {
        PyObject_ClearWeakRefs(self);
    }
    Py_XDECREF(((Recurse *)self)->function);
    Py_XDECREF(((Recurse *)self)->reference);
    Py_TYPE(self)->tp_free(self);
}

static PyMethodDef recurse_methods[] = {
    {"__reduce__", recurse_reduce, METH_NOARGS, NULL},
    {NULL},
};

static PyTypeObject RecurseType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cassette_hook._speedups.Recurse",
    .tp_doc = "runtime.callees.recurse on CPython 3.11: its Python function, called from C.",
    .tp_basicsize = sizeof(Recurse),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Recurse, vectorcall),
    .tp_weaklistoffset = offsetof(Recurse, weakrefs),
    .tp_dealloc = recurse_dealloc,
    .tp_getattro = recurse_getattro,
    .tp_setattro = recurse_setattro,
    .tp_repr = recurse_repr,
    .tp_descr_get = recurse_descr_get,
    .tp_methods = recurse_methods,
    .tp_getset = recurse_getset,
};
#endif

/* install_recurse(f, reference): what runtime.callees.recurse is on the C path (once: bodies
 * is loaded once): f, its Python code, with the vectorcall above, or on 3.11 a Recurse calling
 * through f, which calls reference, the Python reference, where unpop does not apply. */
/* C only: gives runtime.callees.recurse the vectorcall above (on 3.11, is what it is). */
PyObject *
install_recurse(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyFunction_Check(args[0]) || !PyFunction_Check(args[1]) || state->recurse_function != NULL) {
        PyErr_SetString(PyExc_TypeError, "install_recurse() takes two Python functions, once");
        return NULL;
    }
    PyObject *func = args[0];
#ifdef CH_CALL_INLINES_ANY_FUNCTION
    Recurse *recurse = PyType_Ready(&RecurseType) < 0 ? NULL : PyObject_New(Recurse, &RecurseType);
    if (recurse == NULL) {
        return NULL;
    }
    recurse->function = Py_NewRef(func);
    recurse->reference = Py_NewRef(args[1]);
    recurse->vectorcall = recurse_object_call;
    recurse->weakrefs = NULL;
#endif
    state->recurse_function = Py_NewRef(func);
    state->recurse_python = ((PyFunctionObject *)func)->vectorcall;
#ifdef CH_CALL_INLINES_ANY_FUNCTION
    return (PyObject *)recurse;
#else
    set_recurse_vectorcall(recurse_vectorcall);
    return Py_NewRef(func);
#endif
}

/* What type.__call__ does after __new__ when __init__ is C code (object's, or a builtin
 * base's): obj's class's tp_init with the call's arguments (stack[1:], kwnames). */
static int
init_in_c(PyObject *obj, PyObject *const *stack, Py_ssize_t nargs, PyObject *kwnames)
{
    initproc init = Py_TYPE(obj)->tp_init;
    if (init == NULL) {
        return 0;
    }
    PyObject *positional = PyTuple_New(nargs - 1), *keywords = NULL;
    if (positional == NULL) {
        return -1;
    }
    for (Py_ssize_t i = 1; i < nargs; i++) {
        PyTuple_SET_ITEM(positional, i - 1, Py_NewRef(stack[i]));
    }
    Py_ssize_t named = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (named > 0 && (keywords = PyDict_New()) != NULL) {
        for (Py_ssize_t i = 0; i < named; i++) {
            if (PyDict_SetItem(keywords, PyTuple_GET_ITEM(kwnames, i), stack[nargs + i]) < 0) {
                Py_CLEAR(keywords);
                break;
            }
        }
    }
    int result = named > 0 && keywords == NULL ? -1 : init(obj, positional, keywords);
    Py_DECREF(positional);
    Py_XDECREF(keywords);
    return result;
}

/* runtime.callees.construct for the common classes -- object's __new__ or a Python one (a
 * NamedTuple's), then a Python __init__ or C code's (object's) -- in C, so that no frame
 * of ours is between the program's and __new__'s or __init__'s (type.__call__ calls them
 * from C too).  Any other class is runtime.callees.construct's. */
static PyObject *
construct_by_ref_steps(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (first_argument(nargs, "construct_by_ref", "ref") < 0) {
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
    PyObject *small[ARGS_ON_STACK], **stack = small, *out = NULL, *new_function = NULL, *obj = NULL;
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
    /* (borrowed, as type.__call__ finds them) */
    PyObject *new = _PyType_Lookup((PyTypeObject *)cls, state->str_new), *init = _PyType_Lookup((PyTypeObject *)cls, state->str_init);
    if (new != state->object_new && new != NULL && Py_TYPE(new) == &PyStaticMethod_Type) { /* def __new__(cls, ...) */
        new_function = Py_TYPE(new)->tp_descr_get(new, NULL, cls);
        if (new_function == NULL) {
            goto done;
        }
        if (!PyFunction_Check(new_function)) {
            Py_CLEAR(new_function);
        }
    }
    int python_init = init != NULL && PyFunction_Check(init);
    if (new_function != NULL ? !(python_init || (init != NULL && Py_TYPE(init) == &PyWrapperDescr_Type))
                             : new != state->object_new || !python_init) {
        stack[0] = cls;
        out = PyObject_Vectorcall(state->construct, stack, nargs, kwnames);
        goto done;
    }
    if (new_function == NULL) {
        obj = PyObject_Vectorcall(state->object_new, &cls, 1, NULL);
    }
    else {
        PyObject *run_new = resolve(NULL, new_function);
        stack[0] = cls;
        obj = run_new ? PyObject_Vectorcall(run_new, stack, nargs, kwnames) : NULL;
        Py_XDECREF(run_new);
    }
    if (obj == NULL) {
        goto done;
    }
    if (!PyObject_TypeCheck(obj, (PyTypeObject *)cls)) { /* no __init__, as type.__call__ */
        out = Py_NewRef(obj);
        goto done;
    }
    /* (looked up again: __new__ may have changed the class, and obj may be a subclass's) */
    init = _PyType_Lookup(Py_TYPE(obj), state->str_init);
    if (init == NULL || !PyFunction_Check(init)) { /* C code: what type.__call__ runs */
        if (init_in_c(obj, stack, nargs, kwnames) == 0) {
            out = Py_NewRef(obj);
        }
        goto done;
    }
    Py_INCREF(init);
    PyObject *run = resolve(NULL, init);
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
done:
    Py_XDECREF(obj);
    Py_XDECREF(new_function);
    if (stack != small) {
        PyMem_Free(stack);
    }
    Py_DECREF(cls);
    return out;
}

/* Mirrors runtime.callees.construct_by_ref. */
PyObject *
construct_by_ref(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    return own_off(construct_by_ref_steps(module, args, nargs, kwnames));
}
