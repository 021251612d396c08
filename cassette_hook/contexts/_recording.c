/* ProfileContext's hooks in C: a call's node joins its thread's stack, and leaves it timed.
 *
 * _calltree.py holds the reference version (Recording, and Node's fields), used where
 * this module is not built or CASSETTE_HOOK_PURE_PYTHON=1 is set (_native.py).  Why C:
 * the hooks run twice per observed call, and in Python they cost about 1,000 ns a call
 * on 3.12 (two frames with *args and **kwargs, a thread-local read, naming the callee,
 * the clock), five times what cProfile's C costs; here a hook adds no Python frame and
 * no allocation (docs/performance.md, "Against other tools").
 *
 * Recording is a base class of ProfileContext: a hook's self is the context, and its
 * fields cache the stack of the thread that last ran a hook.  A node's children are
 * named by name_of (contexts/_names.py) in Python; here they are found by a key that
 * costs nothing to compute -- a Python function's or class's __qualname__ (checked
 * against the __module__ it came with), or a callee that lives as long as its module or
 * C type (a builtin function, a method descriptor, a C type) -- in the node's `keyed` table,
 * which ProfileContext._child fills the first time it names a callee.  A callee with no
 * such key, or a key that does not match, is named by _child each time.
 *
 * It also holds the sys.monitoring callbacks that make each resume of a generator a call
 * of its function (3.12+: "Resumes" below), and ImportTimer, the wrapper that times imports.
 */
#include "../_speedups/compat.h" /* Python.h, and the accelerators' per-version helpers (fetch_exception ...) */

static PyObject *str_thread_stack, *str_child, *str_module;

/* time.perf_counter_ns(), which the pure-Python recording reads. */
static inline long long
now(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    PyTime_t t = 0;
    (void)PyTime_PerfCounterRaw(&t); /* cannot fail where perf_counter works */
    return (long long)t;
#else
    return (long long)_PyTime_GetPerfCounter();
#endif
}

/* -- Node: calls of one function at one path of a thread's call tree ------------------ */

typedef struct {
    PyObject_HEAD
    PyObject *name;
    PyObject *children;   /* name -> Node */
    PyObject *keyed;      /* key -> Node: see the comment at the top */
    PyObject *key_module; /* the __module__ of the qualname key that names this node, or None */
    long long calls, total, start;
} Node;

static PyTypeObject NodeType;

static int
node_init(Node *self, PyObject *args, PyObject *kwds)
{
    static char *keywords[] = {"name", NULL};
    PyObject *name;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "U:Node", keywords, &name)) {
        return -1;
    }
    PyObject *children = PyDict_New(), *keyed = PyDict_New();
    if (children == NULL || keyed == NULL) {
        Py_XDECREF(children);
        Py_XDECREF(keyed);
        return -1;
    }
    /* Out of the collector's sight, as the node is (see node_dealloc): a new dict is
     * untracked until it holds a tracked object up to 3.13, and tracked from the start
     * from 3.14 on.  These hold strings, untracked nodes and C callees, and only this node
     * refers to them, so they are never part of a cycle. */
    PyObject_GC_UnTrack(children);
    PyObject_GC_UnTrack(keyed);
    Py_XSETREF(self->name, Py_NewRef(name));
    Py_XSETREF(self->children, children);
    Py_XSETREF(self->keyed, keyed);
    Py_XSETREF(self->key_module, Py_NewRef(Py_None));
    self->calls = self->total = self->start = 0;
    return 0;
}

/* A node is not tracked by the garbage collector: it holds only strings, its two dicts
 * and, as keys of `keyed`, qualnames and C callees (builtins, method descriptors, C
 * types), none of which can lead back to it, so it is never part of a cycle.  Tracked, a
 * profile of a large program was hundreds of thousands of objects that every full
 * collection walked, and the collections' pauses were charged to whatever function ran
 * (docs/contexts.md, "The profile and the garbage collector").  Its dicts are untracked
 * too (node_init). */
static void
node_dealloc(Node *self)
{
    Py_CLEAR(self->name);
    Py_CLEAR(self->children);
    Py_CLEAR(self->keyed);
    Py_CLEAR(self->key_module);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef node_members[] = {
    {"name", T_OBJECT_EX, offsetof(Node, name), READONLY, "The function's name (name_of)."},
    {"children", T_OBJECT_EX, offsetof(Node, children), READONLY, "Name -> the node of calls made by these."},
    {"keyed", T_OBJECT_EX, offsetof(Node, keyed), READONLY, "Key -> child, for the C hooks."},
    {"key_module", T_OBJECT_EX, offsetof(Node, key_module), 0, "The module of the qualname key naming this node."},
    {"calls", T_LONGLONG, offsetof(Node, calls), 0, "Calls that returned or raised."},
    {"total", T_LONGLONG, offsetof(Node, total), 0, "Their total time, ns."},
    {"start", T_LONGLONG, offsetof(Node, start), 0, "When the running call started (perf_counter_ns)."},
    {NULL},
};

static PyTypeObject NodeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cassette_hook.contexts._recording.Node",
    .tp_doc = "Node(name): the fields of _calltree.Node.",
    .tp_basicsize = sizeof(Node),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, /* not Py_TPFLAGS_HAVE_GC: see node_dealloc */
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)node_init,
    .tp_dealloc = (destructor)node_dealloc,
    .tp_members = node_members,
};

/* -- Recording: the hooks ----------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    uint64_t thread; /* PyThreadState_GetID of the thread whose stack is cached; ids start at 1 */
    PyObject *stack; /* that thread's list of running nodes, its tree's root first */
} Recording;

/* The running thread's stack (borrowed: its tree, which the context keeps, holds it). */
static PyObject *
stack_of(Recording *self)
{
    uint64_t thread = PyThreadState_GetID(PyThreadState_Get());
    if (thread == self->thread && self->stack != NULL) {
        return self->stack;
    }
    PyObject *stack = PyObject_CallMethodNoArgs((PyObject *)self, str_thread_stack);
    if (stack == NULL) {
        return NULL;
    }
    if (!PyList_CheckExact(stack) || PyList_GET_SIZE(stack) < 1) {
        PyErr_Format(PyExc_TypeError, "%.100s._thread_stack() must return a list holding the root, not %.100s",
                     Py_TYPE(self)->tp_name, Py_TYPE(stack)->tp_name);
        Py_DECREF(stack);
        return NULL;
    }
    Py_XSETREF(self->stack, stack);
    self->thread = thread;
    return stack;
}

/* What the node's children are found by without naming f (borrowed), or NULL; *module
 * is set for a qualname key.  A function's name is its module and qualname, whatever
 * else it is (name_of), and both are read at each call, as name_of reads them; what
 * else is a key lives as long as its module or C type, and is named by identity. */
static PyObject *
key_of(PyObject *f, PyObject **module)
{
    *module = NULL;
    PyObject *function = Py_IS_TYPE(f, &PyMethod_Type) ? PyMethod_GET_FUNCTION(f) : f;
    if (Py_IS_TYPE(function, &PyFunction_Type)) {
        PyObject *m = ((PyFunctionObject *)function)->func_module;
        PyObject *qualname = ((PyFunctionObject *)function)->func_qualname;
        if (m == NULL || !PyUnicode_CheckExact(m) || PyUnicode_GET_LENGTH(m) == 0 || !PyUnicode_CheckExact(qualname)) {
            return NULL; /* named from its globals instead (name_of) */
        }
        *module = m;
        return qualname;
    }
    PyTypeObject *kind = Py_TYPE(f);
    if (kind == &PyMethodDescr_Type || kind == &PyWrapperDescr_Type || kind == &PyClassMethodDescr_Type) {
        return f; /* list.append, object.__init__: one per class */
    }
    if (kind == &PyCFunction_Type) { /* len, math.sqrt: one per module; a bound one is new per access */
        PyObject *owner = PyCFunction_GET_SELF(f);
        return owner == NULL || PyModule_CheckExact(owner) ? f : NULL;
    }
    if (!PyType_Check(f)) {
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)f;
    if (!(cls->tp_flags & Py_TPFLAGS_HEAPTYPE) || (cls->tp_flags & Py_TPFLAGS_IMMUTABLETYPE)) {
        /* a C type: it lives as long as its module */
        return kind->tp_hash == PyType_Type.tp_hash && kind->tp_richcompare == PyType_Type.tp_richcompare ? f : NULL;
    }
    /* A class of the program's, which a profile must not keep alive (its instances'
     * __del__ would not run at exit): named by its qualname and __module__ as a function
     * is, read as type's own descriptors read them (name_of).  Not a module named _x: its
     * name may be x's (_names._public), and that depends on the class itself. */
    PyObject *qualname = ((PyHeapTypeObject *)cls)->ht_qualname;
    PyObject *m = PyDict_GetItemWithError(cls->tp_dict, str_module); /* borrowed */
    if (m == NULL || !PyUnicode_CheckExact(m) || PyUnicode_GET_LENGTH(m) == 0 || PyUnicode_READ_CHAR(m, 0) == '_'
        || qualname == NULL || !PyUnicode_CheckExact(qualname)) {
        PyErr_Clear(); /* (a failed lookup: named by _child instead) */
        return NULL;
    }
    *module = m;
    return qualname;
}

/* The node of f under parent (a new reference), named in Python the first time. */
static PyObject *
child_of(Recording *self, Node *parent, PyObject *f)
{
    PyObject *module, *key = key_of(f, &module);
    if (key != NULL) {
        PyObject *found = PyDict_GetItemWithError(parent->keyed, key);
        if (found != NULL) {
            PyObject *known = ((Node *)found)->key_module;
            if (module == NULL || known == module
                || (PyUnicode_CheckExact(known) && PyUnicode_Compare(known, module) == 0)) {
                return Py_NewRef(found);
            }
        }
        else if (PyErr_Occurred()) {
            return NULL;
        }
    }
    PyObject *args[] = {(PyObject *)self, (PyObject *)parent, f, key ? key : Py_None, module ? module : Py_None};
    PyObject *node = PyObject_VectorcallMethod(str_child, args, 5 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (node != NULL && !PyObject_TypeCheck(node, &NodeType)) {
        PyErr_Format(PyExc_TypeError, "%.100s._child() must return a Node, not %.100s",
                     Py_TYPE(self)->tp_name, Py_TYPE(node)->tp_name);
        Py_CLEAR(node);
    }
    return node;
}

static PyObject *
recording_prehook(Recording *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "prehook() takes the callee after the context");
        return NULL;
    }
    PyObject *stack = stack_of(self);
    if (stack == NULL) {
        return NULL;
    }
    PyObject *parent = PyList_GET_ITEM(stack, PyList_GET_SIZE(stack) - 1);
    if (!PyObject_TypeCheck(parent, &NodeType)) {
        PyErr_SetString(PyExc_TypeError, "a profile's stack holds Nodes only");
        return NULL;
    }
    PyObject *node = child_of(self, (Node *)parent, args[0]);
    if (node == NULL) {
        return NULL;
    }
    int failed = PyList_Append(stack, node);
    Py_DECREF(node); /* the stack and the parent's children hold it */
    if (failed) {
        return NULL;
    }
    ((Node *)node)->start = now();
    Py_RETURN_NONE;
}

/* The running call ended: it leaves the stack, counted and timed.  With nothing running
 * (hooks that see a call end but did not see it start) there is nothing to count. */
static PyObject *
ended(Recording *self)
{
    long long end = now();
    PyObject *stack = stack_of(self);
    if (stack == NULL) {
        return NULL;
    }
    Py_ssize_t depth = PyList_GET_SIZE(stack);
    if (depth < 2) {
        Py_RETURN_NONE;
    }
    Node *node = (Node *)PyList_GET_ITEM(stack, depth - 1); /* pushed by prehook: a Node */
    node->total += end - node->start;
    node->calls += 1;
    Py_SET_SIZE((PyVarObject *)stack, depth - 1); /* as list.pop() does, without making its result */
    Py_DECREF(node);               /* not the last reference: the parent's children hold it */
    Py_RETURN_NONE;
}

static PyObject *
recording_posthook(Recording *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (nargs < 2) {
        PyErr_SetString(PyExc_TypeError, "posthook() takes the result and the callee after the context");
        return NULL;
    }
    return ended(self);
}

static PyObject *
recording_raisehook(Recording *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (nargs < 2) {
        PyErr_SetString(PyExc_TypeError, "raisehook() takes the exception and the callee after the context");
        return NULL;
    }
    return ended(self);
}

static int
recording_traverse(Recording *self, visitproc visit, void *arg)
{
    Py_VISIT(self->stack);
    return 0;
}

static int
recording_clear(Recording *self)
{
    Py_CLEAR(self->stack);
    self->thread = 0;
    return 0;
}

static void
recording_dealloc(Recording *self)
{
    PyObject_GC_UnTrack(self);
    recording_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef recording_methods[] = {
    {"prehook", (PyCFunction)(void (*)(void))recording_prehook, METH_FASTCALL | METH_KEYWORDS,
     "prehook($self, f, /, *args, **kwargs)\n--\n\n"
     "A call starts: its node (f under the running call) joins this thread's stack."},
    {"posthook", (PyCFunction)(void (*)(void))recording_posthook, METH_FASTCALL | METH_KEYWORDS,
     "posthook($self, out, f, /, *args, **kwargs)\n--\n\nThe call returned: it is counted and timed."},
    {"raisehook", (PyCFunction)(void (*)(void))recording_raisehook, METH_FASTCALL | METH_KEYWORDS,
     "raisehook($self, exc, f, /, *args, **kwargs)\n--\n\nThe call raised: it is counted and timed all the same."},
    {NULL},
};

static PyTypeObject RecordingType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cassette_hook.contexts._recording.Recording",
    .tp_doc = "The hooks of ProfileContext, which provides _thread_stack() and _child().",
    .tp_basicsize = sizeof(Recording),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)recording_traverse,
    .tp_clear = (inquiry)recording_clear,
    .tp_dealloc = (destructor)recording_dealloc,
    .tp_methods = recording_methods,
};

/* -- ImportTimer: importlib's _find_and_load, timed as <import name> without a frame ---- */

/* ImportTimer(find_and_load, started, ended) stands for importlib._bootstrap._find_and_load
 * (profile._watch_imports): a call runs started(name, frame) -- frame being the running
 * Python frame, the importer's or importlib's -- then find_and_load, then, if started
 * returned something other than None, ended(that), whether the import returned or raised.
 * The pure-Python path does the same with a Python function, which is one more frame
 * among importlib's while a module's body runs; being C, this one adds none, so code that
 * walks its stack during an import sees what it sees plainly (docs/contexts.md,
 * "Imports").  No signal check falls between its steps: what an interrupt cuts short is
 * the Python they call, and ended still runs if started had begun a row. */
typedef struct {
    PyObject_HEAD
    PyObject *wrapped, *started, *ended;
    vectorcallfunc vectorcall;
} ImportTimer;

static PyObject *str_name;

/* The module name of a _find_and_load(name, import_) call, or None (borrowed). */
static PyObject *
imported_name(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (nargs > 0) {
        return args[0];
    }
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t i = 0; i < nkw; i++) {
        if (PyUnicode_Compare(PyTuple_GET_ITEM(kwnames, i), str_name) == 0) {
            return args[nargs + i];
        }
    }
    return Py_None;
}

static PyObject *
import_timer_call(ImportTimer *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *frame = (PyObject *)PyEval_GetFrame(); /* borrowed; NULL when no Python code runs */
    PyObject *token = PyObject_CallFunctionObjArgs(self->started, imported_name(args, nargs, kwnames),
                                                   frame != NULL ? frame : Py_None, NULL);
    if (token == NULL) {
        return NULL;
    }
    PyObject *out = PyObject_Vectorcall(self->wrapped, args, nargsf, kwnames);
    if (token != Py_None) {
        PyObject *raised = out == NULL ? fetch_exception() : NULL;
        PyObject *done = PyObject_CallOneArg(self->ended, token);
        if (done == NULL) { /* as a Python `finally` would: this exception goes on, chained */
            Py_CLEAR(out);
            if (raised != NULL) {
                PyObject *exc = fetch_exception();
                PyException_SetContext(exc, raised); /* (steals raised) */
                restore_exception(exc);
            }
        }
        else {
            Py_DECREF(done);
            if (raised != NULL) {
                restore_exception(raised);
            }
        }
    }
    Py_DECREF(token);
    return out;
}

static PyObject *
import_timer_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *wrapped, *started, *ended;
    if (kwds != NULL && PyDict_GET_SIZE(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError, "ImportTimer() takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_UnpackTuple(args, "ImportTimer", 3, 3, &wrapped, &started, &ended)) {
        return NULL;
    }
    if (!PyCallable_Check(wrapped) || !PyCallable_Check(started) || !PyCallable_Check(ended)) {
        PyErr_SetString(PyExc_TypeError, "ImportTimer(find_and_load, started, ended) takes three callables");
        return NULL;
    }
    ImportTimer *self = (ImportTimer *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->wrapped = Py_NewRef(wrapped);
    self->started = Py_NewRef(started);
    self->ended = Py_NewRef(ended);
    self->vectorcall = (vectorcallfunc)import_timer_call;
    return (PyObject *)self;
}

/* Attributes it does not have are the wrapped function's (__name__, __qualname__,
 * __module__, __doc__), as they would be of a functools.wraps wrapper. */
static PyObject *
import_timer_getattro(ImportTimer *self, PyObject *name)
{
    PyObject *found = PyObject_GenericGetAttr((PyObject *)self, name);
    if (found == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        found = PyObject_GetAttr(self->wrapped, name);
    }
    return found;
}

static PyObject *
import_timer_repr(ImportTimer *self)
{
    return PyUnicode_FromFormat("<cassette_hook's timed %R>", self->wrapped);
}

static int
import_timer_traverse(ImportTimer *self, visitproc visit, void *arg)
{
    Py_VISIT(self->wrapped);
    Py_VISIT(self->started);
    Py_VISIT(self->ended);
    return 0;
}

static int
import_timer_clear(ImportTimer *self)
{
    Py_CLEAR(self->wrapped);
    Py_CLEAR(self->started);
    Py_CLEAR(self->ended);
    return 0;
}

static void
import_timer_dealloc(ImportTimer *self)
{
    PyObject_GC_UnTrack(self);
    import_timer_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef import_timer_members[] = {
    {"__wrapped__", T_OBJECT_EX, offsetof(ImportTimer, wrapped), READONLY, "importlib's _find_and_load."},
    {"__cassette_hook_wraps__", T_OBJECT_EX, offsetof(ImportTimer, wrapped), READONLY,
     "The same: marks importlib's _find_and_load as timed already."},
    {NULL},
};

static PyTypeObject ImportTimerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cassette_hook.contexts._recording.ImportTimer",
    .tp_doc = "ImportTimer(find_and_load, started, ended): importlib's _find_and_load, timed for the profiles.",
    .tp_basicsize = sizeof(ImportTimer),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(ImportTimer, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = import_timer_new,
    .tp_getattro = (getattrofunc)import_timer_getattro,
    .tp_repr = (reprfunc)import_timer_repr,
    .tp_traverse = (traverseproc)import_timer_traverse,
    .tp_clear = (inquiry)import_timer_clear,
    .tp_dealloc = (destructor)import_timer_dealloc,
    .tp_members = import_timer_members,
};

/* -- Resumes: a generator's resume as a call of its function (3.12+) ------------------- */

/* The C version of _resumes.py's sys.monitoring callbacks (docs/internals.md, "The
 * profile's rows: ours taken out, imports added"), which _resumes registers where this
 * module is built: in Python they cost about 4 us per resume and yield, most of it in the
 * Python code itself.  Same semantics, step by step: a frame counts if its code is a
 * generator's or coroutine's that cassette_hook rewrote (counted); a resume pushes the
 * generator's node on the running thread's stack of each profile in `resume_profiles`
 * (weak references, set by set_resume_profiles) that times calls there, and records what
 * it pushed in the thread's running list; a yield, return or unwind pops it.  The
 * running list is flat, to make no object per resume: the pushed (stack, node) pairs,
 * then the code, then their number. */
#if PY_VERSION_HEX >= 0x030C0000

static PyObject *resume_profiles; /* a tuple of weak references to ProfileContexts */
static PyObject *disable;         /* sys.monitoring.DISABLE */
static PyObject *str_resuming_stack, *str_generator_node, *str_running_key, *str_ours, *str_dunder_name;

static int
counted(PyCodeObject *code)
{
    if (!(code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR))) {
        return 0;
    }
    PyObject *consts = code->co_consts;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(consts); i++) {
        PyTypeObject *kind = Py_TYPE(PyTuple_GET_ITEM(consts, i));
        if (kind != &PyUnicode_Type && kind != &PyBytes_Type && kind != &PyLong_Type && kind != &PyFloat_Type
            && kind != &PyComplex_Type && kind != &PyBool_Type && kind != Py_TYPE(Py_None)
            && kind != Py_TYPE(Py_Ellipsis) && kind != &PyTuple_Type && kind != &PyFrozenSet_Type
            && kind != &PyCode_Type) {
            return 1; /* an object no compiler makes: a hook of a twin's call sites */
        }
    }
    PyObject *names = code->co_names;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        if (PyUnicode_Tailmatch(name, str_ours, 0, PY_SSIZE_T_MAX, -1) == 1) {
            return 1; /* switched code */
        }
    }
    return 0;
}

/* The running thread's running list (borrowed), made the first time. */
static PyObject *
running_list(void)
{
    PyObject *dict = PyThreadState_GetDict();
    if (dict == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "no thread state dict");
        return NULL;
    }
    PyObject *running = PyDict_GetItemWithError(dict, str_running_key);
    if (running == NULL && !PyErr_Occurred()) {
        running = PyList_New(0);
        if (running == NULL || PyDict_SetItem(dict, str_running_key, running) < 0) {
            Py_XDECREF(running);
            return NULL;
        }
        Py_DECREF(running); /* the dict holds it */
    }
    return running;
}

/* The profile's stack in this thread if it times calls here (a new reference), else
 * None: the stack the hooks cached, when a profiled call runs in this thread, else
 * ProfileContext._resuming_stack(). */
static PyObject *
resuming_stack(PyObject *profile)
{
    if (PyObject_TypeCheck(profile, &RecordingType)) {
        Recording *r = (Recording *)profile;
        if (r->stack != NULL && r->thread == PyThreadState_GetID(PyThreadState_Get())
            && PyList_GET_SIZE(r->stack) > 1) {
            return Py_NewRef(r->stack);
        }
    }
    PyObject *stack = PyObject_CallMethodNoArgs(profile, str_resuming_stack);
    if (stack != NULL && stack != Py_None && (!PyList_CheckExact(stack) || PyList_GET_SIZE(stack) < 1)) {
        PyErr_SetString(PyExc_TypeError, "_resuming_stack() must return None or a list holding the root");
        Py_CLEAR(stack);
    }
    return stack;
}

static PyObject *
weak_target(PyObject *ref) /* a new reference, or None */
{
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *target;
    if (PyWeakref_GetRef(ref, &target) < 0) {
        return NULL;
    }
    return target == NULL ? Py_NewRef(Py_None) : target;
#else
    return Py_NewRef(PyWeakref_GetObject(ref));
#endif
}

/* Push the generator's node in each profile; -1 on an error. */
static int
push(PyCodeObject *code)
{
    PyObject *running = running_list();
    if (running == NULL) {
        return -1;
    }
    PyObject *module = NULL;
    Py_ssize_t pushed = 0;
    PyObject *profiles = Py_NewRef(resume_profiles);
    int failed = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(profiles) && !failed; i++) {
        PyObject *profile = weak_target(PyTuple_GET_ITEM(profiles, i));
        if (profile == NULL) {
            failed = 1;
            break;
        }
        PyObject *stack = profile == Py_None ? Py_NewRef(Py_None) : resuming_stack(profile);
        if (stack == NULL) {
            failed = 1;
        }
        else if (stack != Py_None) {
            if (module == NULL) {
                PyObject *globals = PyEval_GetGlobals(); /* the generator's (borrowed) */
                module = globals == NULL ? NULL : PyDict_GetItemWithError(globals, str_dunder_name);
                if (module == NULL && PyErr_Occurred()) {
                    failed = 1;
                }
                module = Py_NewRef(module != NULL && PyUnicode_CheckExact(module) && PyUnicode_GET_LENGTH(module) > 0
                                   ? module : Py_None);
            }
            PyObject *parent = PyList_GET_ITEM(stack, PyList_GET_SIZE(stack) - 1);
            PyObject *node = NULL;
            if (!failed && PyObject_TypeCheck(parent, &NodeType)) {
                node = PyDict_GetItemWithError(((Node *)parent)->keyed, code->co_qualname);
                if (node != NULL) {
                    PyObject *known = ((Node *)node)->key_module;
                    if (known == module
                        || (PyUnicode_CheckExact(known) && PyUnicode_CheckExact(module)
                            && PyUnicode_Compare(known, module) == 0)) {
                        Py_INCREF(node);
                    }
                    else {
                        node = NULL;
                    }
                }
                if (node == NULL && !PyErr_Occurred()) {
                    PyObject *name = module == Py_None ? Py_NewRef(code->co_qualname)
                                                       : PyUnicode_FromFormat("%U.%U", module, code->co_qualname);
                    if (name != NULL) {
                        PyObject *args[] = {profile, parent, name, (PyObject *)code, code->co_qualname, module};
                        node = PyObject_VectorcallMethod(str_generator_node, args,
                                                         6 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
                        Py_DECREF(name);
                        if (node != NULL && !PyObject_TypeCheck(node, &NodeType)) {
                            PyErr_SetString(PyExc_TypeError, "_generator_node() must return a Node");
                            Py_CLEAR(node);
                        }
                    }
                }
            }
            else if (!failed) {
                PyErr_SetString(PyExc_TypeError, "a profile's stack holds Nodes only");
            }
            if (node == NULL || PyList_Append(stack, node) < 0 || PyList_Append(running, stack) < 0
                || PyList_Append(running, node) < 0) {
                failed = 1; /* (what was appended stays: the pops find it as it is) */
            }
            else {
                pushed++;
                ((Node *)node)->start = now();
            }
            Py_XDECREF(node);
        }
        Py_XDECREF(stack);
        Py_DECREF(profile);
    }
    Py_DECREF(profiles);
    Py_XDECREF(module);
    PyObject *count = PyLong_FromSsize_t(pushed);
    if (count == NULL || PyList_Append(running, (PyObject *)code) < 0 || PyList_Append(running, count) < 0) {
        failed = 1;
    }
    Py_XDECREF(count);
    return failed ? -1 : 0;
}

/* Pop what the push of this frame pushed, counted and timed; -1 on an error. */
static int
pop(PyCodeObject *code)
{
    long long end = now();
    PyObject *running = running_list();
    if (running == NULL) {
        return -1;
    }
    Py_ssize_t n = PyList_GET_SIZE(running);
    if (n < 2 || PyList_GET_ITEM(running, n - 2) != (PyObject *)code) {
        return 0; /* a frame that was running before the profile began */
    }
    Py_ssize_t pushed = PyLong_AsSsize_t(PyList_GET_ITEM(running, n - 1));
    if (pushed < 0 || 2 * pushed > n - 2) {
        return pushed == -1 && PyErr_Occurred() ? -1 : 0;
    }
    Py_ssize_t first = n - 2 - 2 * pushed;
    for (Py_ssize_t i = first; i < n - 2; i += 2) {
        PyObject *stack = PyList_GET_ITEM(running, i);
        Node *node = (Node *)PyList_GET_ITEM(running, i + 1);
        Py_ssize_t depth = PyList_GET_SIZE(stack);
        if (depth > 0 && PyList_GET_ITEM(stack, depth - 1) == (PyObject *)node) {
            node->total += end - node->start;
            node->calls += 1;
            Py_SET_SIZE((PyVarObject *)stack, depth - 1); /* as ended() pops */
            Py_DECREF(node);
        }
    }
    return PyList_SetSlice(running, first, n, NULL);
}

/* A callback's error must not reach the program: it is reported as unraisable. */
static PyObject *
callback_done(int failed, PyObject *callback)
{
    if (failed) {
        PyErr_WriteUnraisable(callback);
    }
    Py_RETURN_NONE;
}

static PyObject *
resumes_resumed(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || !PyCode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "resumed(code, offset)");
        return NULL;
    }
    if (!counted((PyCodeObject *)args[0])) {
        return Py_NewRef(disable);
    }
    return callback_done(push((PyCodeObject *)args[0]) < 0, args[0]);
}

static PyObject *
resumes_thrown_into(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || !PyCode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "thrown_into(code, offset, exception)");
        return NULL;
    }
    if (!counted((PyCodeObject *)args[0])) {
        Py_RETURN_NONE; /* (PY_THROW cannot be disabled) */
    }
    return callback_done(push((PyCodeObject *)args[0]) < 0, args[0]);
}

static PyObject *
resumes_suspended(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || !PyCode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "suspended(code, offset, value)");
        return NULL;
    }
    if (!counted((PyCodeObject *)args[0])) {
        return Py_NewRef(disable);
    }
    return callback_done(pop((PyCodeObject *)args[0]) < 0, args[0]);
}

static PyObject *
resumes_unwound(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || !PyCode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "unwound(code, offset, exception)");
        return NULL;
    }
    if (!(((PyCodeObject *)args[0])->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR))) {
        Py_RETURN_NONE; /* (PY_UNWIND cannot be disabled: every frame's) */
    }
    return callback_done(pop((PyCodeObject *)args[0]) < 0, args[0]);
}

static PyObject *
resumes_set_profiles(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyTuple_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "set_resume_profiles(weak references: tuple, DISABLE)");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args[0]); i++) {
        if (!PyWeakref_CheckRef(PyTuple_GET_ITEM(args[0], i))) {
            PyErr_SetString(PyExc_TypeError, "set_resume_profiles() takes weak references to profiles");
            return NULL;
        }
    }
    Py_XSETREF(resume_profiles, Py_NewRef(args[0]));
    Py_XSETREF(disable, Py_NewRef(args[1]));
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"resumed", (PyCFunction)(void (*)(void))resumes_resumed, METH_FASTCALL,
     "resumed(code, offset)\n--\n\nPY_START, PY_RESUME: a counted generator's node is pushed."},
    {"thrown_into", (PyCFunction)(void (*)(void))resumes_thrown_into, METH_FASTCALL,
     "thrown_into(code, offset, exception)\n--\n\nPY_THROW: a counted generator's node is pushed."},
    {"suspended", (PyCFunction)(void (*)(void))resumes_suspended, METH_FASTCALL,
     "suspended(code, offset, value)\n--\n\nPY_YIELD, PY_RETURN: its node is popped, counted and timed."},
    {"unwound", (PyCFunction)(void (*)(void))resumes_unwound, METH_FASTCALL,
     "unwound(code, offset, exception)\n--\n\nPY_UNWIND: its node is popped, counted and timed."},
    {"set_resume_profiles", (PyCFunction)(void (*)(void))resumes_set_profiles, METH_FASTCALL,
     "set_resume_profiles(refs, disable)\n--\n\nThe profiles (weak references) the callbacks push on."},
    {NULL},
};
#else
static PyMethodDef module_methods[] = {{NULL}};
#endif

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "cassette_hook.contexts._recording",
    .m_doc = "ProfileContext's hooks in C (optional; _calltree.py has them in Python).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC
PyInit__recording(void)
{
    str_thread_stack = PyUnicode_InternFromString("_thread_stack");
    str_child = PyUnicode_InternFromString("_child");
    str_module = PyUnicode_InternFromString("__module__");
    str_name = PyUnicode_InternFromString("name");
    if (str_thread_stack == NULL || str_child == NULL || str_module == NULL || str_name == NULL) {
        return NULL;
    }
#if PY_VERSION_HEX >= 0x030C0000
    str_resuming_stack = PyUnicode_InternFromString("_resuming_stack");
    str_generator_node = PyUnicode_InternFromString("_generator_node");
    str_running_key = PyUnicode_InternFromString("cassette_hook.contexts._recording.running");
    str_ours = PyUnicode_InternFromString("__cassette_hook_");
    str_dunder_name = PyUnicode_InternFromString("__name__");
    resume_profiles = PyTuple_New(0);
    disable = Py_NewRef(Py_None);
    if (str_resuming_stack == NULL || str_generator_node == NULL || str_running_key == NULL || str_ours == NULL
        || str_dunder_name == NULL || resume_profiles == NULL) {
        return NULL;
    }
#endif
    /* object.__new__, so that object.__new__(cls) -- how a context is copied -- works for
     * a subclass, as it does for any context. */
    RecordingType.tp_new = PyBaseObject_Type.tp_new;
    if (PyType_Ready(&NodeType) < 0 || PyType_Ready(&RecordingType) < 0 || PyType_Ready(&ImportTimerType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(module, "Node", (PyObject *)&NodeType) < 0
        || PyModule_AddObjectRef(module, "Recording", (PyObject *)&RecordingType) < 0
        || PyModule_AddObjectRef(module, "ImportTimer", (PyObject *)&ImportTimerType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
