/* The lazy import hook's function watcher and first-call trampoline (CPython 3.12+).
 *
 * The lazy import hook hands out light code (the module as compiled) and switches the
 * functions made from it once a context is active (importhook.lazy_mode.py).  This module does two
 * things for it.
 *
 * Switched at the first call.  An activation *arms* the functions of the modules imported
 * light: their vectorcall slot becomes first_call, which runs _light's callback (switch
 * the function's module: every function of it gets its switched code) and then makes the
 * call as CPython would.  So a module is switched when the program first calls one of
 * its functions, from a call site, from C (a sort key, a property), or as a plan makes a
 * twin; a program that imports 286 modules and runs 13 pays for 13.  The trampoline is C,
 * so the callee's frame has its caller's frame below it.  PyFunction_SetVectorcall zeroes
 * the function's version, so a call site specialized for it earlier (which guards on the
 * version and would push the frame itself) deopts and reaches the trampoline.
 *
 * Made later.  A frame that was running at the activation keeps running its light code,
 * and the functions it defines afterwards -- a closure in the body of a `with ctx:` block,
 * the rest of a module body that activated a context -- are made from the light code's
 * constants.  A function watcher sees each function as it is made, and the light code's
 * mark (a slot of its co_extra) says what to do: arm it while its module waits, give it
 * the switched code once the module is switched.  Without this, the hook would have to
 * switch every nested function at import, which costs a cold import of a package with
 * many closures more than compiling it does (networkx: docs/performance.md).  The watcher
 * is registered when the module loads (the lazy hook's first module), and then costs
 * every function creation in the process one look at its code's co_extra.
 *
 * Imported under a context.  A module imported while a context is active runs its body
 * switched and has its functions armed as they are made (lazy_mode.arm_module), so that a
 * first run under a context rewrites what it runs, not all it imports.  What f.__code__
 * returns must then still be the code f will run (a decorator may record it at import):
 * see get_code below.
 *
 * Versions.  MAKE_FUNCTION versions a new function from its code's co_version after the
 * watcher's event; a call site that specializes for a version calls past the trampoline,
 * so an armed code's co_version is 0 while its module waits (kept in its mark, and given
 * back as the module is switched).  A switched code is set in the struct, not through
 * __code__'s setter: at the CREATE event MAKE_FUNCTION has not given the function its
 * closure yet, so the setter's check of the free variables would refuse a closure.  The
 * switched code has the light code's free variables, flags and names (rewrite/_dual.py),
 * and every function made from the marked code gets the same switched code, so the
 * version still stands for one body.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if PY_VERSION_HEX >= 0x030C0000

static Py_ssize_t switched_slot = -1; /* the co_extra index holding a light code's mark */
static PyObject *on_first_call = NULL;  /* _light's: switches the module of the function it is given */
static PyObject *on_code_read = NULL;   /* lazy_mode's: gives the function it is given the code it will run */
static PyObject *read_modules = NULL;   /* lazy_mode's set of module names: their functions' reads call it too */
static vectorcallfunc default_vectorcall = NULL; /* CPython's own, read off the first function armed */

/* A light code's mark (in co_extra) is a one-item list, set once (PyUnstable_Code_SetExtra
 * is not to be called over a value): its item is the switched code once the code's module
 * is switched; until then, while the module waits for the first call of one of its
 * functions, an int, the code's own co_version, kept while co_version is 0; and None for a
 * code whose module could not be switched. */
static void
drop_mark(void *mark)
{
    Py_XDECREF((PyObject *)mark);
}

static PyObject *first_call(PyObject *func, PyObject *const *args, size_t nargsf, PyObject *kwnames);

/* Calls to func reach first_call until it is disarmed.  The version goes to 0 with it
 * (PyFunction_SetVectorcall), so that no call site specialized for func calls its code
 * past the trampoline, and none can specialize for it while it is armed.  A function
 * whose vectorcall another tool has replaced is left alone: the call sites of switched
 * code still switch its module, as they make its twin (runtime.plan.switch_before_twin). */
static void
arm_function(PyFunctionObject *func)
{
    if (default_vectorcall == NULL) {
        default_vectorcall = func->vectorcall;
    }
    if (func->vectorcall == default_vectorcall) {
        PyFunction_SetVectorcall(func, first_call);
    }
}

/* CPython's vectorcall back; on 3.13, which versions functions only as MAKE_FUNCTION
 * makes them, the version of func's code too, so that calls to it specialize again
 * (3.12 gives a function of version 0 a new one when a call to it specializes). */
static void
disarm_function(PyFunctionObject *func)
{
    if (func->vectorcall != first_call) {
        return;
    }
    PyFunction_SetVectorcall(func, default_vectorcall);
#if PY_VERSION_HEX >= 0x030D0000
    func->func_version = ((PyCodeObject *)func->func_code)->co_version;
#endif
}

/* The first call of an armed function: _light switches its module (or, if that is being
 * done by this thread already, leaves it light), then the call is made as CPython makes
 * it.  This frame is C: the callee's f_back is its caller's frame.  _light turns what
 * keeps a module from being switched into a warning; what it lets through (a
 * KeyboardInterrupt meanwhile) is the call's, and the function stays armed. */
static PyObject *
first_call(PyObject *func, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (on_first_call != NULL) {
        PyObject *done = PyObject_CallOneArg(on_first_call, func);
        if (done == NULL) {
            return NULL;
        }
        Py_DECREF(done);
    }
    disarm_function((PyFunctionObject *)func);
    return default_vectorcall(func, args, nargsf, kwnames);
}

static int
on_function_event(PyFunction_WatchEvent event, PyFunctionObject *func, PyObject *new_value)
{
    (void)new_value;
    if (event != PyFunction_EVENT_CREATE) {
        return 0;
    }
    void *mark = NULL;
    if (PyUnstable_Code_GetExtra(func->func_code, switched_slot, &mark) < 0) {
        PyErr_Clear(); /* (func_code is always a code object: cannot happen) */
        return 0;
    }
    if (mark == NULL) {
        return 0;
    }
    PyObject *state = PyList_GET_ITEM((PyObject *)mark, 0);
    if (PyLong_CheckExact(state)) {
        arm_function(func); /* (MAKE_FUNCTION then versions it from co_version: 0 while marked) */
    }
    else if (PyCode_Check(state)) {
        Py_SETREF(func->func_code, Py_NewRef(state));
    }
    return 0;
}

/* The mark of `light`, made (holding `initial`) if it has none; NULL on error.  Borrowed. */
static PyObject *
mark_of(PyObject *light, PyObject *initial)
{
    if (!PyCode_Check(light)) {
        PyErr_SetString(PyExc_TypeError, "a code object is needed");
        return NULL;
    }
    void *mark = NULL;
    if (PyUnstable_Code_GetExtra(light, switched_slot, &mark) < 0) {
        return NULL;
    }
    if (mark == NULL) {
        mark = PyList_New(1);
        if (mark == NULL) {
            return NULL;
        }
        PyList_SET_ITEM((PyObject *)mark, 0, Py_NewRef(initial));
        if (PyUnstable_Code_SetExtra(light, switched_slot, mark) < 0) {
            Py_DECREF((PyObject *)mark);
            return NULL;
        }
    }
    return (PyObject *)mark;
}

/* The mark's item becomes `state` (a switched code, or None); an arm mark's co_version is
 * given back to the code first.  A code is switched once: its module is switched once. */
static PyObject *
settle(PyObject *light, PyObject *state)
{
    PyObject *mark = mark_of(light, state);
    if (mark == NULL) {
        return NULL;
    }
    PyObject *was = PyList_GET_ITEM(mark, 0);
    if (PyLong_CheckExact(was)) {
        ((PyCodeObject *)light)->co_version = (uint32_t)PyLong_AsUnsignedLong(was);
        Py_INCREF(state);
        PyList_SetItem(mark, 0, state);
    }
    Py_RETURN_NONE;
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
    return settle(args[0], args[1]);
}

static PyObject *
disarm_at_creation(PyObject *module, PyObject *light)
{
    (void)module;
    return settle(light, Py_None);
}

static PyObject *
arm_at_creation(PyObject *module, PyObject *light)
{
    (void)module;
    if (!PyCode_Check(light)) {
        PyErr_SetString(PyExc_TypeError, "arm_at_creation(light) takes a code object");
        return NULL;
    }
    PyCodeObject *code = (PyCodeObject *)light;
    PyObject *version = PyLong_FromUnsignedLong(code->co_version);
    if (version == NULL) {
        return NULL;
    }
    PyObject *mark = mark_of(light, version);
    if (mark != NULL && PyList_GET_ITEM(mark, 0) == version) { /* (armed once: as its module first waits) */
        code->co_version = 0; /* what MAKE_FUNCTION versions the functions made from it with */
    }
    Py_DECREF(version);
    if (mark == NULL) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
switched_of(PyObject *module, PyObject *light)
{
    (void)module;
    if (!PyCode_Check(light)) {
        PyErr_SetString(PyExc_TypeError, "switched_of(light) takes a code object");
        return NULL;
    }
    void *mark = NULL;
    if (PyUnstable_Code_GetExtra(light, switched_slot, &mark) < 0) {
        return NULL;
    }
    PyObject *state = mark == NULL ? Py_None : PyList_GET_ITEM((PyObject *)mark, 0);
    return Py_NewRef(PyCode_Check(state) ? state : Py_None);
}

/* `step` done to `func`, which must be a function (a TypeError naming `name` otherwise). */
static PyObject *
on_function(PyObject *func, void (*step)(PyFunctionObject *), const char *name)
{
    if (!PyFunction_Check(func)) {
        PyErr_Format(PyExc_TypeError, "%s(function) takes a function", name);
        return NULL;
    }
    step((PyFunctionObject *)func);
    Py_RETURN_NONE;
}

static PyObject *
arm(PyObject *module, PyObject *func)
{
    (void)module;
    return on_function(func, arm_function, "arm");
}

static PyObject *
disarm(PyObject *module, PyObject *func)
{
    (void)module;
    return on_function(func, disarm_function, "disarm");
}

static PyObject *
armed(PyObject *module, PyObject *func)
{
    (void)module;
    return PyBool_FromLong(PyFunction_Check(func) && ((PyFunctionObject *)func)->vectorcall == first_call);
}

/* What f.__code__ says.  A decorator may keep a function's code as its module is imported
 * (jinja2's @internalcode: a set of codes, whose frames its tracebacks leave out), so what
 * `__code__` returns must be the code the function will run.  An armed function would run
 * its switched code from its first call on, and a function of a module imported idle
 * would from the next activation; so once set_code_read has a callback, function's
 * `__code__` is this getset (same name, doc and setter as CPython's), whose getter, for an
 * armed function or one whose __module__ is in the callback's set of modules imported
 * light, first has the callback give it the code it will run (lazy_mode.code_read), and
 * then reads the code as CPython's getter does (audit event included).  For any other
 * function it is CPython's getter.  The callback reads codes with code_of, not through
 * this getter. */
static getter cpython_get_code = NULL; /* CPython's getter of function.__code__, once ours replaced it */
static PyGetSetDef code_getset;        /* ours: CPython's, with get_code as getter */

static int
read_watched(PyFunctionObject *func)
{
    if (func->vectorcall == first_call) {
        return 1;
    }
    PyObject *module = func->func_module;
    if (read_modules == NULL || module == NULL || !PyUnicode_CheckExact(module)) {
        return 0;
    }
    return PySet_Contains(read_modules, module) > 0; /* (an exact str: its hash cannot fail) */
}

static PyObject *
get_code(PyObject *func, void *closure)
{
    if (on_code_read != NULL && PyFunction_Check(func) && read_watched((PyFunctionObject *)func)) {
        PyObject *done = PyObject_CallOneArg(on_code_read, func);
        if (done == NULL) {
            return NULL;
        }
        Py_DECREF(done);
    }
    return cpython_get_code(func, closure);
}

/* function.__code__ becomes ours (above); done once.  -1 with an exception if the type's
 * __code__ is not the getset descriptor CPython defines (another tool replaced it). */
static int
guard_code(void)
{
    if (cpython_get_code != NULL) {
        return 0;
    }
    PyObject *dict = PyType_GetDict(&PyFunction_Type);
    if (dict == NULL) {
        return -1;
    }
    PyObject *cpython = PyDict_GetItemString(dict, "__code__"); /* (borrowed) */
    if (cpython == NULL || !Py_IS_TYPE(cpython, &PyGetSetDescr_Type)) {
        PyErr_SetString(PyExc_RuntimeError,
                        "cassette_hook.importhook._watch: function.__code__ is not CPython's getset descriptor");
        Py_DECREF(dict);
        return -1;
    }
    PyGetSetDef *def = ((PyGetSetDescrObject *)cpython)->d_getset;
    code_getset = (PyGetSetDef){def->name, get_code, def->set, def->doc, def->closure};
    PyObject *ours = PyDescr_NewGetSet(&PyFunction_Type, &code_getset);
    if (ours == NULL) {
        Py_DECREF(dict);
        return -1;
    }
    getter was = def->get;
    int failed = PyDict_SetItemString(dict, def->name, ours);
    Py_DECREF(ours);
    Py_DECREF(dict);
    if (failed) {
        return -1;
    }
    cpython_get_code = was; /* (CPython's descriptor, static, outlives its removal from the dict) */
    PyType_Modified(&PyFunction_Type);
    return 0;
}

static PyObject *
set_first_call(PyObject *module, PyObject *callback)
{
    (void)module;
    Py_XSETREF(on_first_call, Py_NewRef(callback));
    Py_RETURN_NONE;
}

static PyObject *
set_code_read(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2 || !PySet_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "set_code_read(callback, modules) takes a callable and a set");
        return NULL;
    }
    if (guard_code() < 0) {
        return NULL;
    }
    Py_XSETREF(on_code_read, Py_NewRef(args[0]));
    Py_XSETREF(read_modules, Py_NewRef(args[1]));
    Py_RETURN_NONE;
}

static PyObject *
code_of(PyObject *module, PyObject *func)
{
    (void)module;
    if (!PyFunction_Check(func)) {
        PyErr_SetString(PyExc_TypeError, "code_of(function) takes a function");
        return NULL;
    }
    return Py_NewRef(PyFunction_GET_CODE(func));
}

static PyMethodDef methods[] = {
    {"switch_at_creation", (PyCFunction)(void (*)(void))switch_at_creation, METH_FASTCALL,
     "switch_at_creation(light, switched): functions made from now on from light get switched."},
    {"arm_at_creation", arm_at_creation, METH_O,
     "arm_at_creation(light): functions made from now on from light get armed (until switch_at_creation)."},
    {"disarm_at_creation", disarm_at_creation, METH_O,
     "disarm_at_creation(light): functions made from now on from light are left as made."},
    {"switched_of", switched_of, METH_O, "switched_of(light): the switched code functions made from light get, or None."},
    {"arm", arm, METH_O, "arm(function): its next call runs the first-call callback first."},
    {"disarm", disarm, METH_O, "disarm(function): calls to it are CPython's again."},
    {"armed", armed, METH_O, "armed(function): does its next call run the first-call callback?"},
    {"set_first_call", set_first_call, METH_O, "set_first_call(callback): callback(function) runs at an armed function's first call."},
    {"set_code_read", (PyCFunction)(void (*)(void))set_code_read, METH_FASTCALL,
     "set_code_read(callback, modules): function.__code__ runs callback(function) first where function is armed "
     "or its __module__ is in the set modules."},
    {"code_of", code_of, METH_O, "code_of(function): the code it holds now (function.__code__ without switching it)."},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "cassette_hook.importhook._watch",
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
    switched_slot = PyUnstable_Eval_RequestCodeExtraIndex(drop_mark);
    if (switched_slot < 0) {
        return NULL;
    }
    if (PyFunction_AddWatcher(on_function_event) < 0) {
        PyObject *why = PyErr_GetRaisedException();
        PyErr_Format(PyExc_ImportError, "cassette_hook.importhook._watch: no function watcher to be had (%S)", why);
        Py_XDECREF(why);
        return NULL;
    }
    return PyModule_Create(&module_def);
}

#else /* before 3.12: no function watchers */

PyMODINIT_FUNC
PyInit__watch(void)
{
    PyErr_SetString(PyExc_ImportError, "cassette_hook.importhook._watch needs CPython 3.12's function watchers");
    return NULL;
}

#endif
