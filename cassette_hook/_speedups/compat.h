/* What differs between the CPython versions the accelerator supports (3.10-3.15): every
 * test of PY_VERSION_HEX is here, as a named feature or an inline function, so that the
 * concept files say what they need rather than which version has it. */
#ifndef CASSETTE_HOOK_SPEEDUPS_COMPAT_H
#define CASSETTE_HOOK_SPEEDUPS_COMPAT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <structmember.h> /* PyMemberDef (in Python.h from 3.12 on) */

/* Per-thread state (a few variables, read at every hooked call).  On ELF the default model
 * for a shared object calls __tls_get_addr at each access (4.5% of a counting prehook's
 * time on 3.12); initial-exec reads it at a fixed offset from the thread pointer, from the
 * static TLS block glibc keeps a surplus of for modules loaded later.  Where that surplus
 * is gone, loading this module fails, and the package runs the pure-Python hot path. */
#if defined(_MSC_VER)
#define THREAD_LOCAL __declspec(thread)
#elif defined(__ELF__) && (defined(__GNUC__) || defined(__clang__))
#define THREAD_LOCAL _Thread_local __attribute__((tls_model("initial-exec")))
#else
#define THREAD_LOCAL _Thread_local
#endif

/* Dict watchers (3.12+): the mirror of the builtins a twin reads (runtime.plan.c), and on 3.14
 * the twin tables' version (weakid.c). */
#define CH_HAVE_DICT_WATCHERS (PY_VERSION_HEX >= 0x030C0000)

/* Function watchers (3.12+): a twin slot learns its function's death from the
 * PyFunction_EVENT_DESTROY event (runtime.plan.c) rather than from a weak reference's
 * callback; before 3.12 it makes the weak reference. */
#define CH_HAVE_FUNC_WATCHERS (PY_VERSION_HEX >= 0x030C0000)

/* PyLong_AsSsize_t of a small int without the call (3.12+: an int of one digit is
 * "compact", its value read inline), for a count a hot path reads per call (a Guard's
 * arities, runtime.callsite.c); any other object goes through PyLong_AsSsize_t. */
static inline Py_ssize_t
ch_as_ssize(PyObject *n)
{
#if PY_VERSION_HEX >= 0x030C0000
    if (PyLong_CheckExact(n) && PyUnstable_Long_IsCompact((PyLongObject *)n)) {
        return (Py_ssize_t)PyUnstable_Long_CompactValue((PyLongObject *)n);
    }
#endif
    return PyLong_AsSsize_t(n);
}

/* A dict's ma_version_tag: changed at every change of what it maps, and no two dicts share
 * one (a process-wide counter).  Deprecated from 3.12 on, for want of users, still kept
 * through 3.13; 3.14 has none (weakid.c watches the tables instead). */
#define CH_HAVE_DICT_VERSION_TAG (PY_VERSION_HEX < 0x030E0000)

#if CH_HAVE_DICT_VERSION_TAG
static inline uint64_t
ch_dict_version_tag(PyObject *dict)
{
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
    return ((PyDictObject *)dict)->ma_version_tag;
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic pop
#endif
}
#endif

/* The exception being raised, taken out of the thread's state as one object (a new
 * reference; its traceback on it), and put back.  3.12 keeps it as one object already. */
static inline PyObject *
fetch_exception(void)
{
#if PY_VERSION_HEX >= 0x030C0000
    return PyErr_GetRaisedException();
#else
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    if (traceback != NULL) {
        PyException_SetTraceback(value, traceback);
    }
    Py_XDECREF(type);
    Py_XDECREF(traceback);
    return value;
#endif
}

static inline void
restore_exception(PyObject *exc)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(exc);
#else
    PyErr_Restore(Py_NewRef(Py_TYPE(exc)), exc, PyException_GetTraceback(exc));
#endif
}

/* The exception being raised gets the traceback strip(its traceback) returns (borrowed;
 * NULL for none), if that is another one.  Before 3.12, while an exception propagates the
 * thread's traceback is the one that counts, kept apart from the exception's. */
static inline void
ch_replace_raised_traceback(PyObject *(*strip)(PyObject *tb))
{
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc = PyErr_GetRaisedException();
    PyObject *tb = exc != NULL ? PyException_GetTraceback(exc) : NULL, *rest = strip(tb);
    if (rest != tb) {
        PyException_SetTraceback(exc, rest != NULL ? rest : Py_None);
    }
    Py_XDECREF(tb);
    PyErr_SetRaisedException(exc);
#else
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *rest = strip(tb);
    if (rest != tb) {
        Py_XINCREF(rest);
        Py_SETREF(tb, rest);
        if (value != NULL && PyExceptionInstance_Check(value)) {
            PyException_SetTraceback(value, rest != NULL ? rest : Py_None);
        }
    }
    PyErr_Restore(type, value, tb);
#endif
}

/* 3.10 keeps the handled exception's traceback apart from exc.__traceback__ (a bare raise
 * re-raises with that one): tb becomes it.  3.11 on read it off the exception: nothing to do. */
static inline void
ch_set_handled_traceback(PyObject *exc, PyObject *tb)
{
#if PY_VERSION_HEX < 0x030B0000
    PyErr_SetExcInfo(Py_NewRef(Py_TYPE(exc)), Py_NewRef(exc), tb == Py_None ? NULL : Py_NewRef(tb));
#else
    (void)exc, (void)tb;
#endif
}

/* 3.11's generic CALL inlines any Python function, whatever its vectorcall slot holds (3.10
 * inlines no call; 3.12+ only a function whose slot is CPython's own), so a vectorcall
 * given to a Python function is not what a call of it runs there: on 3.11
 * runtime.callees.recurse is an object of a C type of its own (bodies.c, RecurseType). */
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#define CH_CALL_INLINES_ANY_FUNCTION 1
#endif

/* A Python function's vectorcall replaced, with what specialized call sites check of it
 * reset, so that they let go of the old one. */
static inline void
ch_function_set_vectorcall(PyFunctionObject *func, vectorcallfunc vectorcall)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyFunction_SetVectorcall(func, vectorcall); /* (zeroes its version) */
#else
    func->vectorcall = vectorcall;
#if PY_VERSION_HEX >= 0x030B0000
    func->func_version = 0; /* (3.11's specialized call sites check it, not the vectorcall) */
#endif
#endif
}

#if PY_VERSION_HEX >= 0x030D0000
/* (exported, as on 3.10-3.12, but declared in an internal header since 3.13) */
PyAPI_FUNC(int) _PyObject_GetMethod(PyObject *obj, PyObject *name, PyObject **method);
#endif

/* Function versions (CPython 3.13+).  Specialized calls guard on a function's version.
 * 3.13 gives one only in MAKE_FUNCTION (3.11 and 3.12 hand a new one to a function
 * without, when a call to it next specializes), so a function made by FunctionType() --
 * a twin -- or given a new __code__ -- one switched at a lazy activation, or by
 * ch.instrument -- has none, and every call to it would stay a generic CALL: fib 12-16%
 * slower, idle or overdubbed (benchmarks/bench_versions.py).  Such a function gets what
 * MAKE_FUNCTION gives a function of its code, the code's co_version; but only when the
 * function it stands for had a version: one without had its defaults, code or vectorcall
 * changed, and the plain program's calls to it are not specialized either (the functions
 * of one code share a version, which is sound while their defaults have the shape that
 * code's MAKE_FUNCTION gives them). */
#if PY_VERSION_HEX >= 0x030D0000
#define VERSION_OF(func) (((PyFunctionObject *)(func))->func_version)
#if PY_VERSION_HEX >= 0x030E0000
/* 3.14: 0 is "never had one", 1 "cleared" (a new __code__ or defaults); valid ones start at 2 */
#define VERSION_VALID(version) ((version) >= 2)
#else
#define VERSION_VALID(version) ((version) != 0)
#endif
static inline void
version_from_code(PyFunctionObject *func, uint32_t had)
{
    if (VERSION_VALID(had) && !VERSION_VALID(func->func_version)) {
        func->func_version = ((PyCodeObject *)func->func_code)->co_version;
    }
}
#else /* 3.10-3.12: nothing to do (3.10 has no versions) */
#define VERSION_OF(func) 0
#define version_from_code(func, had) ((void)(func), (void)(had))
#endif

/* A function object emptied to be made anew (runtime.plan.c's spare twin): what it holds
 * of the function it stood for, beyond its code, globals, names and builtins -- type
 * parameters from 3.12, the annotate function from 3.14 -- and the version a new function
 * has (0; 3.10 has none). */
static inline void
function_emptied(PyFunctionObject *func)
{
    Py_CLEAR(func->func_closure);
    Py_CLEAR(func->func_defaults);
    Py_CLEAR(func->func_kwdefaults);
    Py_CLEAR(func->func_annotations);
#if PY_VERSION_HEX >= 0x030C0000
    Py_CLEAR(func->func_typeparams);
#endif
#if PY_VERSION_HEX >= 0x030E0000
    Py_CLEAR(func->func_annotate);
#endif
}

static inline void
version_cleared(PyFunctionObject *func)
{
#if PY_VERSION_HEX >= 0x030B0000
    func->func_version = 0;
#else
    (void)func;
#endif
}

/* 3.12 only: a function made for one of a code whose MAKE_FUNCTION gave it the code's
 * co_version (plain's) gets that version too.  3.12 would otherwise hand it one of its own
 * when a call to it next specializes: the twins of closures made per call, one each,
 * would undo the specialization of the call site at every call, where the program's own
 * closures share their code's (sound as on 3.13: "Function versions" above).  3.13+ do it
 * in version_from_code; 3.11 gives MAKE_FUNCTION no version. */
static inline void
version_as_make_function(PyFunctionObject *made, PyFunctionObject *plain)
{
#if PY_VERSION_HEX >= 0x030C0000 && PY_VERSION_HEX < 0x030D0000
    if (plain->func_version != 0) {
        made->func_version = ((PyCodeObject *)made->func_code)->co_version;
    }
#else
    (void)made, (void)plain;
#endif
}

/* A function given, in place, another code of the same shape (runtime.plan.c: a lambda that
 * only its call site holds made its own twin).  Its old version let go as CPython lets one
 * go (PyFunction_SetVectorcall with the vectorcall it has: 3.13 keeps a table of functions
 * by version, which a version written over would leave pointing at a freed function), and
 * the new one what MAKE_FUNCTION gives a function of the new code, if it had one (as
 * twins get theirs: version_from_code, version_as_make_function); 3.11 hands a function
 * without one a new version when a call to it next specializes, 3.10 has none. */
static inline void
function_recoded(PyFunctionObject *func, PyObject *code)
{
#if PY_VERSION_HEX >= 0x030D0000
    int had = VERSION_VALID(func->func_version);
#elif PY_VERSION_HEX >= 0x030B0000
    int had = func->func_version != 0;
#endif
#if PY_VERSION_HEX >= 0x030B0000
    ch_function_set_vectorcall(func, func->vectorcall); /* (zeroes its version) */
#endif
    Py_SETREF(func->func_code, Py_NewRef(code));
#if PY_VERSION_HEX >= 0x030C0000
    if (had) {
        func->func_version = ((PyCodeObject *)code)->co_version;
    }
#elif PY_VERSION_HEX >= 0x030B0000
    (void)had;
#endif
}

/* The module slot that declares a module for the main interpreter only (3.12+: a second
 * interpreter's import then fails with ImportError; before 3.12, a second interpreter's
 * exec finds the module made already, and module.c refuses it). */
#if PY_VERSION_HEX >= 0x030C0000
#define CH_SLOT_ONE_INTERPRETER {Py_mod_multiple_interpreters, Py_MOD_MULTIPLE_INTERPRETERS_NOT_SUPPORTED},
#else
#define CH_SLOT_ONE_INTERPRETER
#endif

/* The signature of a METH_FASTCALL | METH_KEYWORDS function: public as
 * PyCFunctionFastWithKeywords from 3.13, underscored before (primitives.c's trampolines). */
#if PY_VERSION_HEX < 0x030D0000
typedef _PyCFunctionFastWithKeywords PyCFunctionFastWithKeywords;
#endif

/* The type of a PyCMethod's (METH_METHOD) argument count, the count alone (no
 * PY_VECTORCALL_ARGUMENTS_OFFSET): size_t before 3.14, Py_ssize_t from 3.14. */
#if PY_VERSION_HEX >= 0x030E0000
typedef Py_ssize_t CMethodNargs;
#else
typedef size_t CMethodNargs;
#endif

#endif /* CASSETTE_HOOK_SPEEDUPS_COMPAT_H */
