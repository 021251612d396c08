#include "internal.h"

static PyObject *python_dunder(PyObject *obj, PyObject *name);

/* Fill set from a set of ids (at most half full, so probes end). */
int
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

/* Are all these values of runtime.operators.C_OPERANDS, builtin classes whose every dunder is C?
 * Then no protocol of theirs leads to Python: runtime.operators.body finds nothing for them, and
 * a primitive's preparer (runtime.primitives._Arguments.prepare: callbacks made call sites,
 * iterated arguments with Python __iter__ given a stand-in) leaves them as they are. */
int
all_c_operands(PyObject *const *args, Py_ssize_t nargs)
{
    for (Py_ssize_t i = 0; i < nargs; i++) {
        int c = PySet_Contains(state->c_operands, (PyObject *)Py_TYPE(args[i]));
        if (c <= 0) {
            if (c < 0) {
                PyErr_Clear(); /* (a class whose metaclass cannot hash it: not one of them) */
            }
            return 0;
        }
    }
    return 1;
}

/* The entry of dunder_table for the builtin op, or NULL: runtime.operators.body knows nothing of it. */
const OperatorDunders *
dunders_of(PyObject *op)
{
    for (size_t i = address_slot(op); state->dunder_table[i].op != NULL; i = (i + 1) % ADDRESS_SET_SIZE) {
        if (state->dunder_table[i].op == op) {
            return &state->dunder_table[i];
        }
    }
    return NULL;
}

/* May runtime.operators.body find Python dunders for op(*args), op's entry being dunders (NULL:
 * body knows nothing of op)?  Not when every special method it would look up is missing
 * from its operand's class or is C code there -- found by CPython's own lookup along the
 * MRO (cached by the interpreter), where body walks the MRO in Python.  A builtin class
 * (not a heap type) holds no Python code at all.  Anything else found (a Python
 * function, our Special standing in for one, None) is body's to judge. */
int
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

/* Fill dunder_table from runtime.operators.DUNDERS. */
int
dunder_table_fill(PyObject *table)
{
    if (!PyDict_CheckExact(table) || PyDict_GET_SIZE(table) > ADDRESS_SET_SIZE / 2) {
        PyErr_SetString(PyExc_TypeError, "configure(): operator_dunders must be a dict of at most 64 operators");
        return -1;
    }
    for (size_t i = 0; i < ADDRESS_SET_SIZE; i++) {
        for (int j = 0; j < state->dunder_table[i].n; j++) {
            Py_CLEAR(state->dunder_table[i].name[j]);
        }
        Py_CLEAR(state->dunder_table[i].symbol);
    }
    memset(state->dunder_table, 0, sizeof(state->dunder_table));
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
        while (state->dunder_table[i].op != NULL) {
            i = (i + 1) % ADDRESS_SET_SIZE;
        }
        OperatorDunders *entry = &state->dunder_table[i];
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

/* runtime.operators.yield_from_operand: what `yield from obj` iterates -- obj itself for a
 * generator or a coroutine, which the instruction takes as they are (with its own checks),
 * else iter(obj) as a call site. */
/* Mirrors runtime.operators.yield_from_operand. */
PyObject *
yield_from(PyObject *module, PyObject *obj)
{
    return PyGen_CheckExact(obj) || PyCoro_CheckExact(obj) ? Py_NewRef(obj) : call_active(state->iter_builtin, &obj, 1, NULL);
}

/* The special method name on the class of obj, as runtime.operators._special finds it, when it is
 * a plain Python function (or a Special standing in for one): borrowed, or NULL. */
static PyObject *
python_dunder(PyObject *obj, PyObject *name)
{
    PyObject *found = _PyType_Lookup(Py_TYPE(obj), name);
    if (found != NULL && Py_TYPE(found) == state->SpecialType) {
        found = ((Special *)found)->function;
    }
    return found != NULL && PyFunction_Check(found) ? found : NULL;
}

/* What runtime.operators.body would make of op(*args) (dunders: op's entry), run here where it is
 * Python functions called as call sites (call_in, as body's partials of call do): the
 * first operand's dunder for an operator on it (obj[k], -obj), its truth for `in`, the
 * iterator it returns for iter(obj), checked as iter() checks it; and on two operands of
 * one class, which try no reflected method first, a binary operator's forward dunder (its
 * NotImplemented the operator's TypeError) or a comparison's forward then reflected ones
 * (both NotImplemented: identity for == and !=, else the TypeError).  1 and the result in
 * *out, 0 when body is to decide (nothing run), -1 on error. */
int
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
        /* CPython's own error, in the running version's words (3.15 names the class):
         * runtime.operators._iterator raises it, as the pure-Python path does. */
        PyObject *module = PyImport_ImportModule("cassette_hook.runtime.operators");
        PyObject *raise = module == NULL ? NULL : PyObject_GetAttrString(module, "_iterator");
        Py_XDECREF(module);
        if (raise != NULL) {
            PyObject *call[2] = {(PyObject *)Py_TYPE(args[0]), result};
            PyObject *same = PyObject_Vectorcall(raise, call, 2, NULL);
            Py_DECREF(raise);
            if (same != NULL) { /* (an iterator to Python after all: kept) */
                Py_DECREF(same);
                *out = result;
                return 1;
            }
        }
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
