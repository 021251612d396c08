/* plan in C: the twins a plan made, read from its tables (current_twin), a twin made
 * here for a function whose code has one already (shared_twin), function versions kept
 * (3.13+), and the mirror of the builtins a twin reads (3.12+). */
#include "internal.h"

/* The twin of function f in table (a dict id -> (twin, code, defaults, kwdefaults)), if
 * it is current: f still has the code and defaults it was made from.  1 and a new
 * reference to the twin, 0 if there is none, 2 if the table says None (a direct table's
 * "not direct"), -1 on error.  A class may be in a direct table too, as (constructor,
 * None, None, None).  (A new reference: the caller may allocate while it holds the twin,
 * a collection may run in an allocation on 3.10 and 3.11, and a full one empties the
 * twin tables -- plan's _drop_twins_before_full_collections -- which may hold the only
 * other reference.) */
int
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

/* Twins of switched code that skip the question (3.12+).  A twin of a switched function
 * runs the function's own code (a frame's code object is the program's), so the only way
 * it can tell it is a twin is what its frame reads: the builtins, which CPython takes
 * from the function object.  A twin gets a mirror of the builtins in which
 * __cassette_hook_twin__ is true, and its switch goes straight to the rewritten body.
 * The mirror must hold what the builtins hold, whatever the program does to them later
 * (a monkeypatched builtin, a name added): a dict watcher copies each change of the
 * builtins into it as it is made.  Without dict watchers (before 3.12), twins ask the
 * question as the function does (mirror_builtins returns None). */
#if CH_HAVE_DICT_WATCHERS
static int
pin(void)
{
    return PyDict_Update(state->mirror, state->pinned);
}

/* Called before each change of the builtins: the same change to the mirror. */
static int
follow_builtins(PyDict_WatchEvent event, PyObject *dict, PyObject *key, PyObject *new_value)
{
    if (dict != state->mirrored || state->mirror == NULL) {
        return 0;
    }
    if (key != NULL && event != PyDict_EVENT_CLONED) {
        int is_pinned = PyDict_Contains(state->pinned, key);
        if (is_pinned != 0) {
            return is_pinned < 0 ? -1 : 0;
        }
    }
    switch (event) {
    case PyDict_EVENT_ADDED:
    case PyDict_EVENT_MODIFIED:
        return PyDict_SetItem(state->mirror, key, new_value);
    case PyDict_EVENT_DELETED:
        if (PyDict_DelItem(state->mirror, key) < 0) {
            if (!PyErr_ExceptionMatches(PyExc_KeyError)) {
                return -1;
            }
            PyErr_Clear();
        }
        return 0;
    case PyDict_EVENT_CLONED: /* an empty builtins updated from the dict `key` */
        return PyDict_Update(state->mirror, key) < 0 ? -1 : pin();
    case PyDict_EVENT_CLEARED: /* (CPython's shutdown, before it puts back its copy) */
        PyDict_Clear(state->mirror);
        return pin();
    default: /* PyDict_EVENT_DEALLOCATED: the interpreter is going */
        return 0;
    }
}

static PyObject *
mirror_of(PyObject *builtins, PyObject *pinned_values)
{
    if (state->mirror != NULL) {
        if (builtins != state->mirrored) {
            PyErr_SetString(PyExc_ValueError, "mirror_builtins: the builtins are mirrored already, another dict");
            return NULL;
        }
        return Py_NewRef(state->mirror);
    }
    int watcher = PyDict_AddWatcher(follow_builtins);
    if (watcher < 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    state->mirror = PyDict_Copy(builtins);
    state->pinned = PyDict_Copy(pinned_values);
    if (state->mirror == NULL || state->pinned == NULL || pin() < 0 || PyDict_Watch(watcher, builtins) < 0) {
        Py_CLEAR(state->mirror);
        Py_CLEAR(state->pinned);
        PyDict_ClearWatcher(watcher);
        return NULL;
    }
    state->mirrored = builtins;
    return Py_NewRef(state->mirror);
}
#endif

/* plan's: the mirror of builtins in which the names of pinned keep their values there,
 * made and watched at the first call (pinned is read then); None where it cannot be
 * (before 3.12, all dict watchers taken). */
/* C only: a dict watcher (3.12+) keeps the mirror; the pure path's twins ask the switch. */
PyObject *
mirror_builtins(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyDict_CheckExact(args[0]) || !PyDict_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "mirror_builtins(builtins, pinned) takes two dicts");
        return NULL;
    }
#if CH_HAVE_DICT_WATCHERS
    return mirror_of(args[0], args[1]);
#else
    Py_RETURN_NONE;
#endif
}

/* plan's: a twin's frames read builtins (the mirror above) in place of its globals'. */
/* C only: a function's builtins, which Python code cannot set. */
PyObject *
set_builtins(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyFunction_Check(args[0]) || !PyDict_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "set_builtins(function, builtins) takes a function and a dict");
        return NULL;
    }
    Py_SETREF(((PyFunctionObject *)args[0])->func_builtins, Py_NewRef(args[1]));
    Py_RETURN_NONE;
}

/* The twin of the one function of a code that a call site met last and that still lives
 * (runtime.plan's Shared, its last item: a one-item list this fills).  A closure or lambda
 * made per call and called where a variable holds it dies before the next is made: its
 * twin is kept here, for the calls it gets while it lives, rather than in the plan's twin
 * table, whose entry (a weak reference with a callback object of its own, two dict entries
 * and their removal at its death) cost several times what making the twin costs.  The
 * slot learns the function's death, and lets the twin go then (the twin holds the
 * function's cells and defaults: they must not outlive it): on 3.12+ from a function
 * watcher's PyFunction_EVENT_DESTROY, the function entered by its address in a table the
 * watcher reads (state->followed) -- no object made per function, no callback called at
 * its death; before 3.12, or when every function watcher of the interpreter is taken,
 * from a weak reference whose callback is the slot.  Once two functions of the code are
 * seen alive at once (a decorator's wrappers), the code's later functions go to the
 * table, as before: one slot would be remade at every call that alternates between them. */
typedef struct TwinSlot {
    PyObject_HEAD
    PyObject *func;                   /* the function (borrowed: NULL from its death on), or NULL */
    PyObject *ref;                    /* a weak reference to it, where no watcher follows it */
    PyObject *twin, *code, *defaults, *kwdefaults; /* its twin, and what the twin was made from */
    PyFunctionObject *spare;          /* a dead function's twin that nothing else held, emptied */
    int crowded;                      /* two functions of the code were alive at once */
    vectorcallfunc vectorcall;
} TwinSlot;

/* The functions slots hold while they live, for the watcher: (function, slot) by the
 * function's address, open-addressed with linear probing and no tombstones (an entry
 * removed pulls its followers back), neither held.  A function that slots of several
 * plans hold is in it once for each.  Allocated and grown when an entry is made, never
 * when one is removed: the watcher runs inside a function's dealloc. */
struct FollowedFunction {
    PyObject *func; /* NULL: an empty place */
    TwinSlot *slot;
};

static inline size_t
followed_home(PyObject *func, size_t mask)
{
    uintptr_t address = (uintptr_t)func;
    return (size_t)((address >> 4) ^ (address >> 14)) & mask;
}

#if CH_HAVE_FUNC_WATCHERS
/* Enter (func, slot); 0, or -1 with an error set. */
static int
followed_add(PyObject *func, TwinSlot *slot)
{
    SpeedupsState *const st = state;
    if (st->followed == NULL || 2 * (st->followed_count + 1) > st->followed_mask + 1) {
        size_t size = st->followed == NULL ? 64 : 2 * (st->followed_mask + 1);
        struct FollowedFunction *grown = PyMem_Calloc(size, sizeof(struct FollowedFunction));
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (size_t i = 0; st->followed != NULL && i <= st->followed_mask; i++) {
            if (st->followed[i].func != NULL) {
                size_t at = followed_home(st->followed[i].func, size - 1);
                while (grown[at].func != NULL) {
                    at = (at + 1) & (size - 1);
                }
                grown[at] = st->followed[i];
            }
        }
        PyMem_Free(st->followed);
        st->followed = grown;
        st->followed_mask = size - 1;
    }
    size_t at = followed_home(func, st->followed_mask);
    while (st->followed[at].func != NULL) {
        at = (at + 1) & st->followed_mask;
    }
    st->followed[at] = (struct FollowedFunction){func, slot};
    st->followed_count++;
    return 0;
}

/* The place of (func, slot), or of func with any slot if slot is NULL; -1 if none. */
static Py_ssize_t
followed_find(PyObject *func, TwinSlot *slot)
{
    SpeedupsState *const st = state;
    if (st->followed_count == 0) {
        return -1;
    }
    size_t mask = st->followed_mask;
    for (size_t at = followed_home(func, mask);; at = (at + 1) & mask) {
        PyObject *held = st->followed[at].func;
        if (held == NULL) {
            return -1;
        }
        if (held == func && (slot == NULL || st->followed[at].slot == slot)) {
            return (Py_ssize_t)at;
        }
    }
}

/* Remove the entry at place `at`, the entries after it in its run moved back to where
 * their probes find them (no allocation). */
static void
followed_remove(size_t at)
{
    SpeedupsState *const st = state;
    size_t mask = st->followed_mask, next = at;
    for (;;) {
        st->followed[at].func = NULL;
        st->followed[at].slot = NULL;
        for (;;) {
            next = (next + 1) & mask;
            if (st->followed[next].func == NULL) {
                st->followed_count--;
                return;
            }
            size_t home = followed_home(st->followed[next].func, mask);
            /* (stays if its home is cyclically in (at, next]) */
            if (at <= next ? (at < home && home <= next) : (at < home || home <= next)) {
                continue;
            }
            break;
        }
        st->followed[at] = st->followed[next];
        at = next;
    }
}

static void slot_died(TwinSlot *self);

/* The watcher: a function a slot holds is being destroyed (its reference count held at 1
 * by CPython meanwhile); each slot that holds it lets it go, as the weak reference's
 * callback would have.  Every function's events come here once it is taken, so anything
 * else returns at once. */
static int
slot_function_event(PyFunction_WatchEvent event, PyFunctionObject *func, PyObject *new_value)
{
    (void)new_value;
    if (event != PyFunction_EVENT_DESTROY || state == NULL || state->followed_count == 0) {
        return 0;
    }
    Py_ssize_t at;
    while ((at = followed_find((PyObject *)func, NULL)) >= 0) { /* (found anew each time: letting go may run Python) */
        TwinSlot *slot = state->followed[at].slot;
        followed_remove((size_t)at);
        slot->func = NULL;
        Py_INCREF(slot); /* (letting the twin go may let the slot's plan go) */
        slot_died(slot);
        Py_DECREF(slot);
    }
    return 0;
}
#endif

/* Start following func's death (the slot holds no function): 0, or -1 with an error set. */
static int
slot_follow(TwinSlot *self, PyObject *func)
{
#if CH_HAVE_FUNC_WATCHERS
    SpeedupsState *const st = state;
    if (st->slot_watcher == 0) {
        int watcher = PyFunction_AddWatcher(slot_function_event);
        if (watcher < 0) {
            PyErr_Clear(); /* (all taken: weak references, as before 3.12) */
        }
        st->slot_watcher = watcher < 0 ? -1 : watcher + 1;
    }
    if (st->slot_watcher > 0) {
        if (followed_add(func, self) < 0) {
            return -1;
        }
        self->func = func;
        return 0;
    }
#endif
    PyObject *ref = PyWeakref_NewRef(func, (PyObject *)self);
    if (ref == NULL) {
        return -1;
    }
    self->ref = ref;
    self->func = func;
    return 0;
}

/* Stop following the function the slot holds, if any (the function lives, or the slot
 * goes).  Its weak reference, if it has one, in *ref for the caller to let go. */
static void
slot_unfollow(TwinSlot *self, PyObject **ref)
{
    *ref = self->ref;
    self->ref = NULL;
    if (self->func == NULL) {
        return;
    }
#if CH_HAVE_FUNC_WATCHERS
    if (*ref == NULL) {
        Py_ssize_t at = followed_find(self->func, self);
        if (at >= 0) {
            followed_remove((size_t)at);
        }
    }
#endif
    self->func = NULL;
}

static void
slot_empty(TwinSlot *self)
{
    PyObject *ref;
    slot_unfollow(self, &ref);
    Py_XDECREF(ref);
    Py_CLEAR(self->twin);
    Py_CLEAR(self->code);
    Py_CLEAR(self->defaults);
    Py_CLEAR(self->kwdefaults);
}

/* The function died (self->func cleared): its twin goes -- or, when the slot holds the
 * only reference to it and nothing was set on it, is emptied of what it held of the
 * function's (its cells, defaults and annotations) and kept as the spare that the code's
 * next twin is made of: nothing can tell it from a new function then, and making it costs
 * no allocation and none of PyFunction_New's look-ups in the globals. */
static void
slot_died(TwinSlot *self)
{
    PyFunctionObject *twin = (PyFunctionObject *)self->twin;
    if (self->spare == NULL && twin != NULL && Py_REFCNT(twin) == 1 && twin->func_weakreflist == NULL
        && twin->func_dict == NULL) {
        self->twin = NULL;
        self->spare = twin;
        function_emptied(twin);
    }
    slot_empty(self);
}

/* The weak reference's callback, where the slot follows its function by one. */
static PyObject *
slot_call(TwinSlot *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) != 1 || args[0] != self->ref) {
        Py_RETURN_NONE;
    }
    self->func = NULL;
    slot_died(self);
    Py_RETURN_NONE;
}

static int
slot_traverse(TwinSlot *self, visitproc visit, void *arg)
{
    Py_VISIT(self->ref); /* (which holds this slot: its callback) */
    Py_VISIT(self->twin);
    Py_VISIT(self->code);
    Py_VISIT(self->defaults);
    Py_VISIT(self->kwdefaults);
    Py_VISIT(self->spare);
    return 0;
}

static int
slot_clear(TwinSlot *self)
{
    slot_empty(self);
    Py_CLEAR(self->spare);
    return 0;
}

static void
slot_dealloc(TwinSlot *self)
{
    PyObject_GC_UnTrack(self);
    slot_empty(self);
    Py_CLEAR(self->spare);
    PyObject_GC_Del(self);
}

static PyMemberDef slot_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(TwinSlot, vectorcall), READONLY},
    {NULL},
};

PyTypeObject TwinSlotType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cassette_hook._speedups.TwinSlot",
    .tp_doc = "The twin of the last function of a code met, while that function lives.",
    .tp_basicsize = sizeof(TwinSlot),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(TwinSlot, vectorcall),
    .tp_traverse = (traverseproc)slot_traverse,
    .tp_clear = (inquiry)slot_clear,
    .tp_dealloc = (destructor)slot_dealloc,
    .tp_members = slot_members,
};

/* The slot in a Shared's box (a one-item list), made at the first look; NULL on error. */
static TwinSlot *
slot_of(PyObject *box)
{
    if (!PyList_CheckExact(box) || PyList_GET_SIZE(box) != 1) {
        PyErr_SetString(PyExc_TypeError, "cassette_hook: a plan's shared twin has no one-item list last");
        return NULL;
    }
    PyObject *held = PyList_GET_ITEM(box, 0);
    if (Py_TYPE(held) == &TwinSlotType) {
        return (TwinSlot *)held;
    }
    TwinSlot *slot = PyObject_GC_New(TwinSlot, &TwinSlotType);
    if (slot == NULL) {
        return NULL;
    }
    slot->func = slot->ref = slot->twin = slot->code = slot->defaults = slot->kwdefaults = NULL;
    slot->spare = NULL;
    slot->crowded = 0;
    slot->vectorcall = (vectorcallfunc)slot_call;
    PyObject_GC_Track(slot);
    PyList_SET_ITEM(box, 0, (PyObject *)slot); /* (the list's reference) */
    Py_DECREF(held);
    return slot;
}

/* Is f the function the slot holds the twin of?  Is it holding one? */
#define SLOT_HOLDS(slot, f) ((slot)->func == (f))
#define SLOT_LIVE(slot) ((slot)->func != NULL)

/* Plan._make_twin's shortcut, for a function whose code the plan has made a twin of
 * before (runtime.plan.shared: code -> (twin code, globals, __module__, builtins, the twin's
 * builtins, len(globals)), entered by Plan._make_twin): a closure or lambda made anew
 * has the code, globals and module of the first, so the plan's answers for the first
 * (its scope, the switch, the builtins its twin reads, the module's classes reached)
 * hold for it, and its twin is the shared rewritten code made a function with its own
 * defaults, keyword defaults, closure, names and version, as Plan._twin_from makes it
 * (a microsecond of Python before, per function object).  1 and a new reference in
 * *twin, kept (the code's slot, or runtime.plan.twins) unless sole; 0 if the shortcut does
 * not apply (Python decides); -1 on error.  The globals' size stands for what
 * runtime.standins.reach rescans when it grows, as reach's own test does.  sole: the
 * caller's reference to f is its only one (direct_run's: a lambda called where it is
 * made), so f dies with the call, and is made its own twin in place -- its code the
 * rewritten one, its builtins the twin's -- as a bound method the site's load made is
 * rebound to its twin: nothing else can see it to tell the two apart, and the twin costs
 * no function made and freed. */
int
shared_twin(PyObject *plan, PyObject *f, int sole, PyObject **twin)
{
    SpeedupsState *const st = state;
    PyFunctionObject *func = (PyFunctionObject *)f;
    PyObject *shared = slot(plan, st->plan_shared, "shared");
    PyObject *table = shared ? values_of(shared) : NULL;
    if (table == NULL) {
        return -1;
    }
    PyObject *found = by_id(table, func->func_code);
    if (found == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    if (!PyTuple_CheckExact(found) || PyTuple_GET_SIZE(found) != 7 || !PyCode_Check(PyTuple_GET_ITEM(found, 0))
        || !PyDict_CheckExact(PyTuple_GET_ITEM(found, 4)) || !PyLong_CheckExact(PyTuple_GET_ITEM(found, 5))) {
        PyErr_SetString(PyExc_TypeError, "cassette_hook: a plan's shared twin is not (code, globals, module, "
                                         "builtins, builtins, size, slot)");
        return -1;
    }
    PyObject *module = func->func_module ? func->func_module : Py_None;
    if (PyTuple_GET_ITEM(found, 1) != func->func_globals || PyTuple_GET_ITEM(found, 2) != module
        || PyTuple_GET_ITEM(found, 3) != func->func_builtins
        || ch_as_ssize(PyTuple_GET_ITEM(found, 5)) != PyDict_GET_SIZE(func->func_globals)) {
        return 0;
    }
    if (sole && func->func_weakreflist == NULL) {
        Py_INCREF(found); /* (letting the old code go may run Python: code watchers, co_extra) */
        function_recoded(func, PyTuple_GET_ITEM(found, 0));
        if (PyTuple_GET_ITEM(found, 4) != PyTuple_GET_ITEM(found, 3)) { /* the mirror of the builtins */
            Py_SETREF(func->func_builtins, Py_NewRef(PyTuple_GET_ITEM(found, 4)));
        }
        Py_DECREF(found);
        *twin = Py_NewRef(f);
        return 1;
    }
    PyObject *defaults = func->func_defaults ? func->func_defaults : Py_None;
    PyObject *kwdefaults = func->func_kwdefaults ? func->func_kwdefaults : Py_None;
    TwinSlot *kept = NULL;
    int enter = !sole;
    if (enter) {
        kept = slot_of(PyTuple_GET_ITEM(found, 6));
        if (kept == NULL) {
            return -1;
        }
        if (SLOT_HOLDS(kept, f) && kept->code == func->func_code && kept->defaults == defaults
            && kept->kwdefaults == kwdefaults) {
            *twin = Py_NewRef(kept->twin); /* (a twin follows its function: docs/internals.md) */
            return 1;
        }
        if (!SLOT_HOLDS(kept, f) && SLOT_LIVE(kept)) {
            kept->crowded = 1;
        }
        if (kept->crowded && !SLOT_HOLDS(kept, f)) {
            kept = NULL; /* (entered in the table) */
        }
    }
    Py_INCREF(found); /* (held while the twin is made: entering it runs Python) */
    PyFunctionObject *made = kept != NULL ? kept->spare : NULL;
    if (made != NULL && made->func_code == PyTuple_GET_ITEM(found, 0) && made->func_globals == func->func_globals
        && made->func_module == func->func_module) {
        kept->spare = NULL; /* (its reference, now the caller's) */
        version_cleared(made); /* (what a new function has; versioned below as one would be) */
        Py_XSETREF(made->func_qualname, Py_NewRef(func->func_qualname));
    }
    else {
        made = (PyFunctionObject *)PyFunction_NewWithQualName(PyTuple_GET_ITEM(found, 0), func->func_globals,
                                                              func->func_qualname);
    }
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
    version_as_make_function(made, func); /* (3.12: see compat.h) */
    if (kept != NULL) {
        Py_INCREF(kept); /* (the box may be emptied while the function is followed) */
        /* (the old values let go once the new are in: letting go may run Python, which may
         * come back here) */
        PyObject *old[5] = {NULL, kept->twin, kept->code, kept->defaults, kept->kwdefaults};
        if (!SLOT_HOLDS(kept, f)) {
            slot_unfollow(kept, &old[0]); /* (a function that lives: crowded above) */
            if (slot_follow(kept, f) < 0) {
                kept->twin = kept->code = kept->defaults = kept->kwdefaults = NULL;
                for (int i = 0; i < 5; i++) {
                    Py_XDECREF(old[i]);
                }
                Py_DECREF(kept);
                Py_DECREF(found);
                Py_DECREF(made);
                return -1;
            }
        }
        kept->twin = Py_NewRef(made);
        kept->code = Py_NewRef(func->func_code);
        kept->defaults = Py_NewRef(defaults);
        kept->kwdefaults = Py_NewRef(kwdefaults);
        for (int i = 0; i < 5; i++) {
            Py_XDECREF(old[i]);
        }
        Py_DECREF(kept);
        Py_DECREF(found);
        *twin = (PyObject *)made;
        return 1;
    }
    Py_DECREF(found);
    if (enter) {
        PyObject *twins = slot(plan, st->plan_twins, "twins");
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

/* importhook.lazy_mode.set_code(func, code): func.__code__ = code (its checks, its watchers' events),
 * the version kept as above. */
/* Mirrors importhook.lazy_mode.set_code. */
PyObject *
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
/* C only: a twin gets its function's version (3.13+), which Python code cannot set. */
PyObject *
version_like(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyFunction_Check(args[0]) || !PyFunction_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "version_like(twin, function) takes two functions");
        return NULL;
    }
    version_from_code((PyFunctionObject *)args[0], VERSION_OF(args[1]));
    Py_RETURN_NONE;
}
