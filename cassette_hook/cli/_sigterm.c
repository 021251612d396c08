/* SIGTERM, delivered again until Python's handler for it has run.
 *
 * _process sets a Python handler for SIGTERM that writes the reports and then ends the
 * process by SIGTERM (docs/processes.md, "Forked children").  A Python handler runs when
 * the main thread next checks for signals, and a signal that arrives just before the
 * main thread blocks in C -- a multiprocessing pool's worker going back to wait for its
 * next task while the pool terminates it -- is noted but never acted on: the blocking
 * call started after the signal and is not interrupted, so the process waits for ever
 * where, with the default action, it would have ended.  (Under a context the worker runs
 * more C between its checks, and this happened to 1 in 6 pools ended with `with Pool()`.)
 *
 * So arm() puts a handler of ours in front of Python's (as faulthandler.register does with
 * chain=True): it calls Python's, which notes the signal, and starts a timer that sends
 * SIGTERM to the process again every 100 ms: the next one interrupts the blocking call,
 * and Python's handler runs.  That handler ends the process (while it writes, the signals
 * it gets again are noted and ignored: _process._on_sigterm; one that interrupted a
 * context mid-update, the trace writing a line, is let go: the next one writes).  A
 * program that sets its own handler later replaces both, and the timer is never started.
 * Where there are no POSIX timers (macOS), arm() does nothing and returns False.  A forked
 * child inherits the handler but not the timer: arm() is called again there, and starts
 * the timer at once if SIGTERM came before it (missed_by, below).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__linux__) && defined(SIGEV_SIGNAL) && defined(CLOCK_MONOTONIC)
#define HAVE_TIMER 1
#else
#define HAVE_TIMER 0
#endif

#if HAVE_TIMER
static struct sigaction chained; /* Python's handler, which ours calls first */
static timer_t timer;
static pid_t timer_owner; /* the process that made the timer: a forked child makes its own */
/* A forked child that got SIGTERM before it made its timer (arm()): the signal came before
 * the child's Python state was reset after the fork (PyOS_AfterFork_Child), which forgets
 * the signals Python's handler had noted, so Python's handler would never run.  This
 * happens when a pool is terminated before a worker it just forked has run at all (a
 * loaded machine, `with Pool() as pool:` around little work): plain, the default action
 * would have ended the worker; here it would wait for its next task for ever.  arm(),
 * called in the child once its Python state is whole, then starts the timer at once. */
static volatile sig_atomic_t missed_by; /* the process id of such a child, else 0 */

static void
on_sigterm(int signum, siginfo_t *info, void *context)
{
    int saved = errno;
    if (chained.sa_flags & SA_SIGINFO) {
        chained.sa_sigaction(signum, info, context);
    }
    else if (chained.sa_handler != SIG_DFL && chained.sa_handler != SIG_IGN) {
        chained.sa_handler(signum);
    }
    if (timer_owner == getpid()) {
        struct itimerspec again = {{0, 100000000}, {0, 100000000}};
        (void)timer_settime(timer, 0, &again, NULL); /* async-signal-safe */
    }
    else {
        missed_by = getpid(); /* (async-signal-safe) a forked child's, before its arm() */
    }
    errno = saved;
}
#endif

static PyObject *
arm(PyObject *module, PyObject *unused)
{
#if HAVE_TIMER
    struct sigaction current;
    if (sigaction(SIGTERM, NULL, &current) != 0) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    if (timer_owner != getpid()) {
        struct sigevent event;
        memset(&event, 0, sizeof(event));
        event.sigev_notify = SIGEV_SIGNAL;
        event.sigev_signo = SIGTERM;
        if (timer_create(CLOCK_MONOTONIC, &event, &timer) != 0) {
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        timer_owner = getpid();
        if (missed_by == timer_owner) { /* SIGTERM came before: delivered again now, and on */
            struct itimerspec soon = {{0, 100000000}, {0, 1000000}};
            if (timer_settime(timer, 0, &soon, NULL) != 0) {
                return PyErr_SetFromErrno(PyExc_OSError);
            }
        }
    }
    if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == on_sigterm) {
        Py_RETURN_TRUE; /* (inherited from the parent) */
    }
    if (current.sa_handler == SIG_DFL || current.sa_handler == SIG_IGN) {
        PyErr_SetString(PyExc_RuntimeError, "arm(): SIGTERM has no handler to chain to");
        return NULL;
    }
    struct sigaction ours = current;
    ours.sa_sigaction = on_sigterm;
    ours.sa_flags = (current.sa_flags | SA_SIGINFO) & ~SA_RESETHAND;
    chained = current;
    if (sigaction(SIGTERM, &ours, NULL) != 0) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_RETURN_TRUE;
#else
    Py_RETURN_FALSE;
#endif
}

static PyMethodDef methods[] = {
    {"arm", arm, METH_NOARGS,
     "arm()\n--\n\nPut a handler in front of SIGTERM's (Python's) that calls it and delivers SIGTERM again "
     "every 100 ms, until the process ends.  Returns whether it does (False where there are no POSIX timers)."},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "cassette_hook.cli._sigterm",
    .m_doc = "SIGTERM delivered again until Python's handler has run (see _process._catch_sigterm).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__sigterm(void)
{
    return PyModule_Create(&module_def);
}
