/*
 * The compiled element loops of the BSON decoder.
 *
 * read_document(data, pos, end, ctx) and read_array(data, pos, end, ctx) take the place of the two
 * pure-Python loops in _decoder.py and keep their contract exactly: the same arguments (``data`` is a
 * bytes object, ``pos`` the first element, ``end`` the index of the enclosing document's trailing NUL,
 * ``ctx`` the decoding context tuple), the same results, and InvalidBSON (or the low-level error the
 * Python loop would let through, such as UnicodeDecodeError or RecursionError) for the same inputs.
 *
 * Only the hot element types are decoded here. Every other type goes back to the Python reader of
 * _decoder._READERS, so the rarely used types and every codec option keep one implementation. Every
 * length is checked against ``end`` before a byte is read, so malformed input can never read outside
 * the document being decoded.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Set once by configure(): the Python objects the loops hand work to. */
static PyObject *invalid_bson;     /* mongio.bson.errors.InvalidBSON */
static PyObject *readers;          /* dict: element type -> Python reader */
static PyObject *objectid_factory; /* ObjectId._from_bytes */
static PyObject *timestamp_factory;/* Timestamp._from_decoded(time, inc) */
static PyObject *int64_type;       /* Int64 */
static PyObject *to_dbref;         /* _decoder._to_dbref */
static PyObject *strict_utf8;      /* bytes.decode: the context's UTF-8 function when errors are strict */
static PyObject *ref_key;          /* "$ref" */

typedef struct {
    PyObject *ctx;
    PyObject *options;
    PyObject *document_class;
    PyObject *utf8;
    PyObject *decoder_map; /* NULL when the context has none */
    int is_dict;
    int is_raw;
    int strict;
} Context;

static int32_t
load_int32(const unsigned char *p)
{
    uint32_t v = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
    return (int32_t)v;
}

static uint32_t
load_uint32(const unsigned char *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static uint64_t
load_uint64(const unsigned char *p)
{
    return (uint64_t)load_uint32(p) | ((uint64_t)load_uint32(p + 4) << 32);
}

static PyObject *
malformed(const char *what)
{
    PyErr_SetString(invalid_bson, what);
    return NULL;
}

/* Raise InvalidBSON for the element named ``key`` (NULL inside an array); ``format`` has one %U for where
 * the element is ("for key 'k'" or "in an array") and at most one %d after it. */
static PyObject *
element_error(PyObject *key, const char *format, int number)
{
    PyObject *where = key != NULL ? PyUnicode_FromFormat("for key %R", key) : PyUnicode_FromString("in an array");
    if (where == NULL) {
        return NULL;
    }
    PyErr_Format(invalid_bson, format, where, number);
    Py_DECREF(where);
    return NULL;
}

static int
unpack_context(PyObject *ctx, Context *c)
{
    if (!PyTuple_Check(ctx) || PyTuple_GET_SIZE(ctx) < 6) {
        PyErr_SetString(PyExc_TypeError, "the decoding context must be the decoder's context tuple");
        return -1;
    }
    if (invalid_bson == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "mongio.bson._speedups is used before configure()");
        return -1;
    }
    c->ctx = ctx;
    c->options = PyTuple_GET_ITEM(ctx, 0);
    c->document_class = PyTuple_GET_ITEM(ctx, 1);
    c->is_dict = PyObject_IsTrue(PyTuple_GET_ITEM(ctx, 2));
    c->is_raw = PyObject_IsTrue(PyTuple_GET_ITEM(ctx, 3));
    if (c->is_dict < 0 || c->is_raw < 0) {
        return -1;
    }
    c->utf8 = PyTuple_GET_ITEM(ctx, 4);
    c->strict = c->utf8 == strict_utf8;
    c->decoder_map = PyTuple_GET_ITEM(ctx, 5);
    if (c->decoder_map == Py_None) {
        c->decoder_map = NULL;
    }
    return 0;
}

static PyObject *
decode_text(const Context *c, const unsigned char *start, Py_ssize_t size)
{
    if (c->strict) {
        return PyUnicode_DecodeUTF8((const char *)start, size, NULL);
    }
    PyObject *raw = PyBytes_FromStringAndSize((const char *)start, size);
    if (raw == NULL) {
        return NULL;
    }
    PyObject *text = PyObject_CallOneArg(c->utf8, raw);
    Py_DECREF(raw);
    return text;
}

static PyObject *read_elements(PyObject *data, Py_ssize_t pos, Py_ssize_t end, const Context *c, int array);

/* The embedded document or array whose length field is at ``pos``; ``*next`` gets the position after it. */
static PyObject *
read_nested(PyObject *data, Py_ssize_t pos, Py_ssize_t end, const Context *c, int array, Py_ssize_t *next)
{
    const unsigned char *buf = (const unsigned char *)PyBytes_AS_STRING(data);
    if (pos + 4 > end) {
        return malformed(array ? "an array's length runs past the end of its document"
                               : "an embedded document's length runs past the end of its document");
    }
    int32_t size = load_int32(buf + pos);
    Py_ssize_t value_end = pos + (Py_ssize_t)size - 1;
    if (size < 5 || value_end >= end || buf[value_end] != 0) {
        PyErr_Format(invalid_bson, "bad %s length %d", array ? "array" : "embedded document", (int)size);
        return NULL;
    }
    *next = value_end + 1;
    if (array) {
        return read_elements(data, pos + 4, value_end, c, 1);
    }
    if (c->is_raw) {
        PyObject *slice = PyBytes_FromStringAndSize((const char *)buf + pos, value_end + 1 - pos);
        if (slice == NULL) {
            return NULL;
        }
        PyObject *raw = PyObject_CallFunctionObjArgs(c->document_class, slice, c->options, NULL);
        Py_DECREF(slice);
        return raw;
    }
    PyObject *value = read_elements(data, pos + 4, value_end, c, 0);
    if (value == NULL) {
        return NULL;
    }
    int has_ref = c->is_dict ? PyDict_Contains(value, ref_key) : PySequence_Contains(value, ref_key);
    if (has_ref < 0) {
        Py_DECREF(value);
        return NULL;
    }
    if (has_ref) {
        PyObject *ref = PyObject_CallOneArg(to_dbref, value);
        Py_DECREF(value);
        return ref;
    }
    return value;
}

/* A type the loop does not inline: the Python reader decodes it and says where the next element starts. */
static PyObject *
read_with_python(PyObject *data, unsigned char kind, Py_ssize_t pos, Py_ssize_t end, const Context *c,
                 Py_ssize_t *next)
{
    PyObject *key = PyLong_FromLong(kind);
    if (key == NULL) {
        return NULL;
    }
    PyObject *reader = PyDict_GetItemWithError(readers, key); /* borrowed */
    Py_DECREF(key);
    if (reader == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_Format(invalid_bson, "unknown BSON type 0x%02x", (unsigned int)kind);
        }
        return NULL;
    }
    PyObject *result = PyObject_CallFunction(reader, "OnnO", data, pos, end, c->ctx);
    if (result == NULL) {
        return NULL;
    }
    if (!PyTuple_Check(result) || PyTuple_GET_SIZE(result) != 2) {
        Py_DECREF(result);
        PyErr_SetString(PyExc_TypeError, "a BSON reader must return (value, position)");
        return NULL;
    }
    Py_ssize_t after = PyLong_AsSsize_t(PyTuple_GET_ITEM(result, 1));
    if (after == -1 && PyErr_Occurred()) {
        Py_DECREF(result);
        return NULL;
    }
    if (after < pos) {
        Py_DECREF(result);
        return malformed("a BSON reader moved backwards");
    }
    PyObject *value = PyTuple_GET_ITEM(result, 0);
    Py_INCREF(value);
    Py_DECREF(result);
    *next = after;
    return value;
}

static PyObject *
read_elements(PyObject *data, Py_ssize_t pos, Py_ssize_t end, const Context *c, int array)
{
    const unsigned char *buf = (const unsigned char *)PyBytes_AS_STRING(data);
    PyObject *container;
    if (array) {
        container = PyList_New(0);
    } else if (c->is_dict) {
        container = PyDict_New();
    } else {
        container = PyObject_CallNoArgs(c->document_class);
    }
    if (container == NULL) {
        return NULL;
    }
    if (Py_EnterRecursiveCall(" while decoding nested BSON")) {
        Py_DECREF(container);
        return NULL;
    }
    while (pos < end) {
        unsigned char kind = buf[pos];
        const unsigned char *key_start = buf + pos + 1;
        const unsigned char *key_stop = memchr(key_start, 0, (size_t)(end - pos - 1));
        if (key_stop == NULL) {
            malformed(array ? "an array index is missing its NUL terminator"
                            : "an element name is missing its NUL terminator");
            goto fail;
        }
        PyObject *key = NULL;
        if (!array) {
            key = decode_text(c, key_start, key_stop - key_start);
            if (key == NULL) {
                goto fail;
            }
        }
        pos = (key_stop - buf) + 1;
        PyObject *value = NULL;
        switch (kind) {
        case 0x02: { /* string */
            if (pos + 4 > end) {
                element_error(key, "string %U runs past the end of its container", 0);
                break;
            }
            int32_t size = load_int32(buf + pos);
            pos += 4;
            Py_ssize_t value_end = pos + (Py_ssize_t)size - 1;
            if (size < 1 || value_end >= end || buf[value_end] != 0) {
                element_error(key, "bad string length %U: %d", (int)size);
                break;
            }
            value = decode_text(c, buf + pos, size - 1);
            pos = value_end + 1;
            break;
        }
        case 0x10: /* int32 */
            if (pos + 4 > end) {
                element_error(key, "int32 %U runs past the end of its container", 0);
                break;
            }
            value = PyLong_FromLong((long)load_int32(buf + pos));
            pos += 4;
            break;
        case 0x03: /* embedded document */
        case 0x04: /* array */
            value = read_nested(data, pos, end, c, kind == 0x04, &pos);
            break;
        case 0x01: { /* double */
            if (pos + 8 > end) {
                element_error(key, "double %U runs past the end of its container", 0);
                break;
            }
            uint64_t bits = load_uint64(buf + pos);
            double number;
            memcpy(&number, &bits, sizeof number);
            value = PyFloat_FromDouble(number);
            pos += 8;
            break;
        }
        case 0x08: /* boolean */
            if (pos >= end) {
                element_error(key, "boolean %U runs past the end of its container", 0);
                break;
            }
            if (buf[pos] > 1) {
                element_error(key, "boolean %U is %d, not 0 or 1", (int)buf[pos]);
                break;
            }
            value = PyBool_FromLong(buf[pos]);
            pos += 1;
            break;
        case 0x12: { /* int64 */
            if (pos + 8 > end) {
                element_error(key, "int64 %U runs past the end of its container", 0);
                break;
            }
            PyObject *number = PyLong_FromLongLong((long long)(int64_t)load_uint64(buf + pos));
            if (number != NULL) {
                value = PyObject_CallOneArg(int64_type, number);
                Py_DECREF(number);
            }
            pos += 8;
            break;
        }
        case 0x07: { /* ObjectId */
            if (pos + 12 > end) {
                element_error(key, "ObjectId %U runs past the end of its container", 0);
                break;
            }
            PyObject *raw = PyBytes_FromStringAndSize((const char *)buf + pos, 12);
            if (raw != NULL) {
                value = PyObject_CallOneArg(objectid_factory, raw);
                Py_DECREF(raw);
            }
            pos += 12;
            break;
        }
        case 0x0A: /* null */
            value = Py_NewRef(Py_None);
            break;
        case 0x11: { /* timestamp: increment, then time */
            if (pos + 8 > end) {
                element_error(key, "timestamp %U runs past the end of its container", 0);
                break;
            }
            PyObject *inc = PyLong_FromUnsignedLong(load_uint32(buf + pos));
            PyObject *time = PyLong_FromUnsignedLong(load_uint32(buf + pos + 4));
            if (inc != NULL && time != NULL) {
                value = PyObject_CallFunctionObjArgs(timestamp_factory, time, inc, NULL);
            }
            Py_XDECREF(inc);
            Py_XDECREF(time);
            pos += 8;
            break;
        }
        default:
            value = read_with_python(data, kind, pos, end, c, &pos);
            break;
        }
        if (value == NULL) {
            Py_XDECREF(key);
            goto fail;
        }
        if (c->decoder_map != NULL) {
            PyObject *transform = PyObject_GetItem(c->decoder_map, (PyObject *)Py_TYPE(value));
            if (transform == NULL) {
                if (!PyErr_ExceptionMatches(PyExc_KeyError)) {
                    Py_DECREF(value);
                    Py_XDECREF(key);
                    goto fail;
                }
                PyErr_Clear();
            } else {
                PyObject *transformed = PyObject_CallOneArg(transform, value);
                Py_DECREF(transform);
                Py_DECREF(value);
                if (transformed == NULL) {
                    Py_XDECREF(key);
                    goto fail;
                }
                value = transformed;
            }
        }
        int stored;
        if (array) {
            stored = PyList_Append(container, value);
        } else if (c->is_dict) {
            stored = PyDict_SetItem(container, key, value);
        } else {
            stored = PyObject_SetItem(container, key, value);
        }
        Py_DECREF(value);
        Py_XDECREF(key);
        if (stored < 0) {
            goto fail;
        }
    }
    Py_LeaveRecursiveCall();
    return container;
fail:
    Py_LeaveRecursiveCall();
    Py_DECREF(container);
    return NULL;
}

static PyObject *
entry(PyObject *const *args, Py_ssize_t nargs, int array)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "expected (data, pos, end, ctx)");
        return NULL;
    }
    PyObject *data = args[0];
    if (!PyBytes_CheckExact(data)) {
        PyErr_SetString(PyExc_TypeError, "BSON data must be bytes here");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t end = PyLong_AsSsize_t(args[2]);
    if (end == -1 && PyErr_Occurred()) {
        return NULL;
    }
    /* ``end`` indexes the trailing NUL, so it must lie inside the buffer; ``pos`` may equal it (no elements). */
    if (pos < 0 || end < pos || end >= PyBytes_GET_SIZE(data)) {
        return malformed("element bounds outside the BSON data");
    }
    Context c;
    if (unpack_context(args[3], &c) < 0) {
        return NULL;
    }
    return read_elements(data, pos, end, &c, array);
}

static PyObject *
read_document(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    return entry(args, nargs, 0);
}

static PyObject *
read_array(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    return entry(args, nargs, 1);
}

static PyObject *
configure(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *error, *reader_table, *objectid, *timestamp, *int64, *dbref, *utf8;
    if (!PyArg_ParseTuple(args, "OO!OOOOO", &error, &PyDict_Type, &reader_table, &objectid, &timestamp,
                          &int64, &dbref, &utf8)) {
        return NULL;
    }
    Py_XSETREF(invalid_bson, Py_NewRef(error));
    Py_XSETREF(readers, Py_NewRef(reader_table));
    Py_XSETREF(objectid_factory, Py_NewRef(objectid));
    Py_XSETREF(timestamp_factory, Py_NewRef(timestamp));
    Py_XSETREF(int64_type, Py_NewRef(int64));
    Py_XSETREF(to_dbref, Py_NewRef(dbref));
    Py_XSETREF(strict_utf8, Py_NewRef(utf8));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"read_document", (PyCFunction)(void (*)(void))read_document, METH_FASTCALL,
     "read_document(data, pos, end, ctx): the elements from pos up to end as a document."},
    {"read_array", (PyCFunction)(void (*)(void))read_array, METH_FASTCALL,
     "read_array(data, pos, end, ctx): the elements from pos up to end as a list."},
    {"configure", configure, METH_VARARGS,
     "configure(InvalidBSON, readers, objectid_from_bytes, timestamp, Int64, to_dbref, strict_utf8)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "mongio.bson._speedups", "The compiled element loops of the BSON decoder.", -1,
    methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    ref_key = PyUnicode_InternFromString("$ref");
    if (ref_key == NULL) {
        return NULL;
    }
    return PyModule_Create(&module_def);
}
