/* _context in C: the stack of active contexts as the hot path reads it (stack_top and
 * active_entry, inline in internal.h), a context popped while its hooks run (the Popped
 * record: internal.h says why), and Context.__exit__. */
#include "internal.h"

THREAD_LOCAL Popped popped;

static PyObject *context_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

/* Record for this thread that while the stack's variable holds what it holds now, the
 * running code's innermost entry is the one below entry: what runs popped starts so.
 * *outer: the record before, which popped_end puts back.  -1 on error (nothing changed). */
static int
popped_begin(PyObject *entry, Popped *outer)
{
    SpeedupsState *const st = state;
    PyObject *below = slot(entry, st->entry_below, "below");
    if (below == NULL) {
        return -1;
    }
    PyObject *held;
    if (PyContextVar_Get(st->active, NULL, &held) < 0) {
        return -1;
    }
    Popped *now = &popped;
    *outer = *now;
    now->from = held;
    now->to = Py_NewRef(below);
    now->entry = entry;
    return 0;
}

static void
popped_end(Popped *outer)
{
    Popped *now = &popped;
    Py_XDECREF(now->from);
    Py_DECREF(now->to);
    *now = *outer;
}

/* Run a hook or an overload with the context popped: under the entry below, or plain when
 * there is none (a new reference).  stack holds its positional arguments, then the
 * call's keyword values. */
PyObject *
run_popped(PyObject *entry, PyObject *hook, PyObject *const *stack, Py_ssize_t nargs, PyObject *kwnames)
{
    Popped outer;
    if (popped_begin(entry, &outer) < 0) {
        return NULL;
    }
    PyObject *below = popped.to;
    PyObject *out = below == Py_None ? PyObject_Vectorcall(hook, stack, nargs, kwnames)
                                     : call_unpacked(state->seen_below, hook, NULL, stack, nargs, kwnames);
    popped_end(&outer);
    return out;
}

/* popped_call(entry, method, args, kwargs): method(*args, **kwargs) run popped, as
 * run_popped runs it, given a tuple and a dict: what the Python closure of a Site
 * (callsites.site, past the thread's budget of Sites) runs its hooks with, and
 * without_body a fallback overload; the pure-Python path sets the stack's variable to the
 * entry below and back, two ContextVar.set calls a hook. */
/* Mirrors runtime.callees.run_popped. */
PyObject *
popped_call(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    SpeedupsState *const st = state;
    if (nargs != 4 || st->entry_type == NULL || Py_TYPE(args[0]) != st->entry_type || !PyTuple_Check(args[2])
        || !PyDict_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "popped_call(entry, method, args, kwargs) takes an Entry, a callable, "
                                         "a tuple and a dict");
        return NULL;
    }
    Popped outer;
    if (popped_begin(args[0], &outer) < 0) {
        return NULL;
    }
    PyObject *out = popped.to == Py_None
                        ? PyObject_Call(args[1], args[2], args[3])
                        : PyObject_CallFunctionObjArgs(st->seen_below, args[1], args[2], args[3], NULL);
    popped_end(&outer);
    return out;
}

/* run_popped(entry, method, *args, **kwargs): generics.overdub's call of an overload at
 * the top level, run as a Site runs one, so that the overload's recurse(ctx, f, ...) finds
 * its entry (unpop) and calls f's twin with no frame of ours between. */
/* C only: generics.overdub runs the overload popped in its own frame on the pure-Python path. */
PyObject *
run_popped_call(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (nargs < 2 || state->entry_type == NULL || Py_TYPE(args[0]) != state->entry_type) {
        PyErr_SetString(PyExc_TypeError, "run_popped(entry, method, *args, **kwargs) takes an Entry first");
        return NULL;
    }
    return run_popped(args[0], args[1], args + 2, nargs - 2, kwnames);
}

/* A prehook or posthook, run popped; its result is dropped. */
int
run_hook(PyObject *entry, PyObject *hook, PyObject *const *stack, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *out = run_popped(entry, hook, stack, nargs, kwnames);
    Py_XDECREF(out);
    return out == NULL ? -1 : 0;
}

/* Context.__exit__ on the C path: context_stack.pop_at_exit(ctx) (pop, which either pops or
 * raises having changed nothing, then a tagging context's end of its extent), called again
 * if an interrupt arrived before it changed anything (its first lines: what no Python
 * __exit__ can protect, since the interrupt may come before its first instruction).  The
 * first pop's exception is the one that goes on.  "Before it changed anything": the
 * innermost entry is still the one that was. */
/* Mirrors context_stack._exiting. */
static PyObject *
context_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *was;
    if (active_entry(&was) < 0) {
        return NULL;
    }
    /* (was is only compared after the pop, not held: pop lets the entry go, and settles) */
    int ours = was != NULL && SLOT(was, state->entry_ctx) == self;
    Py_XDECREF(was);
    PyObject *out = PyObject_CallOneArg(state->pop_function, self);
    if (out == NULL && ours) {
        PyObject *exc = fetch_exception(), *now;
        if (active_entry(&now) < 0) {
            Py_DECREF(exc);
        }
        else {
            Py_XDECREF(now); /* (compared only: while was is on the stack, it is alive) */
            if (now == was) {
                PyObject *again = PyObject_CallOneArg(state->pop_function, self);
                if (again == NULL) { /* (a second interrupt: it goes on) */
                    Py_CLEAR(exc);
                }
                Py_XDECREF(again);
            }
            if (exc != NULL) {
                restore_exception(exc);
            }
        }
    }
    return out;
}

static PyMethodDef context_exit_def = {"__exit__", (PyCFunction)(void (*)(void))context_exit, METH_FASTCALL,
                                       "Deactivate the context (the innermost active one)."};

/* exit_method(Context, pop_at_exit): Context.__exit__ for the C path, a method descriptor. */
/* C only: makes Context.__exit__ of the C path (context_exit) a method descriptor. */
PyObject *
exit_method(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyType_Check(args[0]) || !PyCallable_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "exit_method(Context, pop_at_exit)");
        return NULL;
    }
    Py_XSETREF(state->pop_function, Py_NewRef(args[1]));
    return PyDescr_NewMethod((PyTypeObject *)args[0], &context_exit_def);
}

/* context_stack.top on the C path: the innermost active entry as the running code sees it. */
/* Mirrors context_stack.top. */
PyObject *
top(PyObject *module, PyObject *unused)
{
    PyObject *entry;
    if (stack_top(&entry) < 0) {
        return NULL;
    }
    return entry != NULL ? entry : Py_NewRef(Py_None);
}

/* C only: hands over _context's ContextVar, the stack. */
PyObject *
bind(PyObject *module, PyObject *variable)
{
    if (!PyContextVar_CheckExact(variable)) {
        PyErr_SetString(PyExc_TypeError, "bind() takes a ContextVar");
        return NULL;
    }
    Py_XSETREF(state->active, Py_NewRef(variable));
    Py_RETURN_NONE;
}
