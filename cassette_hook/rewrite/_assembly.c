/* The assembler's per-instruction work in C: the 3.11+ line table's encoder, and the loop
 * over a body's items (below, "The loop over the items").
 *
 * The references are Python: _nullslot._line_table and _assembler.Assembler._code's loop,
 * used where this module is not built or CASSETTE_HOOK_PURE_PYTHON=1 is set
 * (_native.optional); _nullslot chooses, once.  Why C: on a cold switch of networkx (3.12)
 * the loop over the items was about half of the assembler's time and the line table about a
 * quarter (docs/performance.md, "The assembler's per-instruction work in C"); in Python a
 * table's run costs a tuple, a comparison of tuples and a few bytearray appends, here a few
 * stores into a buffer.
 *
 * The line table's encoder.
 * The same entries in the same forms as the reference, byte for byte (tests/test_assembly.py
 * compares the two over real modules): runs of instructions with equal positions, an entry
 * per eight code units; the short form for a column below 72 on the line of the entry
 * before, the one-line form for the next two lines (columns below 128 only: CPython walks
 * the table backwards by the high bit of an entry's first byte), else the long form.  A run
 * is (position, code units); a position is None (the run before it goes on), a compiled
 * position (_instr.CompiledPosition, a tuple: read as one, once set_compiled_position has
 * named its class) or an object with lineno, end_lineno, col_offset and end_col_offset.
 *
 * Its range: positions as bytecode's InstrLocation and co_positions hold them, fields None
 * or non-negative ints.  Outside it (a field that is not an int, below zero, or from 2**40
 * on; units below zero) it raises ValueError, where the reference writes bytes CPython
 * cannot read or fails otherwise: the assembler then declines the body
 * (_assembler.Assembler.code).  Within it, what the reference raises is raised here, with
 * its message, and what it writes of positions bytecode would refuse (an end line or column
 * before the start) is written here too. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include "_slots.h" /* slot_offset */

#define FIELD_LIMIT ((long long)1 << 40) /* past this a field is out of range (CPython keeps C ints) */

static PyObject *str_lineno, *str_end_lineno, *str_col_offset, *str_end_col_offset;
static PyTypeObject *compiled_position = NULL; /* _instr.CompiledPosition, read as a tuple */

/* A position's four fields (line, end line, column, end column), each None or a value, and
 * the objects they were read from (borrowed from the position or the run it continues),
 * for the reference's error messages. */
typedef struct {
    long long value[4];
    unsigned char none[4];
    PyObject *object[4];
} Position;

typedef struct {
    unsigned char *bytes;
    Py_ssize_t size, capacity;
} Buffer;

static int
grow(Buffer *out, Py_ssize_t more)
{
    if (out->size + more <= out->capacity) {
        return 0;
    }
    Py_ssize_t capacity = out->capacity * 2 > out->size + more ? out->capacity * 2 : out->size + more + 64;
    unsigned char *bytes = PyMem_Realloc(out->bytes, (size_t)capacity);
    if (bytes == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    out->bytes = bytes;
    out->capacity = capacity;
    return 0;
}

/* value in six-bit chunks, low first (Objects/locations.md): the reference's _unsigned. */
static inline void
put_unsigned(Buffer *out, unsigned long long value)
{
    while (value > 0x3F) {
        out->bytes[out->size++] = (unsigned char)(0x40 | (value & 0x3F));
        value >>= 6;
    }
    out->bytes[out->size++] = (unsigned char)value;
}

/* The reference's _signed: the sign in the lowest bit. */
static inline void
put_signed(Buffer *out, long long value)
{
    put_unsigned(out, value < 0 ? ((unsigned long long)(-value) << 1) | 1 : (unsigned long long)value << 1);
}

/* One field of a position: None, or an int in range (ValueError otherwise). */
static int
read_field(PyObject *object, Position *here, int index)
{
    here->object[index] = object;
    if (object == Py_None) {
        here->none[index] = 1;
        here->value[index] = 0;
        return 0;
    }
    here->none[index] = 0;
    if (!PyLong_Check(object)) {
        PyErr_Format(PyExc_ValueError, "a position's field is None or an int, not %R", object);
        return -1;
    }
    int overflow = 0;
    long long value = PyLong_AsLongLongAndOverflow(object, &overflow);
    if (value == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (overflow || value < 0 || value >= FIELD_LIMIT) {
        PyErr_Format(PyExc_ValueError, "a position's field out of the line table's range: %R", object);
        return -1;
    }
    here->value[index] = value;
    return 0;
}

/* The fields of a position object (not None); the attributes' objects are borrowed from the
 * caller's references in `held` (released by the caller). */
static int
read_position(PyObject *loc, Position *here, PyObject *held[4])
{
    if (compiled_position != NULL && Py_TYPE(loc) == compiled_position && PyTuple_GET_SIZE(loc) == 4) {
        for (int index = 0; index < 4; index++) {
            if (read_field(PyTuple_GET_ITEM(loc, index), here, index) < 0) {
                return -1;
            }
        }
        return 0;
    }
    PyObject *names[4] = {str_lineno, str_end_lineno, str_col_offset, str_end_col_offset};
    for (int index = 0; index < 4; index++) {
        held[index] = PyObject_GetAttr(loc, names[index]);
        if (held[index] == NULL || read_field(held[index], here, index) < 0) {
            return -1;
        }
    }
    return 0;
}

static inline int
same_position(const Position *a, const Position *b)
{
    for (int index = 0; index < 4; index++) {
        if (a->none[index] != b->none[index] || (!a->none[index] && a->value[index] != b->value[index])) {
            return 0;
        }
    }
    return 1;
}

/* A run's entries, eight code units to one; `line` is what the next entry's line is a delta
 * from.  Each entry takes at most 1 + 4 numbers of 8 bytes (values below 2**40 take 7). */
static int
put_run(Buffer *out, const Position *run, long long units, long long *line)
{
    long long start = run->value[0], end = run->value[1], column = run->value[2], end_column = run->value[3];
    for (;;) {
        if (grow(out, 1 + 4 * 8) < 0) {
            return -1;
        }
        unsigned char header = (unsigned char)(units >= 8 ? 0x87 : 0x7F + units);
        if (run->none[0]) { /* no position at all */
            out->bytes[out->size++] = header | 15 << 3;
        }
        else if (run->none[2]) { /* a line, no columns */
            if (!run->none[1] && end != start) {
                PyErr_Format(PyExc_ValueError,
                             "An instruction cannot have no column offset and span multiple lines "
                             "(lineno: %S, end lineno: %S",
                             run->object[0], run->object[1]);
                return -1;
            }
            out->bytes[out->size++] = header | 13 << 3;
            put_signed(out, start - *line);
            *line = start;
        }
        else if (run->none[3] || run->none[1]) {
            PyObject *tuple = PyTuple_Pack(4, run->object[0], run->object[1], run->object[2], run->object[3]);
            if (tuple != NULL) {
                PyErr_Format(PyExc_ValueError, "a position with a column has an end line and column, not %R",
                             tuple);
                Py_DECREF(tuple);
            }
            return -1;
        }
        else if (end == start) {
            long long delta = start - *line;
            if (delta == 0 && column < 72 && end_column - column <= 15) { /* the short form */
                long long second = ((column & 7) << 4) + end_column - column;
                if (second < 0) { /* (an end column before the column: as bytearray.append refuses it) */
                    PyErr_SetString(PyExc_ValueError, "byte must be in range(0, 256)");
                    return -1;
                }
                out->bytes[out->size++] = header | (unsigned char)((column >> 3) << 3);
                out->bytes[out->size++] = (unsigned char)second;
            }
            else if (1 <= delta && delta <= 2 && column < 0x80 && end_column < 0x80) { /* the one-line form */
                out->bytes[out->size++] = header | (unsigned char)((10 + delta) << 3);
                out->bytes[out->size++] = (unsigned char)column;
                out->bytes[out->size++] = (unsigned char)end_column;
                *line = start;
            }
            else { /* the long form, on one line */
                out->bytes[out->size++] = header | 14 << 3;
                put_signed(out, delta);
                out->bytes[out->size++] = 0;
                put_unsigned(out, (unsigned long long)column + 1);
                put_unsigned(out, (unsigned long long)end_column + 1);
                *line = start;
            }
        }
        else if (end < start && end - start < -0x1000) { /* (the reference's look-up past its table) */
            PyErr_SetString(PyExc_IndexError, "tuple index out of range");
            return -1;
        }
        else { /* the long form */
            out->bytes[out->size++] = header | 14 << 3;
            put_signed(out, start - *line);
            /* (an end line before its line: the reference's table read from its end) */
            put_unsigned(out, (unsigned long long)(end >= start ? end - start : 0x1000 + (end - start)));
            put_unsigned(out, (unsigned long long)column + 1);
            put_unsigned(out, (unsigned long long)end_column + 1);
            *line = start;
        }
        units -= 8;
        if (units <= 0) {
            return 0;
        }
    }
}

/* The objects a run's fields were read from, kept alive while it is the run. */
static void
hold_run(Position *run, PyObject *run_held[4])
{
    for (int index = 0; index < 4; index++) {
        Py_INCREF(run->object[index]);
        Py_XSETREF(run_held[index], run->object[index]);
    }
}

static PyObject *
line_table(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "line_table() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *first = args[0];
    Position start_position = {{0}, {0, 1, 1, 1}, {first, Py_None, Py_None, Py_None}};
    if (read_field(first, &start_position, 0) < 0) {
        return NULL;
    }
    if (start_position.none[0]) {
        PyErr_SetString(PyExc_ValueError, "the first line is an int");
        return NULL;
    }
    PyObject *iterator = PyObject_GetIter(args[1]);
    if (iterator == NULL) {
        return NULL;
    }
    Buffer out = {NULL, 0, 0};
    Position run = start_position, here;
    PyObject *run_held[4] = {NULL, NULL, NULL, NULL}; /* the run's fields' objects */
    PyObject *seen = NULL;  /* the last run's position object (strong: compared by identity) */
    PyObject *item = NULL;
    PyObject *table = NULL;
    int have_run = 0, joins = 0;
    long long units = 0, line = start_position.value[0];
    while ((item = PyIter_Next(iterator)) != NULL) {
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            PyErr_Format(PyExc_TypeError, "a run is (position, units), not %R", item);
            goto done;
        }
        PyObject *loc = PyTuple_GET_ITEM(item, 0);
        long long size = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 1));
        if (size == -1 && PyErr_Occurred()) {
            goto done;
        }
        if (size < 0) {
            PyErr_SetString(PyExc_ValueError, "a run of fewer than no code units");
            goto done;
        }
        if (loc == seen && joins) { /* one object: CACHE entries, the instructions of a site */
            units += size;
            Py_DECREF(item);
            continue;
        }
        Py_INCREF(loc);
        Py_XSETREF(seen, loc);
        PyObject *held[4] = {NULL, NULL, NULL, NULL};
        if (loc == Py_None) { /* an instruction without a position continues the run before it */
            here = have_run ? run : start_position;
        }
        else if (read_position(loc, &here, held) < 0) {
            for (int index = 0; index < 4; index++) {
                Py_XDECREF(held[index]);
            }
            goto done;
        }
        if (have_run && joins && same_position(&here, &run)) {
            for (int index = 0; index < 4; index++) {
                Py_XDECREF(held[index]);
            }
            units += size;
            Py_DECREF(item);
            continue;
        }
        if (have_run && put_run(&out, &run, units, &line) < 0) {
            for (int index = 0; index < 4; index++) {
                Py_XDECREF(held[index]);
            }
            goto done;
        }
        run = here;
        hold_run(&run, run_held); /* (before `held` and `item` let go of the objects) */
        for (int index = 0; index < 4; index++) {
            Py_XDECREF(held[index]);
        }
        units = size;
        joins = !here.none[0];
        have_run = 1;
        Py_DECREF(item);
    }
    if (!PyErr_Occurred() && !(have_run && put_run(&out, &run, units, &line) < 0)) {
        table = PyBytes_FromStringAndSize((const char *)out.bytes, out.size);
    }
done: /* the one exit: `table` is NULL unless the whole table was made */
    Py_XDECREF(item);
    PyMem_Free(out.bytes);
    Py_DECREF(iterator);
    Py_XDECREF(seen);
    for (int index = 0; index < 4; index++) {
        Py_XDECREF(run_held[index]);
    }
    return table;
}

/* -- The loop over the items ------------------------------------------------------------
 *
 * _assembler.Assembler._code's loop over a body's items, into flat lists of opcodes and
 * arguments (a CACHE entry a unit of its own), the line table's runs, the labels' indexes,
 * the jumps and the instructions whose argument needs an EXTENDED_ARG.  Walk takes labels,
 * try blocks' ends and starts, and the instructions whose argument is of a common kind (by
 * the opcode's kind in the table Python hands it, _assembler._WALK_KINDS: an int, a
 * constant, a name, a local variable's name, a flagged name, a comparison); the rest, and
 * whatever of those it does not expect (a cell, a constant numbered by no key yet is not
 * one: the Python const() numbers it), it hands to `one`, the Python loop's body, as a
 * one-item tuple with the loop's state (position, has it no line, in a try block), and goes
 * on with the state `one` returns.  The same steps in the same order as the Python loop, so
 * the same lists: tests/test_assembly_in_c.py compares the two over real modules. */

enum { DELEGATED = 0, KIND_INT, KIND_CONST, KIND_NAME, KIND_LOCAL, KIND_FLAG_NAME, KIND_FLAGS_NAME, KIND_COMPARE };

static PyObject *str_opcode, *str_arg, *str_location, *str_stack_depth, *str_target, *str_entry, *str_code, *str_runs,
    *str_opcodes, *str_args;

typedef struct {
    PyObject *instr_types, *label_type, *location_type, *unset, *compare_type, *try_begin, *try_end, *verbatim_type;
    PyObject *seed_code; /* the code the body's first item, a Verbatim, copies (None: there is none) */
    const unsigned char *kinds, *entries_of;
    PyObject *opcodes, *arguments, *starts, *run_positions, *labels, *jumps, *wide, *blocks, *verbatim;
    PyObject *by_id, *names, *name_index, *varnames, *varname_index, *constant, *compare;
    PyObject *cache_unit, *zero;
    /* where the instructions' fields (_opcode, _arg, _location) and the positions' lineno
     * are in the last types read (see slot_offset) */
    PyTypeObject *instr_read, *location_read;
    Py_ssize_t field_at[3], lineno_at;
} Walk;

/* item.<name> (new reference), name the `field`th of `names` and `at` its offsets, cached
 * for `*read`, the type they were found in. */
static PyObject *
field_of(PyObject *item, PyTypeObject **read, Py_ssize_t *at, PyObject *const *names, int count, int field)
{
    if (Py_TYPE(item) != *read) {
        for (int index = 0; index < count; index++) {
            at[index] = slot_offset(Py_TYPE(item), names[index]);
        }
        *read = Py_TYPE(item);
    }
    if (at[field] >= 0) {
        PyObject *value = *(PyObject **)((char *)item + at[field]);
        if (value != NULL) {
            return Py_NewRef(value);
        }
    }
    return PyObject_GetAttr(item, names[field]); /* (an unset slot: its AttributeError) */
}

static inline PyObject *
instr_field(Walk *w, PyObject *item, int field)
{
    PyObject *names[3] = {str_opcode, str_arg, str_location};
    return field_of(item, &w->instr_read, w->field_at, names, 3, field);
}

static inline PyObject *
lineno_of(Walk *w, PyObject *loc)
{
    return field_of(loc, &w->location_read, &w->lineno_at, &str_lineno, 1, 0);
}

/* value's index in values, appended at its first use (_assembler._numbering's): -1 on error. */
static Py_ssize_t
number(PyObject *values, PyObject *index_of, PyObject *value)
{
    PyObject *index = PyDict_GetItemWithError(index_of, value);
    if (index != NULL) {
        return PyLong_AsSsize_t(index);
    }
    if (PyErr_Occurred()) {
        return -1;
    }
    Py_ssize_t size = PyList_GET_SIZE(values);
    PyObject *made = PyLong_FromSsize_t(size);
    if (made == NULL) {
        return -1;
    }
    int failed = PyDict_SetItem(index_of, value, made) < 0 || PyList_Append(values, value) < 0;
    Py_DECREF(made);
    return failed ? -1 : size;
}

/* int(value) where value is an int whose int() is the int's own (a bool, an IntEnum member),
 * from 0 to 0x7FFFFFFF; else -1 (handed to Python). */
static long
small_int(PyObject *value)
{
    if (!PyLong_Check(value)
        || (!PyLong_CheckExact(value) && Py_TYPE(value)->tp_as_number->nb_int != PyLong_Type.tp_as_number->nb_int)) {
        return -1;
    }
    int overflow = 0;
    long out = PyLong_AsLongAndOverflow(value, &overflow);
    if (out == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    return overflow || out < 0 || out > 0x7FFFFFFF ? -1 : out;
}

static int
append_long(PyObject *list, long value)
{
    PyObject *made = PyLong_FromLong(value);
    if (made == NULL) {
        return -1;
    }
    int failed = PyList_Append(list, made);
    Py_DECREF(made);
    return failed;
}

/* What a Python callable (const, compare) returns, as the argument: -2 on an error. */
static long
called(PyObject *callable, PyObject *arg)
{
    PyObject *out = PyObject_CallOneArg(callable, arg);
    if (out == NULL) {
        return -2;
    }
    long value = small_int(out);
    Py_DECREF(out);
    if (value < 0) {
        PyErr_SetString(PyExc_ValueError, "an argument out of the C loop's range");
        return -2;
    }
    return value;
}

/* The argument an instruction takes of kind `kind`, or -1 where walk hands it to Python (-2
 * on an error, raised).  Nothing is numbered before it is known to be taken. */
static long
argument_of(Walk *w, int kind, PyObject *arg)
{
    Py_ssize_t index;
    switch (kind) {
    case KIND_INT:
        return arg == w->unset ? 0 : small_int(arg);
    case KIND_CONST: {
        PyObject *key = PyLong_FromVoidPtr(arg);
        if (key == NULL) {
            return -2;
        }
        PyObject *found = PyDict_GetItemWithError(w->by_id, key); /* (borrowed) */
        Py_DECREF(key);
        if (found == NULL) {
            return PyErr_Occurred() ? -2 : called(w->constant, arg); /* (keyed by the Python const()) */
        }
        long value = small_int(found);
        return value < 0 ? -1 : value;
    }
    case KIND_NAME:
    case KIND_LOCAL:
        if (!PyUnicode_CheckExact(arg)) {
            return -1;
        }
        index = kind == KIND_NAME ? number(w->names, w->name_index, arg) : number(w->varnames, w->varname_index, arg);
        return index < 0 ? -2 : (index > 0xFFFFFF ? -1 : (long)index);
    case KIND_FLAG_NAME:
    case KIND_FLAGS_NAME: {
        Py_ssize_t flags = kind == KIND_FLAG_NAME ? 1 : 2;
        if (!PyTuple_CheckExact(arg) || PyTuple_GET_SIZE(arg) <= flags
            || !PyUnicode_CheckExact(PyTuple_GET_ITEM(arg, flags))) {
            return -1;
        }
        long first = small_int(PyTuple_GET_ITEM(arg, 0));
        long second = flags == 2 ? small_int(PyTuple_GET_ITEM(arg, 1)) : 0;
        if (first < 0 || first > 0xFFFF || second < 0 || second > 0xFFFF) {
            return -1;
        }
        index = number(w->names, w->name_index, PyTuple_GET_ITEM(arg, flags));
        if (index < 0) {
            return -2;
        }
        if (index > 0xFFFFFF) {
            return -1;
        }
        return flags == 1 ? first + ((long)index << 1) : first + 2 * second + ((long)index << 2);
    }
    case KIND_COMPARE:
        return PyObject_TypeCheck(arg, (PyTypeObject *)w->compare_type) ? called(w->compare, arg) : -1;
    default:
        return -1;
    }
}

/* A Verbatim block of the seed's code taken: its units and runs appended, the position its
 * last run's. */
static int
verbatim(Walk *w, PyObject *item, PyObject **position, int *lineless)
{
    Py_ssize_t here = PyList_GET_SIZE(w->opcodes);
    PyObject *code = PyObject_GetAttr(item, str_code);
    if (code == NULL) {
        return -1;
    }
    Py_DECREF(code); /* (compared by identity only: the item holds it) */
    if (w->seed_code == Py_None || code != w->seed_code) {
        return 0; /* (declined, by Python) */
    }
    PyObject *runs = PyObject_GetAttr(item, str_runs), *opcodes = NULL, *arguments = NULL, *last = NULL;
    int out = -1;
    if (runs == NULL || (opcodes = PyObject_GetAttr(item, str_opcodes)) == NULL
        || (arguments = PyObject_GetAttr(item, str_args)) == NULL) {
        goto done;
    }
    if (!PyList_CheckExact(runs) || !PyList_CheckExact(opcodes) || !PyList_CheckExact(arguments)) {
        out = 0;
        goto done;
    }
    for (Py_ssize_t index = 0; index < PyList_GET_SIZE(runs); index++) {
        PyObject *run = PyList_GET_ITEM(runs, index);
        if (!PyTuple_CheckExact(run) || PyTuple_GET_SIZE(run) != 2 || !PyLong_CheckExact(PyTuple_GET_ITEM(run, 0))) {
            out = 0; /* (not a Verbatim's runs: Python's, from the start) */
            goto done;
        }
    }
    {
        PyObject *pair = Py_BuildValue("(nO)", here, item);
        int failed = pair == NULL || PyList_Append(w->verbatim, pair) < 0;
        Py_XDECREF(pair);
        if (failed) {
            goto done;
        }
    }
    for (Py_ssize_t index = 0; index < PyList_GET_SIZE(runs); index++) {
        PyObject *run = PyList_GET_ITEM(runs, index);
        Py_ssize_t unit = PyLong_AsSsize_t(PyTuple_GET_ITEM(run, 0));
        if ((unit == -1 && PyErr_Occurred()) || append_long(w->starts, (long)(here + unit)) < 0
            || PyList_Append(w->run_positions, PyTuple_GET_ITEM(run, 1)) < 0) {
            goto done;
        }
    }
    if (PyList_SetSlice(w->opcodes, here, here, opcodes) < 0
        || PyList_SetSlice(w->arguments, PyList_GET_SIZE(w->arguments), PyList_GET_SIZE(w->arguments), arguments) < 0) {
        goto done;
    }
    if (PyList_GET_SIZE(runs) > 0) {
        last = Py_NewRef(PyTuple_GET_ITEM(PyList_GET_ITEM(runs, PyList_GET_SIZE(runs) - 1), 1));
        PyObject *line = lineno_of(w, last);
        if (line == NULL) {
            goto done;
        }
        *lineless = line == Py_None;
        Py_DECREF(line);
        Py_SETREF(*position, Py_NewRef(last));
    }
    out = 1;
done:
    Py_XDECREF(runs);
    Py_XDECREF(opcodes);
    Py_XDECREF(arguments);
    Py_XDECREF(last);
    return out;
}

/* A label, or a try block's start or end, taken: 1; not one walk takes: 0; -1 on an error. */
static int
marker(Walk *w, PyObject *item, int *in_try)
{
    PyObject *type = (PyObject *)Py_TYPE(item);
    Py_ssize_t here = PyList_GET_SIZE(w->opcodes);
    if (type == w->label_type) {
        PyObject *offset = PyLong_FromSsize_t(here);
        int failed = offset == NULL || PyDict_SetItem(w->labels, item, offset) < 0;
        Py_XDECREF(offset);
        return failed ? -1 : 1;
    }
    if (type == w->try_begin) {
        if (*in_try) {
            return 0; /* (declined, by Python) */
        }
        PyObject *depth = PyObject_GetAttr(item, str_stack_depth);
        PyObject *target = depth == NULL ? NULL : PyObject_GetAttr(item, str_target);
        int taken = target != NULL && PyLong_CheckExact(depth) && (PyObject *)Py_TYPE(target) == w->label_type;
        Py_XDECREF(depth);
        Py_XDECREF(target);
        if (PyErr_Occurred()) {
            return -1;
        }
        if (!taken) {
            return 0;
        }
        PyObject *block = Py_BuildValue("[ni]", here, 0);
        int failed = block == NULL || PyDict_SetItem(w->blocks, item, block) < 0;
        Py_XDECREF(block);
        if (failed) {
            return -1;
        }
        *in_try = 1;
        return 1;
    }
    if (type == w->try_end) {
        PyObject *entry = PyObject_GetAttr(item, str_entry);
        if (entry == NULL) {
            return -1;
        }
        PyObject *block = PyDict_GetItemWithError(w->blocks, entry); /* (borrowed) */
        Py_DECREF(entry);
        if (block == NULL || !PyList_CheckExact(block) || PyList_GET_SIZE(block) != 2) {
            return PyErr_Occurred() ? -1 : 0;
        }
        PyObject *last = PyLong_FromSsize_t(here - 1);
        if (last == NULL) {
            return -1;
        }
        PyList_SetItem(block, 1, last); /* (steals) */
        *in_try = 0;
        return 1;
    }
    return 0;
}

/* An instruction taken: its units and runs appended. */
static int
instruction(Walk *w, PyObject *item, long opcode, long c_arg, PyObject *jump, PyObject **position, int *lineless)
{
    Py_ssize_t here = PyList_GET_SIZE(w->opcodes);
    PyObject *loc = instr_field(w, item, 2);
    if (loc == NULL) {
        return -1;
    }
    if (loc != *position && PyObject_TypeCheck(loc, (PyTypeObject *)w->location_type)) {
        PyObject *line = lineno_of(w, loc);
        if (line == NULL) {
            Py_DECREF(loc);
            return -1;
        }
        *lineless = line == Py_None;
        Py_DECREF(line);
        Py_SETREF(*position, Py_NewRef(loc));
        if (!*lineless && (append_long(w->starts, (long)here) < 0 || PyList_Append(w->run_positions, loc) < 0)) {
            Py_DECREF(loc);
            return -1;
        }
    }
    Py_DECREF(loc);
    if (jump != NULL) {
        PyObject *pair = Py_BuildValue("(nO)", here, jump);
        int failed = pair == NULL || PyList_Append(w->jumps, pair) < 0;
        Py_XDECREF(pair);
        if (failed) {
            return -1;
        }
    }
    if (c_arg > 0xFF && append_long(w->wide, (long)here) < 0) {
        return -1;
    }
    int entries = w->entries_of[opcode];
    if (*lineless) { /* (a run a unit) */
        for (int unit = 0; unit <= entries; unit++) {
            if (append_long(w->starts, (long)here + unit) < 0 || PyList_Append(w->run_positions, *position) < 0) {
                return -1;
            }
        }
    }
    if (append_long(w->opcodes, opcode) < 0 || append_long(w->arguments, c_arg) < 0) {
        return -1;
    }
    for (int unit = 0; unit < entries; unit++) {
        if (PyList_Append(w->opcodes, w->cache_unit) < 0 || PyList_Append(w->arguments, w->zero) < 0) {
            return -1;
        }
    }
    return 0;
}

static int
unpack(PyObject *tuple, Py_ssize_t size, PyObject **out[])
{
    if (!PyTuple_CheckExact(tuple) || PyTuple_GET_SIZE(tuple) != size) {
        PyErr_SetString(PyExc_TypeError, "walk(): a tuple of another size");
        return -1;
    }
    for (Py_ssize_t index = 0; index < size; index++) {
        *out[index] = PyTuple_GET_ITEM(tuple, index);
    }
    return 0;
}

/* walk(tables, items, state, lists, numbering, one) -> state: see above. */
static PyObject *
walk(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    Walk w;
    PyObject *walk_kinds, *caches, *cache_opcode, *items, *one, *state;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "walk(tables, items, state, lists, numbering, one)");
        return NULL;
    }
    PyObject **tables[] = {&w.instr_types, &walk_kinds, &caches, &cache_opcode, &w.label_type, &w.location_type,
                           &w.unset, &w.compare_type, &w.try_begin, &w.try_end, &w.verbatim_type};
    PyObject **lists[] = {&w.opcodes, &w.arguments, &w.starts, &w.run_positions, &w.labels, &w.jumps, &w.wide,
                          &w.blocks, &w.verbatim};
    PyObject **numbering[] = {&w.by_id, &w.names, &w.name_index, &w.varnames, &w.varname_index, &w.constant,
                              &w.compare, &w.seed_code};
    if (unpack(args[0], 11, tables) < 0 || unpack(args[3], 9, lists) < 0 || unpack(args[4], 8, numbering) < 0) {
        return NULL;
    }
    items = args[1];
    state = args[2];
    one = args[5];
    if (!PyAnySet_Check(w.instr_types) || !PyBytes_CheckExact(walk_kinds) || PyBytes_GET_SIZE(walk_kinds) != 256
        || !PyBytes_CheckExact(caches) || PyBytes_GET_SIZE(caches) != 256 || !PyType_Check(w.location_type)
        || !PyType_Check(w.compare_type) || !PyList_CheckExact(items) || !PyList_CheckExact(w.opcodes)
        || !PyList_CheckExact(w.arguments) || !PyList_CheckExact(w.starts) || !PyList_CheckExact(w.run_positions)
        || !PyDict_CheckExact(w.labels) || !PyList_CheckExact(w.jumps) || !PyList_CheckExact(w.wide)
        || !PyList_CheckExact(w.verbatim)
        || !PyDict_CheckExact(w.blocks) || !PyDict_CheckExact(w.by_id) || !PyList_CheckExact(w.names)
        || !PyDict_CheckExact(w.name_index) || !PyList_CheckExact(w.varnames) || !PyDict_CheckExact(w.varname_index)
        || !PyTuple_CheckExact(state) || PyTuple_GET_SIZE(state) != 3) {
        PyErr_SetString(PyExc_TypeError, "walk(): a table, list, dict or state of another type");
        return NULL;
    }
    w.kinds = (const unsigned char *)PyBytes_AS_STRING(walk_kinds);
    w.entries_of = (const unsigned char *)PyBytes_AS_STRING(caches);
    w.cache_unit = cache_opcode;
    w.zero = NULL;
    w.instr_read = w.location_read = NULL;
    PyObject *position = Py_NewRef(PyTuple_GET_ITEM(state, 0)), *arg = NULL;
    int lineless = PyObject_IsTrue(PyTuple_GET_ITEM(state, 1)), in_try = PyObject_IsTrue(PyTuple_GET_ITEM(state, 2));
    if (lineless < 0 || in_try < 0 || (w.zero = PyLong_FromLong(0)) == NULL) {
        goto error;
    }
    for (Py_ssize_t at = 0; at < PyList_GET_SIZE(items); at++) {
        PyObject *item = PyList_GET_ITEM(items, at);
        long opcode = -1, c_arg = -1;
        int jump = 0;
        int taken = PySet_Contains(w.instr_types, (PyObject *)Py_TYPE(item));
        if (taken < 0) {
            goto error;
        }
        if (taken) {
            PyObject *opcode_object = instr_field(&w, item, 0);
            if (opcode_object == NULL) {
                goto error;
            }
            opcode = PyLong_AsLong(opcode_object);
            Py_DECREF(opcode_object);
            if (opcode == -1 && PyErr_Occurred()) {
                PyErr_Clear(); /* (not an opcode: the Python loop's error, or decline) */
            }
            if (opcode >= 0 && opcode < 256 && w.kinds[opcode] != DELEGATED) {
                if ((arg = instr_field(&w, item, 1)) == NULL) {
                    goto error;
                }
                if ((PyObject *)Py_TYPE(arg) == w.label_type) {
                    jump = 1;
                    c_arg = 0; /* (set once the offsets are known) */
                }
                else if ((c_arg = argument_of(&w, w.kinds[opcode], arg)) == -2) {
                    goto error;
                }
            }
            if (c_arg >= 0) {
                if (instruction(&w, item, opcode, c_arg, jump ? arg : NULL, &position, &lineless) < 0) {
                    goto error;
                }
                Py_CLEAR(arg);
                continue;
            }
            Py_CLEAR(arg);
        }
        else {
            taken = (PyObject *)Py_TYPE(item) == w.verbatim_type ? verbatim(&w, item, &position, &lineless)
                                                                 : marker(&w, item, &in_try);
            if (taken < 0) {
                goto error;
            }
            if (taken) {
                continue;
            }
        }
        /* Python's: what the reference loop does with it */
        PyObject *part = PyTuple_Pack(1, item);
        PyObject *now = part == NULL ? NULL : Py_BuildValue("(OOO)", position, lineless ? Py_True : Py_False,
                                                             in_try ? Py_True : Py_False);
        PyObject *outcome = now == NULL ? NULL : PyObject_CallFunctionObjArgs(one, part, now, NULL);
        Py_XDECREF(part);
        Py_XDECREF(now);
        if (outcome == NULL) {
            goto error;
        }
        if (!PyTuple_CheckExact(outcome) || PyTuple_GET_SIZE(outcome) != 3) {
            Py_DECREF(outcome);
            PyErr_SetString(PyExc_TypeError, "walk()'s one() returns (position, lineless, in_try)");
            goto error;
        }
        Py_SETREF(position, Py_NewRef(PyTuple_GET_ITEM(outcome, 0)));
        lineless = PyObject_IsTrue(PyTuple_GET_ITEM(outcome, 1));
        in_try = PyObject_IsTrue(PyTuple_GET_ITEM(outcome, 2));
        Py_DECREF(outcome);
        if (lineless < 0 || in_try < 0) {
            goto error;
        }
    }
    Py_DECREF(w.zero);
    return Py_BuildValue("(NOO)", position, lineless ? Py_True : Py_False, in_try ? Py_True : Py_False);
error:
    Py_XDECREF(arg);
    Py_XDECREF(w.zero);
    Py_XDECREF(position);
    return NULL;
}

static PyObject *
set_compiled_position(PyObject *module, PyObject *cls)
{
    (void)module;
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &PyTuple_Type)) {
        PyErr_Format(PyExc_TypeError, "set_compiled_position() takes a subclass of tuple, not %R", cls);
        return NULL;
    }
    Py_INCREF(cls);
    Py_XSETREF(compiled_position, (PyTypeObject *)cls);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"line_table", (PyCFunction)(void (*)(void))line_table, METH_FASTCALL,
     "line_table(first_line, runs)\n--\n\n"
     "The 3.11+ co_linetable of runs, each (position, code units): _nullslot._line_table's."},
    {"walk", (PyCFunction)(void (*)(void))walk, METH_FASTCALL,
     "walk(tables, items, state, lists, numbering, one)\n--\n\n"
     "_assembler.Assembler._code's loop over the items; what it does not take, one() does."},
    {"set_compiled_position", set_compiled_position, METH_O,
     "set_compiled_position(cls)\n--\n\n"
     "Positions of class cls (a tuple subclass) are read as the tuple (line, end line, column, end column)."},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "cassette_hook.rewrite._assembly",
    .m_doc = "The assembler's per-instruction work in C (optional; _nullslot.py has it in Python).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__assembly(void)
{
    str_lineno = PyUnicode_InternFromString("lineno");
    str_end_lineno = PyUnicode_InternFromString("end_lineno");
    str_col_offset = PyUnicode_InternFromString("col_offset");
    str_end_col_offset = PyUnicode_InternFromString("end_col_offset");
    str_opcode = PyUnicode_InternFromString("_opcode");
    str_arg = PyUnicode_InternFromString("_arg");
    str_location = PyUnicode_InternFromString("_location");
    str_stack_depth = PyUnicode_InternFromString("stack_depth");
    str_target = PyUnicode_InternFromString("target");
    str_entry = PyUnicode_InternFromString("entry");
    str_code = PyUnicode_InternFromString("code");
    str_runs = PyUnicode_InternFromString("runs");
    str_opcodes = PyUnicode_InternFromString("opcodes");
    str_args = PyUnicode_InternFromString("args");
    if (str_lineno == NULL || str_end_lineno == NULL || str_col_offset == NULL || str_end_col_offset == NULL
        || str_opcode == NULL || str_arg == NULL || str_location == NULL || str_stack_depth == NULL
        || str_target == NULL || str_entry == NULL || str_code == NULL || str_runs == NULL || str_opcodes == NULL
        || str_args == NULL) {
        return NULL;
    }
    return PyModule_Create(&module_def);
}
