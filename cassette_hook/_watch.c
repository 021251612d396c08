/* Functions made from light code get its switched code as they are made (CPython 3.12+).
 *
 * The lazy import hook hands out light code (the module as compiled) and switches the
 * functions made from it at the first activation of a context (_light.py).  A frame that
 * was already running then keeps running its light code, and the functions it defines
 * afterwards -- a closure in the body of a `with ctx:` block, the rest of a module body
 * that activated a context -- are made from the light code's constants.  Without this
 * module, the hook switches every nested function at import, so that those constants are
 * switchable already; that costs a cold import of a package with many closures more than
 * compiling it does (networkx: docs/performance.md).
 *
 * With it, the activation marks each light function code with its switched code (a slot
 * of the code's co_extra, which holds the reference and drops it when the light code
 * dies), and a function watcher gives a function made from a marked code the switched
 * one as it is created -- before anything can call it or specialize a call to it.  The
 * watcher is registered when the module loads (the lazy hook's first module), and then
 * costs every function creation in the process one look at its code's co_extra.
 *
 * The code is set in the struct, not through __code__'s setter: at the CREATE event
 * MAKE_FUNCTION has not given the function its closure yet, so the setter's check of the
 * free variables would refuse a closure.  The switched code has the light code's free
 * variables, flags and names (rewrite/_dual.py).  MAKE_FUNCTION then sets the function's
 * version from the light code's co_version; specialized calls guard on that version and
 * read func_code when they run, and every function made from the marked code gets the
 * same switched code, so the version still stands for one body.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if PY_VERSION_HEX >= 0x030C0000

static Py_ssize_t switched_slot = -1; /* the co_extra index holding a light code's switched code */

static void
drop_switched(void *switched)
{
    Py_XDECREF((PyObject *)switched);
}

static int
on_function_event(PyFunction_WatchEvent event, PyFunctionObject *func, PyObject *new_value)
{
    (void)new_value;
    if (event != PyFunction_EVENT_CREATE) {
        return 0;
    }
    void *switched = NULL;
    if (PyUnstable_Code_GetExtra(func->func_code, switched_slot, &switched) < 0) {
        PyErr_Clear(); /* (func_code is always a code object: cannot happen) */
        return 0;
    }
    if (switched != NULL) {
        Py_SETREF(func->func_code, Py_NewRef((PyObject *)switched));
    }
    return 0;
}

static PyObject *
switch_at_creation(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2 || !PyCode_Check(args[0]) || !PyCode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "switch_at_creation(light, switched) takes two code objects");
        return NULL;
    }
    PyCodeObject *light = (PyCodeObject *)args[0], *switched = (PyCodeObject *)args[1];
    if (light->co_nfreevars != switched->co_nfreevars
        || (light->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR))
               != (switched->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR))) {
        PyErr_Format(PyExc_ValueError, "switch_at_creation: the switched code of %R is not of its kind", light);
        return NULL;
    }
    void *marked = NULL;
    if (PyUnstable_Code_GetExtra((PyObject *)light, switched_slot, &marked) < 0) {
        return NULL;
    }
    if (marked == NULL) { /* (a code is marked once: its module is switched once) */
        if (PyUnstable_Code_SetExtra((PyObject *)light, switched_slot, Py_NewRef(switched)) < 0) {
            Py_DECREF(switched);
            return NULL;
        }
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"switch_at_creation", (PyCFunction)(void (*)(void))switch_at_creation, METH_FASTCALL,
     "switch_at_creation(light, switched): functions made from now on from light get switched."},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "cassette_hook._watch",
    .m_doc = "Functions made from light code get its switched code as they are made (_light.py).",
    .m_size = -1,
    .m_methods = methods,
};

/* The watcher and the slot are taken as the module loads: where they cannot be (all of the
 * interpreter's function watchers in use), the module fails to load and the hook switches
 * nested functions at import instead, as it does before 3.12. */
PyMODINIT_FUNC
PyInit__watch(void)
{
    switched_slot = PyUnstable_Eval_RequestCodeExtraIndex(drop_switched);
    if (switched_slot < 0) {
        return NULL;
    }
    if (PyFunction_AddWatcher(on_function_event) < 0) {
        PyObject *why = PyErr_GetRaisedException();
        PyErr_Format(PyExc_ImportError, "cassette_hook._watch: no function watcher to be had (%S)", why);
        Py_XDECREF(why);
        return NULL;
    }
    return PyModule_Create(&module_def);
}

#else /* before 3.12: no function watchers */

PyMODINIT_FUNC
PyInit__watch(void)
{
    PyErr_SetString(PyExc_ImportError, "cassette_hook._watch needs CPython 3.12's function watchers");
    return NULL;
}

#endif
