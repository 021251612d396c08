/* What the accelerator's files share: the state (state.h, with compat.h), the small
 * helpers the hot path inlines, the object layouts more than one file reads, and the
 * prototypes of the functions one file calls in another.  Each concept file mirrors one
 * Python module (docs/internals.md, "The C hot path"):
 *
 *   module.c     the method table, multi-phase init, configure() and shared helpers
 *   context.c    _context: the stack's top, a context popped while its hooks run, __exit__
 *   weakid.c     _weakid: the tables by id (WeakIdCache) and their memo
 *   runtime.plan.c       plan: twins from the tables, shared twins, function versions, the builtins' mirror
 *   own.c        _own: tracebacks cleaned of cassette_hook's own frames
 *   runtime.primitives.c primitives: builtins called as the plain program calls them
 *   runtime.operators.c  operators: operators and their Python dunders
 *   dispatch.c   dispatch: a generic's type cache walked (Dispatcher, Refiner)
 *   runtime.callees.c     bodies: what runs a callee's body, recurse, construct
 *   runtime.callsites.c   callsite: resolve, enter, call, the overdubbed call (Site) and the site types
 *   implicit.c   _implicit: Special, a class's special method called as a call site
 *   switch.c     _switch: switched code's questions, the live entries
 *   tagging.c    tagging: the wrappers' fields and tag/untag/metadata
 *
 * Every function the module exports (the method table in module.c, and each type's
 * methods) says above its definition which Python function it mirrors, as
 * "Mirrors module.name." (the module's name in the package), or "C only: why." when it
 * has none; tests/test_structure.py checks that each named one exists. */
#ifndef CASSETTE_HOOK_SPEEDUPS_INTERNAL_H
#define CASSETTE_HOOK_SPEEDUPS_INTERNAL_H

#include "state.h"

/* The functions the files share are the extension's own: hidden, so that a call from one
 * file to another is a direct call, not one through the PLT (PyInit__speedups is exported
 * by PyMODINIT_FUNC). */
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility push(hidden)
#endif

/* Entry, Plan and Tag are Python classes with __slots__; their slots are read at the
 * offsets of their member descriptors (configure), checked against the exact class. */
#define SLOT(obj, offset) (*(PyObject **)((char *)(obj) + (offset)))
#define ARGS_ON_STACK 12

/* The most positional arguments enter takes the entering way (a call site hands it at most
 * rewrite._nullslot's MAX_ENTERED, which tests check is no more; more are resolved). */
#define ENTERED_MAX 15

static inline PyObject *
slot(PyObject *obj, Py_ssize_t offset, const char *name)
{
    PyObject *value = SLOT(obj, offset);
    if (value == NULL) {
        PyErr_Format(PyExc_AttributeError, "%s has no %s", Py_TYPE(obj)->tp_name, name);
    }
    return value; /* borrowed */
}

/* A builtin function or a builtin method bound (len, items.append): PyCFunction_Type, or
 * PyCMethod_Type, its subclass with the same layout, whose objects (type(...).__name__
 * 'builtin_method') are the bound methods that take their defining class (METH_METHOD:
 * re.Pattern.match, array.array.extend).  Every test of a callee's kind asks this, not
 * for the exact type: a builtin_method taken for something else went to Python at every
 * call (runtime.callsites._resolve_direct), a microsecond each. */
static inline int
is_builtin(PyObject *f)
{
    PyTypeObject *kind = Py_TYPE(f);
    return kind == &PyCFunction_Type || kind == &PyCMethod_Type;
}

static inline size_t
address_slot(const void *address)
{
    return (size_t)(((uintptr_t)address >> 4) ^ ((uintptr_t)address >> 11)) % ADDRESS_SET_SIZE;
}

static inline int
address_set_has(const AddressSet *set, const void *address)
{
    for (size_t i = address_slot(address); set->slots[i] != NULL; i = (i + 1) % ADDRESS_SET_SIZE) {
        if (set->slots[i] == address) {
            return 1;
        }
    }
    return 0;
}

/* -- the stack (context.c) ---------------------------------------------------------------
 *
 * A context is popped while its hooks and overloads run (calls they make are seen by the
 * contexts below it, never by it).  The Python reference sets the stack's variable to the
 * entry below and resets it after: two context-variable writes, each a new HAMT and a
 * token, and the variable's read cache lost twice; about 40% of what a counting prehook
 * costs (bench_tools' "count" row, 3.12).  Here the variable keeps its value, and this
 * thread records instead that while it holds `from`, the running code's innermost entry
 * is `to`, the one below.  Every reader of the stack goes through stack_top() (Python's
 * through context_stack.top), and whatever sets the variable meanwhile (a `with ctx:` in a
 * hook, the Python closure's pops) composes with the record: another value is read as it
 * is.  Like the variable, the record covers everything the hook runs on this thread,
 * asyncio tasks it runs included (docs/internals.md says where the two differ). */
typedef struct {
    PyObject *from, *to; /* strong references, or NULL: no context popped */
    PyObject *entry;     /* the popped entry (borrowed: the caller of run_popped holds it) */
} Popped;

extern THREAD_LOCAL Popped popped;

/* *top: what the stack's variable holds, read through this thread's Popped record (a new
 * reference: an Entry, None, or what else the variable was set to).  -1 on error. */
static inline int
stack_top(PyObject **top)
{
    if (PyContextVar_Get(state->active, NULL, top) < 0) {
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
static inline int
active_entry(PyObject **entry)
{
    if (stack_top(entry) < 0) {
        return -1;
    }
    if (*entry == Py_None) {
        Py_CLEAR(*entry);
    }
    else if (*entry != NULL && Py_TYPE(*entry) != state->entry_type) {
        PyErr_SetString(PyExc_TypeError, "cassette_hook: the context stack holds something else than an Entry");
        Py_CLEAR(*entry);
        return -1;
    }
    return 0;
}

/* -- tracebacks (own.c) ------------------------------------------------------------------ */
void strip_raised(void);
PyObject *handled_traceback(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* out, with the traceback of its error cleaned of our frames if it is NULL (own.c). */
static inline PyObject *
own_off(PyObject *out)
{
    if (out == NULL) {
        strip_raised();
    }
    return out;
}

/* -- object layouts more than one file reads -------------------------------------------- */

/* dispatch.c: what a Generic (a functools.partial) calls. */
typedef struct {
    PyObject_HEAD
    PyObject *roots;  /* the Generic's type cache (a list, changed in place) */
    PyObject *miss;   /* Generic._miss: args tuple -> the entry it caches */
    vectorcallfunc vectorcall;
} Dispatcher;

/* runtime.callsites.c: the overdubbed call of one callee under one context (runtime.callees.c makes one
 * that runs a bodyless callee's steps). */
typedef struct Site {
    PyObject_HEAD
    PyObject *entry, *f;
    vectorcallfunc vectorcall;
} Site;

/* implicit.c: a class's special method, called as a call site. */
typedef struct {
    PyObject_HEAD
    PyObject *function;
    vectorcallfunc vectorcall;
} Special;

/* The static types (made ready by the exec slot), and Special's spec (a heap type). */
extern PyTypeObject DispatcherType, RefinerType, TaggedFieldsType, SiteType, OperatorSiteType, MethodSiteType,
    ForgetType, TwinSlotType;
extern PyType_Spec special_spec;

/* -- the functions one file calls in another --------------------------------------------- */

/* module.c */
int slot_offset(PyTypeObject *type, const char *name, Py_ssize_t *offset);
int first_argument(Py_ssize_t nargs, const char *function, const char *name);
PyObject *as_tuple(PyObject *const *items, Py_ssize_t n);
PyObject *call_unpacked(PyObject *fn, PyObject *first, PyObject *second, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
int keep(PyObject *kwargs, const char *name, PyObject **into);
PyObject *configure(PyObject *module, PyObject *args, PyObject *kwargs);

/* context.c */
PyObject *run_popped(PyObject *entry, PyObject *hook, PyObject *const *stack, Py_ssize_t nargs, PyObject *kwnames);
PyObject *run_popped_call(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *popped_call(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
int run_hook(PyObject *entry, PyObject *hook, PyObject *const *stack, Py_ssize_t nargs, PyObject *kwnames);
PyObject *exit_method(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *top(PyObject *module, PyObject *unused);
PyObject *bind(PyObject *module, PyObject *variable);

/* weakid.c */
PyObject *values_of(PyObject *cache);
PyObject *by_id_lookup(PyObject *table, PyObject *f);

/* The version of a twin table that its memo entries carry (see weakid.c): its dict's
 * ma_version_tag, or where dicts have none (3.14), the watcher's one counter. */
static inline uint64_t
twin_table_version(PyObject *table)
{
#if CH_HAVE_DICT_VERSION_TAG
    return ch_dict_version_tag(table);
#else
    (void)table;
    return state->twin_tables_version;
#endif
}

static inline TwinMemo *
twin_memo_of(PyObject *table, PyObject *f)
{
    uintptr_t address = (uintptr_t)f;
    return &state->twin_memo[((address >> 4) ^ (address >> 12) ^ ((uintptr_t)table >> 4)) & (TWIN_MEMO - 1)];
}

/* table[id(f)], borrowed, or NULL (with an error set if there was one, or if table is
 * not a dict).  The memo's answer inline, at every caller: a hit is some 20 instructions,
 * and out of line it cost 42 on 3.14, the rest the call and the registers the lookup
 * past the memo needs (by_id_lookup); a matched overload's call makes three. */
static inline PyObject *
by_id(PyObject *table, PyObject *f)
{
    if (PyDict_CheckExact(table)) {
        const TwinMemo *memo = twin_memo_of(table, f);
        if (memo->f == f && memo->table == table && memo->version == twin_table_version(table)) {
            return memo->found;
        }
    }
    return by_id_lookup(table, f);
}
int enter_by_id(PyObject *cache, PyObject *obj, PyObject *value);
int twin_tables_watch(void); /* (the exec slot: 0, or -1 with an error set) */

/* runtime.plan.c */
int current_twin(PyObject *table, PyObject *f, PyObject **twin);
PyObject *mirror_builtins(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *set_builtins(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
int shared_twin(PyObject *plan, PyObject *f, int sole, PyObject **twin);
PyObject *set_code(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *version_like(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* runtime.primitives.c */
int indirect_name(const char *name);
int has_indirect_name(PyObject *builtin);
int fill_indirect_names(PyObject *names);
int fill_indirect_methods(PyObject *callers);
int indirect_method(PyMethodDef *method);
int primitive_in_place(PyObject *f, int i);
int has_id(PyObject *table, PyObject *f);
int is_scalar(PyObject *x);
int is_plain_function(PyObject *f);
PyObject *run_primitive(PyObject *f, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *primitive(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);

/* runtime.operators.c */
int address_set_fill(AddressSet *set, PyObject *ids);
int all_c_operands(PyObject *const *args, Py_ssize_t nargs);
const OperatorDunders *dunders_of(PyObject *op);
int python_dunders(const OperatorDunders *dunders, PyObject *const *args, Py_ssize_t nargs);
int dunder_table_fill(PyObject *table);
PyObject *yield_from(PyObject *module, PyObject *obj);
int one_python_dunder(PyObject *entry, const OperatorDunders *dunders, PyObject *const *args, Py_ssize_t nargs, PyObject **out);

/* dispatch.c */
PyObject *method_for(Dispatcher *self, PyObject *const *args, Py_ssize_t n);

/* runtime.callees.c */
PyObject *python_call(PyTypeObject *kind);
PyObject *call_twin(PyObject *plan, PyObject *call, PyObject *instance);
PyObject *body_of(PyObject *plan, PyObject *callee);
int plain_builtin(PyObject *entry, PyObject *plan, PyObject *const *call, Py_ssize_t n, PyObject *kwnames, PyObject **out);
PyObject *no_body(PyObject *entry, PyObject *plan, PyObject *const *call, Py_ssize_t n, PyObject *kwnames);
PyObject *unpop(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *repop(PyObject *module, PyObject *unused);
PyObject *unpopped(PyObject *module, PyObject *unused);
PyObject *install_recurse(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *construct_by_ref(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);

/* runtime.callsites.c */
PyObject *resolve(PyObject *module, PyObject *f);
PyObject *resolve_star(PyObject *module, PyObject *f);
PyObject *enter(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *overload_of(PyObject *module, PyObject *call);
PyObject *present_c(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *new_site(PyObject *entry, PyObject *f, vectorcallfunc run);
PyObject *call_in(PyObject *entry, PyObject *f, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *call_active(PyObject *f, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *call(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *method_of(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *call_ex(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* switch.c */
PyObject *runs_here(PyObject *unused, PyObject *module);
PyObject *entry_gone(PyObject *unused, PyObject *ref);
PyObject *watch_live(PyObject *unused, PyObject *const *args, Py_ssize_t nargs);
PyObject *operator_call(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);

/* tagging.c */
PyObject *plain_value(PyObject *x);
int is_tagging(PyObject *ctx);
PyObject *untag(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *metadata(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *istagged(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *hasmetadata(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *tag(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *make(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *configure_tagging(PyObject *module, PyObject *args, PyObject *kwargs);
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility pop
#endif

#endif /* CASSETTE_HOOK_SPEEDUPS_INTERNAL_H */
