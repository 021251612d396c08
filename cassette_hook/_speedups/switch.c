#include "internal.h"



/* importhook.switch.enter: should a switched body of module (its name) run rewritten here and now?
 * Asked at every call of a function the import hook loaded while a context is active
 * anywhere; the plan remembers its answer per module (Plan.runs_module, asked here the
 * first time). */
/* Mirrors importhook.switch.enter. */
PyObject *
runs_here(PyObject *unused, PyObject *module)
{
    PyObject *entry, *known = NULL;
    if (active_entry(&entry) < 0) {
        return NULL;
    }
    if (entry == NULL) {
        Py_RETURN_FALSE;
    }
    PyObject *plan = slot(entry, state->entry_plan, "plan");
    PyObject *modules = plan ? slot(plan, state->plan_modules, "_modules") : NULL;
    if (modules != NULL) {
        known = Py_XNewRef(PyDict_GetItemWithError(modules, module));
        if (known == NULL && !PyErr_Occurred()) {
            known = PyObject_CallMethodOneArg(plan, state->str_runs_module, module);
        }
    }
    Py_DECREF(entry);
    return known;
}

/* The live entries, as _switch follows them (watch_live() hands them over): state->live_entries and
 * live_operator_entries, sets of weak references whose callback is entry_gone, and the builtins module whose flags they
 * switch.  An entry's death runs no Python code here, so no interrupt can cut its
 * bookkeeping short or be swallowed in it, and the flags turn off the moment the last
 * entry that needs them goes. */
/* C only: the weak references' callback that keeps _switch's live sets (set.discard on the pure path) and its flags. */
PyObject *
entry_gone(PyObject *unused, PyObject *ref)
{
    PyObject *sets[2] = {state->live_entries, state->live_operator_entries}, *flags[2] = {state->str_active_flag, state->str_operators_flag};
    /* Held here: CPython calls the callback of an object's only weak reference without a
     * reference of its own to it (PyObject_ClearWeakRefs), so the first set's discard may
     * free it before the second set is asked. */
    Py_INCREF(ref);
    for (int i = 0; i < 2; i++) {
        if (sets[i] == NULL) {
            continue;
        }
        int found = PySet_Discard(sets[i], ref);
        if (found < 0 || (found && PySet_GET_SIZE(sets[i]) == 0 &&
                          PyObject_SetAttr(state->flags_module, flags[i], Py_False) < 0)) {
            Py_DECREF(ref);
            return NULL;
        }
    }
    Py_DECREF(ref);
    Py_RETURN_NONE;
}

/* C only: hands over _switch's live sets and flags for entry_gone. */
PyObject *
watch_live(PyObject *unused, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5 || !PySet_Check(args[0]) || !PySet_Check(args[1]) || !PyUnicode_Check(args[3]) ||
        !PyUnicode_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "watch_live(live, live_operators, builtins, active_name, operators_name)");
        return NULL;
    }
    Py_XSETREF(state->live_entries, Py_NewRef(args[0]));
    Py_XSETREF(state->live_operator_entries, Py_NewRef(args[1]));
    Py_XSETREF(state->flags_module, Py_NewRef(args[2]));
    Py_XSETREF(state->str_active_flag, Py_NewRef(args[3]));
    Py_XSETREF(state->str_operators_flag, Py_NewRef(args[4]));
    Py_RETURN_NONE;
}

/* importhook.switch._operator_call: an operator in switched code, op(*args), a call site when the
 * innermost active context counts operators as calls. */
/* Mirrors importhook.switch._operator_call. */
PyObject *
operator_call(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (first_argument(nargs, "operator_call", "op") < 0) {
        return NULL;
    }
    PyObject *entry;
    if (active_entry(&entry) < 0) {
        return NULL;
    }
    int observed = 0;
    if (entry != NULL) {
        PyObject *plan = slot(entry, state->entry_plan, "plan");
        observed = plan != NULL && Py_TYPE(plan) == state->plan_type ? SLOT(plan, state->plan_operators) == Py_True : -1;
    }
    PyObject *out = NULL;
    if (observed < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "cassette_hook: an entry's plan is not a Plan");
        }
    }
    else {
        out = observed ? call_in(entry, args[0], args + 1, nargs - 1, kwnames)
                       : PyObject_Vectorcall(args[0], args + 1, nargs - 1, kwnames);
    }
    Py_XDECREF(entry);
    return out;
}
