/* The stack walks' per-item work in C: _stack.stack_depths's walk over a body's items, and
 * the first loop of _stack.pair_by_depth (where its walk stops, and what happens there).
 *
 * The reference is Python: _stack._stack_depths and _stack._stops, used where this module
 * is not built or CASSETTE_HOOK_PURE_PYTHON=1 is set (_native.optional); _stack chooses,
 * once.  Why C: on a first run of sympy under a context (3.12) the two were the biggest part
 * of the rewrite's own passes, each a per-item loop already tuned as far as Python goes
 * (docs/performance.md, "The stack walks in C"); in Python each item costs a type test, two
 * slot reads through their descriptors, a key made and looked up, here pointer compares and
 * reads at the slots' offsets (_slots.h).
 *
 * configure(...) hands over, once, the item classes, bytecode's UNSET, the depth walk's
 * memo of steps (_stack._STEPS) and its filler (_stack._step), the pairing's filler of a
 * name's role (_stack._role), and the two references.  Then:
 *
 * depths(items) is stack_depths(items): the same walk, in the same order, asking the same
 * memo by the same keys (a miss calls _step, which fills it, as the reference does).  Where
 * it meets what it does not take -- an item of another class (a subclass of Label or Instr
 * ...), a jump or a handler whose label is not an item, a depth two paths disagree on, a
 * try block's fields not plain -- it hands the items to the reference, which gives the same
 * depths or raises what it raises (UnsupportedCode with its message, KeyError).  Nothing it
 * did before is seen but the memo's steps, which the reference would have filled alike.
 *
 * stops(items, depths, roles, producers, consumers, producer_depth, consumer_depth) is
 * _stops(...): the consumed and produced slots, the exits, the stops and the lowest depth
 * before each, the same objects.  The items' classes and depths are checked before the
 * callbacks are first called (the reference runs the whole where one is not taken: no
 * callback is called twice). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <stdint.h>
#include "_slots.h" /* slot_offset */

static PyObject *str_name, *str_arg, *str_target, *str_stack_depth, *str_push_lasti;

typedef struct {
    PyTypeObject *instr, *label, *set_lineno, *try_begin, *try_end;
    PyObject *unset, *steps, *step, *depths_reference, *stops_reference, *role;
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
            if (kind == config.instr) {
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

/* Whether `kind` is one of the item classes the walks take (bytecode's own, not a
 * subclass: the reference asks isinstance of those). */
static inline int
taken_kind(PyTypeObject *kind)
{
    return kind == config.instr || kind == config.label || kind == config.set_lineno || kind == config.try_begin
           || kind == config.try_end;
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
        if (!taken_kind(kind)) {
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

/* Sets `dict[index] = value` (value borrowed). */
static inline int
set_at(PyObject *dict, Py_ssize_t index, PyObject *value)
{
    PyObject *key = PyLong_FromSsize_t(index);
    if (key == NULL) {
        return -1;
    }
    int result = PyDict_SetItem(dict, key, value);
    Py_DECREF(key);
    return result;
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

/* The first loop over one instruction of role `role` at `index`: its consumed and produced
 * slots and its exit recorded; 1 where it is a stop, 0 where not, -1 on error. */
static int
one_role(PyObject *role, PyObject *item, Py_ssize_t index, PyObject *depth, PyObject *const *args, PyObject *consumed,
         PyObject *produced, PyObject *exits)
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
            int result = slot == Py_None ? 0 : set_at(side ? produced : consumed, index, slot);
            stop |= slot != Py_None;
            Py_DECREF(slot);
            if (result < 0) {
                return -1;
            }
        }
    }
    if (!PyTuple_Check(goes) || PyTuple_GET_SIZE(goes) < 2) {
        PyErr_SetString(PyExc_TypeError, "a flow is not (jumps, stops)");
        return -1;
    }
    int jumps = PyObject_IsTrue(PyTuple_GET_ITEM(goes, 0));
    int ends = jumps == 0 ? PyObject_IsTrue(PyTuple_GET_ITEM(goes, 1)) : jumps;
    if (ends < 0) {
        return -1;
    }
    if (ends) {
        if (set_at(exits, index, goes) < 0) {
            return -1;
        }
        stop = 1;
    }
    return stop;
}

static PyObject *
stops(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (!configured()) {
        return NULL;
    }
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "stops(items, depths, roles, producers, consumers, producer_depth, consumer_depth)");
        return NULL;
    }
    PyObject *items = args[0], *depths = args[1], *roles = args[2];
    int taken = PyList_CheckExact(items) && PyList_CheckExact(depths) && PyDict_CheckExact(roles)
                && PyList_GET_SIZE(depths) >= PyList_GET_SIZE(items);
    Py_ssize_t count = taken ? PyList_GET_SIZE(items) : 0;
    for (Py_ssize_t index = 0; taken && index < count; index++) {
        PyObject *depth = PyList_GET_ITEM(depths, index);
        int small = 1;
        taken = taken_kind(Py_TYPE(PyList_GET_ITEM(items, index)))
                && (depth == Py_None || (small_int(depth, &small), small));
    }
    if (!taken) {
        return PyObject_Vectorcall(config.stops_reference, args, (size_t)nargs, NULL);
    }
    PyObject *consumed = PyDict_New(), *produced = PyDict_New(), *exits = PyDict_New();
    PyObject *stop_list = PyList_New(0), *lowest = PyList_New(0), *out = NULL;
    PyObject *low = Py_NewRef(Py_None); /* (the lowest depth since the last stop, or None) */
    if (consumed == NULL || produced == NULL || exits == NULL || stop_list == NULL || lowest == NULL) {
        goto done;
    }
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
                goto done;
            }
            PyObject *role = role_of(item, name, roles, args[3], args[4]);
            if (role == NULL) {
                goto done;
            }
            int here = PyTuple_GET_SIZE(role) ? one_role(role, item, index, depth, args, consumed, produced, exits) : 0;
            Py_DECREF(role);
            if (here < 0) {
                goto done;
            }
            stop |= here;
        }
        else {
            stop = index == 0 || !(kind == config.set_lineno || kind == config.try_end);
        }
        if (stop) {
            PyObject *key = PyLong_FromSsize_t(index);
            int result = key == NULL ? -1 : PyList_Append(stop_list, key);
            Py_XDECREF(key);
            if (result < 0 || PyList_Append(lowest, low) < 0) {
                goto done;
            }
            Py_SETREF(low, Py_NewRef(Py_None));
        }
        else {
            int small = 1;
            long value = small_int(depth, &small);
            if (low == Py_None || value < low_value) {
                Py_SETREF(low, Py_NewRef(depth));
                low_value = value;
            }
        }
    }
    out = PyTuple_Pack(5, consumed, produced, exits, stop_list, lowest);
done:
    Py_XDECREF(low);
    Py_XDECREF(consumed);
    Py_XDECREF(produced);
    Py_XDECREF(exits);
    Py_XDECREF(stop_list);
    Py_XDECREF(lowest);
    return out;
}

static PyObject *
configure(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError, "configure(Instr, Label, SetLineno, TryBegin, TryEnd, UNSET, steps, step, "
                                         "depths_reference, stops_reference, role)");
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
    PyObject **fields[11] = {
        (PyObject **)&config.instr, (PyObject **)&config.label, (PyObject **)&config.set_lineno,
        (PyObject **)&config.try_begin, (PyObject **)&config.try_end, &config.unset, &config.steps, &config.step,
        &config.depths_reference, &config.stops_reference, &config.role,
    };
    for (int index = 0; index < 11; index++) {
        Py_XSETREF(*fields[index], Py_NewRef(args[index]));
    }
    config.name_at = name_at;
    config.arg_at = arg_at;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", (PyCFunction)(void (*)(void))configure, METH_FASTCALL,
     "configure(Instr, Label, SetLineno, TryBegin, TryEnd, UNSET, steps, step, depths_reference, stops_reference, "
     "role)\n--\n\n"
     "The classes, memos and Python functions the walks use (once, by _stack)."},
    {"depths", (PyCFunction)depths, METH_O,
     "depths(items)\n--\n\n"
     "_stack.stack_depths in C: the depth of the stack before each item (None where unreachable)."},
    {"stops", (PyCFunction)(void (*)(void))stops, METH_FASTCALL,
     "stops(items, depths, roles, producers, consumers, producer_depth, consumer_depth)\n--\n\n"
     "_stack._stops in C: pair_by_depth's first loop (consumed, produced, exits, stops, lowest)."},
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
    if (str_name == NULL || str_arg == NULL || str_target == NULL || str_stack_depth == NULL
        || str_push_lasti == NULL) {
        return NULL;
    }
    return PyModule_Create(&module_def);
}
