#include "internal.h"

static PyObject *special_call(Special *self, PyObject *const *args, size_t nargsf, PyObject *kwnames);
static PyObject *special_get(Special *self, PyObject *obj, PyObject *type);
static PyObject *special_new(PyTypeObject *type, PyObject *args, PyObject *kwargs);
static int special_traverse(Special *self, visitproc visit, void *arg);
static int special_clear(Special *self);
static void special_dealloc(Special *self);

/* runtime.standins.Special: what a class holds in place of a special method of its own, and a
 * property in place of its accessors, while contexts are active.  Called, it makes the
 * call of its function as a call site does (call_in), so the context sees the function
 * run, with no frame of ours under it.  CPython's slots (hash(), ==, sort, len(), a for
 * loop's __next__) find it on the class and, since it is a method descriptor, call it
 * unbound with the instance first.  Read as an attribute -- obj.__eq__, super().__eq__,
 * getattr() -- it binds the method itself, as the class would; read on the class, it is
 * the method. */

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

PyType_Spec special_spec = {
    .name = "cassette_hook._speedups.Special",
    .basicsize = sizeof(Special),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .slots = special_slots,
};
