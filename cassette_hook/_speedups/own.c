/* _own in C: tracebacks are the program's (docs/internals.md).  An exception that leaves
 * one of the entry points for the program's frame (a Site's call, call, a primitive, a
 * construction, recurse ...) has the entries of cassette_hook's Python code that it
 * passed through taken off the head of its traceback, as _own.strip_traceback does in the
 * Python entry points; the program's frame then adds its own entry above the rest, as
 * when it makes the call plainly.  Only on the way out with an error: own_off(out)
 * (internal.h) is a compare when out is a result.  A frame is ours when its file is in
 * the package's directory (state->own_directory, _own.DIRECTORY, from configure). */
#include "internal.h"

static int
own_entry(PyTracebackObject *tb)
{
    PyCodeObject *code = PyFrame_GetCode(tb->tb_frame);
    int own = PyUnicode_Tailmatch(code->co_filename, state->own_directory, 0, PY_SSIZE_T_MAX, -1) == 1;
    Py_DECREF(code);
    return own;
}

/* tb past its head of our own entries (borrowed; tb itself if none are ours). */
static PyObject *
own_stripped(PyObject *tb)
{
    PyObject *rest = tb;
    while (rest != NULL && rest != Py_None && PyTraceBack_Check(rest) && own_entry((PyTracebackObject *)rest)) {
        rest = (PyObject *)((PyTracebackObject *)rest)->tb_next;
    }
    return rest;
}

void
strip_raised(void)
{
    if (state->own_directory == NULL) {
        return;
    }
    ch_replace_raised_traceback(own_stripped);
}

/* C only: _own's PyErr_SetExcInfo on 3.10, which the pure path calls through ctypes. */
PyObject *
handled_traceback(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyExceptionInstance_Check(args[0]) || (args[1] != Py_None && !PyTraceBack_Check(args[1]))) {
        PyErr_SetString(PyExc_TypeError, "handled_traceback(exc, tb) takes an exception and a traceback or None");
        return NULL;
    }
    ch_set_handled_traceback(args[0], args[1]);
    Py_RETURN_NONE;
}
