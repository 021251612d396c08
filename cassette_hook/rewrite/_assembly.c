/* The assembler's per-instruction work in C: the 3.11+ line table's encoder.
 *
 * rewrite/_nullslot.py holds the reference version (_line_table), used where this module is
 * not built or CASSETTE_HOOK_PURE_PYTHON=1 is set (_native.optional); _nullslot chooses,
 * once.  Why C: of the assembler's time on a cold switch of networkx (3.12), the line table
 * was the largest piece after the loop over the items, about a quarter (docs/performance.md,
 * "The line table in C"); in Python each run costs a tuple, a comparison of tuples and a
 * few bytearray appends, here a few stores into a buffer.
 *
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
    int have_run = 0, joins = 0;
    long long units = 0, line = start_position.value[0];
    while ((item = PyIter_Next(iterator)) != NULL) {
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            PyErr_Format(PyExc_TypeError, "a run is (position, units), not %R", item);
            goto error;
        }
        PyObject *loc = PyTuple_GET_ITEM(item, 0);
        long long size = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 1));
        if (size == -1 && PyErr_Occurred()) {
            goto error;
        }
        if (size < 0) {
            PyErr_SetString(PyExc_ValueError, "a run of fewer than no code units");
            goto error;
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
            goto error;
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
            goto error;
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
    item = NULL;
    if (PyErr_Occurred() || (have_run && put_run(&out, &run, units, &line) < 0)) {
        goto error;
    }
    PyObject *table = PyBytes_FromStringAndSize((const char *)out.bytes, out.size);
    PyMem_Free(out.bytes);
    Py_DECREF(iterator);
    Py_XDECREF(seen);
    for (int index = 0; index < 4; index++) {
        Py_XDECREF(run_held[index]);
    }
    return table;
error:
    Py_XDECREF(item);
    PyMem_Free(out.bytes);
    Py_DECREF(iterator);
    Py_XDECREF(seen);
    for (int index = 0; index < 4; index++) {
        Py_XDECREF(run_held[index]);
    }
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
    if (str_lineno == NULL || str_end_lineno == NULL || str_col_offset == NULL || str_end_col_offset == NULL) {
        return NULL;
    }
    return PyModule_Create(&module_def);
}
