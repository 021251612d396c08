/* The accelerator's state: ONE struct, in the module's state (m_size is its size), which
 * holds what every concept file reads -- what configure() and configure_tagging() hand
 * over, the classes' slot offsets, the tables kept in C, the interned names -- and the
 * static pointer to it that the hot path reads.
 *
 * Why a static pointer, and one module instance: the hot path (a rewritten call site's
 * resolve, a Site's call, an operator) runs at every call of the program, and most of its
 * functions are reached without their module (a Site's vectorcall, a Dispatcher's, a
 * weak reference's callback).  Finding the state through PyModule_GetState(module) or
 * PyType_GetModuleByDef on each of those calls costs a lookup per call; a pointer set once
 * in the exec slot costs one load.  The price is one module instance per process: the
 * module declares that it does not support a second interpreter (3.12+), and an exec slot
 * run a second time fails with ImportError, which the package takes as "no accelerator"
 * (it then runs the pure-Python hot path).  Per-interpreter state -- heap types, and the
 * state found from the module or the object at hand rather than from a static -- is the
 * next step towards subinterpreters (docs/internals.md, "The C hot path").
 *
 * Not in the struct: what is per thread (THREAD_LOCAL: the Popped record, the budgets'
 * counters), which is none of one module's; and the static type objects, which are
 * immutable after PyType_Ready. */
#ifndef CASSETTE_HOOK_SPEEDUPS_STATE_H
#define CASSETTE_HOOK_SPEEDUPS_STATE_H

#include "compat.h"

/* A set of objects by address, in an open-addressing table: asked at every operator
 * call, which a set of ints would answer only after making an int of the address. */
#define ADDRESS_SET_SIZE 128
typedef struct {
    const void *slots[ADDRESS_SET_SIZE];
} AddressSet;

/* One callee runtime.operators.body knows, the special methods it looks up, (operand index, name),
 * and how it runs the one it finds when that is all it runs (see runtime.operators.DUNDERS). */
enum {RUN_BY_BODY, RUN_FIRST, RUN_TRUTH, RUN_ITERATOR, RUN_FORWARD, RUN_COMPARE};
typedef struct {
    const void *op;
    int n;
    int index[3];
    PyObject *name[3]; /* interned, owned */
    int run;
    PyObject *symbol;  /* the operator's symbol, for its errors (owned) */
} OperatorDunders;

/* The last lookups of the twin tables, by address (weakid.c, by_id). */
typedef struct {
    PyObject *table, *f, *found; /* found: borrowed from the table, NULL for "not there" */
    uint64_t version;
} TwinMemo;
#define TWIN_MEMO 256 /* a power of two */

#define MAX_INDIRECT_NAMES 64
#define INDIRECT_SLOTS (2 * MAX_INDIRECT_NAMES) /* at most half full, so probes end */
#define MAX_INDIRECT_METHODS 8
#define METHOD_NAMES 128 /* a power of two */
#define SITES_KEPT 16

struct Site;

typedef struct {
    /* -- the stack (context.c) -- */
    /* The ContextVar of the stack: until bind() hands over _context's, one of this module's
     * own that is never set, so that the hot path called before the runtime has configured
     * it (only cassette_hook's modules call it then, but the module is importable) sees no
     * context, and runs what it is given as the plain program would, rather than reading a
     * NULL variable; everything else the hot path reads it reaches from an active entry. */
    PyObject *active;
    PyObject *pop_function;  /* context_stack.pop_at_exit (exit_method) */

    /* -- the classes whose slots are read at their offsets (configure) -- */
    PyTypeObject *entry_type, *plan_type, *id_table_type; /* id_table_type: _weakid.WeakIdCache */
    Py_ssize_t id_table_values, id_table_refs;
    Py_ssize_t entry_ctx, entry_plan, entry_below, entry_direct_twins;
    Py_ssize_t plan_fast, plan_enters, plan_fallback, plan_prehook_call, plan_posthook_call, plan_raisehook_call,
        plan_overdub_call, plan_overdub, plan_execute, plan_twins, plan_operators, plan_constructors,
        plan_constructions, plan_modules, plan_shared, plan_named_table, plan_named_classes, plan_named_methods,
        plan_overloads;

    /* -- the Python functions the hot path delegates to (configure) -- */
    PyObject *resolve_direct;     /* (plan, f) -> what to call past the table of direct twins, or None */
    PyObject *overload_by_callee; /* (plan, call) -> a named callee's overload, entered in plan.overloads */
    PyObject *guard_type;         /* dispatch.Guard: such an overload, when the later arguments' types decide */
    PyObject *site_code, *site_globals, *site_qualname; /* runtime.callsites.site's closure, to make here */
    int site_entry_first;         /* its free variables are (entry, f), not (f, entry) */
    PyObject *call_primitive;     /* (f, args, kwargs): a primitive that needs emulating */
    PyObject *special;            /* id(builtin) -> handler: the primitives emulated */
    PyObject *preparers;          /* id(builtin) -> prepare(args, kwargs) -> (args, kwargs) */
    PyObject *indirect_names;     /* names of builtin methods that may be emulated */
    PyObject *indirect_callers;   /* builtin -> what a call site calls for it (runtime.callsites.callable_for) */
    PyObject *called_as_is;       /* id(type) -> True: runtime.callees.CALLED_AS_IS's values */
    PyObject *present;            /* (f, args) -> (f, args): how hooks see a builtin method */
    PyObject *overload_dispatchers[2]; /* what generics.overdub and execute call: Dispatchers */
    PyObject *overload_defaults[2]; /* their defaults: no overload */
    PyObject *fallback_dispatcher;  /* what generics.fallback calls: a Dispatcher */
    PyObject *fallback_default;     /* its default: call the primitive */
    PyObject *plain_operators;    /* runtime.operators.PLAIN_OPERATORS: ids, kept as addresses in: */
    AddressSet plain_operator_set;
    PyObject *c_operands;         /* runtime.operators.C_OPERANDS: classes */
    PyObject *runnable;           /* (plan, f) -> what runs f's body, or None */
    PyObject *without_body;       /* (entry, f, args, kwargs): operator protocol or fallback */
    PyObject *python_call_ex;     /* runtime.callsites.call_ex: a star call call_ex() does not take */
    PyObject *operator_dunders;   /* runtime.operators.DUNDERS: id(callee) -> what runtime.operators.body looks up, in: */
    OperatorDunders dunder_table[ADDRESS_SET_SIZE]; /* by address, as an AddressSet */
    PyObject *operator_body;      /* runtime.operators.body: (op, args) -> its Python dunders, or None */
    PyObject *seen_below;         /* (hook, args, kwargs): a hook run under the contexts below */
    PyObject *overdub_instead;    /* generics.OverdubInstead */
    PyObject *construct;          /* runtime.callees.construct(cls, *args, **kwargs): type.__call__ overdubbed */
    PyObject *own_directory;      /* _own.DIRECTORY (own.c) */

    /* -- what the module finds itself (the exec slot) -- */
    PyTypeObject *method_wrapper_type; /* a C slot bound to an object (3.13 does not export it; static) */
    PyObject *object_new;         /* object.__new__ (borrowed: lives as long as object) */
    PyObject *iter_builtin;       /* builtins.iter */
    PyTypeObject *SpecialType;    /* implicit.c's Special, a heap type */
    PyObject *str_twin, *str_new, *str_init, *str_tag, *str_call, *str_runs_module, *str_generation;
    PyObject *one;                /* the int 1 */

    /* -- tables kept in C -- */
    TwinMemo twin_memo[TWIN_MEMO]; /* (weakid.c) borrowed entries, compared by address */
    uint64_t twin_tables_version;  /* (weakid.c, 3.14+) */
    int twin_tables_watcher;       /* (weakid.c, 3.14+) */
    struct {
        uint32_t hash;
        char *name; /* owned; NULL: an empty slot */
    } indirect_names_by_hash[INDIRECT_SLOTS]; /* (runtime.primitives.c) */
    struct {
        PyMethodDef *method;
        PyObject *caller;
        PyObject *descriptor; /* (the method's, from which its caller was made) */
    } indirect_methods[MAX_INDIRECT_METHODS]; /* (runtime.primitives.c) */
    struct {
        PyMethodDef *def;
        PyObject *name;
    } method_names[METHOD_NAMES]; /* (runtime.callsites.c) */
    struct Site *sites_kept[SITES_KEPT]; /* (runtime.callsites.c) Sites kept for reuse: not objects, memory */
    int sites_kept_count;

    /* -- the functions twin slots hold, by address (runtime.plan.c, 3.12+) -- */
    struct FollowedFunction *followed; /* an open-addressed table of (function, slot), or NULL */
    size_t followed_mask, followed_count;
    int slot_watcher;             /* the function watcher that empties them: its id + 1; 0 not yet
                                   * asked for, -1 none to be had */

    /* -- the import hook's switch (switch.c) -- */
    PyObject *live_entries, *live_operator_entries, *flags_module, *str_active_flag, *str_operators_flag;

    /* -- the mirror of the builtins (runtime.plan.c, 3.12+) -- */
    PyObject *mirrored;           /* the builtins dict a mirror follows (borrowed: it outlives us) */
    PyObject *mirror;             /* its mirror */
    PyObject *pinned;             /* the names whose values the mirror keeps its own */

    /* -- runtime.callees.recurse (runtime.callees.c) -- */
    PyObject *recurse_function;   /* runtime.callees.recurse, NULL until install_recurse() */
    vectorcallfunc recurse_python; /* CPython's vectorcall of it: its Python code */
    int recurse_deep_calls;       /* calls in flight made past a thread's budget */

    /* -- tagging (tagging.c, configure_tagging) -- */
    PyTypeObject *tag_type;       /* tagging.Tag */
    Py_ssize_t tag_depth, tag_live, tag_generation;
    PyObject *wrapper_classes;    /* value class -> Tagged[class] (tagging._classes) */
    PyObject *wrapper_class;      /* tagging.wrapper_class: makes one */
    PyObject *wrappers;           /* the set of every Tagged[class] */
    PyObject *tagging_context;    /* tagging._TaggingContext */
    PyObject *no_metadata;        /* tagging.NoMetaData */
    PyObject *allowed_metadata;   /* (context class, value class) -> what metadatatype allows */
    PyObject *allowed_generation; /* [dispatch.generation when allowed_metadata was filled] */
    PyObject *dispatch_module;    /* its generation: bumped when any method changes */
    PyObject *check_metadata;     /* (context class, value, metadata): raises if not allowed */
    PyObject *not_tagging;        /* (ctx, what): raises the error for a context without tagging */
    PyObject *last_tagging_context, *last_tag; /* the last context whose tag was read (a weakref), its tag */
    PyObject *last_untagged_context; /* the last context is_tagging found without a tag (a weakref) */
    PyObject *last_ctx_type, *last_value_type, *last_meta_type, *last_generation; /* metadata_allowed's last yes */
} SpeedupsState;

/* The one module instance's state, set by the exec slot (module.c); NULL before.  The
 * functions of the hot path that read several fields copy it first,
 * `SpeedupsState *const st = state;`: the compiler then keeps it in a register across the
 * calls they make, where it reloads a global after each (a load more per field, a
 * measured 2-6% of a hooked call on 3.13: docs/performance.md). */
extern SpeedupsState *state;

/* Its objects, for the module's m_traverse and m_clear (module.c). */
int state_traverse(SpeedupsState *st, visitproc visit, void *arg);
void state_clear(SpeedupsState *st);

#endif /* CASSETTE_HOOK_SPEEDUPS_STATE_H */
