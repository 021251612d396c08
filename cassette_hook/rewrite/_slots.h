/* Where a class's __slots__ entries are kept in its instances: shared by the assembler's
 * loop (_assembly.c), which reads bytecode's instructions' and positions' slots, the
 * decoder's (_decoding.c), which sets them on the objects it makes, and the stack walks
 * (_stacking.c), which read an instruction's name and argument.  Reading or setting a
 * slot at its offset is what getattr and setattr do for it, without looking the name up
 * each time (docs/internals.md, "The assembler's per-instruction work in C"). */
#ifndef CASSETTE_HOOK_REWRITE_SLOTS_H
#define CASSETTE_HOOK_REWRITE_SLOTS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h> /* T_OBJECT_EX (in Python.h, as Py_T_OBJECT_EX, from 3.12 on) */

/* Where a __slots__ entry `name` of `type` is kept in its instances (the offset its member
 * descriptor reads), or -1 where `name` is something else there (then read or set by
 * getattr or setattr). */
static inline Py_ssize_t
slot_offset(PyTypeObject *type, PyObject *name)
{
    PyObject *descriptor = PyObject_GetAttr((PyObject *)type, name); /* (a member descriptor: itself) */
    if (descriptor == NULL) {
        PyErr_Clear();
        return -1;
    }
    Py_ssize_t offset = -1;
    if (Py_IS_TYPE(descriptor, &PyMemberDescr_Type)) {
        PyMemberDef *member = ((PyMemberDescrObject *)descriptor)->d_member;
        if (member->type == T_OBJECT_EX) {
            offset = member->offset;
        }
    }
    Py_DECREF(descriptor);
    return offset;
}

#endif
