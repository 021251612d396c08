/* The stack walks' per-item work in C: _stack.stack_depths's walk over a body's items, and
 * both loops of _stack.pair_by_depth (where its walk stops and what happens there; the walk
 * over those stops along the control flow).
 *
 * The references are Python: _stack._stack_depths and _stack._pairs, used where this module
 * is not built or CASSETTE_HOOK_PURE_PYTHON=1 is set (_native.optional); _stack chooses,
 * once.  Why C: on a first run of sympy under a context (3.12) the two were the biggest part
 * of the rewrite's own passes, each a per-item loop already tuned as far as Python goes
 * (docs/performance.md, "The stack walks in C"); in Python each item costs a type test, two
 * slot reads through their descriptors, a key made and looked up, here pointer compares and
 * reads at the slots' offsets (_slots.h).
 *
 * configure(...) hands over, once, the item classes, bytecode's UNSET, the depth walk's
 * memo of steps (_stack._STEPS) and its filler (_stack._step), the references
 * (_stack._stack_depths, _stack._pairs, and _stack._paired, the pairing's second loop), and
 * the pairing's filler of a name's role (_stack._role).  Then:
 *
 * depths(items) is stack_depths(items): the same walk, in the same order, asking the same
 * memo by the same keys (a miss calls _step, which fills it, as the reference does).  Where
 * it meets what it does not take -- an item of another class (a subclass of Label, of Instr
 * with a _name or _arg of its own ...), a jump or a handler whose label is not an item, a
 * depth two paths disagree on, a try block's fields not plain -- it hands the items to the
 * reference, which gives the same depths or raises what it raises (UnsupportedCode with its
 * message, KeyError).  Nothing it did before is seen but the memo's steps, which the
 * reference would have filled alike.
 *
 * pairs(items, depths, roles, producers, consumers, producer_depth, consumer_depth) is
 * _pairs(...): each consumer's index -> the frozenset of its producers' indexes, in the
 * reference's order.  The items' classes and depths are checked before the callbacks are
 * first called (the reference runs the whole where one is not taken: no callback is called
 * twice); the second loop calls none, and where it meets what it does not take (a try
 * block's depth not an int, a slot no small int) _paired walks what the first found. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <stdint.h>
#include "_slots.h" /* slot_offset */

static PyObject *str_name, *str_arg, *str_target, *str_stack_depth, *str_push_lasti, *empty_frozenset;

typedef struct {
    PyTypeObject *instr, *label, *set_lineno, *try_begin, *try_end;
    PyObject *unset, *steps, *step, *depths_reference, *pairs_reference, *paired_reference, *role;
    Py_ssize_t name_at, arg_at; /* Instr's _name and _arg slots */
} Config;

static Config config; /* (all NULL until configure) */

/* An instruction's slot at `offset` (borrowed); NULL where it is unset (then the
 * reference's getattr raises AttributeError). */
static inline PyObject *
slot_at(PyObject *object, Py_ssize_t offset)
{
    return *(PyObject **)((char *)object + offset);
}

/* The labels' indexes by identity: an open-addressing table of pointers (the reference's
 * dict by id()); a label met twice keeps its last index, as the dict does. */
typedef struct {
    PyObject **keys;
    Py_ssize_t *values;
    size_t mask;
} Labels;

static inline size_t
label_hash(PyObject *label, size_t mask)
{
    return (size_t)(((uintptr_t)label >> 4) * (uintptr_t)0x9E3779B97F4A7C15ULL >> 7) & mask;
}

static int
labels_init(Labels *labels, Py_ssize_t count)
{
    size_t size = 8;
    while (size < (size_t)count * 2) {
        size *= 2;
    }
    labels->mask = size - 1;
    labels->keys = PyMem_Calloc(size, sizeof(PyObject *));
    labels->values = PyMem_Malloc(size * sizeof(Py_ssize_t));
    if (labels->keys == NULL || labels->values == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void
labels_free(Labels *labels)
{
    PyMem_Free(labels->keys);
    PyMem_Free(labels->values);
}

static void
labels_put(Labels *labels, PyObject *label, Py_ssize_t index)
{
    size_t at = label_hash(label, labels->mask);
    while (labels->keys[at] != NULL && labels->keys[at] != label) {
        at = (at + 1) & labels->mask;
    }
    labels->keys[at] = label;
    labels->values[at] = index;
}

/* The index of `label`, or -1 where it is not an item. */
static Py_ssize_t
labels_get(const Labels *labels, PyObject *label)
{
    size_t at = label_hash(label, labels->mask);
    while (labels->keys[at] != NULL) {
        if (labels->keys[at] == label) {
            return labels->values[at];
        }
        at = (at + 1) & labels->mask;
    }
    return -1;
}

#define UNKNOWN LONG_MIN /* (a depth not reached yet: the reference's None) */

/* Outcomes of the walk besides success: an error raised, or the reference's to run. */
#define FAILED (-1)
#define NOT_TAKEN 1

typedef struct {
    Py_ssize_t *indexes;
    long *depths;
    Py_ssize_t size, capacity;
} Pending;

static int
push(Pending *pending, Py_ssize_t index, long depth)
{
    if (pending->size == pending->capacity) {
        Py_ssize_t capacity = pending->capacity ? pending->capacity * 2 : 16;
        Py_ssize_t *indexes = PyMem_Realloc(pending->indexes, (size_t)capacity * sizeof(Py_ssize_t));
        if (indexes == NULL) {
            PyErr_NoMemory();
            return FAILED;
        }
        pending->indexes = indexes;
        long *depths = PyMem_Realloc(pending->depths, (size_t)capacity * sizeof(long));
        if (depths == NULL) {
            PyErr_NoMemory();
            return FAILED;
        }
        pending->depths = depths;
        pending->capacity = capacity;
    }
    pending->indexes[pending->size] = index;
    pending->depths[pending->size] = depth;
    pending->size++;
    return 0;
}

/* The reference's reach(): `index` first reached at `depth` (then walked from), or again,
 * at the depth it had (else the reference raises, with its message). */
static inline int
reach(long *depths, Pending *pending, Py_ssize_t index, long depth)
{
    if (depths[index] == UNKNOWN) {
        depths[index] = depth;
        return push(pending, index, depth);
    }
    return depths[index] == depth ? 0 : NOT_TAKEN;
}

/* A C long of a plain int, within bounds the walk's sums cannot overflow; 0 and *taken
 * cleared where it is anything else. */
static inline long
small_int(PyObject *value, int *taken)
{
    if (!PyLong_CheckExact(value)) {
        *taken = 0;
        return 0;
    }
    int overflow;
    long out = PyLong_AsLongAndOverflow(value, &overflow);
    if (overflow || out < -(1L << 24) || out > (1L << 24)) {
        *taken = 0;
        return 0;
    }
    return out;
}

/* The memo's step of an instruction (a new reference): its key made as the reference
 * makes it (the name, or the name and a number its argument is or starts with), looked up,
 * and on a miss _step(item, key) asked. */
static PyObject *
step_of(PyObject *item, PyObject *name, PyObject *arg)
{
    PyObject *key, *number = arg;
    PyTypeObject *kind = Py_TYPE(arg);
    if (kind == &PyUnicode_Type || kind == config.label) {
        key = Py_NewRef(name);
    }
    else {
        if (kind == &PyTuple_Type) {
            number = PyTuple_GET_SIZE(arg) ? PyTuple_GET_ITEM(arg, 0) : Py_None;
        }
        if (number != config.unset && PyLong_Check(number)) {
            if ((key = PyTuple_Pack(2, name, number)) == NULL) {
                return NULL;
            }
        }
        else {
            key = Py_NewRef(name);
        }
    }
    PyObject *step = PyDict_GetItemWithError(config.steps, key); /* (borrowed) */
    if (step != NULL) {
        Py_INCREF(step);
    }
    else if (!PyErr_Occurred()) {
        PyObject *args[2] = {item, key};
        step = PyObject_Vectorcall(config.step, args, 2, NULL);
    }
    Py_DECREF(key);
    if (step != NULL && (!PyTuple_CheckExact(step) || PyTuple_GET_SIZE(step) != 4)) {
        PyErr_SetString(PyExc_TypeError, "a step of _stack._STEPS is not (jump, stops, at label, at next)");
        Py_CLEAR(step);
    }
    return step;
}

/* Whether `kind` is one of the item classes the walks take (bytecode's own, not a
 * subclass: the reference asks isinstance of those). */
static inline int
taken_kind(PyTypeObject *kind)
{
    return kind == config.instr || kind == config.label || kind == config.set_lineno || kind == config.try_begin
           || kind == config.try_end;
}

static PyTypeObject *walked_subclass; /* (the last subclass instr_kind took: a strong reference) */

/* Whether the depth walk takes an item of `kind` as an instruction: Instr, or a subclass of
 * it whose `_name` and `_arg` are Instr's slots (what the reference's `item._name` and
 * `item._arg` read there too), such as 3.14's borrowable loads (_py314._Borrowable), which
 * are in most bodies the walk is given there (docs/internals.md, "The stack walks in C"). */
static int
instr_kind(PyTypeObject *kind)
{
    if (kind == config.instr || kind == walked_subclass) {
        return 1;
    }
    if (!PyType_IsSubtype(kind, config.instr) || slot_offset(kind, str_name) != config.name_at
        || slot_offset(kind, str_arg) != config.arg_at) {
        return 0;
    }
    Py_XSETREF(walked_subclass, (PyTypeObject *)Py_NewRef(kind));
    return 1;
}

/* The walk itself, into depths[] (UNKNOWN where unreachable). */
static int
walk(PyObject *items, Py_ssize_t count, const Labels *labels, long *depths)
{
    Pending pending = {NULL, NULL, 0, 0};
    int outcome = push(&pending, 0, 0);
    while (outcome == 0 && pending.size) {
        pending.size--;
        Py_ssize_t index = pending.indexes[pending.size];
        long depth = pending.depths[pending.size];
        while (index < count) {
            PyObject *item = PyList_GET_ITEM(items, index);
            PyTypeObject *kind = Py_TYPE(item);
            depths[index] = depth;
            if (kind == config.instr || (kind != config.label && kind != config.try_begin && kind != config.try_end
                                         && kind != config.set_lineno)) { /* (depths() took it: instr_kind) */
                PyObject *arg = slot_at(item, config.arg_at), *name = slot_at(item, config.name_at);
                if (arg == NULL || name == NULL) {
                    outcome = NOT_TAKEN;
                    break;
                }
                PyObject *step = step_of(item, name, arg);
                if (step == NULL) {
                    outcome = FAILED;
                    break;
                }
                int jump = PyObject_IsTrue(PyTuple_GET_ITEM(step, 0)), stops = PyObject_IsTrue(PyTuple_GET_ITEM(step, 1));
                int taken = 1;
                long at_label = jump > 0 ? small_int(PyTuple_GET_ITEM(step, 2), &taken) : 0;
                long at_next = stops == 0 ? small_int(PyTuple_GET_ITEM(step, 3), &taken) : 0;
                Py_DECREF(step);
                if (jump < 0 || stops < 0) {
                    outcome = FAILED;
                    break;
                }
                if (!taken) {
                    outcome = NOT_TAKEN;
                    break;
                }
                if (jump) {
                    Py_ssize_t target = Py_TYPE(arg) == config.label ? labels_get(labels, arg) : -1;
                    if (target < 0 || (outcome = reach(depths, &pending, target, depth + at_label)) != 0) {
                        outcome = outcome ? outcome : NOT_TAKEN;
                        break;
                    }
                }
                if (stops) {
                    break;
                }
                depth += at_next;
            }
            else if (kind == config.try_begin) {
                PyObject *target = PyObject_GetAttr(item, str_target), *kept = NULL, *lasti = NULL;
                Py_ssize_t handler = -1;
                long handler_depth = depth;
                int taken = 1;
                if (target != NULL && (kept = PyObject_GetAttr(item, str_stack_depth)) != NULL
                    && (lasti = PyObject_GetAttr(item, str_push_lasti)) != NULL) {
                    handler = Py_TYPE(target) == config.label ? labels_get(labels, target) : -1;
                    if (kept != config.unset) {
                        handler_depth = small_int(kept, &taken);
                    }
                    handler_depth += lasti == Py_True ? 2 : lasti == Py_False ? 1 : small_int(lasti, &taken) + 1;
                }
                Py_XDECREF(target);
                Py_XDECREF(kept);
                Py_XDECREF(lasti);
                if (lasti == NULL) { /* (a field unset: the reference raises what it raises) */
                    PyErr_Clear();
                    outcome = NOT_TAKEN;
                    break;
                }
                if (!taken || handler < 0 || (outcome = reach(depths, &pending, handler, handler_depth)) != 0) {
                    outcome = outcome ? outcome : NOT_TAKEN;
                    break;
                }
            }
            index++;
            if (index < count && depths[index] != UNKNOWN) {
                if (depths[index] != depth) {
                    outcome = NOT_TAKEN;
                }
                break;
            }
        }
    }
    PyMem_Free(pending.indexes);
    PyMem_Free(pending.depths);
    return outcome;
}


static int
configured(void)
{
    if (config.instr == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_stacking.configure() was not called");
        return 0;
    }
    return 1;
}

static PyObject *
depths(PyObject *module, PyObject *items)
{
    (void)module;
    if (!configured()) {
        return NULL;
    }
    if (!PyList_CheckExact(items)) {
        return PyObject_CallOneArg(config.depths_reference, items);
    }
    Py_ssize_t count = PyList_GET_SIZE(items), label_count = 0;
    for (Py_ssize_t index = 0; index < count; index++) {
        PyTypeObject *kind = Py_TYPE(PyList_GET_ITEM(items, index));
        if (!taken_kind(kind) && !instr_kind(kind)) {
            return PyObject_CallOneArg(config.depths_reference, items);
        }
        label_count += kind == config.label;
    }
    Labels labels = {NULL, NULL, 0};
    long *known = PyMem_Malloc((size_t)(count ? count : 1) * sizeof(long));
    PyObject *out = NULL;
    if (known == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (labels_init(&labels, label_count) < 0) {
        goto done;
    }
    for (Py_ssize_t index = 0; index < count; index++) {
        PyObject *item = PyList_GET_ITEM(items, index);
        if (Py_TYPE(item) == config.label) {
            labels_put(&labels, item, index);
        }
        known[index] = UNKNOWN;
    }
    int outcome = count ? walk(items, count, &labels, known) : 0;
    if (outcome == NOT_TAKEN) {
        out = PyObject_CallOneArg(config.depths_reference, items);
        goto done;
    }
    if (outcome == FAILED || (out = PyList_New(count)) == NULL) {
        goto done;
    }
    for (Py_ssize_t index = 0; index < count; index++) {
        PyObject *depth = known[index] == UNKNOWN ? Py_NewRef(Py_None) : PyLong_FromLong(known[index]);
        if (depth == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, index, depth);
    }
done:
    labels_free(&labels);
    PyMem_Free(known);
    return out;
}

/* Asks `depth_of(item, depth)` the slot (a new reference, None for none); NULL on error. */
static inline PyObject *
slot_of(PyObject *depth_of, PyObject *item, PyObject *depth)
{
    PyObject *args[2] = {item, depth};
    return PyObject_Vectorcall(depth_of, args, 2, NULL);
}

/* The role of an instruction named `name`: the memo's, or _role's on a miss (a new
 * reference). */
static PyObject *
role_of(PyObject *item, PyObject *name, PyObject *roles, PyObject *producers, PyObject *consumers)
{
    PyObject *role = PyDict_GetItemWithError(roles, name);
    if (role != NULL) {
        Py_INCREF(role);
    }
    else if (!PyErr_Occurred()) {
        PyObject *args[4] = {item, roles, producers, consumers};
        role = PyObject_Vectorcall(config.role, args, 4, NULL);
    }
    if (role != NULL && (!PyTuple_CheckExact(role) || (PyTuple_GET_SIZE(role) != 0 && PyTuple_GET_SIZE(role) != 3))) {
        PyErr_SetString(PyExc_TypeError, "a role of _stack._ROLES is not (consumer, producer, flow) or ()");
        Py_CLEAR(role);
    }
    return role;
}

/* What the first loop finds (the reference's _stops): by item, the slot it consumes and
 * the slot it opens (the callbacks' answers) and its exit (its flow, and as bits: 1 it may
 * jump, 2 it does not go on); the stops in order, and by stop the lowest depth of the items
 * since the stop before (a depth of the list, or None).  The references are owned. */
typedef struct {
    Py_ssize_t count, stop_count, consumed_count;
    PyObject **consumed, **produced, **exits, **lowest;
    unsigned char *exit_bits;
    Py_ssize_t *stops;
} Found;

#define JUMPS 1
#define ENDS 2

static void
found_free(Found *found)
{
    PyObject **by_item[3] = {found->consumed, found->produced, found->exits};
    for (int which = 0; which < 3; which++) {
        for (Py_ssize_t index = 0; by_item[which] != NULL && index < found->count; index++) {
            Py_XDECREF(by_item[which][index]);
        }
    }
    for (Py_ssize_t place = 0; place < found->stop_count; place++) {
        Py_DECREF(found->lowest[place]);
    }
    PyMem_Free(found->consumed);
    PyMem_Free(found->produced);
    PyMem_Free(found->exits);
    PyMem_Free(found->lowest);
    PyMem_Free(found->exit_bits);
    PyMem_Free(found->stops);
}

/* The first loop over one instruction of role `role` at `index`: its consumed and produced
 * slots and its exit recorded; 1 where it is a stop, 0 where not, -1 on error. */
static int
one_role(PyObject *role, PyObject *item, Py_ssize_t index, PyObject *depth, PyObject *const *args, Found *found)
{
    int stop = 0;
    PyObject *goes = PyTuple_GET_ITEM(role, 2);
    for (int side = 0; side < 2; side++) { /* (the consumer first, then the producer, as the reference) */
        int is = PyObject_IsTrue(PyTuple_GET_ITEM(role, side));
        if (is < 0) {
            return -1;
        }
        if (is) {
            PyObject *slot = slot_of(args[6 - side], item, depth);
            if (slot == NULL) {
                return -1;
            }
            if (slot == Py_None) {
                Py_DECREF(slot);
                continue;
            }
            (side ? found->produced : found->consumed)[index] = slot;
            found->consumed_count += !side;
            stop = 1;
        }
    }
    if (!PyTuple_Check(goes) || PyTuple_GET_SIZE(goes) < 2) {
        PyErr_SetString(PyExc_TypeError, "a flow is not (jumps, stops)");
        return -1;
    }
    int jumps = PyObject_IsTrue(PyTuple_GET_ITEM(goes, 0)), ends = PyObject_IsTrue(PyTuple_GET_ITEM(goes, 1));
    if (jumps < 0 || ends < 0) {
        return -1;
    }
    if (jumps || ends) {
        found->exits[index] = Py_NewRef(goes);
        found->exit_bits[index] = (unsigned char)((jumps ? JUMPS : 0) | (ends ? ENDS : 0));
        stop = 1;
    }
    return stop;
}

/* The reference's _stops, into `found`; -1 on error. */
static int
first_loop(PyObject *const *args, Found *found)
{
    PyObject *items = args[0], *depths = args[1], *roles = args[2];
    Py_ssize_t count = found->count;
    found->consumed = PyMem_Calloc((size_t)count + 1, sizeof(PyObject *));
    found->produced = PyMem_Calloc((size_t)count + 1, sizeof(PyObject *));
    found->exits = PyMem_Calloc((size_t)count + 1, sizeof(PyObject *));
    found->lowest = PyMem_Malloc(((size_t)count + 1) * sizeof(PyObject *));
    found->exit_bits = PyMem_Calloc((size_t)count + 1, 1);
    found->stops = PyMem_Malloc(((size_t)count + 1) * sizeof(Py_ssize_t));
    if (found->consumed == NULL || found->produced == NULL || found->exits == NULL || found->lowest == NULL
        || found->exit_bits == NULL || found->stops == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    PyObject *low = Py_None; /* (the lowest depth since the last stop, or None: borrowed from the list) */
    long low_value = 0;
    for (Py_ssize_t index = 0; index < count; index++) {
        PyObject *item = PyList_GET_ITEM(items, index), *depth = PyList_GET_ITEM(depths, index);
        PyTypeObject *kind = Py_TYPE(item);
        int stop;
        if (depth == Py_None) { /* (unreachable) */
            stop = 1;
        }
        else if (kind == config.instr) {
            stop = index == 0;
            PyObject *name = slot_at(item, config.name_at);
            if (name == NULL) {
                PyErr_SetString(PyExc_AttributeError, "_name");
                return -1;
            }
            PyObject *role = role_of(item, name, roles, args[3], args[4]);
            if (role == NULL) {
                return -1;
            }
            int here = PyTuple_GET_SIZE(role) ? one_role(role, item, index, depth, args, found) : 0;
            Py_DECREF(role);
            if (here < 0) {
                return -1;
            }
            stop |= here;
        }
        else {
            stop = index == 0 || !(kind == config.set_lineno || kind == config.try_end);
        }
        if (stop) {
            found->stops[found->stop_count] = index;
            found->lowest[found->stop_count++] = Py_NewRef(low);
            low = Py_None;
        }
        else {
            int small = 1;
            long value = small_int(depth, &small);
            if (low == Py_None || value < low_value) {
                low = depth;
                low_value = value;
            }
        }
    }
    return 0;
}

/* The second loop's states: which producers opened each slot still on the stack, a slot's
 * depth and a frozenset of producers' indexes (the reference's dicts, as arrays).  A state
 * is shared where the reference shares its dict (held by a pending path and by `seen`),
 * and never changed once made: each change makes another, as the reference's does. */
typedef struct {
    Py_ssize_t refs, size;
    long *slots;
    PyObject **sets; /* (owned) */
} State;

static State *
state_new(Py_ssize_t size)
{
    State *state = PyMem_Malloc(sizeof(State) + (size_t)(size ? size : 1) * (sizeof(long) + sizeof(PyObject *)));
    if (state == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    state->refs = 1;
    state->size = 0;
    state->sets = (PyObject **)(state + 1);
    state->slots = (long *)(state->sets + (size ? size : 1));
    return state;
}

static void
state_release(State *state)
{
    if (state != NULL && --state->refs == 0) {
        for (Py_ssize_t at = 0; at < state->size; at++) {
            Py_DECREF(state->sets[at]);
        }
        PyMem_Free(state);
    }
}

static inline State *
state_hold(State *state)
{
    state->refs++;
    return state;
}

/* The producers of `slot` in `state` (borrowed), or NULL. */
static inline PyObject *
state_get(const State *state, long slot)
{
    for (Py_ssize_t at = 0; at < state->size; at++) {
        if (state->slots[at] == slot) {
            return state->sets[at];
        }
    }
    return NULL;
}

/* `state` without its slots at `bound` or above (the reference's {d: p ... if d < bound},
 * made only where one is): takes the reference to `state`, gives one to the result. */
static State *
trimmed(State *state, long bound)
{
    Py_ssize_t kept = 0;
    for (Py_ssize_t at = 0; at < state->size; at++) {
        kept += state->slots[at] < bound;
    }
    if (kept == state->size) {
        return state;
    }
    State *out = state_new(kept);
    if (out != NULL) {
        for (Py_ssize_t at = 0; at < state->size; at++) {
            if (state->slots[at] < bound) {
                out->slots[out->size] = state->slots[at];
                out->sets[out->size++] = Py_NewRef(state->sets[at]);
            }
        }
    }
    state_release(state);
    return out;
}

/* `state` with `slot` opened by `producers` (the reference's {**state, slot: ...}): takes
 * the reference to `state` and to `producers`. */
static State *
opened(State *state, long slot, PyObject *producers)
{
    State *out = state_new(state->size + 1);
    if (out != NULL) {
        int replaced = 0;
        for (Py_ssize_t at = 0; at < state->size; at++) {
            out->slots[at] = state->slots[at];
            if (state->slots[at] == slot) {
                out->sets[at] = Py_NewRef(producers);
                replaced = 1;
            }
            else {
                out->sets[at] = Py_NewRef(state->sets[at]);
            }
        }
        out->size = state->size;
        if (!replaced) {
            out->slots[out->size] = slot;
            out->sets[out->size++] = Py_NewRef(producers);
        }
    }
    state_release(state);
    Py_DECREF(producers);
    return out;
}

/* The reference's merge of what reached a stop before (`known`) with `state`: the slots in
 * both, each with both's producers (known's | state's); *same set where that is `known`. */
static State *
merged(const State *known, const State *state, int *same)
{
    State *out = state_new(known->size);
    if (out == NULL) {
        return NULL;
    }
    *same = 1;
    for (Py_ssize_t at = 0; at < known->size; at++) {
        PyObject *theirs = state_get(state, known->slots[at]);
        if (theirs == NULL) {
            *same = 0;
            continue;
        }
        PyObject *both = PyNumber_Or(known->sets[at], theirs);
        if (both == NULL) {
            state_release(out);
            return NULL;
        }
        out->slots[out->size] = known->slots[at];
        out->sets[out->size++] = both;
        if (*same) {
            int equal = PyObject_RichCompareBool(both, known->sets[at], Py_EQ);
            if (equal < 0) {
                state_release(out);
                return NULL;
            }
            *same = equal;
        }
    }
    return out;
}

typedef struct {
    Py_ssize_t *places;
    State **states;
    Py_ssize_t size, capacity;
} Paths;

static int
paths_push(Paths *paths, Py_ssize_t place, State *state)
{
    if (paths->size == paths->capacity) {
        Py_ssize_t capacity = paths->capacity ? paths->capacity * 2 : 16;
        Py_ssize_t *places = PyMem_Realloc(paths->places, (size_t)capacity * sizeof(Py_ssize_t));
        if (places == NULL) {
            state_release(state);
            PyErr_NoMemory();
            return FAILED;
        }
        paths->places = places;
        State **states = PyMem_Realloc(paths->states, (size_t)capacity * sizeof(State *));
        if (states == NULL) {
            state_release(state);
            PyErr_NoMemory();
            return FAILED;
        }
        paths->states = states;
        paths->capacity = capacity;
    }
    paths->places[paths->size] = place;
    paths->states[paths->size++] = state;
    return 0;
}

/* The reference's _paired: the walk over the stops, carrying each path's state, into
 * `pairs` (consumer's index -> producers) and `unpaired` (by index); FAILED, or NOT_TAKEN
 * where it meets what it does not take (a try block's depth not an int, a label that is
 * not a stop), then the reference walks. */
static int
second_loop(PyObject *items, PyObject *depths, const Found *found, PyObject *pairs, unsigned char *unpaired)
{
    Labels at = {NULL, NULL, 0};
    State **seen = PyMem_Calloc((size_t)found->stop_count + 1, sizeof(State *));
    long *lowest = PyMem_Malloc(((size_t)found->stop_count + 1) * sizeof(long));
    Paths pending = {NULL, NULL, 0, 0};
    State *state = NULL;
    int outcome = FAILED;
    if (seen == NULL || lowest == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (labels_init(&at, found->stop_count) < 0) {
        goto done;
    }
    for (Py_ssize_t place = 0; place < found->stop_count; place++) {
        PyObject *item = PyList_GET_ITEM(items, found->stops[place]);
        if (Py_TYPE(item) == config.label) {
            labels_put(&at, item, place);
        }
        int small = 1;
        lowest[place] = found->lowest[place] == Py_None ? UNKNOWN : small_int(found->lowest[place], &small);
    }
    if ((state = state_new(0)) == NULL || paths_push(&pending, 0, state) < 0) {
        goto done;
    }
    state = NULL;
    outcome = 0;
    while (outcome == 0 && pending.size) {
        pending.size--;
        Py_ssize_t place = pending.places[pending.size];
        state = pending.states[pending.size];
        int on = 0; /* (gone on from the stop before, rather than started here) */
        while (place < found->stop_count) {
            Py_ssize_t index = found->stops[place];
            if (on && lowest[place] != UNKNOWN && (state = trimmed(state, lowest[place])) == NULL) {
                outcome = FAILED;
                break;
            }
            on = 1;
            State *known = seen[place];
            if (known != NULL) {
                int same;
                State *both = merged(known, state, &same);
                if (both == NULL) {
                    outcome = FAILED;
                    break;
                }
                if (same) {
                    state_release(both);
                    break;
                }
                state_release(state);
                state = both;
                state_release(known);
            }
            seen[place] = state_hold(state);
            PyObject *item = PyList_GET_ITEM(items, index), *depth_object = PyList_GET_ITEM(depths, index);
            int small = 1;
            long depth = depth_object == Py_None ? 0 : small_int(depth_object, &small);
            if (depth_object != Py_None && (state = trimmed(state, depth)) == NULL) {
                outcome = FAILED;
                break;
            }
            if (Py_TYPE(item) == config.instr) {
                if (depth_object == Py_None) {
                    place++;
                    continue;
                }
                PyObject *consumed = found->consumed[index];
                if (consumed != NULL) {
                    long slot = small_int(consumed, &small);
                    PyObject *producers = state_get(state, slot);
                    if (producers == NULL) {
                        unpaired[index] = 1;
                    }
                    else {
                        PyObject *key = PyLong_FromSsize_t(index), *before = NULL, *now = NULL;
                        if (key != NULL && (before = PyDict_GetItemWithError(pairs, key)) == NULL && PyErr_Occurred()) {
                            before = NULL;
                        }
                        else if (key != NULL) {
                            now = PyNumber_Or(before != NULL ? before : empty_frozenset, producers);
                        }
                        int result = now == NULL ? -1 : PyDict_SetItem(pairs, key, now);
                        Py_XDECREF(key);
                        Py_XDECREF(now);
                        if (result < 0) {
                            outcome = FAILED;
                            break;
                        }
                    }
                    if ((state = trimmed(state, slot)) == NULL) {
                        outcome = FAILED;
                        break;
                    }
                }
                PyObject *produced = found->produced[index];
                if (produced != NULL) {
                    PyObject *key = PyLong_FromSsize_t(index), *alone = NULL;
                    if (key != NULL) {
                        PyObject *one = PyTuple_Pack(1, key);
                        alone = one == NULL ? NULL : PyFrozenSet_New(one);
                        Py_XDECREF(one);
                        Py_DECREF(key);
                    }
                    if (alone == NULL || (state = opened(state, small_int(produced, &small), alone)) == NULL) {
                        outcome = FAILED;
                        break;
                    }
                }
                unsigned char bits = found->exit_bits[index];
                if (bits & JUMPS) {
                    PyObject *arg = slot_at(item, config.arg_at);
                    Py_ssize_t target = arg != NULL && Py_TYPE(arg) == config.label ? labels_get(&at, arg) : -1;
                    if (target < 0) {
                        outcome = NOT_TAKEN;
                        break;
                    }
                    if ((outcome = paths_push(&pending, target, state_hold(state))) != 0) {
                        break;
                    }
                }
                if (bits & ENDS) {
                    break;
                }
            }
            else if (Py_TYPE(item) == config.try_begin) {
                PyObject *kept = PyObject_GetAttr(item, str_stack_depth), *target = NULL;
                if (kept == NULL || (target = PyObject_GetAttr(item, str_target)) == NULL) {
                    PyErr_Clear(); /* (a field unset: the reference raises what it raises) */
                }
                long handler_depth = kept != NULL ? small_int(kept, &small) : 0;
                Py_ssize_t handler = target != NULL && Py_TYPE(target) == config.label ? labels_get(&at, target) : -1;
                Py_XDECREF(kept);
                Py_XDECREF(target);
                if (!small || handler < 0) {
                    outcome = NOT_TAKEN;
                    break;
                }
                State *handed = trimmed(state_hold(state), handler_depth);
                if (handed == NULL) {
                    outcome = FAILED;
                    break;
                }
                if ((outcome = paths_push(&pending, handler, handed)) != 0) {
                    break;
                }
            }
            place++;
        }
        state_release(state);
        state = NULL;
    }
done:
    state_release(state);
    for (Py_ssize_t path = 0; path < pending.size; path++) {
        state_release(pending.states[path]);
    }
    PyMem_Free(pending.places);
    PyMem_Free(pending.states);
    if (seen != NULL) {
        for (Py_ssize_t place = 0; place < found->stop_count; place++) {
            state_release(seen[place]);
        }
    }
    PyMem_Free(seen);
    PyMem_Free(lowest);
    labels_free(&at);
    return outcome;
}

/* The reference's _paired, asked with what the first loop found, as dicts and lists. */
static PyObject *
paired_by_reference(PyObject *items, PyObject *depths, const Found *found)
{
    PyObject *dicts[3] = {PyDict_New(), PyDict_New(), PyDict_New()};
    PyObject *stops = PyList_New(found->stop_count), *lowest = PyList_New(found->stop_count), *out = NULL;
    if (dicts[0] == NULL || dicts[1] == NULL || dicts[2] == NULL || stops == NULL || lowest == NULL) {
        goto done;
    }
    PyObject **by_item[3] = {found->consumed, found->produced, found->exits};
    for (Py_ssize_t index = 0; index < found->count; index++) {
        for (int which = 0; which < 3; which++) {
            if (by_item[which][index] != NULL) {
                PyObject *key = PyLong_FromSsize_t(index);
                int result = key == NULL ? -1 : PyDict_SetItem(dicts[which], key, by_item[which][index]);
                Py_XDECREF(key);
                if (result < 0) {
                    goto done;
                }
            }
        }
    }
    for (Py_ssize_t place = 0; place < found->stop_count; place++) {
        PyObject *index = PyLong_FromSsize_t(found->stops[place]);
        if (index == NULL) {
            goto done;
        }
        PyList_SET_ITEM(stops, place, index);
        PyList_SET_ITEM(lowest, place, Py_NewRef(found->lowest[place]));
    }
    PyObject *args[7] = {items, depths, dicts[0], dicts[1], dicts[2], stops, lowest};
    out = PyObject_Vectorcall(config.paired_reference, args, 7, NULL);
done:
    for (int which = 0; which < 3; which++) {
        Py_XDECREF(dicts[which]);
    }
    Py_XDECREF(stops);
    Py_XDECREF(lowest);
    return out;
}

static PyObject *
pairs(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (!configured()) {
        return NULL;
    }
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "pairs(items, depths, roles, producers, consumers, producer_depth, consumer_depth)");
        return NULL;
    }
    PyObject *items = args[0], *depths = args[1];
    int taken = PyList_CheckExact(items) && PyList_CheckExact(depths) && PyDict_CheckExact(args[2])
                && PyList_GET_SIZE(depths) >= PyList_GET_SIZE(items);
    Py_ssize_t count = taken ? PyList_GET_SIZE(items) : 0;
    for (Py_ssize_t index = 0; taken && index < count; index++) {
        PyObject *depth = PyList_GET_ITEM(depths, index);
        int small = 1;
        taken = taken_kind(Py_TYPE(PyList_GET_ITEM(items, index)))
                && (depth == Py_None || (small_int(depth, &small), small));
    }
    if (!taken) {
        return PyObject_Vectorcall(config.pairs_reference, args, (size_t)nargs, NULL);
    }
    Found found = {count, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL};
    PyObject *out = NULL, *all = NULL;
    unsigned char *unpaired = NULL;
    if (first_loop(args, &found) < 0) {
        goto done;
    }
    if (found.consumed_count == 0) {
        out = PyDict_New();
        goto done;
    }
    int small = 1;
    for (Py_ssize_t index = 0; small && index < count; index++) {
        if (found.consumed[index] != NULL) {
            small_int(found.consumed[index], &small);
        }
        if (found.produced[index] != NULL) {
            small_int(found.produced[index], &small);
        }
    }
    if (!small) { /* (a slot the callbacks gave that is no small int) */
        out = paired_by_reference(items, depths, &found);
        goto done;
    }
    if ((all = PyDict_New()) == NULL || (unpaired = PyMem_Calloc((size_t)count + 1, 1)) == NULL) {
        if (all != NULL) {
            PyErr_NoMemory();
        }
        goto done;
    }
    int outcome = second_loop(items, depths, &found, all, unpaired);
    if (outcome == NOT_TAKEN) {
        out = paired_by_reference(items, depths, &found);
        goto done;
    }
    if (outcome == FAILED || (out = PyDict_New()) == NULL) {
        goto done;
    }
    Py_ssize_t position = 0;
    PyObject *key, *value;
    while (PyDict_Next(all, &position, &key, &value)) {
        if (!unpaired[PyLong_AsSsize_t(key)] && PyDict_SetItem(out, key, value) < 0) {
            Py_CLEAR(out);
            goto done;
        }
    }
done:
    found_free(&found);
    Py_XDECREF(all);
    PyMem_Free(unpaired);
    return out;
}

static PyObject *
configure(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 12) {
        PyErr_SetString(PyExc_TypeError, "configure(Instr, Label, SetLineno, TryBegin, TryEnd, UNSET, steps, step, "
                                         "depths_reference, pairs_reference, paired_reference, role)");
        return NULL;
    }
    for (int index = 0; index < 5; index++) {
        if (!PyType_Check(args[index])) {
            PyErr_SetString(PyExc_TypeError, "configure: the item classes first");
            return NULL;
        }
    }
    if (!PyDict_CheckExact(args[6])) {
        PyErr_SetString(PyExc_TypeError, "configure: the steps are a dict");
        return NULL;
    }
    Py_ssize_t name_at = slot_offset((PyTypeObject *)args[0], str_name);
    Py_ssize_t arg_at = slot_offset((PyTypeObject *)args[0], str_arg);
    if (name_at < 0 || arg_at < 0) {
        PyErr_SetString(PyExc_TypeError, "configure: Instr's _name and _arg are not slots");
        return NULL;
    }
    PyObject **fields[12] = {
        (PyObject **)&config.instr, (PyObject **)&config.label, (PyObject **)&config.set_lineno,
        (PyObject **)&config.try_begin, (PyObject **)&config.try_end, &config.unset, &config.steps, &config.step,
        &config.depths_reference, &config.pairs_reference, &config.paired_reference, &config.role,
    };
    for (int index = 0; index < 12; index++) {
        Py_XSETREF(*fields[index], Py_NewRef(args[index]));
    }
    config.name_at = name_at;
    config.arg_at = arg_at;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", (PyCFunction)(void (*)(void))configure, METH_FASTCALL,
     "configure(Instr, Label, SetLineno, TryBegin, TryEnd, UNSET, steps, step, depths_reference, pairs_reference, "
     "paired_reference, role)\n--\n\n"
     "The classes, memos and Python functions the walks use (once, by _stack)."},
    {"depths", (PyCFunction)depths, METH_O,
     "depths(items)\n--\n\n"
     "_stack.stack_depths in C: the depth of the stack before each item (None where unreachable)."},
    {"pairs", (PyCFunction)(void (*)(void))pairs, METH_FASTCALL,
     "pairs(items, depths, roles, producers, consumers, producer_depth, consumer_depth)\n--\n\n"
     "_stack._pairs in C: pair_by_depth's two loops (each consumer's index -> its producers' indexes)."},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "cassette_hook.rewrite._stacking",
    .m_doc = "The stack walks' per-item loops in C (optional; _stack.py has them in Python).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__stacking(void)
{
    str_name = PyUnicode_InternFromString("_name");
    str_arg = PyUnicode_InternFromString("_arg");
    str_target = PyUnicode_InternFromString("target");
    str_stack_depth = PyUnicode_InternFromString("stack_depth");
    str_push_lasti = PyUnicode_InternFromString("push_lasti");
    empty_frozenset = PyFrozenSet_New(NULL);
    if (empty_frozenset == NULL || str_name == NULL || str_arg == NULL || str_target == NULL || str_stack_depth == NULL
        || str_push_lasti == NULL) {
        return NULL;
    }
    return PyModule_Create(&module_def);
}
