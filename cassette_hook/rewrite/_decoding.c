/* The decoder's per-instruction work in C: the loop over a code object's units that
 * _decoder.Decoder._items runs in Python; and, with the same reader of the positions, a
 * plain half's runs (_assembler.Verbatim's: below, "A plain half's runs"); and, made as
 * the loop makes its instructions, the copies of the instructions the passes insert
 * (_instr.placed's: below, "Instructions placed"), and the passes' search for the few
 * instructions they act on (_instr.named's: below, "Instructions found by name").
 *
 * The reference is Python: Decoder._items, used where this module is not built or
 * CASSETTE_HOOK_PURE_PYTHON=1 is set (_native.optional); _nullslot.own_decoder chooses,
 * once.  Why C: on a cold rewrite of sympy (3.12) decoding was about a tenth of the hooked
 * first run, most of it that loop (docs/performance.md, "The decoder's loop in C"); in Python
 * each instruction costs a table look-up, a tuple unpacked, a position compared and five
 * attribute stores, here a few stores into the objects' slots (_slots.h).
 *
 * items(tables, code, locals, cells, entries) makes what Decoder._items makes of `code`, the
 * same steps in the same order (tests/test_decoding_in_c.py compares the two, item by item,
 * over real modules): the Instr objects, made as object.__new__ makes them and their slots
 * set (_name, _opcode, _is_jump, _arg, _location), an InstrLocation shared by the
 * instructions of one position, a TryBegin where an exception table entry's range starts and
 * a TryEnd after the instruction it ends on, the jumps' and handlers' labels put in before
 * the instructions they land on.  `locals`, `cells` and `entries` are the Python's (the
 * names a local opcode and a cell opcode index; the exception table's entries, checked to
 * be in order).  It returns the items; None where the reference declines the code (raises
 * _Declined, or KeyError, IndexError, TypeError or ValueError: an argument past its table, a
 * jump landing inside an instruction ...), the family's decode then taking bytecode's route;
 * NotImplemented where it meets what it does not take (an argument past 2**62, a class
 * whose fields are not slots), then the reference decodes the code.  An error the reference
 * would raise (a converter's) is raised. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include "_slots.h" /* slot_offset */

/* An argument's kind: _decoder's _CONST ... _UNKNOWN, in its order (the table's bytes). */
enum {
    KIND_CONST, KIND_LOCAL, KIND_DUAL, KIND_NAME, KIND_FLAG_NAME, KIND_FLAGS_NAME, KIND_FREE, KIND_INT, KIND_NO_ARG,
    KIND_COMPARE, KIND_INTRINSIC1, KIND_INTRINSIC2, KIND_BINARY, KIND_COMMON, KIND_SPECIAL, KIND_FORMAT,
    KIND_JUMP, KIND_EXTENDED, KIND_UNKNOWN, KINDS
};
enum { FORWARD = 1, BACKWARD = 2 }; /* (_decoder's _FORWARD, _BACKWARD; anything else: absolute) */

#define NOWHERE ((long long)1 << 62) /* past any offset: no exception table entry left */
#define ARG_LIMIT ((long long)1 << 52) /* an argument from here on: the reference's (Python ints grow) */

static PyObject *str_co_code, *str_co_consts, *str_co_names, *str_co_freevars, *str_co_linetable, *str_co_firstlineno;
static PyObject *str_target;
static PyObject *instr_slot_names[5], *location_slot_names[4], *empty_tuple;

typedef struct {
    PyObject *opnames, *classes, *converters, *members;
    const unsigned char *kinds, *directions, *caches, *is_jump;
    PyObject *location_type, *label_type, *try_begin_type, *try_end_type, *cell_type, *free_type, *unset;
    long nop;
    /* where the Instr's slots are in the last class made, and the InstrLocation's */
    PyTypeObject *instr_read;
    Py_ssize_t instr_at[5], location_at[4];
} Tables;

/* Sets the slot at `offset` of a new object (a new reference to value taken). */
static inline void
set_slot(PyObject *object, Py_ssize_t offset, PyObject *value)
{
    PyObject **slot = (PyObject **)((char *)object + offset);
    Py_XSETREF(*slot, value);
}

/* The offsets of a class's slots named `names`: 0, or 1 where one is not a slot. */
static int
offsets_of(PyTypeObject *type, PyObject *const *names, int count, Py_ssize_t *at)
{
    for (int index = 0; index < count; index++) {
        if ((at[index] = slot_offset(type, names[index])) < 0) {
            return 1;
        }
    }
    return 0;
}

/* object.__new__(cls), as the reference's _new. */
static inline PyObject *
new_object(PyObject *cls)
{
    return PyBaseObject_Type.tp_new((PyTypeObject *)cls, empty_tuple, NULL);
}

/* A growable array of (index, target) pairs: the jumps, or the handlers. */
typedef struct {
    Py_ssize_t *pairs;
    Py_ssize_t size, capacity;
} Pairs;

static int
add_pair(Pairs *pairs, Py_ssize_t index, Py_ssize_t target)
{
    if (pairs->size == pairs->capacity) {
        Py_ssize_t capacity = pairs->capacity ? pairs->capacity * 2 : 16;
        Py_ssize_t *grown = PyMem_Realloc(pairs->pairs, (size_t)capacity * 2 * sizeof(Py_ssize_t));
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        pairs->pairs = grown;
        pairs->capacity = capacity;
    }
    pairs->pairs[2 * pairs->size] = index;
    pairs->pairs[2 * pairs->size + 1] = target;
    pairs->size++;
    return 0;
}

/* Outcomes besides a list: the reference's decline, and what C hands to the reference. */
#define DECLINED 1
#define NOT_TAKEN 2

/* An exception table entry's fields (start, stop, target, stack depth, push lasti). */
static int
entry_fields(PyObject *entries, Py_ssize_t index, long long *start, long long *stop, PyObject **entry)
{
    *entry = PyList_GET_ITEM(entries, index);
    if (!PyTuple_Check(*entry) || PyTuple_GET_SIZE(*entry) != 5) {
        return NOT_TAKEN;
    }
    *start = PyLong_AsLongLong(PyTuple_GET_ITEM(*entry, 0));
    *stop = PyLong_AsLongLong(PyTuple_GET_ITEM(*entry, 1));
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return NOT_TAKEN;
    }
    return 0;
}

/* The argument of an instruction of kind `kind` (new reference); NULL with *outcome set to
 * DECLINED or NOT_TAKEN, or with an error raised (*outcome 0). */
static PyObject *
argument(Tables *t, int kind, long long c_arg, PyObject *locals, PyObject *cells, PyObject *consts,
         PyObject *names, PyObject *freevars, int *outcome)
{
    Py_ssize_t nlocals = PyList_GET_SIZE(locals), nnames = PyTuple_GET_SIZE(names);
    switch (kind) {
    case KIND_INT:
        return PyLong_FromLongLong(c_arg);
    case KIND_LOCAL:
        if (c_arg >= nlocals) {
            break;
        }
        return Py_NewRef(PyList_GET_ITEM(locals, c_arg));
    case KIND_CONST:
        if (c_arg >= PyTuple_GET_SIZE(consts)) {
            break;
        }
        return Py_NewRef(PyTuple_GET_ITEM(consts, c_arg));
    case KIND_FLAG_NAME:
        if ((c_arg >> 1) >= nnames) {
            break;
        }
        return PyTuple_Pack(2, c_arg & 1 ? Py_True : Py_False, PyTuple_GET_ITEM(names, c_arg >> 1));
    case KIND_NO_ARG:
        return Py_NewRef(t->unset);
    case KIND_NAME:
        if (c_arg >= nnames) {
            break;
        }
        return Py_NewRef(PyTuple_GET_ITEM(names, c_arg));
    case KIND_DUAL:
        if ((c_arg >> 4) >= nlocals || (c_arg & 15) >= nlocals) {
            break;
        }
        return PyTuple_Pack(2, PyList_GET_ITEM(locals, c_arg >> 4), PyList_GET_ITEM(locals, c_arg & 15));
    case KIND_COMPARE:
    case KIND_INTRINSIC1:
    case KIND_INTRINSIC2:
    case KIND_BINARY:
    case KIND_COMMON:
    case KIND_SPECIAL:
    case KIND_FORMAT: { /* an enum member, memoized by value */
        PyObject *known = PyList_GET_ITEM(t->members, kind), *key = PyLong_FromLongLong(c_arg), *member;
        if (key == NULL) {
            return NULL;
        }
        member = PyDict_GetItemWithError(known, key); /* (borrowed) */
        if (member != NULL && member != Py_None) {
            Py_DECREF(key);
            return Py_NewRef(member);
        }
        member = PyErr_Occurred() ? NULL : PyObject_CallOneArg(PyList_GET_ITEM(t->converters, kind), key);
        if (member != NULL && PyDict_SetItem(known, key, member) < 0) {
            Py_CLEAR(member);
        }
        Py_DECREF(key);
        return member;
    }
    case KIND_FREE: {
        Py_ssize_t ncells = PyList_GET_SIZE(cells);
        if (c_arg < ncells) {
            PyObject *cell = PyList_GET_ITEM(cells, c_arg);
            int is_cell = PyObject_IsInstance(cell, t->cell_type);
            if (is_cell < 0) {
                return NULL;
            }
            return is_cell ? Py_NewRef(cell) : PyObject_CallOneArg(t->cell_type, cell);
        }
        if (c_arg - ncells >= PyTuple_GET_SIZE(freevars)) {
            break;
        }
        return PyObject_CallOneArg(t->free_type, PyTuple_GET_ITEM(freevars, c_arg - ncells));
    }
    case KIND_FLAGS_NAME:
        if ((c_arg >> 2) >= nnames) {
            break;
        }
        return PyTuple_Pack(3, c_arg & 1 ? Py_True : Py_False, c_arg & 2 ? Py_True : Py_False,
                            PyTuple_GET_ITEM(names, c_arg >> 2));
    default:
        break;
    }
    *outcome = DECLINED; /* (past a table: the reference's IndexError; an unknown kind: its _Declined) */
    return NULL;
}

/* -- The positions ----------------------------------------------------------------------
 *
 * The positions co_positions() gives a code unit, read from co_linetable as CPython's
 * iterator reads it (Objects/locations.md; Objects/codeobject.c, advance_with_locations),
 * without a tuple a unit: an entry covers one to eight units; its first byte's bits 3-6 say
 * its form (15: no position; 14: the long form, a line delta, an end line delta, a column
 * and an end column, each a varint, the columns one more than their values; 13: a line
 * delta, no columns; 10-12: the next line, 0-2 lines on, a column and an end column byte;
 * 0-9: the line before, the column and the end column's delta in a second byte).  -1 is
 * None, as CPython's iterator makes it.  A table that ends before the code: the reference's
 * positions[unit] past its list (declined); one that ends inside an entry, or a varint of
 * more than 32 bits: the reference's (what CPython's iterator reads there is not checked). */
typedef struct {
    const unsigned char *at, *end; /* the table's bytes not yet read */
    Py_ssize_t stop;               /* the code unit the entry read last ends before */
    int line;                      /* the line the next entry's delta is from */
    int value[4];                  /* line, end line, column, end column; -1: None */
} Lines;

#define LINES_END 1       /* no entry left */
#define LINES_UNREAD 2    /* an entry past the table's end, or a varint past 32 bits */

static inline int
next_byte(Lines *l, unsigned int *out)
{
    if (l->at >= l->end) {
        return LINES_UNREAD;
    }
    *out = *l->at++;
    return 0;
}

static int
varint(Lines *l, unsigned int *out)
{
    unsigned int read, shift = 0;
    if (next_byte(l, &read)) {
        return LINES_UNREAD;
    }
    *out = read & 63;
    while (read & 64) {
        shift += 6;
        if (shift >= 32 || next_byte(l, &read)) {
            return LINES_UNREAD;
        }
        *out |= (read & 63) << shift;
    }
    return 0;
}

static int
signed_varint(Lines *l, int *out)
{
    unsigned int value;
    if (varint(l, &value)) {
        return LINES_UNREAD;
    }
    *out = value & 1 ? -(int)(value >> 1) : (int)(value >> 1);
    return 0;
}

/* The next entry read: 0, LINES_END or LINES_UNREAD. */
static int
advance(Lines *l)
{
    unsigned int first, second, column, end_column, end_delta;
    int delta;
    if (l->at >= l->end) {
        return LINES_END;
    }
    first = *l->at++;
    int code = (first >> 3) & 15;
    l->stop += (first & 7) + 1;
    switch (code) {
    case 15: /* no position */
        l->value[0] = l->value[1] = l->value[2] = l->value[3] = -1;
        return 0;
    case 14: /* the long form */
        if (signed_varint(l, &delta) || varint(l, &end_delta) || varint(l, &column) || varint(l, &end_column)) {
            return LINES_UNREAD;
        }
        l->line += delta;
        l->value[0] = l->line;
        l->value[1] = l->line + (int)end_delta;
        l->value[2] = (int)column - 1;
        l->value[3] = (int)end_column - 1;
        return 0;
    case 13: /* no columns */
        if (signed_varint(l, &delta)) {
            return LINES_UNREAD;
        }
        l->line += delta;
        l->value[0] = l->value[1] = l->line;
        l->value[2] = l->value[3] = -1;
        return 0;
    case 10:
    case 11:
    case 12: /* the one-line form */
        if (next_byte(l, &column) || next_byte(l, &end_column)) {
            return LINES_UNREAD;
        }
        l->line += code - 10;
        l->value[0] = l->value[1] = l->line;
        l->value[2] = (int)column;
        l->value[3] = (int)end_column;
        return 0;
    default: /* the short forms */
        if (next_byte(l, &second)) {
            return LINES_UNREAD;
        }
        l->value[0] = l->value[1] = l->line;
        l->value[2] = code << 3 | (int)(second >> 4);
        l->value[3] = l->value[2] + (int)(second & 15);
        return 0;
    }
}

/* A position's field as co_positions() gives it (new reference). */
static inline PyObject *
field(int value)
{
    return value == -1 ? Py_NewRef(Py_None) : PyLong_FromLong(value);
}

/* The loop: fills `items`, `starts`, `jumps` and `handlers`; 0, DECLINED, NOT_TAKEN or -1
 * on an error. */
static int
loop(Tables *t, PyObject *code, PyObject *raw_object, PyObject *locals, PyObject *cells, PyObject *entries,
     PyObject *items, Py_ssize_t *starts, Pairs *jumps, Pairs *handlers)
{
    const unsigned char *raw = (const unsigned char *)PyBytes_AS_STRING(raw_object);
    Py_ssize_t units = PyBytes_GET_SIZE(raw_object) >> 1, nentries = PyList_GET_SIZE(entries), next_entry = 0;
    PyObject *consts = NULL, *names = NULL, *freevars = NULL, *table = NULL, *first_line = NULL;
    PyObject *location = NULL, *try_begin = NULL, *entry = NULL;
    Lines lines = {NULL, NULL, 0, 0, {-1, -1, -1, -1}};
    int made_at[4] = {0, 0, 0, 0}, have_last = 0; /* the position of the last location made */
    long long next_start = NOWHERE, next_stop = NOWHERE;
    int outcome = -1;
    if ((consts = PyObject_GetAttr(code, str_co_consts)) == NULL || (names = PyObject_GetAttr(code, str_co_names)) == NULL
        || (freevars = PyObject_GetAttr(code, str_co_freevars)) == NULL
        || (table = PyObject_GetAttr(code, str_co_linetable)) == NULL
        || (first_line = PyObject_GetAttr(code, str_co_firstlineno)) == NULL) {
        goto done;
    }
    if (!PyTuple_CheckExact(consts) || !PyTuple_CheckExact(names) || !PyTuple_CheckExact(freevars)
        || !PyBytes_CheckExact(table) || !PyLong_CheckExact(first_line)) {
        outcome = NOT_TAKEN;
        goto done;
    }
    lines.at = (const unsigned char *)PyBytes_AS_STRING(table);
    lines.end = lines.at + PyBytes_GET_SIZE(table);
    long first = PyLong_AsLong(first_line);
    if (first == -1 && PyErr_Occurred()) {
        goto done;
    }
    if (first < INT_MIN || first > INT_MAX) {
        outcome = NOT_TAKEN; /* (CPython keeps it in an int) */
        goto done;
    }
    lines.line = (int)first;
    if (nentries && (outcome = entry_fields(entries, 0, &next_start, &next_stop, &entry)) != 0) {
        goto done;
    }
    outcome = -1;
    Py_ssize_t unit = 0;
    while (unit < units) {
        Py_ssize_t first = unit;
        int op = raw[2 * unit], kind = t->kinds[op];
        long long c_arg;
        if (kind == KIND_EXTENDED) {
            c_arg = raw[2 * unit + 1];
            unit++;
            while (unit < units && t->kinds[raw[2 * unit]] == KIND_EXTENDED) {
                if (c_arg >= ARG_LIMIT >> 8) {
                    outcome = NOT_TAKEN;
                    goto done;
                }
                c_arg = (c_arg << 8) + raw[2 * unit + 1];
                unit++;
            }
            if (unit == units) {
                outcome = DECLINED; /* (EXTENDED_ARG at the end: bytecode's error) */
                goto done;
            }
            op = raw[2 * unit];
            kind = t->kinds[op];
            if (kind == KIND_NO_ARG && op != t->nop) {
                outcome = DECLINED; /* (an argument for an instruction without one: bytecode's error) */
                goto done;
            }
            if (c_arg >= ARG_LIMIT >> 8) {
                outcome = NOT_TAKEN;
                goto done;
            }
            c_arg = (c_arg << 8) + raw[2 * unit + 1]; /* (NOP's: UNSET, its kind's argument) */
        }
        else {
            c_arg = raw[2 * unit + 1];
        }
        Py_ssize_t last = unit + t->caches[op]; /* (its last code unit) */

        if (next_start <= last) {
            if (next_start != first) {
                outcome = DECLINED; /* (a handler's range starting on a cache entry or inside an instruction) */
                goto done;
            }
            starts[first] = PyList_GET_SIZE(items);
            PyObject *label = PyObject_CallNoArgs(t->label_type);
            PyObject *begun = label == NULL ? NULL
                                            : PyObject_CallFunctionObjArgs(t->try_begin_type, label,
                                                                           PyTuple_GET_ITEM(entry, 4),
                                                                           PyTuple_GET_ITEM(entry, 3), NULL);
            Py_XDECREF(label);
            if (begun == NULL) {
                goto done;
            }
            Py_XSETREF(try_begin, begun);
            Py_ssize_t target = PyLong_AsSsize_t(PyTuple_GET_ITEM(entry, 2));
            if ((target == -1 && PyErr_Occurred()) || add_pair(handlers, PyList_GET_SIZE(items), target) < 0
                || PyList_Append(items, try_begin) < 0) {
                goto done;
            }
            next_start = NOWHERE;
        }
        else {
            starts[first] = PyList_GET_SIZE(items);
        }

        while (lines.stop <= unit) { /* (positions[unit]) */
            int read = advance(&lines);
            if (read) {
                outcome = read == LINES_END ? DECLINED : NOT_TAKEN;
                goto done;
            }
        }
        if (!have_last || memcmp(made_at, lines.value, sizeof made_at) != 0) {
            PyObject *made = new_object(t->location_type);
            if (made == NULL) {
                goto done;
            }
            for (int index = 0; index < 4; index++) {
                PyObject *value = field(lines.value[index]);
                if (value == NULL) {
                    Py_DECREF(made);
                    goto done;
                }
                set_slot(made, t->location_at[index], value);
            }
            Py_XSETREF(location, made);
            memcpy(made_at, lines.value, sizeof made_at);
            have_last = 1;
        }

        PyObject *arg;
        if (kind == KIND_JUMP) {
            Py_ssize_t after = last + 1;
            long long direction = t->directions[op];
            if (add_pair(jumps, PyList_GET_SIZE(items),
                         (Py_ssize_t)(direction == FORWARD ? after + c_arg
                                                           : direction == BACKWARD ? after - c_arg : c_arg)) < 0) {
                goto done;
            }
            arg = Py_NewRef(Py_None); /* (the label, once all are known) */
        }
        else {
            int declined = 0;
            arg = argument(t, kind, c_arg, locals, cells, consts, names, freevars, &declined);
            if (arg == NULL) {
                outcome = declined ? declined : -1;
                goto done;
            }
        }

        PyObject *cls = PyTuple_GET_ITEM(t->classes, op);
        if ((PyTypeObject *)cls != t->instr_read) {
            if (offsets_of((PyTypeObject *)cls, instr_slot_names, 5, t->instr_at)) {
                Py_DECREF(arg);
                outcome = NOT_TAKEN;
                goto done;
            }
            t->instr_read = (PyTypeObject *)cls;
        }
        PyObject *instr = new_object(cls), *opcode = instr == NULL ? NULL : PyLong_FromLong(op);
        if (opcode == NULL) {
            Py_XDECREF(instr);
            Py_DECREF(arg);
            goto done;
        }
        set_slot(instr, t->instr_at[0], Py_NewRef(PyTuple_GET_ITEM(t->opnames, op)));
        set_slot(instr, t->instr_at[1], opcode);
        set_slot(instr, t->instr_at[2], Py_NewRef(t->is_jump[op] ? Py_True : Py_False));
        set_slot(instr, t->instr_at[3], arg);
        set_slot(instr, t->instr_at[4], Py_NewRef(location));
        int failed = PyList_Append(items, instr);
        Py_DECREF(instr);
        if (failed) {
            goto done;
        }

        if (next_stop <= last) {
            if (next_stop < unit || try_begin == NULL) {
                outcome = DECLINED; /* (a handler's range ending inside an instruction, or before it starts) */
                goto done;
            }
            PyObject *ended = PyObject_CallOneArg(t->try_end_type, try_begin);
            failed = ended == NULL || PyList_Append(items, ended) < 0;
            Py_XDECREF(ended);
            if (failed) {
                goto done;
            }
            Py_CLEAR(try_begin);
            next_entry++;
            if (next_entry < nentries) {
                if ((outcome = entry_fields(entries, next_entry, &next_start, &next_stop, &entry)) != 0) {
                    goto done;
                }
                outcome = -1;
            }
            else {
                next_stop = NOWHERE;
            }
        }
        unit = last + 1;
    }
    outcome = next_entry < nentries ? DECLINED : 0; /* (a handler's range past the end) */
done:
    Py_XDECREF(consts);
    Py_XDECREF(names);
    Py_XDECREF(freevars);
    Py_XDECREF(table);
    Py_XDECREF(first_line);
    Py_XDECREF(location);
    Py_XDECREF(try_begin);
    return outcome;
}

/* The label of code unit `target` (borrowed from `labels`, made at its first use); NULL
 * with *declined set where target is outside the body. */
static PyObject *
label_of(Tables *t, PyObject **labels, Py_ssize_t units, Py_ssize_t target, int *declined)
{
    if (target < 0 || target >= units) {
        *declined = 1;
        return NULL;
    }
    if (labels[target] == NULL) {
        labels[target] = PyObject_CallNoArgs(t->label_type);
    }
    return labels[target];
}

static int
read_tables(PyObject *tables, Tables *t)
{
    PyObject *kinds, *directions, *caches, *is_jump, *nop;
    if (!PyTuple_CheckExact(tables) || PyTuple_GET_SIZE(tables) != 16) {
        PyErr_SetString(PyExc_TypeError, "items(): tables is a tuple of 16");
        return -1;
    }
    PyObject **fields[] = {&t->opnames, &kinds, &directions, &caches, &is_jump, &t->classes, &t->converters,
                           &t->members, &t->location_type, &t->label_type, &t->try_begin_type, &t->try_end_type,
                           &t->cell_type, &t->free_type, &t->unset, &nop};
    for (Py_ssize_t index = 0; index < 16; index++) {
        *fields[index] = PyTuple_GET_ITEM(tables, index);
    }
    PyObject *bytes[] = {kinds, directions, caches, is_jump};
    for (int index = 0; index < 4; index++) {
        if (!PyBytes_CheckExact(bytes[index]) || PyBytes_GET_SIZE(bytes[index]) != 256) {
            PyErr_SetString(PyExc_TypeError, "items(): a table of 256 bytes");
            return -1;
        }
    }
    if (!PyTuple_CheckExact(t->opnames) || PyTuple_GET_SIZE(t->opnames) != 256 || !PyTuple_CheckExact(t->classes)
        || PyTuple_GET_SIZE(t->classes) != 256 || !PyList_CheckExact(t->converters)
        || PyList_GET_SIZE(t->converters) != KINDS || !PyList_CheckExact(t->members)
        || PyList_GET_SIZE(t->members) != KINDS || !PyType_Check(t->location_type)) {
        PyErr_SetString(PyExc_TypeError, "items(): tables of other types or sizes");
        return -1;
    }
    for (Py_ssize_t index = 0; index < 256; index++) {
        if (!PyType_Check(PyTuple_GET_ITEM(t->classes, index))) {
            PyErr_SetString(PyExc_TypeError, "items(): an Instr class is a class");
            return -1;
        }
    }
    for (Py_ssize_t index = 0; index < KINDS; index++) {
        if (!PyDict_CheckExact(PyList_GET_ITEM(t->members, index))) {
            PyErr_SetString(PyExc_TypeError, "items(): the enum members are dicts");
            return -1;
        }
    }
    t->kinds = (const unsigned char *)PyBytes_AS_STRING(kinds);
    t->directions = (const unsigned char *)PyBytes_AS_STRING(directions);
    t->caches = (const unsigned char *)PyBytes_AS_STRING(caches);
    t->is_jump = (const unsigned char *)PyBytes_AS_STRING(is_jump);
    t->nop = PyLong_AsLong(nop);
    t->instr_read = NULL;
    return t->nop == -1 && PyErr_Occurred() ? -1 : 0;
}

/* items(tables, code, locals, cells, entries): see above. */
static PyObject *
items(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    Tables t;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "items(tables, code, locals, cells, entries)");
        return NULL;
    }
    if (read_tables(args[0], &t) < 0) {
        return NULL;
    }
    PyObject *code = args[1], *locals = args[2], *cells = args[3], *entries = args[4];
    if (!PyList_CheckExact(locals) || !PyList_CheckExact(cells) || !PyList_CheckExact(entries)
        || offsets_of((PyTypeObject *)t.location_type, location_slot_names, 4, t.location_at)) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    PyObject *raw = PyObject_GetAttr(code, str_co_code);
    if (raw == NULL) {
        return NULL;
    }
    if (!PyBytes_CheckExact(raw)) {
        Py_DECREF(raw);
        Py_RETURN_NOTIMPLEMENTED;
    }
    Py_ssize_t units = PyBytes_GET_SIZE(raw) >> 1;
    PyObject *out = NULL, *made = PyList_New(0), **labels = NULL, **before = NULL;
    Py_ssize_t *starts = PyMem_Malloc((size_t)(units + 1) * sizeof(Py_ssize_t));
    Pairs jumps = {NULL, 0, 0}, handlers = {NULL, 0, 0};
    int outcome = -1, declined = 0;
    if (made == NULL || starts == NULL) {
        if (starts == NULL) {
            PyErr_NoMemory();
        }
        goto done;
    }
    for (Py_ssize_t unit = 0; unit < units; unit++) {
        starts[unit] = -1; /* an instruction's first code unit -> where its labels go in items (else -1) */
    }
    outcome = loop(&t, code, raw, locals, cells, entries, made, starts, &jumps, &handlers);
    if (outcome != 0) {
        goto done;
    }
    outcome = -1;
    if (jumps.size == 0 && handlers.size == 0) {
        out = Py_NewRef(made);
        goto done;
    }
    labels = PyMem_Calloc((size_t)units + 1, sizeof(PyObject *)); /* by code unit */
    if (labels == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t index = 0; index < jumps.size; index++) {
        PyObject *label = label_of(&t, labels, units, jumps.pairs[2 * index + 1], &declined);
        if (label == NULL) {
            goto done;
        }
        set_slot(PyList_GET_ITEM(made, jumps.pairs[2 * index]), t.instr_at[3], Py_NewRef(label));
    }
    for (Py_ssize_t index = 0; index < handlers.size; index++) {
        PyObject *label = label_of(&t, labels, units, handlers.pairs[2 * index + 1], &declined);
        if (label == NULL || PyObject_SetAttr(PyList_GET_ITEM(made, handlers.pairs[2 * index]), str_target, label) < 0) {
            goto done;
        }
    }
    Py_ssize_t size = PyList_GET_SIZE(made), count = 0;
    before = PyMem_Calloc((size_t)size + 1, sizeof(PyObject *)); /* the label put in before an item, by index */
    if (before == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t unit = 0; unit < units; unit++) {
        if (labels[unit] != NULL) {
            if (starts[unit] < 0) {
                declined = 1; /* (a jump or a handler landing on a cache entry or inside an instruction) */
                goto done;
            }
            before[starts[unit]] = labels[unit];
            count++;
        }
    }
    if ((out = PyList_New(size + count)) == NULL) {
        goto done;
    }
    Py_ssize_t at = 0;
    for (Py_ssize_t index = 0; index < size; index++) {
        if (before[index] != NULL) {
            PyList_SET_ITEM(out, at++, Py_NewRef(before[index]));
        }
        PyList_SET_ITEM(out, at++, Py_NewRef(PyList_GET_ITEM(made, index)));
    }
done:
    if (labels != NULL) {
        for (Py_ssize_t unit = 0; unit < units; unit++) {
            Py_XDECREF(labels[unit]);
        }
    }
    PyMem_Free(labels);
    PyMem_Free(before);
    PyMem_Free(starts);
    PyMem_Free(jumps.pairs);
    PyMem_Free(handlers.pairs);
    Py_XDECREF(made);
    Py_DECREF(raw);
    if (out != NULL) {
        return out;
    }
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (declined || outcome == DECLINED) {
        Py_RETURN_NONE;
    }
    if (outcome == NOT_TAKEN) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    return NULL;
}

/* -- A plain half's runs ------------------------------------------------------------------
 *
 * _assembler.Verbatim's runs of code units start to stop of a compiled body: (the unit,
 * counted from start, where a run begins; its position, a `cls`, _instr.CompiledPosition,
 * made of the 4-tuple co_positions() gives), a run a unit where there is no line, the run's
 * object again -- read from co_linetable as the loop above reads it, where the reference
 * reads co_positions() a unit at a time.  NotImplemented where the table is one the reader
 * hands back (then the reference reads the runs). */

/* Is `cls` a subclass of tuple made as tuple makes its instances (no __new__ or __init__ of
 * its own)?  Then its instance is allocated here with its fields, as tuple.__new__ copies
 * them into it, without the tuple of fields and the call's arguments: three objects a run,
 * and the allocations the collector counts, were a third of this.  (3.14's tuples cache
 * their hash in a field of their own, which tuple's allocation sets to -1, "not known yet",
 * and so does position_of: tp_alloc leaves it 0.) */
static int
made_as_tuple(PyObject *cls)
{
    PyTypeObject *type = (PyTypeObject *)cls;
    return PyType_Check(cls) && type != &PyTuple_Type && PyType_IsSubtype(type, &PyTuple_Type)
           && type->tp_new == PyTuple_Type.tp_new && type->tp_init == PyTuple_Type.tp_init;
}

/* The unit's 4-tuple of fields, as a `cls` (new reference); `direct`: made_as_tuple(cls). */
static PyObject *
position_of(PyObject *cls, const int *value, int direct)
{
    PyObject *fields = direct ? ((PyTypeObject *)cls)->tp_alloc((PyTypeObject *)cls, 4) : PyTuple_New(4);
    if (fields == NULL) {
        return NULL;
    }
#if PY_VERSION_HEX >= 0x030E0000
    if (direct) {
        ((PyTupleObject *)fields)->ob_hash = -1;
    }
#endif
    for (int index = 0; index < 4; index++) {
        PyObject *made = field(value[index]);
        if (made == NULL) {
            Py_DECREF(fields);
            return NULL;
        }
        PyTuple_SET_ITEM(fields, index, made);
    }
    if (direct) {
        return fields;
    }
    PyObject *position = PyObject_CallOneArg(cls, fields);
    Py_DECREF(fields);
    return position;
}

static int
append_run(PyObject *out, Py_ssize_t unit, PyObject *position)
{
    PyObject *run = PyTuple_New(2), *at = run == NULL ? NULL : PyLong_FromSsize_t(unit);
    if (at == NULL) {
        Py_XDECREF(run);
        return -1;
    }
    PyTuple_SET_ITEM(run, 0, at);
    PyTuple_SET_ITEM(run, 1, Py_NewRef(position));
    int failed = PyList_Append(out, run) < 0;
    Py_DECREF(run);
    return failed ? -1 : 0;
}

/* runs(code, start, stop, cls): see above. */
static PyObject *
runs(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "runs(code, start, stop, cls)");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]), stop = PyLong_AsSsize_t(args[2]);
    if ((start == -1 || stop == -1) && PyErr_Occurred()) {
        return NULL;
    }
    PyObject *table = PyObject_GetAttr(args[0], str_co_linetable), *first_line = NULL, *out = NULL, *last = NULL;
    if (table == NULL || (first_line = PyObject_GetAttr(args[0], str_co_firstlineno)) == NULL) {
        goto done;
    }
    long first = PyLong_CheckExact(first_line) ? PyLong_AsLong(first_line) : -1;
    if (first == -1 && PyErr_Occurred()) {
        goto done;
    }
    if (!PyBytes_CheckExact(table) || !PyLong_CheckExact(first_line) || first < INT_MIN || first > INT_MAX
        || start < 0) {
        out = Py_NewRef(Py_NotImplemented);
        goto done;
    }
    Lines lines = {(const unsigned char *)PyBytes_AS_STRING(table), NULL, 0, (int)first, {-1, -1, -1, -1}};
    lines.end = lines.at + PyBytes_GET_SIZE(table);
    int made_at[4] = {0, 0, 0, 0}, direct = made_as_tuple(args[3]);
    if ((out = PyList_New(0)) == NULL) {
        goto done;
    }
    for (Py_ssize_t unit = 0; unit < stop; unit++) {
        if (lines.stop <= unit) {
            int read = advance(&lines);
            if (read == LINES_END) {
                break; /* (the reference's islice of co_positions() ends with it) */
            }
            if (read) {
                Py_SETREF(out, Py_NewRef(Py_NotImplemented));
                goto done;
            }
        }
        if (unit < start) {
            continue;
        }
        if (last == NULL || memcmp(made_at, lines.value, sizeof made_at) != 0) {
            Py_XSETREF(last, position_of(args[3], lines.value, direct));
            if (last == NULL) {
                Py_CLEAR(out);
                goto done;
            }
            memcpy(made_at, lines.value, sizeof made_at);
        }
        else if (lines.value[0] != -1) {
            continue;
        }
        if (append_run(out, unit - start, last) < 0) {
            Py_CLEAR(out);
            goto done;
        }
    }
done:
    Py_XDECREF(table);
    Py_XDECREF(first_line);
    Py_XDECREF(last);
    return out;
}

/* -- Instructions placed ---------------------------------------------------------------------
 *
 * _instr.placed's copies of a site's instructions at a site: placed(templates, loc) makes,
 * for each of `templates` (a list or tuple of bytecode's instructions, made once for each
 * shape of site), an object of its class as object.__new__ makes it, its _name, _opcode,
 * _is_jump and _arg the template's and its _location `loc`, as the reference
 * (_instr._placed_trusted) makes them: the passes copy some 26,000 sites' instructions in
 * a cold run of sympy, where the reference's loop, five attribute stores an instruction,
 * was the largest of the passes' own costs after the pairing (docs/performance.md,
 * "Placing and joining cheaper").  A class whose fields are not slots is read and set by
 * getattr and setattr, as the reference does (tests/test_decoding_in_c.py compares them). */

static PyTypeObject *placed_read; /* (the class whose slots' offsets placed_at holds) */
static Py_ssize_t placed_at[5];

/* The template's field `index` copied to `made` (at its slot, or by name). */
static inline int
copy_field(PyObject *template, PyObject *made, int index, int by_name)
{
    if (!by_name) {
        PyObject *value = *(PyObject **)((char *)template + placed_at[index]);
        if (value != NULL) {
            set_slot(made, placed_at[index], Py_NewRef(value));
            return 0;
        }
    }
    PyObject *value = PyObject_GetAttr(template, instr_slot_names[index]); /* (unset: its AttributeError) */
    if (value == NULL) {
        return -1;
    }
    int failed = PyObject_SetAttr(made, instr_slot_names[index], value);
    Py_DECREF(value);
    return failed;
}

/* placed(templates, loc): see above. */
static PyObject *
placed(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "placed(templates, loc)");
        return NULL;
    }
    PyObject *templates = PySequence_Fast(args[0], "placed: the templates are a list or a tuple"), *loc = args[1];
    if (templates == NULL) {
        return NULL;
    }
    Py_ssize_t size = PySequence_Fast_GET_SIZE(templates);
    PyObject *out = PyList_New(size);
    for (Py_ssize_t index = 0; out != NULL && index < size; index++) {
        PyObject *template = PySequence_Fast_GET_ITEM(templates, index);
        PyTypeObject *cls = Py_TYPE(template);
        int by_name = 0;
        if (cls != placed_read) {
            by_name = offsets_of(cls, instr_slot_names, 5, placed_at);
            Py_XSETREF(placed_read, by_name ? NULL : (PyTypeObject *)Py_NewRef(cls)); /* (held: its address stays its) */
        }
        PyObject *made = new_object((PyObject *)cls);
        if (made == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, index, made);
        for (int field = 0; field < 4; field++) {
            if (copy_field(template, made, field, by_name) < 0) {
                Py_CLEAR(out);
                break;
            }
        }
        if (out == NULL) {
            break;
        }
        if (by_name) {
            if (PyObject_SetAttr(made, instr_slot_names[4], loc) < 0) {
                Py_CLEAR(out);
            }
        }
        else {
            set_slot(made, placed_at[4], Py_NewRef(loc));
        }
    }
    Py_DECREF(templates);
    return out;
}

/* -- Instructions found by name --------------------------------------------------------------
 *
 * The passes' walks over a body's items that look for a few kinds of instruction among
 * many (_nullslot's rewrite_calls: the calls, definitions and method loads;
 * _rewriter._rewrite_constants_and_operators: the operators, constants and class bodies):
 * named(items, cls, groups, count) gives, for each of `count` groups, the indexes of the
 * items that are `cls` instances whose _name `groups` maps to that group, in order, as the
 * reference (_instr._named) finds them.  In Python each item cost a type test and a name
 * read and looked up, most of those walks' time, for an item in ten or so that they act
 * on (docs/performance.md, "Placing and joining cheaper"). */

static PyTypeObject *named_read; /* (the class whose _name offset named_at is) */
static Py_ssize_t named_at;

/* named(items, cls, groups, count): see above. */
static PyObject *
named(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 4 || !PyList_Check(args[0]) || !PyType_Check(args[1]) || !PyDict_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "named(items: list, cls: type, groups: dict, count: int)");
        return NULL;
    }
    PyObject *items = args[0], *groups = args[2];
    PyTypeObject *cls = (PyTypeObject *)args[1];
    Py_ssize_t count = PyLong_AsSsize_t(args[3]);
    if (count < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "named: a negative count");
        }
        return NULL;
    }
    PyObject *out = PyList_New(count);
    if (out == NULL) {
        return NULL;
    }
    for (Py_ssize_t group = 0; group < count; group++) {
        PyObject *found = PyList_New(0);
        if (found == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, group, found);
    }
    for (Py_ssize_t index = 0; index < PyList_GET_SIZE(items); index++) {
        PyObject *item = PyList_GET_ITEM(items, index);
        if (!PyObject_TypeCheck(item, cls)) {
            continue;
        }
        PyTypeObject *type = Py_TYPE(item);
        if (type != named_read) {
            named_at = slot_offset(type, instr_slot_names[0]);
            Py_XSETREF(named_read, named_at < 0 ? NULL : (PyTypeObject *)Py_NewRef(type));
        }
        PyObject *name = named_at < 0 || type != named_read ? PyObject_GetAttr(item, instr_slot_names[0])
                                                            : Py_XNewRef(*(PyObject **)((char *)item + named_at));
        if (name == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetObject(PyExc_AttributeError, instr_slot_names[0]);
            }
            Py_DECREF(out);
            return NULL;
        }
        PyObject *group = PyDict_GetItemWithError(groups, name);
        Py_DECREF(name);
        if (group == NULL) {
            if (PyErr_Occurred()) {
                Py_DECREF(out);
                return NULL;
            }
            continue;
        }
        Py_ssize_t at = PyLong_AsSsize_t(group);
        if (at < 0 || at >= count) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_IndexError, "named: a group past the count");
            }
            Py_DECREF(out);
            return NULL;
        }
        PyObject *where = PyLong_FromSsize_t(index);
        if (where == NULL || PyList_Append(PyList_GET_ITEM(out, at), where) < 0) {
            Py_XDECREF(where);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(where);
    }
    return out;
}

static PyMethodDef methods[] = {
    {"items", (PyCFunction)(void (*)(void))items, METH_FASTCALL,
     "items(tables, code, locals, cells, entries)\n--\n\n"
     "_decoder.Decoder._items's loop: the items, None (declined) or NotImplemented (the reference's)."},
    {"runs", (PyCFunction)(void (*)(void))runs, METH_FASTCALL,
     "runs(code, start, stop, cls)\n--\n\n"
     "_assembler.Verbatim's runs of code units start to stop, or NotImplemented (the reference's)."},
    {"placed", (PyCFunction)(void (*)(void))placed, METH_FASTCALL,
     "placed(templates, loc)\n--\n\n"
     "_instr.placed: copies of bytecode's instructions `templates` at `loc`."},
    {"named", (PyCFunction)(void (*)(void))named, METH_FASTCALL,
     "named(items, cls, groups, count)\n--\n\n"
     "_instr.named: by group, the indexes of the `cls` items whose _name `groups` maps to it."},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "cassette_hook.rewrite._decoding",
    .m_doc = "The decoder's per-instruction loop and a plain half's runs in C (optional; _decoder.py and "
             "_assembler.py have them in Python).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__decoding(void)
{
    const char *instr_slots[5] = {"_name", "_opcode", "_is_jump", "_arg", "_location"};
    const char *location_slots[4] = {"lineno", "end_lineno", "col_offset", "end_col_offset"};
    for (int index = 0; index < 5; index++) {
        if ((instr_slot_names[index] = PyUnicode_InternFromString(instr_slots[index])) == NULL) {
            return NULL;
        }
    }
    for (int index = 0; index < 4; index++) {
        if ((location_slot_names[index] = PyUnicode_InternFromString(location_slots[index])) == NULL) {
            return NULL;
        }
    }
    str_co_code = PyUnicode_InternFromString("co_code");
    str_co_consts = PyUnicode_InternFromString("co_consts");
    str_co_names = PyUnicode_InternFromString("co_names");
    str_co_freevars = PyUnicode_InternFromString("co_freevars");
    str_co_linetable = PyUnicode_InternFromString("co_linetable");
    str_co_firstlineno = PyUnicode_InternFromString("co_firstlineno");
    str_target = PyUnicode_InternFromString("target");
    empty_tuple = PyTuple_New(0);
    if (str_co_code == NULL || str_co_consts == NULL || str_co_names == NULL || str_co_freevars == NULL
        || str_co_linetable == NULL || str_co_firstlineno == NULL || str_target == NULL || empty_tuple == NULL) {
        return NULL;
    }
    return PyModule_Create(&module_def);
}
