/* The hot path of cassette_hook in C: what rewritten call sites run.
 *
 * Three Python modules hold the reference version of each part, and use this one when
 * it is built (_native.py; CASSETTE_HOOK_PURE_PYTHON=1 keeps the Python ones):
 * callsite.py (resolve, call, the overdubbed call's steps), dispatch.py (the walk of a
 * generic's method cache) and tagging.py (a wrapper's fields, tag/untag/metadata).  Two
 * reasons, both measured (docs/performance.md):
 *
 *   - Speed.  resolve() runs at every call site under a context; in C its fast case is a
 *     context-variable read, one dict lookup and three pointer compares.
 *   - Frames.  A C function adds no Python frame, so a callee that call() calls has the
 *     program's frame as its f_back: no frame of ours between the program's frames.
 *
 * resolve() returns what the program's frame then calls: under hooks, a Site, which runs
 * callsite.site's steps here, so that the hooks and the callee have the program's frame
 * below them.  A Python callee called from C runs in a new evaluation loop, on the C stack
 * (and, from 3.12 on, against CPython's C recursion limit of about 1,500-8,000 levels),
 * where the program's own Python-to-Python call would not: so a thread runs only so many
 * Python callees through Sites at once, and deeper recursion gets callsite.site's Python
 * closure (see SITE_BUDGET).  call() runs the same steps where the caller is C already
 * (3.10 call sites, operator sites through a partial, callbacks from C code).  An
 * overload's call of bodies.recurse runs here too, under the same kind of budget
 * (RECURSE_BUDGET), so that the callee has the overload's frame below it.
 *
 * Everything rare is delegated back to the Python modules (configure() and
 * configure_tagging() hand it over): a Python frame there is only ever on the stack
 * while it works, never under a callee, except where the docstrings of those functions
 * say so.
 *
 * Entry, Plan and Tag are Python classes with __slots__; their slots are read here at the
 * offsets of their member descriptors, checked against the exact class.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <structmember.h> /* PyMemberDef (in Python.h from 3.12 on) */

/* Per-thread state (two variables, read at every hooked call).  On ELF the default model
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

/* What configure() was given. */

/* The ContextVar of the stack: until bind() hands over _context's, one of this module's
 * own that is never set, so that the hot path called before the runtime has configured
 * it (only cassette_hook's modules call it then, but the module is importable) sees no
 * context, and runs what it is given as the plain program would, rather than reading a
 * NULL variable; everything else the hot path reads it reaches from an active entry. */
static PyObject *active;
static PyTypeObject *entry_type, *plan_type, *id_table_type; /* id_table_type: _weakid.WeakIdCache */
static Py_ssize_t id_table_values, id_table_refs;
static Py_ssize_t entry_ctx, entry_plan, entry_below, entry_direct_twins;
static Py_ssize_t plan_fast, plan_enters, plan_fallback, plan_prehook_call, plan_posthook_call, plan_raisehook_call,
    plan_overdub_call, plan_overdub, plan_execute, plan_twins, plan_operators, plan_constructors, plan_constructions,
    plan_modules, plan_shared;
static PyObject *resolve_direct;     /* (plan, f) -> what to call past the table of direct twins, or None */
static PyObject *site_code, *site_globals, *site_qualname; /* callsite.site's closure, to make here */
static int site_entry_first;         /* its free variables are (entry, f), not (f, entry) */
static PyObject *call_primitive;     /* (f, args, kwargs): a primitive that needs emulating */
static PyObject *special;            /* id(builtin) -> handler: the primitives emulated */
static PyObject *preparers;          /* id(builtin) -> prepare(args, kwargs) -> (args, kwargs) */
static PyObject *indirect_names;     /* names of builtin methods that may be emulated */
static PyObject *indirect_callers;   /* builtin -> what a call site calls for it (callsite.callable_for) */
static PyTypeObject *method_wrapper_type; /* a C slot bound to an object (3.13 does not export it) */
static PyObject *present;            /* (f, args) -> (f, args): how hooks see a builtin method */
static PyObject *overload_dispatchers[2]; /* what generics.overdub and execute call: Dispatchers */
static PyObject *overload_defaults[2]; /* their defaults: no overload */
static PyObject *fallback_dispatcher;  /* what generics.fallback calls: a Dispatcher */
static PyObject *fallback_default;     /* its default: call the primitive */
/* A set of objects by address, in an open-addressing table: asked at every operator
 * call, which a set of ints would answer only after making an int of the address. */
#define ADDRESS_SET_SIZE 128
typedef struct {
    const void *slots[ADDRESS_SET_SIZE];
} AddressSet;

static PyObject *plain_operators;      /* operators.PLAIN_OPERATORS: ids, kept as addresses in: */
static AddressSet plain_operator_set;
static PyObject *c_operands;           /* operators.C_OPERANDS: classes */
static PyObject *plain_value(PyObject *x); /* tagging._plain (in the tagging part below) */
static int is_tagging(PyObject *ctx);      /* ctx.tag is not None (in the tagging part below) */
static PyObject *runnable;           /* (plan, f) -> what runs f's body, or None */
static PyObject *without_body;       /* (entry, f, args, kwargs): operator protocol or fallback */
static PyObject *python_call_ex;     /* callsite.call_ex: a star call call_ex() does not take */
static PyObject *operator_dunders;   /* operators.DUNDERS: id(callee) -> what operators.body looks up, in: */
/* One callee operators.body knows, the special methods it looks up, (operand index, name),
 * and how it runs the one it finds when that is all it runs (see operators.DUNDERS). */
enum {RUN_BY_BODY, RUN_FIRST, RUN_TRUTH, RUN_ITERATOR, RUN_FORWARD, RUN_COMPARE};
typedef struct {
    const void *op;
    int n;
    int index[3];
    PyObject *name[3]; /* interned, owned */
    int run;
    PyObject *symbol;  /* the operator's symbol, for its errors (owned) */
} OperatorDunders;
static OperatorDunders dunder_table[ADDRESS_SET_SIZE]; /* by address, as an AddressSet */
static PyObject *operator_body;      /* operators.body: (op, args) -> its Python dunders, or None */
static PyObject *seen_below;         /* (hook, args, kwargs): a hook run under the contexts below */
static PyObject *overdub_instead;    /* generics.OverdubInstead */
static PyObject *construct;          /* bodies.construct(cls, *args, **kwargs): type.__call__ overdubbed */
static PyObject *object_new;         /* object.__new__ */
static PyObject *str_twin, *str_new, *str_init, *str_tag, *str_call, *str_runs_module;
static PyObject *one;                /* the int 1 */
static inline PyObject *own_off(PyObject *out); /* out, the traceback of an error cleaned of ours */

#define SLOT(obj, offset) (*(PyObject **)((char *)(obj) + (offset)))
#define ARGS_ON_STACK 12

static int
slot_offset(PyTypeObject *type, const char *name, Py_ssize_t *offset)
{
    PyObject *descr = PyDict_GetItemString(type->tp_dict, name);
    if (descr == NULL || Py_TYPE(descr) != &PyMemberDescr_Type) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not a slot", type->tp_name, name);
        return -1;
    }
    *offset = ((PyMemberDescrObject *)descr)->d_member->offset;
    return 0;
}

/* 0 if a function of ours that takes its callee first got one, else -1 and Python's error. */
static int
first_argument(Py_ssize_t nargs, const char *function, const char *name)
{
    if (nargs >= 1) {
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "%s() missing 1 required positional argument: '%s'", function, name);
    return -1;
}

static PyObject *
slot(PyObject *obj, Py_ssize_t offset, const char *name)
{
    PyObject *value = SLOT(obj, offset);
    if (value == NULL) {
        PyErr_Format(PyExc_AttributeError, "%s has no %s", Py_TYPE(obj)->tp_name, name);
    }
    return value; /* borrowed */
}

/* A _weakid.WeakIdCache's dict id -> value (borrowed), read at its slot. */
static PyObject *
values_of(PyObject *cache)
{
    if (Py_TYPE(cache) != id_table_type) {
        PyErr_Format(PyExc_TypeError, "cassette_hook: a %.200s is not a WeakIdCache", Py_TYPE(cache)->tp_name);
        return NULL;
    }
    return slot(cache, id_table_values, "values");
}

/* The tables of twins are dicts keyed by id (_weakid.WeakIdCache), and a lookup makes an int
 * of the address and hashes it: an allocation and a free per call, a quarter of what a
 * context that overloads nothing adds to a call.  The last lookups are remembered by
 * address, with the table's version: a dict's ma_version_tag changes at every change of
 * what it maps, and no two dicts share one (a process-wide counter), so an entry whose
 * version is the table's still says what the table says, borrowed from it.  (A callee
 * that dies leaves its table first: WeakIdCache's callback, before the address is free.)
 * The field is deprecated from 3.12 on, for want of users, and still kept through 3.13;
 * 3.14 has none, and the tables are watched instead (dict_version below). */
typedef struct {
    PyObject *table, *f, *found; /* found: borrowed from the table, NULL for "not there" */
    uint64_t version;
} TwinMemo;

#define TWIN_MEMO 256 /* a power of two */
static TwinMemo twin_memo[TWIN_MEMO];

#if PY_VERSION_HEX >= 0x030E0000
/* 3.14+: a dict watcher (3.12's API) sees every change of the tables it watches -- an item
 * added, replaced or deleted, a clear, a clone, the table's end -- and each bumps one
 * counter, which stands for the version of every table: an entry made at the counter's
 * value still says what its table says while the counter has not moved.  A change of any
 * table forgets every entry, but the tables change when twins are made or dropped, not
 * per call.  A table is watched from its first lookup through the memo (twin_memo_watch),
 * before the entry is made.  (A dealloc'd table's address may be taken by a new dict: its
 * end bumped the counter.) */
static uint64_t twin_tables_version = 1;
static int twin_tables_watcher = -1;

static int
twin_table_changed(PyDict_WatchEvent event, PyObject *dict, PyObject *key, PyObject *new_value)
{
    (void)event, (void)dict, (void)key, (void)new_value;
    twin_tables_version++;
    return 0;
}

static inline uint64_t
dict_version(PyObject *dict)
{
    (void)dict;
    return twin_tables_version;
}

/* Watch table before its version is read for a new entry; 0, or -1 with an error set. */
static inline int
twin_memo_watch(PyObject *table)
{
    return PyDict_Watch(twin_tables_watcher, table);
}
#else
static inline int
twin_memo_watch(PyObject *table)
{
    (void)table; /* (ma_version_tag versions every dict) */
    return 0;
}

static inline uint64_t
dict_version(PyObject *dict)
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

/* table[id(f)], borrowed, or NULL (with an error set if there was one, or if table is
 * not a dict). */
static PyObject *
by_id(PyObject *table, PyObject *f)
{
    if (!PyDict_CheckExact(table)) {
        PyErr_Format(PyExc_TypeError, "cassette_hook: a table by id is a %.200s, not a dict", Py_TYPE(table)->tp_name);
        return NULL;
    }
    uintptr_t address = (uintptr_t)f;
    TwinMemo *memo = &twin_memo[((address >> 4) ^ (address >> 12) ^ ((uintptr_t)table >> 4)) & (TWIN_MEMO - 1)];
    uint64_t version = dict_version(table);
    if (memo->f == f && memo->table == table && memo->version == version) {
        return memo->found;
    }
    if (twin_memo_watch(table) < 0) {
        return NULL;
    }
    version = dict_version(table); /* (watched from here on) */
    PyObject *key = PyLong_FromVoidPtr(f);
    if (key == NULL) {
        return NULL;
    }
    PyObject *found = PyDict_GetItemWithError(table, key);
    Py_DECREF(key);
    if (found != NULL || !PyErr_Occurred()) {
        *memo = (TwinMemo){table, f, found, version};
    }
    return found;
}

/* The twin of function f in table (a dict id -> (twin, code, defaults, kwdefaults)), if
 * it is current: f still has the code and defaults it was made from.  1 and a new
 * reference to the twin, 0 if there is none, 2 if the table says None (a direct table's
 * "not direct"), -1 on error.  A class may be in a direct table too, as (constructor,
 * None, None, None).  (A new reference: the caller may allocate while it holds the twin,
 * a collection may run in an allocation on 3.10 and 3.11, and a full one empties the
 * twin tables -- plan's _drop_twins_before_full_collections -- which may hold the only
 * other reference.) */
static int
current_twin(PyObject *table, PyObject *f, PyObject **twin)
{
    int function = PyFunction_Check(f);
    if (!function && !PyType_Check(f)) {
        return 0;
    }
    PyObject *found = by_id(table, f);
    if (found == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    if (found == Py_None) {
        return 2;
    }
    if (!function) {
        if (PyTuple_GET_ITEM(found, 1) != Py_None) {
            return 0;
        }
        *twin = Py_NewRef(PyTuple_GET_ITEM(found, 0));
        return 1;
    }
    PyObject *defaults = PyFunction_GET_DEFAULTS(f), *kwdefaults = PyFunction_GET_KW_DEFAULTS(f);
    if (PyTuple_GET_ITEM(found, 1) == PyFunction_GET_CODE(f)
        && PyTuple_GET_ITEM(found, 2) == (defaults ? defaults : Py_None)
        && PyTuple_GET_ITEM(found, 3) == (kwdefaults ? kwdefaults : Py_None)) {
        *twin = Py_NewRef(PyTuple_GET_ITEM(found, 0));
        return 1;
    }
    return 0;
}

/* A context is popped while its hooks and overloads run (calls they make are seen by the
 * contexts below it, never by it).  The Python reference sets the stack's variable to the
 * entry below and resets it after: two context-variable writes, each a new HAMT and a
 * token, and the variable's read cache lost twice; about 40% of what a counting prehook
 * costs (bench_tools' "count" row, 3.12).  Here the variable keeps its value, and this
 * thread records instead that while it holds `from`, the running code's innermost entry
 * is `to`, the one below.  Every reader of the stack goes through stack_top() (Python's
 * through _context.top), and whatever sets the variable meanwhile (a `with ctx:` in a
 * hook, the Python closure's pops) composes with the record: another value is read as it
 * is.  Like the variable, the record covers everything the hook runs on this thread,
 * asyncio tasks it runs included (docs/internals.md says where the two differ). */
typedef struct {
    PyObject *from, *to; /* strong references, or NULL: no context popped */
    PyObject *entry;     /* the popped entry (borrowed: the caller of run_popped holds it) */
} Popped;

static THREAD_LOCAL Popped popped;

/* *top: what the stack's variable holds, read through this thread's Popped record (a new
 * reference: an Entry, None, or what else the variable was set to).  -1 on error. */
static int
stack_top(PyObject **top)
{
    if (PyContextVar_Get(active, NULL, top) < 0) {
        return -1;
    }
    Popped *now = &popped;
    if (*top == now->from && *top != NULL) {
        Py_SETREF(*top, Py_NewRef(now->to));
    }
    return 0;
}

/* *entry: the innermost active entry (a new reference), or NULL when no context is
 * active.  -1 on error. */
static int
active_entry(PyObject **entry)
{
    if (stack_top(entry) < 0) {
        return -1;
    }
    if (*entry == Py_None) {
        Py_CLEAR(*entry);
    }
    else if (*entry != NULL && Py_TYPE(*entry) != entry_type) {
        PyErr_SetString(PyExc_TypeError, "cassette_hook: the context stack holds something else than an Entry");
        Py_CLEAR(*entry);
        return -1;
    }
    return 0;
}

/* callsite.site(entry, f): its closure, made as MAKE_FUNCTION would make it (calling site()
 * from C would cost a Python frame that CPython cannot inline). */
static PyObject *
make_site(PyObject *entry, PyObject *f)
{
    PyObject *closure = PyTuple_New(2);
    if (closure == NULL) {
        return NULL;
    }
    PyObject *first = PyCell_New(site_entry_first ? entry : f), *second = PyCell_New(site_entry_first ? f : entry);
    if (first == NULL || second == NULL) {
        Py_XDECREF(first);
        Py_XDECREF(second);
        Py_DECREF(closure);
        return NULL;
    }
    PyTuple_SET_ITEM(closure, 0, first);
    PyTuple_SET_ITEM(closure, 1, second);
    PyObject *function = PyFunction_NewWithQualName(site_code, site_globals, site_qualname);
    if (function != NULL && PyFunction_SetClosure(function, closure) < 0) {
        Py_CLEAR(function);
    }
    Py_DECREF(closure);
    return function;
}

/* A builtin function or a builtin method bound (len, items.append): PyCFunction_Type, or
 * PyCMethod_Type, its subclass with the same layout, whose objects (type(...).__name__
 * 'builtin_method') are the bound methods that take their defining class (METH_METHOD:
 * re.Pattern.match, array.array.extend).  Every test of a callee's kind asks this, not
 * for the exact type: a builtin_method taken for something else went to Python at every
 * call (callsite._resolve_direct), a microsecond each. */
static inline int
is_builtin(PyObject *f)
{
    PyTypeObject *kind = Py_TYPE(f);
    return kind == &PyCFunction_Type || kind == &PyCMethod_Type;
}

/* primitives.INDIRECT_NAMES as C strings (filled by configure()): a builtin of one of
 * these names may take callbacks, and is not called directly (callsite._resolve_direct).
 * Asked at every builtin call under a plan that observes nothing, so kept in a hash table
 * (a scan of the 19 names was 7% of a null context's time on deepcopy). */
#define MAX_INDIRECT_NAMES 64
#define INDIRECT_SLOTS (2 * MAX_INDIRECT_NAMES) /* at most half full, so probes end */
static struct {
    uint32_t hash;
    char *name; /* owned; NULL: an empty slot */
} indirect_names_by_hash[INDIRECT_SLOTS];

static uint32_t
name_hash(const char *name) /* FNV-1a */
{
    uint32_t hash = 2166136261u;
    for (; *name != '\0'; name++) {
        hash = (hash ^ (unsigned char)*name) * 16777619u;
    }
    return hash;
}

static int
indirect_name(const char *name)
{
    uint32_t hash = name_hash(name);
    for (uint32_t i = hash % INDIRECT_SLOTS; indirect_names_by_hash[i].name != NULL; i = (i + 1) % INDIRECT_SLOTS) {
        if (indirect_names_by_hash[i].hash == hash && strcmp(name, indirect_names_by_hash[i].name) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Has the builtin function or bound builtin method the name of one that may take callbacks? */
static int
has_indirect_name(PyObject *builtin)
{
    return indirect_name(((PyCFunctionObject *)builtin)->m_ml->ml_name);
}

static int
fill_indirect_names(PyObject *names)
{
    for (int i = 0; i < INDIRECT_SLOTS; i++) {
        PyMem_Free(indirect_names_by_hash[i].name);
        indirect_names_by_hash[i].name = NULL;
    }
    Py_ssize_t count = 0;
    PyObject *iterator = PyObject_GetIter(names), *name;
    if (iterator == NULL) {
        return -1;
    }
    while ((name = PyIter_Next(iterator)) != NULL) {
        const char *utf8 = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
        char *copy = utf8 && count < MAX_INDIRECT_NAMES ? PyMem_Malloc(strlen(utf8) + 1) : NULL;
        Py_DECREF(name);
        if (copy == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_ValueError, "configure(): indirect_names must be at most 64 strs");
            }
            break;
        }
        strcpy(copy, utf8);
        uint32_t hash = name_hash(copy), i = hash % INDIRECT_SLOTS;
        while (indirect_names_by_hash[i].name != NULL) {
            i = (i + 1) % INDIRECT_SLOTS;
        }
        indirect_names_by_hash[i].hash = hash;
        indirect_names_by_hash[i].name = copy;
        count++;
    }
    Py_DECREF(iterator);
    return PyErr_Occurred() ? -1 : 0;
}

/* The C methods among indirect_callers' keys (list.sort, re.Pattern.sub), by the method
 * definition their bound forms share: items.sort is list.sort bound, whatever the list. */
#define MAX_INDIRECT_METHODS 8
static struct {
    PyMethodDef *method;
    PyObject *caller;
} indirect_methods[MAX_INDIRECT_METHODS];

static int
fill_indirect_methods(PyObject *callers)
{
    Py_ssize_t pos = 0, count = 0;
    PyObject *key, *value;
    for (int i = 0; i < MAX_INDIRECT_METHODS; i++) {
        Py_CLEAR(indirect_methods[i].caller);
        indirect_methods[i].method = NULL;
    }
    while (PyDict_Next(callers, &pos, &key, &value)) {
        if (Py_TYPE(key) != &PyMethodDescr_Type) {
            continue;
        }
        if (count == MAX_INDIRECT_METHODS) {
            PyErr_SetString(PyExc_ValueError, "configure(): indirect_callers holds more than 8 methods");
            return -1;
        }
        indirect_methods[count].method = ((PyMethodDescrObject *)key)->d_method;
        indirect_methods[count++].caller = Py_NewRef(value);
    }
    return 0;
}

static PyObject *
method_caller(PyMethodDef *method)
{
    for (int i = 0; i < MAX_INDIRECT_METHODS && indirect_methods[i].method != NULL; i++) {
        if (indirect_methods[i].method == method) {
            return indirect_methods[i].caller;
        }
    }
    return NULL;
}

static PyObject *body_of(PyObject *plan, PyObject *callee);

/* The Python __call__ of an instance of kind, as the interpreter finds it (along the MRO),
 * or NULL: a callable instance's body (borrowed). */
static PyObject *
python_call(PyTypeObject *kind)
{
    if (!PyType_HasFeature(kind, Py_TPFLAGS_HEAPTYPE)) {
        return NULL;
    }
    PyObject *call = _PyType_Lookup(kind, str_call);
    return call != NULL && PyFunction_Check(call) ? call : NULL;
}

/* The twin of call (an instance's python_call) bound to the instance, or None. */
static PyObject *
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

static int shared_twin(PyObject *plan, PyObject *f, int enter, PyObject **twin);
static PyTypeObject ForgetType;

/* What a call site may call in place of f without running hooks: 1 and a new reference
 * in *run (a direct twin, or what callsite._resolve_direct makes of f), 0 when the call
 * must be overdubbed (callsite.site), -1 on error.  sole: the caller's reference to f is
 * its only one, dropped once this returns (see resolve). */
static int
direct_run(PyObject *entry, PyObject *f, PyObject **run, int sole)
{
    PyObject *twins = slot(entry, entry_direct_twins, "direct_twins"), *twin = NULL;
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
    PyObject *plan = slot(entry, entry_plan, "plan");
    if (plan == NULL) {
        return -1;
    }
    if (SLOT(plan, plan_fast) != Py_True && !PyFunction_Check(f) && !PyType_Check(f)) { /* only these may be direct */
        return 0;
    }
    /* (from here on the plan is fast, or f a Python function or class) */
    if ((is_builtin(f) && !has_indirect_name(f))
        || (Py_TYPE(f) == &PyMethodDescr_Type /* (unbound, from a method site) */
            && !indirect_name(((PyMethodDescrObject *)f)->d_method->ml_name))) {
        *run = Py_NewRef(f); /* C code with no callbacks: nothing to overdub */
        return 1;
    }
    if (Py_TYPE(f) == method_wrapper_type || Py_TYPE(f) == &PyWrapperDescr_Type) {
        *run = Py_NewRef(f); /* a C slot, bound or not (object.__init__ from super().__init__()): no body */
        return 1;
    }
    if (is_builtin(f) || Py_TYPE(f) == &PyMethodDescr_Type) {
        /* min, list.sort: a module's builtin or a class's method that takes callbacks */
        PyObject *caller = PyDict_GetItemWithError(indirect_callers, f);
        if (caller != NULL) {
            *run = Py_NewRef(caller);
            return 1;
        }
        if (PyErr_Occurred()) {
            return -1;
        }
        caller = is_builtin(f) ? method_caller(((PyCFunctionObject *)f)->m_ml) : NULL;
        if (caller != NULL) { /* items.sort: list.sort's caller, bound to the list (as call_primitive binds it) */
            *run = PyMethod_New(caller, PyCFunction_GET_SELF(f));
            return *run == NULL ? -1 : 1;
        }
    }
    if (PyType_Check(f) && SLOT(plan, plan_fast) == Py_True) { /* a class whose construction the plan made before */
        PyObject *constructors = slot(plan, plan_constructors, "constructors"), *constructor = NULL;
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
         * method is in no table; callsite._resolve_direct makes the twin the first time) */
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
    PyObject *call = PyType_Check(f) ? NULL : python_call(Py_TYPE(f));
    if (call != NULL) { /* a callable instance under a fast plan, as bodies.runnable makes it */
        *run = call_twin(plan, call, f);
        if (*run == NULL) {
            return -1;
        }
        if (*run != Py_None) {
            return 1;
        }
        Py_CLEAR(*run); /* (out of scope: resolve_direct's answer) */
    }
    if (PyFunction_Check(f) && SLOT(plan, plan_fast) == Py_True) {
        /* a function of a code the plan has made a twin of: a closure or lambda made anew;
         * one that only the site holds (a lambda called where it is made) dies with this
         * call, and is not entered in the table */
        int shared = shared_twin(plan, f, !sole, run);
        if (shared != 0) {
            return shared;
        }
    }
    PyObject *args[2] = {plan, f};
    *run = PyObject_Vectorcall(resolve_direct, args, 2, NULL);
    if (*run == NULL) {
        return -1;
    }
    if (*run == Py_None) {
        Py_CLEAR(*run);
        return 0;
    }
    return 1;
}

static PyObject *overdubbed_site(PyObject *entry, PyObject *f);
static PyObject *new_site(PyObject *entry, PyObject *f, vectorcallfunc run);

/* callsite.resolve under entry: a direct twin, or the overdubbed call (overdubbed_site). */
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

/* callsite.resolve: what a rewritten call site calls in place of f, which the site's frame
 * hands over taken off its stack, and replaces by what this returns. */
static PyObject *
resolve(PyObject *module, PyObject *f)
{
    return resolve_active(f);
}

/* A closure of callsite.site made for f takes f's names, as a twin and a Site have them:
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

/* callsite.resolve_star: resolve for a star call f(*args, **kwargs). */
static PyObject *
resolve_star(PyObject *module, PyObject *f)
{
    PyObject *run = resolve_active(f);
    if (run != NULL && PyFunction_Check(run) && PyFunction_GET_CODE(run) == site_code && take_names(run, f) < 0) {
        Py_CLEAR(run);
    }
    return run;
}

static int run_hook(PyObject *entry, PyObject *hook, PyObject *const *stack, Py_ssize_t nargs, PyObject *kwnames);

/* The most positional arguments enter takes the entering way (a call site hands it at most
 * rewrite._nullslot's MAX_ENTERED, which tests check is no more; more are resolved). */
#define ENTERED_MAX 15

static PyObject *enter_builtin(PyObject *entry, PyObject *ctx, PyObject *f, PyObject *const *args, Py_ssize_t nargs);

/* callsite.enter under entry: for a Python function or bound method with a twin, under
 * a plan that enters, the prehook run here, popped, and the twin (bound alike) returned
 * for the site's own frame to call; a builtin likewise (enter_builtin); anything else
 * resolve_in's. */
static PyObject *
enter_in(PyObject *entry, PyObject *f, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *plan = slot(entry, entry_plan, "plan"), *ctx = slot(entry, entry_ctx, "ctx");
    if (plan == NULL || ctx == NULL) {
        return NULL;
    }
    if (SLOT(plan, plan_enters) != Py_True || nargs > ENTERED_MAX) {
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
    int hooked = run_hook(entry, SLOT(plan, plan_prehook_call), stack, n, NULL);
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

/* _switch.enter: should a switched body of module (its name) run rewritten here and now?
 * Asked at every call of a function the import hook loaded while a context is active
 * anywhere; the plan remembers its answer per module (Plan.runs_module, asked here the
 * first time). */
static PyObject *
runs_here(PyObject *unused, PyObject *module)
{
    PyObject *entry, *known = NULL;
    if (active_entry(&entry) < 0) {
        return NULL;
    }
    if (entry == NULL) {
        Py_RETURN_FALSE;
    }
    PyObject *plan = slot(entry, entry_plan, "plan");
    PyObject *modules = plan ? slot(plan, plan_modules, "_modules") : NULL;
    if (modules != NULL) {
        known = Py_XNewRef(PyDict_GetItemWithError(modules, module));
        if (known == NULL && !PyErr_Occurred()) {
            known = PyObject_CallMethodOneArg(plan, str_runs_module, module);
        }
    }
    Py_DECREF(entry);
    return known;
}

/* The live entries, as _switch follows them (watch_live() hands them over): sets of weak
 * references whose callback is entry_gone, and the builtins module whose flags they
 * switch.  An entry's death runs no Python code here, so no interrupt can cut its
 * bookkeeping short or be swallowed in it, and the flags turn off the moment the last
 * entry that needs them goes. */
static PyObject *live_entries, *live_operator_entries, *flags_module, *str_active_flag, *str_operators_flag;

static PyObject *
entry_gone(PyObject *unused, PyObject *ref)
{
    PyObject *sets[2] = {live_entries, live_operator_entries}, *flags[2] = {str_active_flag, str_operators_flag};
    for (int i = 0; i < 2; i++) {
        if (sets[i] == NULL) {
            continue;
        }
        int found = PySet_Discard(sets[i], ref);
        if (found < 0 || (found && PySet_GET_SIZE(sets[i]) == 0 &&
                          PyObject_SetAttr(flags_module, flags[i], Py_False) < 0)) {
            return NULL;
        }
    }
    Py_RETURN_NONE;
}

static PyObject *
watch_live(PyObject *unused, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5 || !PySet_Check(args[0]) || !PySet_Check(args[1]) || !PyUnicode_Check(args[3]) ||
        !PyUnicode_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "watch_live(live, live_operators, builtins, active_name, operators_name)");
        return NULL;
    }
    Py_XSETREF(live_entries, Py_NewRef(args[0]));
    Py_XSETREF(live_operator_entries, Py_NewRef(args[1]));
    Py_XSETREF(flags_module, Py_NewRef(args[2]));
    Py_XSETREF(str_active_flag, Py_NewRef(args[3]));
    Py_XSETREF(str_operators_flag, Py_NewRef(args[4]));
    Py_RETURN_NONE;
}

/* Twins of switched code that skip the question (3.12+).  A twin of a switched function
 * runs the function's own code (a frame's code object is the program's), so the only way
 * it can tell it is a twin is what its frame reads: the builtins, which CPython takes
 * from the function object.  A twin gets a mirror of the builtins in which
 * __cassette_hook_twin__ is true, and its switch goes straight to the rewritten body.
 * The mirror must hold what the builtins hold, whatever the program does to them later
 * (a monkeypatched builtin, a name added): a dict watcher copies each change of the
 * builtins into it as it is made.  Before 3.12 there are no dict watchers, and twins ask
 * the question as the function does (mirror_builtins returns None). */
#if PY_VERSION_HEX >= 0x030C0000
static PyObject *mirrored = NULL;       /* the builtins dict a mirror follows (borrowed: it outlives us) */
static PyObject *mirror = NULL;         /* its mirror */
static PyObject *pinned = NULL;         /* the names whose values the mirror keeps its own */

static int
pin(void)
{
    return PyDict_Update(mirror, pinned);
}

/* Called before each change of the builtins: the same change to the mirror. */
static int
follow_builtins(PyDict_WatchEvent event, PyObject *dict, PyObject *key, PyObject *new_value)
{
    if (dict != mirrored || mirror == NULL) {
        return 0;
    }
    if (key != NULL && event != PyDict_EVENT_CLONED) {
        int is_pinned = PyDict_Contains(pinned, key);
        if (is_pinned != 0) {
            return is_pinned < 0 ? -1 : 0;
        }
    }
    switch (event) {
    case PyDict_EVENT_ADDED:
    case PyDict_EVENT_MODIFIED:
        return PyDict_SetItem(mirror, key, new_value);
    case PyDict_EVENT_DELETED:
        if (PyDict_DelItem(mirror, key) < 0) {
            if (!PyErr_ExceptionMatches(PyExc_KeyError)) {
                return -1;
            }
            PyErr_Clear();
        }
        return 0;
    case PyDict_EVENT_CLONED: /* an empty builtins updated from the dict `key` */
        return PyDict_Update(mirror, key) < 0 ? -1 : pin();
    case PyDict_EVENT_CLEARED: /* (CPython's shutdown, before it puts back its copy) */
        PyDict_Clear(mirror);
        return pin();
    default: /* PyDict_EVENT_DEALLOCATED: the interpreter is going */
        return 0;
    }
}

static PyObject *
mirror_of(PyObject *builtins, PyObject *pinned_values)
{
    if (mirror != NULL) {
        if (builtins != mirrored) {
            PyErr_SetString(PyExc_ValueError, "mirror_builtins: the builtins are mirrored already, another dict");
            return NULL;
        }
        return Py_NewRef(mirror);
    }
    int watcher = PyDict_AddWatcher(follow_builtins);
    if (watcher < 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    mirror = PyDict_Copy(builtins);
    pinned = PyDict_Copy(pinned_values);
    if (mirror == NULL || pinned == NULL || pin() < 0 || PyDict_Watch(watcher, builtins) < 0) {
        Py_CLEAR(mirror);
        Py_CLEAR(pinned);
        PyDict_ClearWatcher(watcher);
        return NULL;
    }
    mirrored = builtins;
    return Py_NewRef(mirror);
}
#endif

/* plan's: the mirror of builtins in which the names of pinned keep their values there,
 * made and watched at the first call (pinned is read then); None where it cannot be
 * (before 3.12, all dict watchers taken). */
static PyObject *
mirror_builtins(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyDict_CheckExact(args[0]) || !PyDict_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "mirror_builtins(builtins, pinned) takes two dicts");
        return NULL;
    }
#if PY_VERSION_HEX >= 0x030C0000
    return mirror_of(args[0], args[1]);
#else
    Py_RETURN_NONE;
#endif
}

/* plan's: a twin's frames read builtins (the mirror above) in place of its globals'. */
static PyObject *
set_builtins(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyFunction_Check(args[0]) || !PyDict_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "set_builtins(function, builtins) takes a function and a dict");
        return NULL;
    }
    Py_SETREF(((PyFunctionObject *)args[0])->func_builtins, Py_NewRef(args[1]));
    Py_RETURN_NONE;
}

/* callsite.enter: what an entering call site calls with its callee and positional
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

static PyObject *
enter(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    return own_off(enter_steps(module, args, nargs));
}

static PyObject *
as_tuple(PyObject *const *items, Py_ssize_t n)
{
    PyObject *tuple = PyTuple_New(n);
    if (tuple != NULL) {
        for (Py_ssize_t i = 0; i < n; i++) {
            PyTuple_SET_ITEM(tuple, i, Py_NewRef(items[i]));
        }
    }
    return tuple;
}

/* The keyword arguments of a vectorcall (their values follow the positional ones). */
static PyObject *
as_dict(PyObject *const *values, PyObject *kwnames)
{
    PyObject *dict = PyDict_New();
    if (dict == NULL || kwnames == NULL) {
        return dict;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
        if (PyDict_SetItem(dict, PyTuple_GET_ITEM(kwnames, i), values[i]) < 0) {
            Py_DECREF(dict);
            return NULL;
        }
    }
    return dict;
}

/* Call fn the Python way: fn([first, [second,]] args tuple, kwargs dict), from a
 * vectorcall's arguments (nargs positional, then the values of kwnames). */
static PyObject *
call_unpacked(PyObject *fn, PyObject *first, PyObject *second, PyObject *const *args, Py_ssize_t nargs,
              PyObject *kwnames)
{
    PyObject *tuple = as_tuple(args, nargs);
    if (tuple == NULL) {
        return NULL;
    }
    PyObject *dict = as_dict(args + nargs, kwnames);
    if (dict == NULL) {
        Py_DECREF(tuple);
        return NULL;
    }
    PyObject *out;
    if (first == NULL) {
        PyObject *stack[2] = {tuple, dict};
        out = PyObject_Vectorcall(fn, stack, 2, NULL);
    }
    else if (second == NULL) {
        PyObject *stack[3] = {first, tuple, dict};
        out = PyObject_Vectorcall(fn, stack, 3, NULL);
    }
    else {
        PyObject *stack[4] = {first, second, tuple, dict};
        out = PyObject_Vectorcall(fn, stack, 4, NULL);
    }
    Py_DECREF(tuple);
    Py_DECREF(dict);
    return out;
}

/* -- dispatch: dispatch.Generic's type cache, walked in C ------------------------------
 *
 * A Generic's cache is a tree of dicts, roots[len(args)][type(args[0])][type(args[1])]...
 * (dispatch._walk), ending in a method or a refiner.  A Dispatcher is what a Generic (a
 * functools.partial) calls: it walks the tree and calls the method, so a cached dispatch
 * costs no Python frame.  A Refiner is the cache for one argument position where the
 * type alone does not decide (an Is[...] pattern names an object of that type): keyed by
 * the argument's id when the patterns there are all Is[...], else by what the Python
 * spec's key() makes of it.  What is not cached yet is Python's: miss() and fill(). */

typedef struct {
    PyObject_HEAD
    PyObject *roots;  /* the Generic's type cache (a list, changed in place) */
    PyObject *miss;   /* Generic._miss: args tuple -> the entry it caches */
    vectorcallfunc vectorcall;
} Dispatcher;

#define REFINER_RECENT 16

typedef struct {
    PyObject_HEAD
    Py_ssize_t position;
    PyObject *ids;    /* the ids some Is[...] names here (a frozenset), or None: key_of decides */
    PyObject *key_of; /* _KeySpec.key */
    PyObject *fill;   /* args tuple -> the entry for a new key: a method or the next Refiner */
    PyObject *cache;  /* key -> entry */
    /* In front of ``cache`` for an ids refiner: the entry last found for an object at
     * this address (see refined()). */
    struct {
        PyObject *object; /* borrowed, compared by address only, never read */
        PyObject *entry;
    } recent[REFINER_RECENT];
    vectorcallfunc vectorcall;
} Refiner;

static PyTypeObject DispatcherType, RefinerType, TaggedFieldsType;

static int
no_keywords(const char *name, PyObject *kwargs)
{
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
        PyErr_Format(PyExc_TypeError, "%s() takes no keyword arguments", name);
        return 0;
    }
    return 1;
}

/* The cache's key for args under this refiner (a new reference). */
static PyObject *
refiner_key(Refiner *self, PyObject *const *args, Py_ssize_t n)
{
    if (self->position >= n) {
        PyErr_SetString(PyExc_TypeError, "cassette_hook: a refiner got too few arguments");
        return NULL;
    }
    PyObject *value = args[self->position];
    if (self->ids == Py_None) {
        return PyObject_CallOneArg(self->key_of, value);
    }
    PyObject *key = PyLong_FromVoidPtr(value);
    if (key == NULL) {
        return NULL;
    }
    int named = PySet_Contains(self->ids, key);
    if (named <= 0) {
        Py_DECREF(key);
        return named < 0 ? NULL : Py_NewRef(Py_None);
    }
    return key;
}

/* The method these arguments get (a new reference): the entry for their key, refined
 * further when it is the next Refiner.
 *
 * An ids refiner keys its cache by the argument's id, an int made and hashed at every
 * call; ``recent`` answers first, by the argument's address alone.  That is sound without
 * holding the argument: every object some Is[...] names is alive as long as the refiner
 * (registration holds it, and changing the methods makes new refiners), so an address
 * that held a named object still holds it, and one that held another object holds another
 * object again, which gets the same entry (the key of every unnamed object is None). */
static PyObject *
refined(Refiner *self, PyObject *const *args, Py_ssize_t n)
{
    PyObject *entry = NULL;
    size_t slot = 0;
    if (self->ids != Py_None && self->position < n) {
        uintptr_t address = (uintptr_t)args[self->position];
        slot = (size_t)((address >> 4) ^ (address >> 10)) % REFINER_RECENT;
        if (self->recent[slot].object == args[self->position] && self->recent[slot].entry != NULL) {
            entry = Py_NewRef(self->recent[slot].entry);
        }
    }
    if (entry == NULL) {
        PyObject *key = refiner_key(self, args, n);
        if (key == NULL) {
            return NULL;
        }
        entry = PyDict_GetItemWithError(self->cache, key);
        if (entry != NULL) {
            Py_INCREF(entry);
        }
        else if (!PyErr_Occurred()) {
            PyObject *tuple = as_tuple(args, n);
            entry = tuple ? PyObject_CallOneArg(self->fill, tuple) : NULL;
            Py_XDECREF(tuple);
            if (entry != NULL && PyDict_SetItem(self->cache, key, entry) < 0) {
                Py_CLEAR(entry);
            }
        }
        Py_DECREF(key);
        if (entry != NULL && self->ids != Py_None) {
            self->recent[slot].object = args[self->position];
            Py_XSETREF(self->recent[slot].entry, Py_NewRef(entry));
        }
    }
    if (entry != NULL && Py_TYPE(entry) == &RefinerType) {
        PyObject *method = refined((Refiner *)entry, args, n);
        Py_DECREF(entry);
        return method;
    }
    return entry;
}

/* Call the method dispatch found (a new reference, consumed; NULL: its error) with the
 * call's own arguments. */
static PyObject *
call_method(PyObject *method, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (method == NULL) {
        return NULL;
    }
    PyObject *out = PyObject_Vectorcall(method, args, nargsf, kwnames);
    Py_DECREF(method);
    return out;
}

/* The method a generic whose dispatcher this is runs for these arguments (a new
 * reference): Generic.resolve. */
static PyObject *
method_for(Dispatcher *self, PyObject *const *args, Py_ssize_t n)
{
    PyObject *entry = NULL;
    if (PyList_CheckExact(self->roots) && n < PyList_GET_SIZE(self->roots)) {
        entry = PyList_GET_ITEM(self->roots, n);
        for (Py_ssize_t i = 0; i < n && entry != NULL; i++) {
            entry = PyDict_CheckExact(entry) ? PyDict_GetItemWithError(entry, (PyObject *)Py_TYPE(args[i])) : NULL;
        }
        if (entry == NULL && PyErr_Occurred()) {
            return NULL;
        }
    }
    if (entry == NULL || entry == Py_None) {
        PyObject *tuple = as_tuple(args, n);
        entry = tuple ? PyObject_CallOneArg(self->miss, tuple) : NULL;
        Py_XDECREF(tuple);
        if (entry == NULL) {
            return NULL;
        }
    }
    else {
        Py_INCREF(entry);
    }
    if (Py_TYPE(entry) == &RefinerType) {
        PyObject *method = refined((Refiner *)entry, args, n);
        Py_DECREF(entry);
        return method;
    }
    return entry;
}

static PyObject *
dispatcher_call(Dispatcher *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return call_method(method_for(self, args, PyVectorcall_NARGS(nargsf)), args, nargsf, kwnames);
}

static PyObject *
dispatcher_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *roots;
    if (!no_keywords("Dispatcher", kwargs) || !PyArg_UnpackTuple(args, "Dispatcher", 1, 1, &roots)) {
        return NULL;
    }
    if (!PyList_CheckExact(roots)) {
        PyErr_SetString(PyExc_TypeError, "Dispatcher(roots): roots must be a list");
        return NULL;
    }
    Dispatcher *self = PyObject_GC_New(Dispatcher, type);
    if (self == NULL) {
        return NULL;
    }
    self->roots = Py_NewRef(roots);
    self->miss = Py_NewRef(Py_None);
    self->vectorcall = (vectorcallfunc)dispatcher_call;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static int
dispatcher_traverse(Dispatcher *self, visitproc visit, void *arg)
{
    Py_VISIT(self->roots);
    Py_VISIT(self->miss);
    return 0;
}

static int
dispatcher_clear(Dispatcher *self)
{
    Py_CLEAR(self->roots);
    Py_CLEAR(self->miss);
    return 0;
}

static void
dispatcher_dealloc(Dispatcher *self)
{
    PyObject_GC_UnTrack(self);
    dispatcher_clear(self);
    PyObject_GC_Del(self);
}

static PyObject *
dispatcher_get_miss(Dispatcher *self, void *closure)
{
    return Py_NewRef(self->miss);
}

static int
dispatcher_set_miss(Dispatcher *self, PyObject *value, void *closure)
{
    if (value == NULL || !PyCallable_Check(value)) {
        PyErr_SetString(PyExc_TypeError, "Dispatcher.miss must be callable");
        return -1;
    }
    Py_XSETREF(self->miss, Py_NewRef(value));
    return 0;
}

static PyObject *
dispatcher_resolve(Dispatcher *self, PyObject *args)
{
    if (!PyTuple_Check(args)) {
        PyErr_SetString(PyExc_TypeError, "Dispatcher.resolve() takes the arguments as a tuple");
        return NULL;
    }
    return method_for(self, &PyTuple_GET_ITEM(args, 0), PyTuple_GET_SIZE(args));
}

static PyMethodDef dispatcher_methods[] = {
    {"resolve", (PyCFunction)dispatcher_resolve, METH_O, "resolve(args): the method these arguments get."},
    {NULL},
};

static PyGetSetDef dispatcher_getset[] = {
    {"miss", (getter)dispatcher_get_miss, (setter)dispatcher_set_miss,
     "Generic._miss: what fills the cache for arguments not in it."},
    {NULL},
};

static PyMemberDef dispatcher_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Dispatcher, vectorcall), READONLY},
    {NULL},
};

static PyTypeObject DispatcherType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cassette_hook._speedups.Dispatcher",
    .tp_doc = "Dispatcher(roots): calls the method a Generic's type cache holds for the arguments.",
    .tp_basicsize = sizeof(Dispatcher),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = dispatcher_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Dispatcher, vectorcall),
    .tp_traverse = (traverseproc)dispatcher_traverse,
    .tp_clear = (inquiry)dispatcher_clear,
    .tp_dealloc = (destructor)dispatcher_dealloc,
    .tp_methods = dispatcher_methods,
    .tp_getset = dispatcher_getset,
    .tp_members = dispatcher_members,
};

static PyObject *
refiner_call(Refiner *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return call_method(refined(self, args, PyVectorcall_NARGS(nargsf)), args, nargsf, kwnames);
}

static PyObject *
refiner_resolve(Refiner *self, PyObject *args)
{
    if (!PyTuple_Check(args)) {
        PyErr_SetString(PyExc_TypeError, "Refiner.resolve() takes the arguments as a tuple");
        return NULL;
    }
    return refined(self, &PyTuple_GET_ITEM(args, 0), PyTuple_GET_SIZE(args));
}

static PyObject *
refiner_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    Py_ssize_t position;
    PyObject *ids, *key_of, *fill;
    if (!no_keywords("Refiner", kwargs) || !PyArg_ParseTuple(args, "nOOO:Refiner", &position, &ids, &key_of, &fill)) {
        return NULL;
    }
    if (position < 0 || (ids != Py_None && !PyFrozenSet_CheckExact(ids)) || !PyCallable_Check(key_of)
        || !PyCallable_Check(fill)) {
        PyErr_SetString(PyExc_TypeError, "Refiner(position >= 0, ids: frozenset | None, key_of, fill)");
        return NULL;
    }
    Refiner *self = PyObject_GC_New(Refiner, type);
    if (self == NULL) {
        return NULL;
    }
    self->position = position;
    self->ids = Py_NewRef(ids);
    self->key_of = Py_NewRef(key_of);
    self->fill = Py_NewRef(fill);
    self->cache = PyDict_New();
    memset(self->recent, 0, sizeof(self->recent));
    self->vectorcall = (vectorcallfunc)refiner_call;
    PyObject_GC_Track(self);
    if (self->cache == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int
refiner_traverse(Refiner *self, visitproc visit, void *arg)
{
    Py_VISIT(self->ids);
    Py_VISIT(self->key_of);
    Py_VISIT(self->fill);
    Py_VISIT(self->cache);
    for (int i = 0; i < REFINER_RECENT; i++) {
        Py_VISIT(self->recent[i].entry);
    }
    return 0;
}

static int
refiner_clear(Refiner *self)
{
    Py_CLEAR(self->ids);
    Py_CLEAR(self->key_of);
    Py_CLEAR(self->fill);
    Py_CLEAR(self->cache);
    for (int i = 0; i < REFINER_RECENT; i++) {
        Py_CLEAR(self->recent[i].entry);
    }
    return 0;
}

static void
refiner_dealloc(Refiner *self)
{
    PyObject_GC_UnTrack(self);
    refiner_clear(self);
    PyObject_GC_Del(self);
}

static PyMethodDef refiner_methods[] = {
    {"resolve", (PyCFunction)refiner_resolve, METH_O, "resolve(args): the method these arguments get."},
    {NULL},
};

static PyMemberDef refiner_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Refiner, vectorcall), READONLY},
    {NULL},
};

static PyTypeObject RefinerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cassette_hook._speedups.Refiner",
    .tp_doc = "Refiner(position, ids, key_of, fill): the cache for one position where types do not decide.",
    .tp_basicsize = sizeof(Refiner),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = refiner_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Refiner, vectorcall),
    .tp_traverse = (traverseproc)refiner_traverse,
    .tp_clear = (inquiry)refiner_clear,
    .tp_dealloc = (destructor)refiner_dealloc,
    .tp_methods = refiner_methods,
    .tp_members = refiner_members,
};

/* Is f in a dict keyed by id (special, preparers)?  1, 0, or -1 on error. */
static int
has_id(PyObject *table, PyObject *f)
{
    return by_id(table, f) != NULL ? 1 : PyErr_Occurred() ? -1 : 0;
}

/* Does calling the primitive f need primitives.call_primitive's emulation? */
static int
emulated(PyObject *f)
{
    int found = has_id(special, f);
    return found || !is_builtin(f) ? found : has_indirect_name(f);
}

/* Run a hook or an overload with the context popped: under the entry below, or plain when
 * there is none (a new reference).  stack holds its positional arguments, then the
 * call's keyword values. */
static PyObject *
run_popped(PyObject *entry, PyObject *hook, PyObject *const *stack, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *below = slot(entry, entry_below, "below");
    if (below == NULL) {
        return NULL;
    }
    PyObject *held;
    if (PyContextVar_Get(active, NULL, &held) < 0) {
        return NULL;
    }
    Popped *now = &popped, outer = *now;
    now->from = held;
    now->to = Py_NewRef(below);
    now->entry = entry;
    PyObject *out = below == Py_None ? PyObject_Vectorcall(hook, stack, nargs, kwnames)
                                     : call_unpacked(seen_below, hook, NULL, stack, nargs, kwnames);
    Py_XDECREF(now->from);
    Py_DECREF(now->to);
    *now = outer;
    return out;
}

/* run_popped(entry, method, *args, **kwargs): generics.overdub's call of an overload at
 * the top level, run as a Site runs one, so that the overload's recurse(ctx, f, ...) finds
 * its entry (unpop) and calls f's twin with no frame of ours between. */
static PyObject *
run_popped_call(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (nargs < 2 || entry_type == NULL || Py_TYPE(args[0]) != entry_type) {
        PyErr_SetString(PyExc_TypeError, "run_popped(entry, method, *args, **kwargs) takes an Entry first");
        return NULL;
    }
    return run_popped(args[0], args[1], args + 2, nargs - 2, kwnames);
}

/* A prehook or posthook, run popped; its result is dropped. */
static int
run_hook(PyObject *entry, PyObject *hook, PyObject *const *stack, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *out = run_popped(entry, hook, stack, nargs, kwnames);
    Py_XDECREF(out);
    return out == NULL ? -1 : 0;
}

/* The exception being raised, taken out of the thread's state as one object (a new
 * reference; its traceback on it), and put back.  3.12 keeps it as one object already. */
static PyObject *
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

static void
restore_exception(PyObject *exc)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(exc);
#else
    PyErr_Restore(Py_NewRef(Py_TYPE(exc)), exc, PyException_GetTraceback(exc));
#endif
}

/* Tracebacks are the program's (docs/internals.md): an exception that leaves one of the
 * entry points below for the program's frame (a Site's call, call, a primitive, a
 * construction, recurse ...) has the entries of cassette_hook's Python code that it
 * passed through taken off the head of its traceback, as _own.strip_traceback does in the
 * Python entry points; the program's frame then adds its own entry above the rest, as
 * when it makes the call plainly.  Only on the way out with an error: own_off(out) is a
 * compare when out is a result.  A frame is ours when its file is in the package's
 * directory (own_directory, from configure). */
static PyObject *own_directory; /* _own.DIRECTORY */

static int
own_entry(PyTracebackObject *tb)
{
    PyCodeObject *code = PyFrame_GetCode(tb->tb_frame);
    int own = PyUnicode_Tailmatch(code->co_filename, own_directory, 0, PY_SSIZE_T_MAX, -1) == 1;
    Py_DECREF(code);
    return own;
}

static PyObject *
own_stripped(PyObject *tb)
{
    PyObject *rest = tb;
    while (rest != NULL && rest != Py_None && PyTraceBack_Check(rest) && own_entry((PyTracebackObject *)rest)) {
        rest = (PyObject *)((PyTracebackObject *)rest)->tb_next;
    }
    return rest;
}

static void
strip_raised(void)
{
    if (own_directory == NULL) {
        return;
    }
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc = PyErr_GetRaisedException();
    PyObject *tb = exc != NULL ? PyException_GetTraceback(exc) : NULL, *rest = own_stripped(tb);
    if (rest != tb) {
        PyException_SetTraceback(exc, rest != NULL ? rest : Py_None);
    }
    Py_XDECREF(tb);
    PyErr_SetRaisedException(exc);
#else
    PyObject *type, *value, *tb; /* (while it propagates, the thread's traceback is the one that counts) */
    PyErr_Fetch(&type, &value, &tb);
    PyObject *rest = own_stripped(tb);
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

static inline PyObject *
own_off(PyObject *out)
{
    if (out == NULL) {
        strip_raised();
    }
    return out;
}

/* _own.strip_traceback's help on 3.10, whose handled exception keeps its traceback apart
 * from exc.__traceback__ (a bare raise re-raises with that one): tb becomes it.  3.11 on
 * read it off the exception, and this does nothing. */
static PyObject *
handled_traceback(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyExceptionInstance_Check(args[0]) || (args[1] != Py_None && !PyTraceBack_Check(args[1]))) {
        PyErr_SetString(PyExc_TypeError, "handled_traceback(exc, tb) takes an exception and a traceback or None");
        return NULL;
    }
#if PY_VERSION_HEX < 0x030B0000
    PyErr_SetExcInfo(Py_NewRef(Py_TYPE(args[0])), Py_NewRef(args[0]), args[1] == Py_None ? NULL : Py_NewRef(args[1]));
#endif
    Py_RETURN_NONE;
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

/* callsite.overload_of: the overdub method for call ([ctx, f, arguments...]) if it has
 * one, else the execute one, else NULL without an error (a new reference). */
static PyObject *
overload_for(PyObject *const *call, Py_ssize_t n, int ask)
{
    for (int i = 0; i < 2; i++) {
        if (!(ask & (1 << i))) {
            continue;
        }
        PyObject *method = method_for((Dispatcher *)overload_dispatchers[i], call, n);
        if (method == NULL || method != overload_defaults[i]) {
            return method;
        }
        Py_DECREF(method);
    }
    return NULL;
}

static PyObject *
overload_of(PyObject *module, PyObject *call)
{
    if (overload_dispatchers[0] == NULL || overload_dispatchers[1] == NULL) {
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

/* callsite._overloaded: what an overdub or execute overload makes of the call, or
 * OverdubInstead (a new reference).  call is [ctx, callee, arguments..., keyword values]. */
static PyObject *
overloaded(PyObject *entry, int ask, PyObject *const *call, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *method = overload_for(call, nargs, ask);
    if (method == NULL) {
        return PyErr_Occurred() ? NULL : Py_NewRef(overdub_instead);
    }
    PyObject *out = run_popped(entry, method, call, nargs, kwnames);
    Py_DECREF(method);
    return out;
}

/* What runs the callee's own body under the plan, or None (a new reference). */
static PyObject *
body_of(PyObject *plan, PyObject *callee)
{
    if (PyFunction_Check(callee)) {
        PyObject *twins = slot(plan, plan_twins, "twins"), *twin = NULL;
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
        found = shared_twin(plan, callee, 1, &twin);
        if (found != 0) {
            return found < 0 ? NULL : twin;
        }
        return PyObject_CallMethodOneArg(plan, str_twin, callee);
    }
    PyTypeObject *kind = Py_TYPE(callee);
    if (kind == &PyCFunction_Type || kind == &PyCMethod_Type || kind == &PyMethodDescr_Type || kind == &PyWrapperDescr_Type) {
        return Py_NewRef(Py_None); /* C code (len, list.append, object.__init__): no body (bodies.runnable) */
    }
    if (PyType_Check(callee)) { /* how generics._construction decided to construct it, the second time on */
        PyObject *constructions = slot(plan, plan_constructions, "constructions");
        PyObject *table = constructions ? values_of(constructions) : NULL;
        PyObject *how = table ? by_id(table, callee) : NULL;
        if (how != NULL && PyUnicode_Check(how) && PyUnicode_CompareWithASCIIString(how, "primitive") == 0) {
            return Py_NewRef(Py_None);
        }
        if (how != NULL && PyUnicode_Check(how) && PyUnicode_CompareWithASCIIString(how, "python") == 0) {
            PyObject *constructors = slot(plan, plan_constructors, "constructors");
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
    return PyObject_Vectorcall(runnable, args, 2, NULL);
}

static size_t
address_slot(const void *address)
{
    return (size_t)(((uintptr_t)address >> 4) ^ ((uintptr_t)address >> 11)) % ADDRESS_SET_SIZE;
}

static int
address_set_has(const AddressSet *set, const void *address)
{
    for (size_t i = address_slot(address); set->slots[i] != NULL; i = (i + 1) % ADDRESS_SET_SIZE) {
        if (set->slots[i] == address) {
            return 1;
        }
    }
    return 0;
}

/* Fill set from a set of ids (at most half full, so probes end). */
static int
address_set_fill(AddressSet *set, PyObject *ids)
{
    if (PySet_GET_SIZE(ids) > ADDRESS_SET_SIZE / 2) {
        PyErr_SetString(PyExc_ValueError, "configure(): too many ids for a C address set");
        return -1;
    }
    memset(set->slots, 0, sizeof(set->slots));
    PyObject *iterator = PyObject_GetIter(ids), *id;
    if (iterator == NULL) {
        return -1;
    }
    while ((id = PyIter_Next(iterator)) != NULL) {
        void *address = PyLong_AsVoidPtr(id);
        Py_DECREF(id);
        if (address == NULL) {
            break;
        }
        size_t i = address_slot(address);
        while (set->slots[i] != NULL) {
            i = (i + 1) % ADDRESS_SET_SIZE;
        }
        set->slots[i] = address;
    }
    Py_DECREF(iterator);
    return PyErr_Occurred() ? -1 : 0;
}

/* A fallback overload's answer to call ([ctx, f, arguments..., keyword values...]), when
 * the plan has fallback overloads and one takes the call: 1 and the result in *out, 0
 * when none does, -1 on error. */
static int
fallback_overload(PyObject *entry, PyObject *plan, PyObject *const *call, Py_ssize_t n, PyObject *kwnames,
                  PyObject **out)
{
    if (SLOT(plan, plan_fallback) != Py_True) {
        return 0;
    }
    PyObject *method = method_for((Dispatcher *)fallback_dispatcher, call, n);
    if (method == NULL) {
        return -1;
    }
    int taken = method != fallback_default;
    if (taken) {
        *out = run_popped(entry, method, call, n, kwnames);
    }
    Py_DECREF(method);
    return !taken ? 0 : *out == NULL ? -1 : 1;
}

/* A value of a builtin scalar class: every dunder of it is C, so a builtin given only
 * these calls no Python code through them. */
static int
is_scalar(PyObject *x)
{
    return PyFloat_CheckExact(x) || PyLong_CheckExact(x) || PyUnicode_CheckExact(x) || PyBool_Check(x)
           || x == Py_None || PyBytes_CheckExact(x) || PyComplex_CheckExact(x);
}

/* A module's builtin function (math.cos, len) that primitives does not emulate. */
static int
is_plain_function(PyObject *f)
{
    if (!is_builtin(f) || !PyModule_Check(PyCFunction_GET_SELF(f))) {
        return 0;
    }
    int emulated = has_id(special, f);
    return emulated < 0 ? -1 : !emulated;
}

/* bodies.without_body for a call with nothing of Python to recurse into: an operator of
 * operators.PLAIN_OPERATORS whose operands are all of operators.C_OPERANDS once unwrapped
 * (a tagging context's primitives get plain values), or a module's builtin function that
 * primitives does not emulate, given plain scalars only (so that tagging has nothing to
 * unwrap).  The callee is called on the plain operands, unless a fallback overload takes
 * the call.  1 and the result in *out, 0 when the call is not such a call
 * (bodies.without_body decides), -1 on error.  call is [ctx, f, operands...]. */
static int
plain_builtin(PyObject *entry, PyObject *plan, PyObject *const *call, Py_ssize_t n, PyObject *kwnames,
              PyObject **out)
{
    PyObject *f = call[1], *plain[2];
    PyObject *const *operands = plain;
    if (kwnames != NULL || !is_builtin(f)) {
        return 0;
    }
    if (n >= 3 && n <= 4 && address_set_has(&plain_operator_set, f)) {
        int unwrap = -1; /* does the context tag values (read once, if an operand needs it)? */
        for (Py_ssize_t i = 2; i < n; i++) {
            PyObject *operand = call[i];
            int c = PySet_Contains(c_operands, (PyObject *)Py_TYPE(operand));
            if (c == 0 && unwrap != 0) {
                if (unwrap < 0 && (unwrap = is_tagging(call[0])) < 0) {
                    return -1;
                }
                if (unwrap) {
                    operand = plain_value(operand);
                    c = PySet_Contains(c_operands, (PyObject *)Py_TYPE(operand));
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

static PyObject *run_primitive(PyObject *f, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);

/* Are all these values of operators.C_OPERANDS, builtin classes whose every dunder is C?
 * Then no protocol of theirs leads to Python: operators.body finds nothing for them, and
 * a primitive's preparer (primitives._Arguments.prepare: callbacks made call sites,
 * iterated arguments with Python __iter__ given a stand-in) leaves them as they are. */
static int
all_c_operands(PyObject *const *args, Py_ssize_t nargs)
{
    for (Py_ssize_t i = 0; i < nargs; i++) {
        int c = PySet_Contains(c_operands, (PyObject *)Py_TYPE(args[i]));
        if (c <= 0) {
            if (c < 0) {
                PyErr_Clear(); /* (a class whose metaclass cannot hash it: not one of them) */
            }
            return 0;
        }
    }
    return 1;
}

/* The entry of dunder_table for the builtin op, or NULL: operators.body knows nothing of it. */
static const OperatorDunders *
dunders_of(PyObject *op)
{
    for (size_t i = address_slot(op); dunder_table[i].op != NULL; i = (i + 1) % ADDRESS_SET_SIZE) {
        if (dunder_table[i].op == op) {
            return &dunder_table[i];
        }
    }
    return NULL;
}

/* May operators.body find Python dunders for op(*args), op's entry being dunders (NULL:
 * body knows nothing of op)?  Not when every special method it would look up is missing
 * from its operand's class or is C code there -- found by CPython's own lookup along the
 * MRO (cached by the interpreter), where body walks the MRO in Python.  A builtin class
 * (not a heap type) holds no Python code at all.  Anything else found (a Python
 * function, our Special standing in for one, None) is body's to judge. */
static int
python_dunders(const OperatorDunders *dunders, PyObject *const *args, Py_ssize_t nargs)
{
    if (dunders == NULL) {
        return 0;
    }
    for (int i = 0; i < dunders->n; i++) {
        if (dunders->index[i] >= nargs) {
            continue;
        }
        PyTypeObject *type = Py_TYPE(args[dunders->index[i]]);
        if (!PyType_HasFeature(type, Py_TPFLAGS_HEAPTYPE)) {
            continue;
        }
        PyObject *found = _PyType_Lookup(type, dunders->name[i]);
        if (found != NULL && Py_TYPE(found) != &PyWrapperDescr_Type && Py_TYPE(found) != &PyMethodDescr_Type) {
            return 1;
        }
    }
    return 0;
}

/* Fill dunder_table from operators.DUNDERS. */
static int
dunder_table_fill(PyObject *table)
{
    if (!PyDict_CheckExact(table) || PyDict_GET_SIZE(table) > ADDRESS_SET_SIZE / 2) {
        PyErr_SetString(PyExc_TypeError, "configure(): operator_dunders must be a dict of at most 64 operators");
        return -1;
    }
    for (size_t i = 0; i < ADDRESS_SET_SIZE; i++) {
        for (int j = 0; j < dunder_table[i].n; j++) {
            Py_CLEAR(dunder_table[i].name[j]);
        }
        Py_CLEAR(dunder_table[i].symbol);
    }
    memset(dunder_table, 0, sizeof(dunder_table));
    Py_ssize_t at = 0;
    PyObject *id, *value, *how, *symbol, *pairs;
    while (PyDict_Next(table, &at, &id, &value)) {
        void *op = PyLong_AsVoidPtr(id);
        if (op == NULL) {
            return -1;
        }
        if (!PyArg_ParseTuple(value, "UUO!", &how, &symbol, &PyTuple_Type, &pairs) || PyTuple_GET_SIZE(pairs) > 3) {
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError,
                            "configure(): operator_dunders' values are (how, symbol, at most 3 (index, name))");
            return -1;
        }
        size_t i = address_slot(op);
        while (dunder_table[i].op != NULL) {
            i = (i + 1) % ADDRESS_SET_SIZE;
        }
        OperatorDunders *entry = &dunder_table[i];
        entry->op = op;
        const char *ways[] = {"", "first", "truth", "iterator", "forward", "compare"};
        entry->run = -1;
        for (int way = RUN_BY_BODY; way <= RUN_COMPARE; way++) {
            if (PyUnicode_CompareWithASCIIString(how, ways[way]) == 0) {
                entry->run = way;
            }
        }
        if (entry->run < 0) {
            PyErr_Format(PyExc_ValueError, "configure(): no way to run an operator's dunder called %R", how);
            return -1;
        }
        entry->symbol = Py_NewRef(symbol);
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(pairs); j++) {
            PyObject *pair = PyTuple_GET_ITEM(pairs, j);
            int index;
            PyObject *name;
            if (!PyArg_ParseTuple(pair, "iU", &index, &name)) {
                return -1;
            }
            entry->index[j] = index;
            entry->name[j] = Py_NewRef(name);
            PyUnicode_InternInPlace(&entry->name[j]);
            entry->n = (int)j + 1;
        }
    }
    return 0;
}

static int one_python_dunder(PyObject *entry, const OperatorDunders *dunders, PyObject *const *args, Py_ssize_t nargs,
                             PyObject **out);

/* bodies.without_body, in C where it needs no Python of its own: a builtin function,
 * method (list.extend, as hooks see items.extend) or class (map) under a context that does
 * not tag (a tagging context's primitives get unwrapped arguments,
 * tagging.for_primitive's) runs an operator's Python dunders if operators.body finds any,
 * else a fallback overload if one takes the call, else the primitive (run_primitive).
 * The builtin then has the program's frame below it, and so have the callbacks it makes
 * (a generator resumed by next(), a key function).  So has a Python function or class
 * outside the context's scope (a library's, under libraries = False), which no operator
 * or emulation concerns: the fallback overload, else the call itself.  Anything else is
 * bodies.without_body's.  call is [ctx, f, arguments..., keyword values...]. */
static PyObject *
no_body(PyObject *entry, PyObject *plan, PyObject *const *call, Py_ssize_t n, PyObject *kwnames)
{
    PyObject *f = call[1], *const *args = call + 2;
    Py_ssize_t nargs = n - 2;
    int c_class = PyType_Check(f) && !PyType_HasFeature((PyTypeObject *)f, Py_TPFLAGS_HEAPTYPE);
    int python = Py_TYPE(f) == &PyFunction_Type || (PyType_Check(f) && !c_class);
    if (!python && !is_builtin(f) && Py_TYPE(f) != &PyMethodDescr_Type && !c_class) {
        return call_unpacked(without_body, entry, f, args, nargs, kwnames);
    }
    int tagging = is_tagging(call[0]);
    if (tagging != 0) {
        return tagging < 0 ? NULL : call_unpacked(without_body, entry, f, args, nargs, kwnames);
    }
    const OperatorDunders *dunders = is_builtin(f) ? dunders_of(f) : NULL;
    if (python_dunders(dunders, args, nargs)) { /* operators.body may find some */
        PyObject *out;
        int ran = kwnames == NULL ? one_python_dunder(entry, dunders, args, nargs, &out) : 0;
        if (ran != 0) {
            return ran < 0 ? NULL : out;
        }
        PyObject *tuple = as_tuple(args, nargs);
        PyObject *pair[2] = {f, tuple};
        PyObject *body = tuple ? PyObject_Vectorcall(operator_body, pair, 2, NULL) : NULL;
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
    return python ? PyObject_Vectorcall(f, args, nargs, kwnames) : run_primitive(f, args, nargs, kwnames);
}

/* stack: [ctx, <ctx, then the result>, callee, positional arguments..., keyword values...] */
static PyObject *
overdubbed(PyObject *entry, PyObject *callee, PyObject **stack, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *plan = slot(entry, entry_plan, "plan"), *ctx = slot(entry, entry_ctx, "ctx");
    if (plan == NULL || ctx == NULL) {
        return NULL;
    }
    if (Py_TYPE(plan) != plan_type) {
        PyErr_SetString(PyExc_TypeError, "cassette_hook: an entry's plan is not a Plan");
        return NULL;
    }
    PyObject *const *args = stack + 3;
    stack[0] = stack[1] = ctx;
    stack[2] = callee;
    PyObject *prehook = SLOT(plan, plan_prehook_call), *posthook = SLOT(plan, plan_posthook_call);
    if (prehook != NULL && prehook != Py_None && run_hook(entry, prehook, stack + 1, nargs + 2, kwnames) < 0) {
        return NULL;
    }
    PyObject *out, *overload = SLOT(plan, plan_overdub_call);
    int ask = overload != NULL && overload != Py_None ? 0 /* the one overload of every call: no dispatch */
            : (SLOT(plan, plan_overdub) == Py_True ? ASK_OVERDUB : 0)
              | (SLOT(plan, plan_execute) == Py_True ? ASK_EXECUTE : 0);
    if (ask) {
        out = overloaded(entry, ask, stack + 1, nargs + 2, kwnames);
    }
    else {
        out = overload != NULL && overload != Py_None ? run_popped(entry, overload, stack + 1, nargs + 2, kwnames)
                                                      : Py_NewRef(overdub_instead);
    }
    if (out == NULL) {
        goto raised;
    }
    if (out == overdub_instead) {
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
    PyObject *raisehook = SLOT(plan, plan_raisehook_call);
    if (raisehook != NULL && raisehook != Py_None) {
        run_raisehook(entry, raisehook, stack, nargs + 3, kwnames);
    }
    return NULL;
}

/* Could hooks see this builtin as an unbound method and its receiver (callsite.present)?
 * Not when it is a module's function (operator.mul) or a class's (dict.fromkeys). */
static int
presented_as_method(PyObject *builtin)
{
    PyObject *receiver = PyCFunction_GET_SELF(builtin);
    return receiver != NULL && receiver != Py_None && !PyModule_Check(receiver) && !PyType_Check(receiver);
}

/* The names of builtin methods by their PyMethodDef (which lives as long as its type):
 * an interned str, made once, so that finding a method's descriptor costs no string. */
#define METHOD_NAMES 128 /* a power of two */
static struct {
    PyMethodDef *def;
    PyObject *name;
} method_names[METHOD_NAMES];

/* How hooks see a builtin method bound to an instance, items.append, without
 * callsite.present's Python: the descriptor type(items).append when that is the method
 * descriptor f was bound from (borrowed from the type), or NULL without an error when
 * it is not -- a subclass overriding the name, say: present() then walks the MRO. */
static PyObject *
method_descriptor_of(PyObject *f)
{
    PyMethodDef *def = ((PyCFunctionObject *)f)->m_ml;
    size_t at = ((uintptr_t)def >> 4) & (METHOD_NAMES - 1);
    if (method_names[at].def != def) {
        PyObject *name = PyUnicode_InternFromString(def->ml_name);
        if (name == NULL) {
            return NULL;
        }
        Py_XSETREF(method_names[at].name, name);
        method_names[at].def = def;
    }
    PyObject *found = _PyType_Lookup(Py_TYPE(PyCFunction_GET_SELF(f)), method_names[at].name);
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
    PyObject *callee = f, *receiver = NULL;
    if (presented_as_method(f)) {
        callee = method_descriptor_of(f); /* (borrowed from the type) */
        if (callee == NULL) {
            return PyErr_Occurred() ? -1 : 0;
        }
        receiver = PyCFunction_GET_SELF(f);
    }
    /* primitives.call_primitive's own test, by id: f's, or, for a bound method, its
     * descriptor's (what it looks up by name); the preparers are among those. */
    int helped = has_id(special, f);
    if (helped == 0 && callee != f) {
        helped = has_id(special, callee);
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
    int hooked = run_hook(entry, SLOT(plan, plan_prehook_call), stack, n, NULL);
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
    PyObject *plan = slot(entry, entry_plan, "plan");
    int plain = plan == NULL ? -1 : builtin_prehook(entry, ctx, plan, f, args, nargs);
    return plain < 0 ? NULL : plain ? Py_NewRef(f) : resolve_in(entry, f);
}

/* callsite.present: (f, args), or what the Python one makes of a builtin method. */
static PyObject *
present_c(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "present(f, args) takes 2 arguments");
        return NULL;
    }
    if (is_builtin(args[0]) && !presented_as_method(args[0])) {
        return PyTuple_Pack(2, args[0], args[1]);
    }
    return PyObject_Vectorcall(present, args, 2, NULL);
}

/* callsite.site's closure, called: the overdubbed call of f (prehook, overdub, posthook). */
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
            presented = PyObject_Vectorcall(present, pair, 2, NULL);
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

/* The overdubbed call at a 3.11+ call site: callsite.site's closure, in C, so that the
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

typedef struct {
    PyObject_HEAD
    PyObject *entry, *f;
    vectorcallfunc vectorcall;
} Site;

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
 * returns, so a few at hand spare the allocator nearly every one (under the GIL). */
#define SITES_KEPT 16
static Site *sites_kept[SITES_KEPT];
static int sites_kept_count;

static void
site_dealloc(Site *self)
{
    Py_DECREF(self->entry);
    Py_DECREF(self->f);
    if (sites_kept_count < SITES_KEPT) {
        sites_kept[sites_kept_count++] = self;
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

static PyTypeObject SiteType = {
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

/* callsite.site(entry, f) for a call site to call: a Site, or the closure once this
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
static PyObject *
new_site(PyObject *entry, PyObject *f, vectorcallfunc run)
{
    Site *site;
    if (sites_kept_count > 0) {
        site = sites_kept[--sites_kept_count];
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

/* What recurse runs for a callee with no Python body (unpop's answer for one):
 * bodies.without_body's steps, in C -- a plain operator on builtin values, else
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
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *plan = slot(entry, entry_plan, "plan"), *ctx = slot(entry, entry_ctx, "ctx");
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

/* bodies.recurse's common case: called by an overload (or hook) of ctx's own entry,
 * running popped on this thread.  bodies._recurse pushes a new entry for ctx (the popped
 * one is not on the stack), runs the body and pops it: an Entry made per call.
 * unpop_for(ctx, f) puts the popped entry back instead (the thread's Popped record says,
 * until repop(), that the top is the entry itself) and returns what runs f's body, or,
 * for a callee without one, the entry itself (its plan in *plan_out): bodyless_run's
 * steps run it.  None (nothing changed) when it is not that case: no overload running,
 * another context's, a with-block since, or a tagging context (its results are unwrapped
 * as they leave); bodies._recurse then runs.  unpop(ctx, f), the Python path's, hands a
 * Site for the bodyless steps. */
static PyObject *
unpop_for(PyObject *ctx, PyObject *f, PyObject **plan_out)
{
    Popped *now = &popped;
    PyObject *entry = now->entry;
    if (entry == NULL || now->to == entry || SLOT(entry, entry_ctx) != ctx) {
        Py_RETURN_NONE;
    }
    PyObject *held, *plan = slot(entry, entry_plan, "plan");
    if (plan == NULL || PyContextVar_Get(active, NULL, &held) < 0) {
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

static PyObject *
unpop(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "unpop(ctx, f) takes 2 arguments");
        return NULL;
    }
    PyObject *plan, *run = unpop_for(args[0], args[1], &plan);
    if (run != NULL && Py_TYPE(run) == entry_type) {
        Py_SETREF(run, new_site(run, args[1], (vectorcallfunc)bodyless_call));
    }
    return run;
}

/* After unpop's callee returns: the entry is popped again. */
static PyObject *
repop(PyObject *module, PyObject *unused)
{
    Popped *now = &popped;
    if (now->entry == NULL || now->to != now->entry) {
        PyErr_SetString(PyExc_RuntimeError, "cassette_hook: repop() without unpop()");
        return NULL;
    }
    PyObject *below = slot(now->entry, entry_below, "below");
    if (below == NULL) {
        return NULL;
    }
    Py_SETREF(now->to, Py_NewRef(below));
    Py_RETURN_NONE;
}

/* unpopped(): is an entry put back by unpop() in force on this thread (not yet repopped)?
 * bodies.recurse's Python code asks before and after its unpop(), so that it repops
 * exactly when its own unpop happened, even when an interrupt arrives right after it. */
static PyObject *
unpopped(PyObject *module, PyObject *unused)
{
    Popped *now = &popped;
    return PyBool_FromLong(now->entry != NULL && now->to == now->entry);
}

/* Context.__exit__ on the C path: _context.pop(ctx), which either pops or raises having
 * changed nothing, called again if an interrupt arrived before it changed anything (its
 * first lines: what no Python __exit__ can protect, since the interrupt may come before
 * its first instruction).  The first pop's exception is the one that goes on.  "Before it
 * changed anything": the innermost entry is still the one that was. */
static PyObject *pop_function; /* _context.pop */

static PyObject *
context_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *was;
    if (active_entry(&was) < 0) {
        return NULL;
    }
    /* (was is only compared after the pop, not held: pop lets the entry go, and settles) */
    int ours = was != NULL && SLOT(was, entry_ctx) == self;
    Py_XDECREF(was);
    PyObject *out = PyObject_CallOneArg(pop_function, self);
    if (out == NULL && ours) {
        PyObject *exc = fetch_exception(), *now;
        if (active_entry(&now) < 0) {
            Py_DECREF(exc);
        }
        else {
            Py_XDECREF(now); /* (compared only: while was is on the stack, it is alive) */
            if (now == was) {
                PyObject *again = PyObject_CallOneArg(pop_function, self);
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

/* exit_method(Context, pop): Context.__exit__ for the C path, a method descriptor. */
static PyObject *
exit_method(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyType_Check(args[0]) || !PyCallable_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "exit_method(Context, pop)");
        return NULL;
    }
    Py_XSETREF(pop_function, Py_NewRef(args[1]));
    return PyDescr_NewMethod((PyTypeObject *)args[0], &context_exit_def);
}

/* bodies.recurse on the C path: its own Python code, with this for its vectorcall, so that
 * an overload's ch.recurse(ctx, f, ...) calls f's twin from here and the callee has the
 * overload's frame below it (no frame of ours).  Calling the twin from C costs a level of
 * C stack, so a thread makes at most RECURSE_BUDGET such calls at once (a budget of its
 * own: under an overload each level of recursion is a Site's call and one of these, and
 * sharing SITE_BUDGET would halve the depth Sites reach); a thread past it switches
 * recurse to its Python code (CPython's own vectorcall, which call sites inline) until
 * no thread is that deep any more: its recursion then costs no C stack, and shows
 * recurse's frame, as the Python closure of a Site does.  Anything but the common case
 * (an overload of ctx's own entry, unpop's) runs the Python code too. */
#define RECURSE_BUDGET 100
static THREAD_LOCAL int recurses_running; /* twins called from here on this thread, not yet returned */
static PyObject *recurse_function;       /* bodies.recurse, NULL until install_recurse() */
static vectorcallfunc recurse_python;    /* CPython's vectorcall of it: its Python code */
static int recurse_deep_calls;           /* calls in flight made past a thread's budget */

static void
set_recurse_vectorcall(vectorcallfunc vectorcall)
{
    PyFunctionObject *func = (PyFunctionObject *)recurse_function;
#if PY_VERSION_HEX >= 0x030C0000
    PyFunction_SetVectorcall(func, vectorcall); /* (zeroes its version: specialized call sites let go) */
#else
    func->vectorcall = vectorcall;
#if PY_VERSION_HEX >= 0x030B0000
    func->func_version = 0; /* (3.11's specialized call sites check it, not the vectorcall) */
#endif
#endif
}

static PyObject *recurse_vectorcall(PyObject *func, PyObject *const *args, size_t nargsf, PyObject *kwnames);

static PyObject *
recurse_deep(PyObject *func, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (recurse_deep_calls++ == 0) {
        set_recurse_vectorcall(recurse_python);
    }
    PyObject *out = recurse_python(func, args, nargsf, kwnames);
    if (--recurse_deep_calls == 0) {
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
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *plan = NULL, *run = nargs >= 2 ? unpop_for(args[0], args[1], &plan) : Py_NewRef(Py_None);
    if (run == NULL) {
        return NULL;
    }
    recurses_running++;
    PyObject *out;
    if (run == Py_None) {
        out = recurse_python(func, args, nargsf, kwnames);
    }
    else {
        out = Py_TYPE(run) != entry_type ? PyObject_Vectorcall(run, args + 2, nargs - 2, kwnames)
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
    recurses_running--;
    Py_DECREF(run);
    return own_off(out);
}

/* install_recurse(f): bodies.recurse takes the vectorcall above (once: bodies is loaded once). */
static PyObject *
install_recurse(PyObject *module, PyObject *func)
{
    if (!PyFunction_Check(func) || recurse_function != NULL) {
        PyErr_SetString(PyExc_TypeError, "install_recurse() takes a Python function, once");
        return NULL;
    }
    recurse_function = Py_NewRef(func);
    recurse_python = ((PyFunctionObject *)func)->vectorcall;
    set_recurse_vectorcall(recurse_vectorcall);
    Py_RETURN_NONE;
}

/* primitives.call_primitive: the primitive f called as the plain program would call it.
 * A builtin that takes callbacks gets its arguments prepared (the callbacks made call
 * sites) and is called from here, so the callbacks have the program's frame below them;
 * the other emulated builtins are primitives.call_primitive's. */
static PyObject *
run_primitive(PyObject *f, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *prepare = by_id(preparers, f), *out = NULL;
    if (prepare != NULL && kwnames == NULL && all_c_operands(args, nargs)) {
        out = PyObject_Vectorcall(f, args, nargs, NULL); /* nothing to prepare */
    }
    else if (prepare != NULL) {
        PyObject *prepared = call_unpacked(prepare, NULL, NULL, args, nargs, kwnames);
        if (prepared != NULL && PyTuple_CheckExact(prepared) && PyTuple_GET_SIZE(prepared) == 2
            && PyTuple_CheckExact(PyTuple_GET_ITEM(prepared, 0)) && PyDict_CheckExact(PyTuple_GET_ITEM(prepared, 1))) {
            out = PyObject_Call(f, PyTuple_GET_ITEM(prepared, 0), PyTuple_GET_ITEM(prepared, 1));
        }
        else if (prepared != NULL) {
            PyErr_SetString(PyExc_TypeError, "cassette_hook: a preparer must return (args, kwargs)");
        }
        Py_XDECREF(prepared);
    }
    else if (!PyErr_Occurred()) {
        int emulate = emulated(f);
        out = emulate < 0 ? NULL
            : emulate ? call_unpacked(call_primitive, f, NULL, args, nargs, kwnames)
                      : PyObject_Vectorcall(f, args, nargs, kwnames);
    }
    return out;
}

/* primitives.primitive: what the program's frame calls for a builtin it must not call
 * directly (callsite.callable_for). */
static PyObject *
primitive(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (first_argument(nargs, "primitive", "f") < 0) {
        return NULL;
    }
    return own_off(run_primitive(args[0], args + 1, nargs - 1, kwnames));
}

static PyObject *call_in(PyObject *entry, PyObject *f, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);

/* _switch._operator_call: an operator in switched code, op(*args), a call site when the
 * innermost active context counts operators as calls. */
static PyObject *
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
        PyObject *plan = slot(entry, entry_plan, "plan");
        observed = plan != NULL && Py_TYPE(plan) == plan_type ? SLOT(plan, plan_operators) == Py_True : -1;
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

/* f(*args, **kwargs) under entry (borrowed; NULL: no context active).  Under an entering
 * plan, a builtin (an operator site's operator, most often) has its prehook run as an
 * entering site would (builtin_prehook) and is called from here, with no Site. */
static PyObject *
call_in(PyObject *entry, PyObject *f, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *run;
    if (entry == NULL) {
        run = Py_NewRef(f);
    }
    else {
        if (is_builtin(f) && kwnames == NULL && nargs <= ENTERED_MAX) {
            PyObject *plan = slot(entry, entry_plan, "plan"), *ctx = slot(entry, entry_ctx, "ctx");
            if (plan == NULL || ctx == NULL) {
                return NULL;
            }
            int plain = Py_TYPE(plan) == plan_type && SLOT(plan, plan_enters) == Py_True
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
static PyObject *
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

/* callsite.call: f(*args, **kwargs) as the innermost active context sees it. */
static PyObject *
call(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    return first_argument(nargs, "call", "f") < 0 ? NULL : call_active(args[0], args + 1, nargs - 1, kwnames);
}

static PyObject *iter_builtin; /* builtins.iter */

/* operators.yield_from_operand: what `yield from obj` iterates -- obj itself for a
 * generator or a coroutine, which the instruction takes as they are (with its own checks),
 * else iter(obj) as a call site. */
static PyObject *
yield_from(PyObject *module, PyObject *obj)
{
    return PyGen_CheckExact(obj) || PyCoro_CheckExact(obj) ? Py_NewRef(obj) : call_active(iter_builtin, &obj, 1, NULL);
}

/* callsite.operator_site(op): what a twin's operator site loads and calls, site(a, b) as
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

static PyTypeObject OperatorSiteType = {
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

/* callsite.method_site(name): what a twin's method load obj.name becomes when the call it
 * feeds is a plain call (rewrite._nullslot).  The plain program's method load pushes the
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
 * generator's site resumed under another context keeps what it had resolved). */
#if PY_VERSION_HEX >= 0x030D0000
/* (exported, as on 3.10-3.12, but declared in an internal header since 3.13) */
PyAPI_FUNC(int) _PyObject_GetMethod(PyObject *obj, PyObject *name, PyObject **method);
#endif

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
static PyObject *
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

static PyTypeObject MethodSiteType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cassette_hook._speedups.MethodSite",
    .tp_doc = "A method load's site: obj.name resolved for the call it feeds (made by callsite.method_site).",
    .tp_basicsize = sizeof(MethodSite),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = method_site_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(MethodSite, vectorcall),
    .tp_dealloc = (destructor)method_site_dealloc,
    .tp_repr = (reprfunc)method_site_repr,
    .tp_members = method_site_members,
};

/* _implicit.Special: what a class holds in place of a special method of its own, and a
 * property in place of its accessors, while contexts are active.  Called, it makes the
 * call of its function as a call site does (call_in), so the context sees the function
 * run, with no frame of ours under it.  CPython's slots (hash(), ==, sort, len(), a for
 * loop's __next__) find it on the class and, since it is a method descriptor, call it
 * unbound with the instance first.  Read as an attribute -- obj.__eq__, super().__eq__,
 * getattr() -- it binds the method itself, as the class would; read on the class, it is
 * the method. */
typedef struct {
    PyObject_HEAD
    PyObject *function;
    vectorcallfunc vectorcall;
} Special;

static PyObject *
special_call(Special *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *entry;
    if (active_entry(&entry) < 0) {
        return NULL;
    }
    if (entry == NULL) { /* no context here: the method, as the slot would call it */
        return PyObject_Vectorcall(self->function, args, nargsf, kwnames);
    }
    PyObject *out = call_in(entry, self->function, args, PyVectorcall_NARGS(nargsf), kwnames);
    Py_DECREF(entry);
    return out;
}

static PyObject *
special_get(Special *self, PyObject *obj, PyObject *type)
{
    return obj == NULL ? Py_NewRef(self->function) : PyMethod_New(self->function, obj);
}

static PyObject *
special_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *function;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
        PyErr_SetString(PyExc_TypeError, "Special() takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_UnpackTuple(args, "Special", 1, 1, &function)) {
        return NULL;
    }
    if (!PyFunction_Check(function)) {
        PyErr_Format(PyExc_TypeError, "Special() takes a Python function, not %.200s", Py_TYPE(function)->tp_name);
        return NULL;
    }
    Special *self = PyObject_GC_New(Special, type);
    if (self == NULL) {
        return NULL;
    }
    self->function = Py_NewRef(function);
    self->vectorcall = (vectorcallfunc)special_call;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static int
special_traverse(Special *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self)); /* (a heap type) */
    Py_VISIT(self->function);
    return 0;
}

static int
special_clear(Special *self)
{
    Py_CLEAR(self->function);
    return 0;
}

static void
special_dealloc(Special *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    special_clear(self);
    PyObject_GC_Del(self);
    Py_DECREF(type);
}

static PyMemberDef special_members[] = {
    {"__func__", T_OBJECT, offsetof(Special, function), READONLY, "the special method it stands in for"},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Special, vectorcall), READONLY},
    {NULL},
};

/* A heap type, and not an immutable one: CPython's specializer takes a method descriptor of
 * an immutable type to be what reading it on the class gives (a function is), and would
 * cache a repeated `Cls.__len__` as the stand-in itself; it specializes no load that finds
 * a descriptor of a mutable type, which then goes through special_get each time. */
static PyType_Slot special_slots[] = {
    {Py_tp_doc, "A class's special method, called by C as a call site (see _implicit)."},
    {Py_tp_new, special_new},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_descr_get, special_get},
    {Py_tp_traverse, special_traverse},
    {Py_tp_clear, special_clear},
    {Py_tp_dealloc, special_dealloc},
    {Py_tp_members, special_members},
    {0, NULL},
};

static PyType_Spec special_spec = {
    .name = "cassette_hook._speedups.Special",
    .basicsize = sizeof(Special),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .slots = special_slots,
};

static PyTypeObject *SpecialType;

/* The special method name on the class of obj, as operators._special finds it, when it is
 * a plain Python function (or a Special standing in for one): borrowed, or NULL. */
static PyObject *
python_dunder(PyObject *obj, PyObject *name)
{
    PyObject *found = _PyType_Lookup(Py_TYPE(obj), name);
    if (found != NULL && Py_TYPE(found) == SpecialType) {
        found = ((Special *)found)->function;
    }
    return found != NULL && PyFunction_Check(found) ? found : NULL;
}

/* What operators.body would make of op(*args) (dunders: op's entry), run here where it is
 * Python functions called as call sites (call_in, as body's partials of call do): the
 * first operand's dunder for an operator on it (obj[k], -obj), its truth for `in`, the
 * iterator it returns for iter(obj), checked as iter() checks it; and on two operands of
 * one class, which try no reflected method first, a binary operator's forward dunder (its
 * NotImplemented the operator's TypeError) or a comparison's forward then reflected ones
 * (both NotImplemented: identity for == and !=, else the TypeError).  1 and the result in
 * *out, 0 when body is to decide (nothing run), -1 on error. */
static int
one_python_dunder(PyObject *entry, const OperatorDunders *dunders, PyObject *const *args, Py_ssize_t nargs,
                  PyObject **out)
{
    int run = dunders->run, binary = run == RUN_FORWARD || run == RUN_COMPARE;
    if (run == RUN_BY_BODY || nargs == 0 || (run == RUN_ITERATOR && nargs != 1) || (run == RUN_TRUTH && nargs != 2)
        || (binary && (nargs != 2 || Py_TYPE(args[0]) != Py_TYPE(args[1])))) {
        return 0;
    }
    PyObject *forward = python_dunder(args[0], dunders->name[0]);
    PyObject *reflected = run == RUN_COMPARE ? python_dunder(args[1], dunders->name[1]) : NULL;
    if (forward == NULL || (run == RUN_COMPARE && reflected == NULL)) { /* (a C or missing reflected one: body) */
        return 0;
    }
    Py_INCREF(forward); /* (the calls may change the class) */
    Py_XINCREF(reflected);
    PyObject *result = call_in(entry, forward, args, nargs, NULL);
    if (result == Py_NotImplemented && run == RUN_COMPARE) {
        PyObject *swapped[2] = {args[1], args[0]};
        Py_SETREF(result, call_in(entry, reflected, swapped, 2, NULL));
    }
    Py_DECREF(forward);
    Py_XDECREF(reflected);
    if (result == NULL) {
        return -1;
    }
    if (run == RUN_TRUTH) {
        int truth = PyObject_IsTrue(result);
        Py_DECREF(result);
        result = truth < 0 ? NULL : Py_NewRef(truth ? Py_True : Py_False);
    }
    else if (run == RUN_ITERATOR && !PyIter_Check(result)) {
        PyErr_Format(PyExc_TypeError, "iter() returned non-iterator of type '%.100s'", Py_TYPE(result)->tp_name);
        Py_CLEAR(result);
    }
    else if (binary && result == Py_NotImplemented) {
        Py_CLEAR(result);
        int eq = PyUnicode_CompareWithASCIIString(dunders->symbol, "==") == 0;
        if (run == RUN_COMPARE && (eq || PyUnicode_CompareWithASCIIString(dunders->symbol, "!=") == 0)) {
            result = Py_NewRef((args[0] == args[1]) == eq ? Py_True : Py_False);
        }
        else {
            PyObject *name = PyObject_GetAttrString((PyObject *)Py_TYPE(args[0]), "__name__");
            if (name != NULL && run == RUN_FORWARD) {
                PyErr_Format(PyExc_TypeError, "unsupported operand type(s) for %U: '%U' and '%U'", dunders->symbol,
                             name, name);
            }
            else if (name != NULL) {
                PyErr_Format(PyExc_TypeError, "'%U' not supported between instances of '%U' and '%U'",
                             dunders->symbol, name, name);
            }
            Py_XDECREF(name);
        }
    }
    *out = result;
    return result == NULL ? -1 : 1;
}

/* callsite.call_ex: a 3.10 star call f(*args, **kwargs), with args a tuple and kwargs a
 * dict (or None), as the call it is; anything else is callsite.call_ex's (which makes the
 * plain call's errors). */
static PyObject *
call_ex_steps(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 2 || nargs > 3 || !PyTuple_CheckExact(args[1])
        || (nargs == 3 && args[2] != Py_None && !PyDict_CheckExact(args[2]))) {
        return PyObject_Vectorcall(python_call_ex, args, nargs, NULL);
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
            out = PyObject_Vectorcall(python_call_ex, args, nargs, NULL);
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

static PyObject *
call_ex(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    return own_off(call_ex_steps(module, args, nargs));
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

/* bodies.construct for the common classes -- object's __new__ or a Python one (a
 * NamedTuple's), then a Python __init__ or C code's (object's) -- in C, so that no frame
 * of ours is between the program's and __new__'s or __init__'s (type.__call__ calls them
 * from C too).  Any other class is bodies.construct's. */
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
    PyObject *new = _PyType_Lookup((PyTypeObject *)cls, str_new), *init = _PyType_Lookup((PyTypeObject *)cls, str_init);
    if (new != object_new && new != NULL && Py_TYPE(new) == &PyStaticMethod_Type) { /* def __new__(cls, ...) */
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
                             : new != object_new || !python_init) {
        stack[0] = cls;
        out = PyObject_Vectorcall(construct, stack, nargs, kwnames);
        goto done;
    }
    if (new_function == NULL) {
        obj = PyObject_Vectorcall(object_new, &cls, 1, NULL);
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
    init = _PyType_Lookup(Py_TYPE(obj), str_init);
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

static PyObject *
construct_by_ref(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    return own_off(construct_by_ref_steps(module, args, nargs, kwnames));
}

/* _context.top on the C path: the innermost active entry as the running code sees it. */
static PyObject *
top(PyObject *module, PyObject *unused)
{
    PyObject *entry;
    if (stack_top(&entry) < 0) {
        return NULL;
    }
    return entry != NULL ? entry : Py_NewRef(Py_None);
}

static PyObject *
bind(PyObject *module, PyObject *variable)
{
    if (!PyContextVar_CheckExact(variable)) {
        PyErr_SetString(PyExc_TypeError, "bind() takes a ContextVar");
        return NULL;
    }
    Py_XSETREF(active, Py_NewRef(variable));
    Py_RETURN_NONE;
}

static int
keep(PyObject *kwargs, const char *name, PyObject **into)
{
    PyObject *value = PyDict_GetItemString(kwargs, name);
    if (value == NULL) {
        PyErr_Format(PyExc_TypeError, "configure() needs %s", name);
        return -1;
    }
    Py_XSETREF(*into, Py_NewRef(value));
    return 0;
}

/* -- tagging: the wrappers and the functions an overload runs per operation --------------
 *
 * tagging.py holds the reference (a Python base class with slots and a __del__).  Here
 * the fields of a wrapper are a C base class, whose deallocation does the __del__'s
 * accounting without running Python, and tag/untag/metadata/istagged/hasmetadata -- a
 * few per overloaded operation in forward-mode AD -- are C functions.  What is rare
 * (a metadata type not checked yet, a context without tagging, a new wrapper class) is
 * tagging.py's, handed over by configure_tagging(). */

typedef struct {
    PyObject_HEAD
    PyObject *value, *tag, *meta, *generation;
} TaggedFields;

static PyTypeObject *tag_type;       /* tagging.Tag */
static Py_ssize_t tag_depth, tag_live, tag_generation;
static PyObject *wrapper_classes;    /* value class -> Tagged[class] (tagging._classes) */
static PyObject *wrapper_class;      /* tagging.wrapper_class: makes one */
static PyObject *wrappers;           /* the set of every Tagged[class] */
static PyObject *tagging_context;    /* tagging._TaggingContext */
static PyObject *no_metadata;        /* tagging.NoMetaData */
static PyObject *allowed_metadata;   /* (context class, value class) -> what metadatatype allows */
static PyObject *allowed_generation; /* [dispatch.generation when allowed_metadata was filled] */
static PyObject *dispatch_module;    /* its generation: bumped when any method changes */
static PyObject *check_metadata;     /* (context class, value, metadata): raises if not allowed */
static PyObject *not_tagging;        /* (ctx, what): raises the error for a context without tagging */
static PyObject *str_generation;

/* x's fields if x is a wrapper of this tag, else NULL. */
static TaggedFields *
tagged_for(PyObject *x, PyObject *tag)
{
    int wrapper = PySet_Contains(wrappers, (PyObject *)Py_TYPE(x));
    if (wrapper <= 0) {
        return NULL; /* (a set of classes: a lookup cannot fail) */
    }
    TaggedFields *fields = (TaggedFields *)x;
    return fields->tag == tag ? fields : NULL;
}

/* tagging._plain: x's value, however deeply wrapped (borrowed; x itself if not a wrapper). */
static PyObject *
plain_value(PyObject *x)
{
    while (wrappers != NULL && PySet_Contains(wrappers, (PyObject *)Py_TYPE(x)) == 1) {
        x = ((TaggedFields *)x)->value;
    }
    return x;
}

/* tagging._make: value wrapped for tag, carrying meta (a new reference). */
static PyObject *
make_wrapper(PyObject *value, PyObject *tag, PyObject *meta)
{
    if (Py_TYPE(tag) != tag_type) {
        PyErr_Format(PyExc_TypeError, "cassette_hook: a context's tag is a %.200s, not a Tag", Py_TYPE(tag)->tp_name);
        return NULL;
    }
    PyObject *cls = PyDict_GetItemWithError(wrapper_classes, (PyObject *)Py_TYPE(value));
    if (cls != NULL) {
        Py_INCREF(cls);
    }
    else if (PyErr_Occurred() || (cls = PyObject_CallOneArg(wrapper_class, (PyObject *)Py_TYPE(value))) == NULL) {
        return NULL;
    }
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &TaggedFieldsType)) {
        PyErr_SetString(PyExc_TypeError, "cassette_hook: a wrapper class is not made on TaggedFields");
        Py_DECREF(cls);
        return NULL;
    }
    TaggedFields *wrapper = (TaggedFields *)((PyTypeObject *)cls)->tp_alloc((PyTypeObject *)cls, 0);
    Py_DECREF(cls);
    if (wrapper == NULL) {
        return NULL;
    }
    wrapper->value = Py_NewRef(value);
    wrapper->tag = Py_NewRef(tag);
    wrapper->meta = Py_NewRef(meta);
    PyObject *depth = SLOT(tag, tag_depth), *generation = SLOT(tag, tag_generation), *live = SLOT(tag, tag_live);
    int inside = depth ? PyObject_IsTrue(depth) : 0;
    if (inside < 0) {
        Py_DECREF(wrapper);
        return NULL;
    }
    if (inside && generation != NULL && live != NULL) { /* made inside the extent: counted */
        PyObject *more = PyNumber_Add(live, one);
        if (more == NULL) {
            Py_DECREF(wrapper);
            return NULL;
        }
        Py_SETREF(SLOT(tag, tag_live), more);
        wrapper->generation = Py_NewRef(generation);
    }
    else { /* made by the caller outside: the caller's own */
        wrapper->generation = Py_NewRef(Py_None);
    }
    return (PyObject *)wrapper;
}

/* A wrapper made inside its tag's extent, of the tag's current generation, is gone:
 * one live wrapper less for the extent's end to find (tagging.Tagged.__del__). */
static void
uncount(TaggedFields *self)
{
    PyObject *tag = self->tag, *generation = self->generation;
    if (tag == NULL || generation == NULL || generation == Py_None || Py_TYPE(tag) != tag_type) {
        return;
    }
    PyObject *current = SLOT(tag, tag_generation), *live = SLOT(tag, tag_live);
    if (current == NULL || live == NULL || !PyLong_CheckExact(current) || !PyLong_CheckExact(generation)) {
        return;
    }
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    if (PyObject_RichCompareBool(current, generation, Py_EQ) == 1) {
        PyObject *fewer = PyNumber_Subtract(live, one);
        if (fewer != NULL) {
            Py_SETREF(SLOT(tag, tag_live), fewer);
        }
    }
    PyErr_Clear();
    PyErr_Restore(type, value, traceback);
}

static int
tagged_traverse(TaggedFields *self, visitproc visit, void *arg)
{
    Py_VISIT(self->value);
    Py_VISIT(self->tag);
    Py_VISIT(self->meta);
    Py_VISIT(self->generation);
    return 0;
}

static int
tagged_clear(TaggedFields *self)
{
    Py_CLEAR(self->value);
    Py_CLEAR(self->tag);
    Py_CLEAR(self->meta);
    Py_CLEAR(self->generation);
    return 0;
}

static void
tagged_dealloc(TaggedFields *self)
{
    PyObject_GC_UnTrack(self);
    uncount(self);
    tagged_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef tagged_members[] = {
    {"_ch_value", T_OBJECT_EX, offsetof(TaggedFields, value), 0, "the plain value"},
    {"_ch_tag", T_OBJECT_EX, offsetof(TaggedFields, tag), 0, "the Tag of the context it is tagged for"},
    {"_ch_meta", T_OBJECT_EX, offsetof(TaggedFields, meta), 0, "its metadata, or NoMetaData"},
    {"_ch_generation", T_OBJECT_EX, offsetof(TaggedFields, generation), 0,
     "the tag's generation it was made in, or None when made outside the extent"},
    {NULL},
};

static PyTypeObject TaggedFieldsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cassette_hook._speedups.TaggedFields",
    .tp_doc = "The fields of a tagged value (tagging.Tagged's base).",
    .tp_basicsize = sizeof(TaggedFields),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)tagged_traverse,
    .tp_clear = (inquiry)tagged_clear,
    .tp_dealloc = (destructor)tagged_dealloc,
    .tp_members = tagged_members,
};

/* Positional-or-keyword arguments named names[0..n), the last `optional` of them may be
 * missing (left NULL).  0 on success. */
static int
arguments(const char *function, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
          const char *const *names, Py_ssize_t n, Py_ssize_t optional, PyObject **out)
{
    if (nargs > n) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %zd arguments (%zd given)", function, n, nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        out[i] = i < nargs ? args[i] : NULL;
    }
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        Py_ssize_t i = 0;
        while (i < n && PyUnicode_CompareWithASCIIString(name, names[i]) != 0) {
            i++;
        }
        if (i == n) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", function, name);
            return -1;
        }
        if (out[i] != NULL) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", function, names[i]);
            return -1;
        }
        out[i] = args[nargs + k];
    }
    for (Py_ssize_t i = 0; i < n - optional; i++) {
        if (out[i] == NULL) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", function, names[i]);
            return -1;
        }
    }
    return 0;
}

/* The last context whose tag was read, by a weak reference, and that tag (held: a dead
 * context's tag lives on until another tagging context is read). */
static PyObject *last_tagging_context, *last_tag;

static int
is_last_tagging_context(PyObject *ctx)
{
    return last_tagging_context != NULL && ((PyWeakReference *)last_tagging_context)->wr_object == ctx;
}

/* ctx.tag (a new reference).  tag, untag and metadata each need it, and AD calls them
 * five times per operation, always for one context: the last context read answers
 * without an attribute lookup.  Sound because enabletagging binds a context's tag before
 * the context is handed out, and nothing rebinds it; and a weak reference, since its
 * referent is cleared when the context dies, never matches another context that later
 * gets the same address. */
static PyObject *
context_tag(PyObject *ctx)
{
    if (is_last_tagging_context(ctx)) {
        return Py_NewRef(last_tag);
    }
    PyObject *tag = PyObject_GetAttr(ctx, str_tag);
    if (tag != NULL && Py_TYPE(tag) == tag_type) {
        PyObject *ref = PyWeakref_NewRef(ctx, NULL);
        if (ref == NULL) { /* (a context class without weak references: not remembered) */
            PyErr_Clear();
        }
        else {
            Py_XSETREF(last_tagging_context, ref);
            Py_XSETREF(last_tag, Py_NewRef(tag));
        }
    }
    return tag;
}

/* Does ctx tag values (has enabletagging given it a tag)?  1, 0, or -1 on error. */
static int
is_tagging(PyObject *ctx)
{
    if (is_last_tagging_context(ctx)) {
        return 1;
    }
    PyObject *tag = PyObject_GetAttr(ctx, str_tag);
    if (tag == NULL) {
        return -1;
    }
    int tagging = tag != Py_None;
    Py_DECREF(tag);
    return tagging;
}

/* Has configure_tagging() not run yet (tagging's functions then raise: they would read
 * its tables)?  Only a direct import of this private module can call them before. */
static int
tagging_unconfigured(const char *function)
{
    if (wrappers != NULL) {
        return 0;
    }
    PyErr_Format(PyExc_RuntimeError, "cassette_hook._speedups.%s: called before cassette_hook.tagging set it up",
                 function);
    return 1;
}

/* (x, ctx) of untag/metadata/istagged/hasmetadata, and x's fields if tagged for ctx. */
static int
x_and_ctx(const char *function, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **x,
          TaggedFields **fields)
{
    static const char *const names[] = {"x", "ctx"};
    PyObject *parsed[2];
    if (tagging_unconfigured(function) || arguments(function, args, nargs, kwnames, names, 2, 0, parsed) < 0) {
        return -1;
    }
    *x = parsed[0];
    *fields = NULL;
    if (PySet_Contains(wrappers, (PyObject *)Py_TYPE(*x)) != 1) {
        return 0;
    }
    PyObject *tag = context_tag(parsed[1]);
    if (tag == NULL) {
        return -1;
    }
    *fields = tagged_for(*x, tag);
    Py_DECREF(tag);
    return 0;
}

static PyObject *
untag(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *x;
    TaggedFields *fields;
    if (x_and_ctx("untag", args, nargs, kwnames, &x, &fields) < 0) {
        return NULL;
    }
    return Py_NewRef(fields ? fields->value : x);
}

static PyObject *
metadata(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *x;
    TaggedFields *fields;
    if (x_and_ctx("metadata", args, nargs, kwnames, &x, &fields) < 0) {
        return NULL;
    }
    return Py_NewRef(fields ? fields->meta : no_metadata);
}

static PyObject *
istagged(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *x;
    TaggedFields *fields;
    if (x_and_ctx("istagged", args, nargs, kwnames, &x, &fields) < 0) {
        return NULL;
    }
    return PyBool_FromLong(fields != NULL);
}

static PyObject *
hasmetadata(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *x;
    TaggedFields *fields;
    if (x_and_ctx("hasmetadata", args, nargs, kwnames, &x, &fields) < 0) {
        return NULL;
    }
    return PyBool_FromLong(fields != NULL && fields->meta != no_metadata);
}

/* The last answer of metadata_allowed, for the classes of (context, value, metadata)
 * and dispatch's generation it was given in: AD tags every result with the same classes,
 * so one entry answers nearly every call without a tuple to hash. */
static PyObject *last_ctx_type, *last_value_type, *last_meta_type, *last_generation;

/* May values of this class carry this metadata in this context class?  1 yes, 0 not
 * known yet (check_metadata decides, and remembers), -1 on error. */
static int
metadata_allowed(PyObject *ctx_type, PyObject *value_type, PyObject *meta)
{
    PyObject *generation = PyDict_GetItemWithError(PyModule_GetDict(dispatch_module), str_generation);
    if (generation == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_AttributeError, "cassette_hook: dispatch has no generation");
        }
        return -1;
    }
    if (generation == last_generation && ctx_type == last_ctx_type && value_type == last_value_type
        && (PyObject *)Py_TYPE(meta) == last_meta_type) {
        return 1;
    }
    int current = PyObject_RichCompareBool(PyList_GET_ITEM(allowed_generation, 0), generation, Py_EQ);
    if (current <= 0) {
        return current;
    }
    PyObject *key = PyTuple_Pack(2, ctx_type, value_type);
    if (key == NULL) {
        return -1;
    }
    PyObject *allowed = PyDict_GetItemWithError(allowed_metadata, key);
    Py_DECREF(key);
    if (allowed == NULL || allowed == no_metadata) {
        return PyErr_Occurred() ? -1 : 0;
    }
    int ok = PyObject_IsInstance(meta, allowed);
    if (ok == 1 && PyObject_IsSubclass((PyObject *)Py_TYPE(meta), allowed) == 1) { /* (not for a __class__ that lies) */
        Py_XSETREF(last_generation, Py_NewRef(generation));
        Py_XSETREF(last_ctx_type, Py_NewRef(ctx_type));
        Py_XSETREF(last_value_type, Py_NewRef(value_type));
        Py_XSETREF(last_meta_type, Py_NewRef((PyObject *)Py_TYPE(meta)));
    }
    return ok;
}

static PyObject *
tag(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"value", "ctx", "metadata"};
    PyObject *parsed[3];
    if (tagging_unconfigured("tag") || arguments("tag", args, nargs, kwnames, names, 3, 1, parsed) < 0) {
        return NULL;
    }
    PyObject *value = parsed[0], *ctx = parsed[1], *meta = parsed[2] ? parsed[2] : no_metadata;
    int tagging = is_last_tagging_context(ctx) ? 1 : PyObject_IsInstance(ctx, tagging_context);
    PyObject *tag = tagging > 0 ? context_tag(ctx) : NULL;
    if (tag == NULL || tag == Py_None) {
        if (tagging >= 0 && !PyErr_Occurred()) {
            PyObject *out = PyObject_CallOneArg(not_tagging, ctx);
            Py_XDECREF(out);
            if (out != NULL) {
                PyErr_SetString(PyExc_TypeError, "tag(): tagging is not enabled for this context");
            }
        }
        Py_XDECREF(tag);
        return NULL;
    }
    TaggedFields *fields = tagged_for(value, tag);
    if (fields != NULL) { /* already tagged for this context: its plain value, tagged anew */
        value = fields->value;
    }
    if (meta != no_metadata) {
        int allowed = metadata_allowed((PyObject *)Py_TYPE(ctx), (PyObject *)Py_TYPE(value), meta);
        if (allowed == 0) {
            PyObject *stack[3] = {(PyObject *)Py_TYPE(ctx), value, meta};
            PyObject *checked = PyObject_Vectorcall(check_metadata, stack, 3, NULL);
            Py_XDECREF(checked);
            allowed = checked ? 1 : -1;
        }
        if (allowed < 0) {
            Py_DECREF(tag);
            return NULL;
        }
    }
    Py_INCREF(value); /* fields may go with the wrapper it was read from */
    PyObject *out = make_wrapper(value, tag, meta);
    Py_DECREF(value);
    Py_DECREF(tag);
    return out;
}

static PyObject *
make(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "make(value, tag, meta) takes 3 arguments");
        return NULL;
    }
    return make_wrapper(args[0], args[1], args[2]);
}

static PyObject *
configure_tagging(PyObject *module, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args) != 0 || kwargs == NULL) {
        PyErr_SetString(PyExc_TypeError, "configure_tagging() takes keyword arguments");
        return NULL;
    }
    PyObject *type = PyDict_GetItemString(kwargs, "tag_type");
    if (type == NULL || !PyType_Check(type) || slot_offset((PyTypeObject *)type, "depth", &tag_depth) < 0
        || slot_offset((PyTypeObject *)type, "live", &tag_live) < 0
        || slot_offset((PyTypeObject *)type, "generation", &tag_generation) < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "configure_tagging() needs tag_type, a class with slots");
        }
        return NULL;
    }
    Py_XSETREF(tag_type, (PyTypeObject *)Py_NewRef(type));
    if (keep(kwargs, "classes", &wrapper_classes) < 0 || keep(kwargs, "wrapper_class", &wrapper_class) < 0
        || keep(kwargs, "wrappers", &wrappers) < 0 || keep(kwargs, "tagging_context", &tagging_context) < 0
        || keep(kwargs, "no_metadata", &no_metadata) < 0 || keep(kwargs, "allowed", &allowed_metadata) < 0
        || keep(kwargs, "allowed_generation", &allowed_generation) < 0 || keep(kwargs, "dispatch", &dispatch_module) < 0
        || keep(kwargs, "check_metadata", &check_metadata) < 0 || keep(kwargs, "not_tagging", &not_tagging) < 0) {
        return NULL;
    }
    if (!PyDict_CheckExact(wrapper_classes) || !PySet_CheckExact(wrappers) || !PyDict_CheckExact(allowed_metadata)
        || !PyList_CheckExact(allowed_generation) || PyList_GET_SIZE(allowed_generation) != 1
        || !PyModule_Check(dispatch_module)) {
        PyErr_SetString(PyExc_TypeError,
                        "configure_tagging(): classes and allowed must be dicts, wrappers a set, "
                        "allowed_generation a list of one, dispatch a module");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
configure(PyObject *module, PyObject *args, PyObject *kwargs)
{
    PyObject *entry, *plan;
    if (PyTuple_GET_SIZE(args) != 0 || kwargs == NULL) {
        PyErr_SetString(PyExc_TypeError, "configure() takes keyword arguments");
        return NULL;
    }
    entry = PyDict_GetItemString(kwargs, "entry_type");
    plan = PyDict_GetItemString(kwargs, "plan_type");
    PyObject *id_table = PyDict_GetItemString(kwargs, "id_table_type");
    if (entry == NULL || plan == NULL || id_table == NULL || !PyType_Check(entry) || !PyType_Check(plan)
        || !PyType_Check(id_table)) {
        PyErr_SetString(PyExc_TypeError, "configure() needs entry_type, plan_type and id_table_type");
        return NULL;
    }
    if (slot_offset((PyTypeObject *)entry, "ctx", &entry_ctx) < 0
        || slot_offset((PyTypeObject *)entry, "plan", &entry_plan) < 0
        || slot_offset((PyTypeObject *)entry, "below", &entry_below) < 0
        || slot_offset((PyTypeObject *)entry, "direct_twins", &entry_direct_twins) < 0
        || slot_offset((PyTypeObject *)plan, "fast", &plan_fast) < 0
        || slot_offset((PyTypeObject *)plan, "enters", &plan_enters) < 0
        || slot_offset((PyTypeObject *)plan, "fallback", &plan_fallback) < 0
        || slot_offset((PyTypeObject *)plan, "prehook_call", &plan_prehook_call) < 0
        || slot_offset((PyTypeObject *)plan, "overdub_call", &plan_overdub_call) < 0
        || slot_offset((PyTypeObject *)plan, "posthook_call", &plan_posthook_call) < 0
        || slot_offset((PyTypeObject *)plan, "raisehook_call", &plan_raisehook_call) < 0
        || slot_offset((PyTypeObject *)plan, "overdub", &plan_overdub) < 0
        || slot_offset((PyTypeObject *)plan, "execute", &plan_execute) < 0
        || slot_offset((PyTypeObject *)plan, "operators", &plan_operators) < 0
        || slot_offset((PyTypeObject *)plan, "constructors", &plan_constructors) < 0
        || slot_offset((PyTypeObject *)plan, "constructions", &plan_constructions) < 0
        || slot_offset((PyTypeObject *)plan, "twins", &plan_twins) < 0
        || slot_offset((PyTypeObject *)plan, "_modules", &plan_modules) < 0
        || slot_offset((PyTypeObject *)plan, "shared", &plan_shared) < 0
        || slot_offset((PyTypeObject *)id_table, "values", &id_table_values) < 0
        || slot_offset((PyTypeObject *)id_table, "_refs", &id_table_refs) < 0) {
        return NULL;
    }
    Py_XSETREF(id_table_type, (PyTypeObject *)Py_NewRef(id_table));
    Py_XSETREF(entry_type, (PyTypeObject *)Py_NewRef(entry));
    Py_XSETREF(plan_type, (PyTypeObject *)Py_NewRef(plan));
    if (keep(kwargs, "resolve_direct", &resolve_direct) < 0 || keep(kwargs, "site_closure", &site_code) < 0 || keep(kwargs, "call_primitive", &call_primitive) < 0
        || keep(kwargs, "special", &special) < 0 || keep(kwargs, "preparers", &preparers) < 0 || keep(kwargs, "indirect_names", &indirect_names) < 0
        || keep(kwargs, "indirect_callers", &indirect_callers) < 0
        || keep(kwargs, "present", &present) < 0 || keep(kwargs, "overdub_default", &overload_defaults[0]) < 0
        || keep(kwargs, "execute_default", &overload_defaults[1]) < 0
        || keep(kwargs, "fallback_default", &fallback_default) < 0
        || keep(kwargs, "plain_operators", &plain_operators) < 0 || keep(kwargs, "c_operands", &c_operands) < 0
        || keep(kwargs, "runnable", &runnable) < 0 || keep(kwargs, "without_body", &without_body) < 0
        || keep(kwargs, "operator_dunders", &operator_dunders) < 0 || keep(kwargs, "operator_body", &operator_body) < 0
        || keep(kwargs, "call_ex", &python_call_ex) < 0
        || keep(kwargs, "seen_below", &seen_below) < 0 || keep(kwargs, "overdub_instead", &overdub_instead) < 0
        || keep(kwargs, "construct", &construct) < 0 || keep(kwargs, "own_directory", &own_directory) < 0) {
        return NULL;
    }
    if (!PyFunction_Check(site_code)) {
        PyErr_SetString(PyExc_TypeError, "configure(): site_closure must be a closure made by callsite.site");
        return NULL;
    }
    PyObject *closure = site_code; /* a sample closure: its code, globals and names */
    PyObject *freevars = PyObject_GetAttrString(PyFunction_GET_CODE(closure), "co_freevars");
    if (freevars == NULL) {
        return NULL;
    }
    int shape = PyTuple_Check(freevars) && PyTuple_GET_SIZE(freevars) == 2;
    site_entry_first = shape && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(freevars, 0), "entry") == 0;
    shape = shape && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(freevars, site_entry_first ? 1 : 0), "f") == 0
            && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(freevars, site_entry_first ? 0 : 1), "entry") == 0;
    Py_DECREF(freevars);
    if (!shape) {
        PyErr_SetString(PyExc_TypeError, "configure(): site's closure must have the free variables entry and f");
        return NULL;
    }
    Py_XSETREF(site_qualname, Py_NewRef(((PyFunctionObject *)closure)->func_qualname));
    Py_XSETREF(site_globals, Py_NewRef(PyFunction_GET_GLOBALS(closure)));
    site_code = Py_NewRef(PyFunction_GET_CODE(closure));
    Py_DECREF(closure);
    const char *generics[3] = {"overdub", "execute", "fallback"};
    PyObject **dispatchers[3] = {&overload_dispatchers[0], &overload_dispatchers[1], &fallback_dispatcher};
    for (int i = 0; i < 3; i++) {
        PyObject *generic = PyDict_GetItemString(kwargs, generics[i]);
        PyObject *dispatcher = generic ? PyObject_GetAttrString(generic, "func") : NULL;
        if (dispatcher == NULL || Py_TYPE(dispatcher) != &DispatcherType) {
            Py_XDECREF(dispatcher);
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "configure() needs %s, a Generic that calls a Dispatcher", generics[i]);
            return NULL;
        }
        Py_XSETREF(*dispatchers[i], dispatcher);
    }
    if (!PyAnySet_CheckExact(plain_operators) || !PyAnySet_CheckExact(c_operands)) {
        PyErr_SetString(PyExc_TypeError, "configure(): plain_operators and c_operands must be sets");
        return NULL;
    }
    if (!PyDict_CheckExact(special) || !PyDict_CheckExact(preparers) || !PyAnySet_CheckExact(indirect_names)
        || !PyDict_CheckExact(indirect_callers)) {
        PyErr_SetString(PyExc_TypeError,
                        "configure(): special, preparers and indirect_callers must be dicts, indirect_names a set");
        return NULL;
    }
    if (address_set_fill(&plain_operator_set, plain_operators) < 0 || dunder_table_fill(operator_dunders) < 0
        || fill_indirect_names(indirect_names) < 0 || fill_indirect_methods(indirect_callers) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* Function versions (CPython 3.13).  Specialized calls guard on a function's version.
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
static void
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

/* The callback of the weak reference to a function that enter_by_id entered in a
 * WeakIdCache: WeakIdCache._forget in C (its partial and frame cost more than the rest
 * of a closure's twin together). */
typedef struct {
    PyObject_HEAD
    PyObject *cache, *key; /* the WeakIdCache, id(function) */
    vectorcallfunc vectorcall;
} Forget;

static int
forget_one(PyObject *dict, PyObject *key)
{
    if (dict == NULL || !PyDict_CheckExact(dict) || PyDict_DelItem(dict, key) == 0) {
        return 0;
    }
    if (PyErr_ExceptionMatches(PyExc_KeyError)) {
        PyErr_Clear();
        return 0;
    }
    return -1;
}

static PyObject *
forget_call(Forget *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (forget_one(SLOT(self->cache, id_table_values), self->key) < 0
        || forget_one(SLOT(self->cache, id_table_refs), self->key) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static int
forget_traverse(Forget *self, visitproc visit, void *arg)
{
    Py_VISIT(self->cache);
    return 0;
}

static int
forget_clear(Forget *self)
{
    Py_CLEAR(self->cache);
    return 0;
}

static void
forget_dealloc(Forget *self)
{
    PyObject_GC_UnTrack(self);
    Py_CLEAR(self->cache);
    Py_CLEAR(self->key);
    PyObject_GC_Del(self);
}

static PyMemberDef forget_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Forget, vectorcall), READONLY},
    {NULL},
};

static PyTypeObject ForgetType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cassette_hook._speedups.Forget",
    .tp_doc = "Forgets a dead function's entry in a WeakIdCache (the callback of its weak reference).",
    .tp_basicsize = sizeof(Forget),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Forget, vectorcall),
    .tp_traverse = (traverseproc)forget_traverse,
    .tp_clear = (inquiry)forget_clear,
    .tp_dealloc = (destructor)forget_dealloc,
    .tp_members = forget_members,
};

/* WeakIdCache.set(cache, obj, value) in C: 0, or -1 on error. */
static int
enter_by_id(PyObject *cache, PyObject *obj, PyObject *value)
{
    PyObject *values = values_of(cache), *refs = SLOT(cache, id_table_refs);
    if (values == NULL || !PyDict_CheckExact(values) || refs == NULL || !PyDict_CheckExact(refs)) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "cassette_hook: a WeakIdCache without its dicts");
        }
        return -1;
    }
    PyObject *key = PyLong_FromVoidPtr(obj);
    if (key == NULL) {
        return -1;
    }
    int known = PyDict_Contains(refs, key);
    if (known == 0) {
        Forget *forget = PyObject_GC_New(Forget, &ForgetType);
        if (forget == NULL) {
            Py_DECREF(key);
            return -1;
        }
        forget->cache = Py_NewRef(cache);
        forget->key = Py_NewRef(key);
        forget->vectorcall = (vectorcallfunc)forget_call;
        PyObject_GC_Track(forget);
        PyObject *ref = PyWeakref_NewRef(obj, (PyObject *)forget);
        Py_DECREF(forget);
        known = ref == NULL ? -1 : PyDict_SetItem(refs, key, ref);
        Py_XDECREF(ref);
    }
    int out = known < 0 ? -1 : PyDict_SetItem(values, key, value);
    Py_DECREF(key);
    return out;
}

/* Plan._make_twin's shortcut, for a function whose code the plan has made a twin of
 * before (plan.shared: code -> (twin code, globals, __module__, builtins, the twin's
 * builtins, len(globals)), entered by Plan._make_twin): a closure or lambda made anew
 * has the code, globals and module of the first, so the plan's answers for the first
 * (its scope, the switch, the builtins its twin reads, the module's classes reached)
 * hold for it, and its twin is the shared rewritten code made a function with its own
 * defaults, keyword defaults, closure, names and version, as Plan._twin_from makes it
 * (a microsecond of Python before, per function object).  1 and a new reference in
 * *twin, entered in plan.twins if enter; 0 if the shortcut does not apply (Python
 * decides); -1 on error.  The globals' size stands for what _implicit.reach rescans
 * when it grows, as reach's own test does. */
static int
shared_twin(PyObject *plan, PyObject *f, int enter, PyObject **twin)
{
    PyFunctionObject *func = (PyFunctionObject *)f;
    PyObject *shared = slot(plan, plan_shared, "shared");
    PyObject *table = shared ? values_of(shared) : NULL;
    if (table == NULL) {
        return -1;
    }
    PyObject *found = by_id(table, func->func_code);
    if (found == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    if (!PyTuple_CheckExact(found) || PyTuple_GET_SIZE(found) != 6 || !PyCode_Check(PyTuple_GET_ITEM(found, 0))
        || !PyDict_CheckExact(PyTuple_GET_ITEM(found, 4)) || !PyLong_CheckExact(PyTuple_GET_ITEM(found, 5))) {
        PyErr_SetString(PyExc_TypeError, "cassette_hook: a plan's shared twin is not (code, globals, module, "
                                         "builtins, builtins, size)");
        return -1;
    }
    PyObject *module = func->func_module ? func->func_module : Py_None;
    if (PyTuple_GET_ITEM(found, 1) != func->func_globals || PyTuple_GET_ITEM(found, 2) != module
        || PyTuple_GET_ITEM(found, 3) != func->func_builtins
        || PyLong_AsSsize_t(PyTuple_GET_ITEM(found, 5)) != PyDict_GET_SIZE(func->func_globals)) {
        return 0;
    }
    Py_INCREF(found); /* (held while the twin is made: entering it runs Python) */
    PyFunctionObject *made = (PyFunctionObject *)PyFunction_NewWithQualName(PyTuple_GET_ITEM(found, 0),
                                                                            func->func_globals, func->func_qualname);
    if (made == NULL) {
        Py_DECREF(found);
        return -1;
    }
    /* (set as FunctionType() sets them, with no version reset: version_from_code's) */
    Py_XSETREF(made->func_name, Py_NewRef(func->func_name));
    Py_XSETREF(made->func_defaults, Py_XNewRef(func->func_defaults));
    Py_XSETREF(made->func_kwdefaults, Py_XNewRef(func->func_kwdefaults));
    Py_XSETREF(made->func_closure, Py_XNewRef(func->func_closure));
    if (PyTuple_GET_ITEM(found, 4) != PyTuple_GET_ITEM(found, 3)) { /* the mirror of the builtins */
        Py_XSETREF(made->func_builtins, Py_NewRef(PyTuple_GET_ITEM(found, 4)));
    }
    version_from_code(made, VERSION_OF(f));
    Py_DECREF(found);
    if (enter) {
        PyObject *twins = slot(plan, plan_twins, "twins");
        PyObject *entry = twins == NULL ? NULL
                          : PyTuple_Pack(4, made, func->func_code, func->func_defaults ? func->func_defaults : Py_None,
                                         func->func_kwdefaults ? func->func_kwdefaults : Py_None);
        int entered = entry == NULL ? -1 : enter_by_id(twins, f, entry);
        Py_XDECREF(entry);
        if (entered < 0) {
            Py_DECREF(made);
            return -1;
        }
    }
    *twin = (PyObject *)made;
    return 1;
}

/* _light.set_code(func, code): func.__code__ = code (its checks, its watchers' events),
 * the version kept as above. */
static PyObject *
set_code(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyFunction_Check(args[0]) || !PyCode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "set_code(function, code) takes a function and a code object");
        return NULL;
    }
    uint32_t had = VERSION_OF(args[0]);
    if (PyObject_SetAttrString(args[0], "__code__", args[1]) < 0) {
        return NULL;
    }
    version_from_code((PyFunctionObject *)args[0], had);
    Py_RETURN_NONE;
}

/* plan's twin of func: versioned as above if func is. */
static PyObject *
version_like(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyFunction_Check(args[0]) || !PyFunction_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "version_like(twin, function) takes two functions");
        return NULL;
    }
    version_from_code((PyFunctionObject *)args[0], VERSION_OF(args[1]));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"resolve", resolve, METH_O, "What a rewritten call site calls in place of f."},
    {"resolve_star", resolve_star, METH_O, "What a rewritten star call site calls in place of f."},
    {"enter", (PyCFunction)(void (*)(void))enter, METH_FASTCALL,
     "enter(f, *args): what an entering call site calls in place of f, given its arguments."},
    {"set_code", (PyCFunction)(void (*)(void))set_code, METH_FASTCALL,
     "set_code(function, code): function.__code__ = code, calls to it as specializable as before (3.13)."},
    {"version_like", (PyCFunction)(void (*)(void))version_like, METH_FASTCALL,
     "version_like(twin, function): the twin's calls as specializable as the function's (3.13)."},
    {"operator_call", (PyCFunction)(void (*)(void))operator_call, METH_FASTCALL | METH_KEYWORDS,
     "operator_call(op, *args): an operator of switched code (_switch._operator_call)."},
    {"method_of", (PyCFunction)(void (*)(void))method_of, METH_FASTCALL,
     "method_of(obj, name): what a method site of switched code loads, as MethodSite(name)(obj)."},
    {"mirror_builtins", (PyCFunction)(void (*)(void))mirror_builtins, METH_FASTCALL,
     "mirror_builtins(builtins, pinned): a dict that follows builtins, but for pinned's names (3.12+; else None)."},
    {"set_builtins", (PyCFunction)(void (*)(void))set_builtins, METH_FASTCALL,
     "set_builtins(function, builtins): the builtins function's frames read."},
    {"entry_gone", entry_gone, METH_O, "entry_gone(ref): an entry _switch followed has died (a weakref callback)."},
    {"watch_live", (PyCFunction)(void (*)(void))watch_live, METH_FASTCALL,
     "watch_live(live, live_operators, builtins, active_name, operators_name): the sets entry_gone keeps."},
    {"runs_here", runs_here, METH_O, "runs_here(module): should a switched body of module run rewritten now?"},
    {"yield_from", yield_from, METH_O, "yield_from(obj): what `yield from obj` iterates, iter(obj) as a call site."},
    {"call", (PyCFunction)(void (*)(void))call, METH_FASTCALL | METH_KEYWORDS,
     "call(f, /, *args, **kwargs): f(*args, **kwargs) as the innermost active context sees it."},
    {"call_ex", (PyCFunction)(void (*)(void))call_ex, METH_FASTCALL,
     "call_ex(f, args, kwargs=None, /): the star call f(*args, **kwargs) (3.10 call sites)."},
    {"primitive", (PyCFunction)(void (*)(void))primitive, METH_FASTCALL | METH_KEYWORDS,
     "primitive(f, /, *args, **kwargs): the builtin f called as the plain program would call it."},
    {"construct_by_ref", (PyCFunction)(void (*)(void))construct_by_ref, METH_FASTCALL | METH_KEYWORDS,
     "construct_by_ref(ref, /, *args, **kwargs): ref() called, its __init__ overdubbed."},
    {"bind", bind, METH_O, "Use this ContextVar as the stack of active contexts."},
    {"unpop", (PyCFunction)(void (*)(void))unpop, METH_FASTCALL,
     "unpop(ctx, f): put back the popped entry of ctx's running overload, and return what runs f's body; or None."},
    {"install_recurse", install_recurse, METH_O, "install_recurse(f): bodies.recurse's calls run in C where they can."},
    {"repop", repop, METH_NOARGS, "repop(): pop again what unpop() put back."},
    {"run_popped", (PyCFunction)(void (*)(void))run_popped_call, METH_FASTCALL | METH_KEYWORDS,
     "run_popped(entry, method, *args, **kwargs): method(*args, **kwargs) run with entry popped, as a Site runs an overload."},
    {"handled_traceback", (PyCFunction)(void (*)(void))handled_traceback, METH_FASTCALL,
     "handled_traceback(exc, tb): tb becomes the traceback of exc, the exception being handled (3.10)."},
    {"exit_method", (PyCFunction)(void (*)(void))exit_method, METH_FASTCALL,
     "exit_method(Context, pop): Context.__exit__ for the C path (pop, called again after an interrupt)."},
    {"unpopped", unpopped, METH_NOARGS, "unpopped(): is what unpop() put back in force on this thread?"},
    {"top", top, METH_NOARGS, "top(): the innermost active Entry as the running code sees it, or None."},
    {"overload_of", overload_of, METH_O,
     "overload_of(call): the overdub method for (ctx, f, *args), else the execute one, else None."},
    {"present", (PyCFunction)(void (*)(void))present_c, METH_FASTCALL,
     "present(f, args): how hooks see a builtin method call: (type's method, (receiver, *args))."},
    {"tag", (PyCFunction)(void (*)(void))tag, METH_FASTCALL | METH_KEYWORDS,
     "tag(value, ctx, metadata=NoMetaData)\n--\n\nvalue tagged with respect to ctx, carrying metadata."},
    {"untag", (PyCFunction)(void (*)(void))untag, METH_FASTCALL | METH_KEYWORDS,
     "untag(x, ctx)\n--\n\nThe plain value of x if it is tagged for ctx, else x itself."},
    {"metadata", (PyCFunction)(void (*)(void))metadata, METH_FASTCALL | METH_KEYWORDS,
     "metadata(x, ctx)\n--\n\nThe metadata x carries for ctx, or NoMetaData."},
    {"istagged", (PyCFunction)(void (*)(void))istagged, METH_FASTCALL | METH_KEYWORDS,
     "istagged(x, ctx)\n--\n\nIs x tagged for ctx (another context's tag does not count)?"},
    {"hasmetadata", (PyCFunction)(void (*)(void))hasmetadata, METH_FASTCALL | METH_KEYWORDS,
     "hasmetadata(x, ctx)\n--\n\nDoes x carry metadata for ctx?"},
    {"make", (PyCFunction)(void (*)(void))make, METH_FASTCALL,
     "make(value, tag, meta): value wrapped for tag (tagging._make)."},
    {"configure_tagging", (PyCFunction)(void (*)(void))configure_tagging, METH_VARARGS | METH_KEYWORDS,
     "Hand over tagging's classes, tables and the Python functions it delegates to."},
    {"configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS,
     "Hand over the classes and the Python functions the hot path delegates to."},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "cassette_hook._speedups",
    .m_doc = "The hot path of cassette_hook in C (optional; callsite.py has it in Python).",
    .m_size = -1,
    .m_methods = methods,
};

/* What stands in for each Python function configure() hands over, until it has: an
 * error, rather than a call through NULL from a path that runs with no context active. */
static PyObject *
unconfigured(PyObject *self, PyObject *args, PyObject *kwargs)
{
    PyErr_SetString(PyExc_RuntimeError, "cassette_hook._speedups: called before the runtime set it up");
    return NULL;
}

static PyMethodDef unconfigured_def = {"unconfigured", (PyCFunction)(void (*)(void))unconfigured,
                                       METH_VARARGS | METH_KEYWORDS, NULL};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    str_twin = PyUnicode_InternFromString("twin");
    str_new = PyUnicode_InternFromString("__new__");
    str_init = PyUnicode_InternFromString("__init__");
    str_call = PyUnicode_InternFromString("__call__");
    str_runs_module = PyUnicode_InternFromString("runs_module");
    if (str_twin == NULL || str_new == NULL || str_init == NULL || str_call == NULL || str_runs_module == NULL) {
        return NULL;
    }
    active = PyContextVar_New("cassette_hook._speedups.unbound", Py_None);
    special = PyDict_New(); /* (and no builtin is emulated or prepared: configure() fills them) */
    preparers = PyDict_New();
    indirect_callers = PyDict_New();
    if (active == NULL || special == NULL || preparers == NULL || indirect_callers == NULL) {
        return NULL;
    }
    PyObject *probe = PyObject_GetAttrString(Py_None, "__repr__"); /* None's tp_repr, bound */
    if (probe == NULL) {
        return NULL;
    }
    method_wrapper_type = Py_TYPE(probe); /* a static type: lives as long as the interpreter */
    Py_DECREF(probe);
    PyObject **delegates[] = {&resolve_direct, &call_primitive, &present, &runnable, &without_body, &python_call_ex,
                              &operator_body, &seen_below, &construct};
    for (size_t i = 0; i < sizeof(delegates) / sizeof(delegates[0]); i++) {
        if ((*delegates[i] = PyCFunction_New(&unconfigured_def, NULL)) == NULL) {
            return NULL;
        }
    }
    object_new = _PyType_Lookup(&PyBaseObject_Type, str_new); /* lives as long as object */
    iter_builtin = Py_XNewRef(PyDict_GetItemString(PyEval_GetBuiltins(), "iter"));
    if (object_new == NULL || iter_builtin == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "object has no __new__, or the builtins no iter");
        return NULL;
    }
#if PY_VERSION_HEX >= 0x030E0000
    if ((twin_tables_watcher = PyDict_AddWatcher(twin_table_changed)) < 0) {
        return NULL;
    }
#endif
    str_tag = PyUnicode_InternFromString("tag");
    str_generation = PyUnicode_InternFromString("generation");
    one = PyLong_FromLong(1);
    if (str_tag == NULL || str_generation == NULL || one == NULL) {
        return NULL;
    }
    if (PyType_Ready(&DispatcherType) < 0 || PyType_Ready(&RefinerType) < 0 || PyType_Ready(&TaggedFieldsType) < 0
        || PyType_Ready(&SiteType) < 0 || PyType_Ready(&OperatorSiteType) < 0 || PyType_Ready(&MethodSiteType) < 0
        || PyType_Ready(&ForgetType) < 0
        || (SpecialType = (PyTypeObject *)PyType_FromSpec(&special_spec)) == NULL) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(module, "Dispatcher", (PyObject *)&DispatcherType) < 0
        || PyModule_AddObjectRef(module, "Refiner", (PyObject *)&RefinerType) < 0
        || PyModule_AddObjectRef(module, "TaggedFields", (PyObject *)&TaggedFieldsType) < 0
        || PyModule_AddObjectRef(module, "Special", (PyObject *)SpecialType) < 0
        || PyModule_AddObjectRef(module, "OperatorSite", (PyObject *)&OperatorSiteType) < 0
        || PyModule_AddObjectRef(module, "MethodSite", (PyObject *)&MethodSiteType) < 0
        || PyModule_AddIntConstant(module, "ENTERED_MAX", ENTERED_MAX) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
