/*
 * The compiled round trip of a connection: ReplyWaiter, the framing core of MessageProtocol, and the
 * usual request's encoding and reply's parse.
 *
 * Every round trip runs the protocol's get_buffer and buffer_updated (from the transport's read callback),
 * its wait_message, and the waiter's future protocol (from asyncio's Task). In Python that is some
 * three hundred bytecodes per reply; here it is a few C calls. The Python classes stay as the reference
 * (reply_waiter.ReplyWaiter, protocol._FramingInPython): the same state, the same order of effects, the same
 * errors, and the unit tests run against both.
 *
 * ReplyWaiter: a one-shot future that one task awaits; deliver() resumes that task within the read
 * callback when no task is running (see reply_waiter.py for why).
 *
 * Framing: the base class of MessageProtocol holding the receive buffer and the waiting task's state as
 * attributes the rest of the protocol (Python) reads and writes under the same names. It does only the
 * frequent steps; every rare one (a buffer to replace, a message to hold, a bad length, a message already
 * held, a lost connection) calls the protocol's Python method for it.
 *
 * encode_request: Connection._send's usual message (an uncompressed OP_MSG whose command is a dict carrying
 * its $db, with at most one document sequence of already-encoded documents), encoded by the compiled BSON
 * loop. Anything else, and any limit exceeded, gives None and wire.op_msg.encode_command_parts, the reference,
 * encodes it (or says what is wrong).
 *
 * usual_reply: Connection._parse_reply's usual case (an uncompressed OP_MSG reply of one body section,
 * answering the request sent, decoded into a dict by the compiled BSON loops). Anything else gives None and
 * the Python parser, the reference, decides.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

#define HEADER_SIZE 16
/* protocol.py's _INITIAL_BUFFER_SIZE and _KEEP_BUFFER_UP_TO, passed in by configure(). */
static Py_ssize_t initial_buffer_size = 4 * 1024;
static Py_ssize_t keep_buffer_up_to = 1024 * 1024;

/* Set once by configure(). */
static PyObject *current_task;          /* asyncio.current_task */
static PyObject *invalid_state_error;   /* asyncio.InvalidStateError */
static PyObject *cancelled_error;       /* asyncio.CancelledError */
static PyObject *invalid_operation;     /* mongio.errors.InvalidOperation */

/* Set once by configure_reply(). */
static PyObject *compiled_read_document; /* mongio.bson._speedups.read_document */
static PyObject *decoder_module;         /* mongio.bson._decoder: its _read_document is the loops in use */

/* Set once by configure_request(). */
static PyObject *compiled_write_document; /* mongio.bson._speedups.write_document */
static PyObject *encoder_module;          /* mongio.bson._encoder: its _write_document is the loop in use */
static PyObject *packed_documents_type;   /* mongio.wire.op_msg.PackedDocuments */
static Py_ssize_t command_overhead = 16 * 1024;
static Py_ssize_t large_packed_size = 128 * 1024;

/* Interned names, made at module init. */
static PyObject *str_call_soon, *str_call_at, *str_time, *str_cancel, *str_done, *str_deliver, *str_hold,
    *str_bad_length, *str_replace_buffer, *str_grow_buffer, *str_take_held, *str_lost_exception, *str_time_out,
    *str_already_waiting, *str_read_document, *str_cache, *str_decode, *str_write_document, *str_encode, *str_db,
    *kwnames_context;

enum { PENDING = 0, FINISHED = 1, CANCELLED = 2 };

/* -- ReplyWaiter ----------------------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *loop;
    PyObject *result;
    PyObject *exception;
    PyObject *callback;
    PyObject *context;
    PyObject *cancel_message;
    PyObject *weakreflist;
    int state;
    char blocking; /* _asyncio_future_blocking: read and written by asyncio's Task */
    char yielded;  /* the await has handed this object to the task once */
} Waiter;

static PyTypeObject WaiterType;

/* A new waiter for ``loop``. */
static Waiter *waiter_for(PyObject *loop) {
    Waiter *self = PyObject_GC_New(Waiter, &WaiterType);
    if (self == NULL) {
        return NULL;
    }
    self->loop = Py_NewRef(loop);
    self->result = self->exception = self->callback = self->context = NULL;
    self->cancel_message = self->weakreflist = NULL;
    self->state = PENDING;
    self->blocking = 0;
    self->yielded = 0;
    PyObject_GC_Track(self);
    return self;
}

/* ReplyWaiter(loop), from Python (the type is final: no subclass to allocate for). */
static PyObject *waiter_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *loop;
    static char *names[] = {"loop", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:ReplyWaiter", names, &loop)) {
        return NULL;
    }
    return (PyObject *)waiter_for(loop);
}

static int waiter_traverse(Waiter *self, visitproc visit, void *arg) {
    Py_VISIT(self->loop);
    Py_VISIT(self->result);
    Py_VISIT(self->exception);
    Py_VISIT(self->callback);
    Py_VISIT(self->context);
    Py_VISIT(self->cancel_message);
    return 0;
}

static int waiter_clear(Waiter *self) {
    Py_CLEAR(self->loop);
    Py_CLEAR(self->result);
    Py_CLEAR(self->exception);
    Py_CLEAR(self->callback);
    Py_CLEAR(self->context);
    Py_CLEAR(self->cancel_message);
    return 0;
}

static void waiter_dealloc(Waiter *self) {
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL) {
        PyObject_ClearWeakRefs((PyObject *)self);
    }
    waiter_clear(self);
    PyObject_GC_Del(self);
}

/* Finish with ``result`` or ``exception`` (either may be NULL); InvalidStateError once already done. */
static int waiter_finish(Waiter *self, PyObject *result, PyObject *exception) {
    if (self->state != PENDING) {
        PyErr_SetString(invalid_state_error, "the reply waiter is already done");
        return -1;
    }
    Py_XSETREF(self->result, Py_XNewRef(result));
    Py_XSETREF(self->exception, exception == Py_None ? NULL : Py_XNewRef(exception));
    self->state = FINISHED;
    return 0;
}

/* Wake the waiting task on the loop's next turn: loop.call_soon(callback, self, context=context). */
static int waiter_schedule_callback(Waiter *self) {
    PyObject *callback = self->callback;
    if (callback == NULL) {
        return 0;
    }
    PyObject *context = self->context;
    self->callback = self->context = NULL;
    PyObject *stack[4] = {self->loop, callback, (PyObject *)self, context != NULL ? context : Py_None};
    PyObject *handle = PyObject_VectorcallMethod(str_call_soon, stack, 3, kwnames_context);
    Py_DECREF(callback);
    Py_XDECREF(context);
    if (handle == NULL) {
        return -1;
    }
    Py_DECREF(handle);
    return 0;
}

/* The reply (or the parser's error): resume the task now when no task runs, else on the next turn. */
static int waiter_deliver(Waiter *self, PyObject *result, PyObject *exception) {
    if (waiter_finish(self, result, exception) < 0) {
        return -1;
    }
    if (self->callback == NULL) {
        return 0;
    }
    PyObject *task = PyObject_CallOneArg(current_task, self->loop);
    if (task == NULL) {
        return -1;
    }
    int running = task != Py_None;
    Py_DECREF(task);
    if (running) {
        return waiter_schedule_callback(self);
    }
    PyObject *callback = self->callback;
    PyObject *context = self->context;
    self->callback = self->context = NULL;
    PyObject *outcome;
    if (context == NULL || context == Py_None) {
        outcome = PyObject_CallOneArg(callback, (PyObject *)self);
    } else if (PyContext_Enter(context) < 0) {
        outcome = NULL;
    } else {
        outcome = PyObject_CallOneArg(callback, (PyObject *)self);
        if (PyContext_Exit(context) < 0) {
            Py_CLEAR(outcome);
        }
    }
    Py_DECREF(callback);
    Py_XDECREF(context);
    if (outcome == NULL) {
        return -1;
    }
    Py_DECREF(outcome);
    return 0;
}

/* Raise what result() raises for a waiter that did not finish with a value. */
static void waiter_raise(Waiter *self) {
    if (self->state == FINISHED) {
        PyErr_SetObject((PyObject *)Py_TYPE(self->exception), self->exception);
    } else if (self->state == CANCELLED) {
        PyObject *error = PyObject_CallOneArg(
            cancelled_error, self->cancel_message != NULL ? self->cancel_message : Py_None);
        if (error != NULL) {
            PyErr_SetObject(cancelled_error, error);
            Py_DECREF(error);
        }
    } else {
        PyErr_SetString(invalid_state_error, "the reply has not arrived yet");
    }
}

static PyObject *waiter_result(Waiter *self, PyObject *unused) {
    if (self->state == FINISHED && self->exception == NULL) {
        return Py_NewRef(self->result != NULL ? self->result : Py_None);
    }
    waiter_raise(self);
    return NULL;
}

static PyObject *waiter_exception(Waiter *self, PyObject *unused) {
    if (self->state == FINISHED) {
        return Py_NewRef(self->exception != NULL ? self->exception : Py_None);
    }
    waiter_raise(self);
    return NULL;
}

static PyObject *waiter_get_loop(Waiter *self, PyObject *unused) {
    return Py_NewRef(self->loop);
}

static PyObject *waiter_done(Waiter *self, PyObject *unused) {
    return PyBool_FromLong(self->state != PENDING);
}

static PyObject *waiter_cancelled(Waiter *self, PyObject *unused) {
    return PyBool_FromLong(self->state == CANCELLED);
}

static PyObject *waiter_add_done_callback(Waiter *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *callback = NULL, *context = Py_None;
    Py_ssize_t nkw = kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs != 1) {
        PyErr_Format(PyExc_TypeError, "add_done_callback() takes 1 positional argument (%zd given)", nargs);
        return NULL;
    }
    callback = args[0];
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        if (!PyUnicode_Check(name) || PyUnicode_CompareWithASCIIString(name, "context") != 0) {
            PyErr_Format(PyExc_TypeError, "add_done_callback() got an unexpected keyword argument %R", name);
            return NULL;
        }
        context = args[nargs + i];
    }
    if (self->state != PENDING) {
        PyObject *stack[4] = {self->loop, callback, (PyObject *)self, context};
        PyObject *handle = PyObject_VectorcallMethod(str_call_soon, stack, 3, kwnames_context);
        if (handle == NULL) {
            return NULL;
        }
        Py_DECREF(handle);
        Py_RETURN_NONE;
    }
    if (self->callback != NULL) {
        /* Only the one task that awaits it registers here; a second party would need a real Future. */
        PyErr_SetString(invalid_operation, "a reply waiter has one task waiting on it; wrap it to await it twice");
        return NULL;
    }
    self->callback = Py_NewRef(callback);
    self->context = context == Py_None ? NULL : Py_NewRef(context);
    Py_RETURN_NONE;
}

static PyObject *waiter_remove_done_callback(Waiter *self, PyObject *callback) {
    if (self->callback != NULL) {
        int equal = PyObject_RichCompareBool(self->callback, callback, Py_EQ);
        if (equal < 0) {
            return NULL;
        }
        if (equal) {
            Py_CLEAR(self->callback);
            Py_CLEAR(self->context);
            return PyLong_FromLong(1);
        }
    }
    return PyLong_FromLong(0);
}

static PyObject *waiter_cancel(Waiter *self, PyObject *args, PyObject *kwargs) {
    PyObject *msg = Py_None;
    static char *names[] = {"msg", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:cancel", names, &msg)) {
        return NULL;
    }
    if (self->state != PENDING) {
        Py_RETURN_FALSE;
    }
    self->state = CANCELLED;
    Py_XSETREF(self->cancel_message, Py_NewRef(msg));
    if (waiter_schedule_callback(self) < 0) {
        return NULL;
    }
    Py_RETURN_TRUE;
}

static PyObject *waiter_set_result(Waiter *self, PyObject *result) {
    if (waiter_finish(self, result, NULL) < 0 || waiter_schedule_callback(self) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *waiter_set_exception(Waiter *self, PyObject *exception) {
    if (waiter_finish(self, NULL, exception) < 0 || waiter_schedule_callback(self) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *waiter_deliver_method(Waiter *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 1 || nargs > 2) {
        PyErr_Format(PyExc_TypeError, "deliver() takes 1 or 2 arguments (%zd given)", nargs);
        return NULL;
    }
    if (waiter_deliver(self, args[0], nargs == 2 ? args[1] : NULL) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* The await: hand this object to the task once while pending, then return the result (or raise). */
static PySendResult waiter_am_send(Waiter *self, PyObject *arg, PyObject **presult) {
    if (self->state == PENDING && !self->yielded) {
        self->yielded = 1;
        self->blocking = 1;
        *presult = Py_NewRef(self);
        return PYGEN_NEXT;
    }
    if (self->state == FINISHED && self->exception == NULL) {
        *presult = Py_NewRef(self->result != NULL ? self->result : Py_None);
        return PYGEN_RETURN;
    }
    waiter_raise(self);
    *presult = NULL;
    return PYGEN_ERROR;
}

static PyObject *waiter_iternext(Waiter *self) {
    PyObject *value;
    PySendResult status = waiter_am_send(self, Py_None, &value);
    if (status == PYGEN_NEXT) {
        return value;
    }
    if (status == PYGEN_RETURN) {
        /* StopIteration carries the result (wrapped, so that a tuple or an exception stays one value). */
        PyObject *stop = PyObject_CallOneArg(PyExc_StopIteration, value);
        Py_DECREF(value);
        if (stop != NULL) {
            PyErr_SetObject(PyExc_StopIteration, stop);
            Py_DECREF(stop);
        }
    }
    return NULL;
}

static PyObject *waiter_await(Waiter *self) {
    return Py_NewRef(self);
}

static PyObject *waiter_await_method(Waiter *self, PyObject *unused) {
    return waiter_await(self);
}

static PyMethodDef waiter_methods[] = {
    {"get_loop", (PyCFunction)waiter_get_loop, METH_NOARGS, NULL},
    {"done", (PyCFunction)waiter_done, METH_NOARGS, NULL},
    {"cancelled", (PyCFunction)waiter_cancelled, METH_NOARGS, NULL},
    {"result", (PyCFunction)waiter_result, METH_NOARGS, NULL},
    {"exception", (PyCFunction)waiter_exception, METH_NOARGS, NULL},
    {"add_done_callback", (PyCFunction)(void (*)(void))waiter_add_done_callback, METH_FASTCALL | METH_KEYWORDS,
     NULL},
    {"remove_done_callback", (PyCFunction)waiter_remove_done_callback, METH_O, NULL},
    {"cancel", (PyCFunction)(void (*)(void))waiter_cancel, METH_VARARGS | METH_KEYWORDS, NULL},
    {"set_result", (PyCFunction)waiter_set_result, METH_O,
     "Finish with ``result``; the waiting task resumes on the loop's next turn, as with a Future."},
    {"set_exception", (PyCFunction)waiter_set_exception, METH_O,
     "Fail with ``exception``; the waiting task resumes on the loop's next turn, as with a Future."},
    {"deliver", (PyCFunction)(void (*)(void))waiter_deliver_method, METH_FASTCALL,
     "Finish with the parsed reply (or the parser's error) and resume the waiting task now if no task is\n"
     "running (the transport's read callback), else on the loop's next turn."},
    {"__await__", (PyCFunction)waiter_await_method, METH_NOARGS, NULL},
    {"__class_getitem__", Py_GenericAlias, METH_O | METH_CLASS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef waiter_members[] = {
    {"_asyncio_future_blocking", T_BOOL, offsetof(Waiter, blocking), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyAsyncMethods waiter_async = {
    .am_await = (unaryfunc)waiter_await,
    .am_send = (sendfunc)waiter_am_send,
};

static PyTypeObject WaiterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mongio.connection._speedups.ReplyWaiter",
    .tp_doc = "A one-shot future for one reply; one task awaits it (see mongio.connection.reply_waiter).",
    .tp_basicsize = sizeof(Waiter),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = waiter_new,
    .tp_dealloc = (destructor)waiter_dealloc,
    .tp_traverse = (traverseproc)waiter_traverse,
    .tp_clear = (inquiry)waiter_clear,
    .tp_weaklistoffset = offsetof(Waiter, weakreflist),
    .tp_as_async = &waiter_async,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)waiter_iternext,
    .tp_methods = waiter_methods,
    .tp_members = waiter_members,
};

/* -- Framing: MessageProtocol's base ------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    PyObject *loop;
    PyObject *buffer; /* bytearray */
    PyObject *view;   /* memoryview of buffer */
    PyObject *waiter;
    PyObject *parser;
    PyObject *timer;
    PyObject *lost_reason;
    Py_ssize_t capacity;
    Py_ssize_t start;
    Py_ssize_t end;
    Py_ssize_t needed;
    Py_ssize_t held;
    Py_ssize_t max_message_size;
} Framing;

/* An object attribute not set (NULL) reads as None, as the members below do. */
#define IS_NONE(o) ((o) == NULL || (o) == Py_None)

static PyObject *framing_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    Framing *self = (Framing *)type->tp_alloc(type, 0);
    if (self != NULL) {
        self->needed = HEADER_SIZE;
    }
    return (PyObject *)self;
}

/* A Python subclass's own traverse and dealloc visit and release its (heap) type: this base does not. */
static int framing_traverse(Framing *self, visitproc visit, void *arg) {
    Py_VISIT(self->loop);
    Py_VISIT(self->buffer);
    Py_VISIT(self->view);
    Py_VISIT(self->waiter);
    Py_VISIT(self->parser);
    Py_VISIT(self->timer);
    Py_VISIT(self->lost_reason);
    return 0;
}

static int framing_clear(Framing *self) {
    Py_CLEAR(self->loop);
    Py_CLEAR(self->buffer);
    Py_CLEAR(self->view);
    Py_CLEAR(self->waiter);
    Py_CLEAR(self->parser);
    Py_CLEAR(self->timer);
    Py_CLEAR(self->lost_reason);
    return 0;
}

static void framing_dealloc(Framing *self) {
    PyObject_GC_UnTrack(self);
    framing_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Call the protocol's (Python) method ``name`` with ``nargs`` arguments; returns a new reference or NULL. */
static PyObject *call_method(Framing *self, PyObject *name, PyObject **args, size_t nargs) {
    PyObject *stack[4];
    stack[0] = (PyObject *)self;
    for (size_t i = 0; i < nargs; i++) {
        stack[i + 1] = args[i];
    }
    return PyObject_VectorcallMethod(name, stack, nargs + 1, NULL);
}

/* self._replace_buffer(bytearray(size), start, end) */
static int replace_buffer(Framing *self, Py_ssize_t size, Py_ssize_t start, Py_ssize_t end) {
    PyObject *new_size = PyLong_FromSsize_t(size);
    PyObject *from = PyLong_FromSsize_t(start);
    PyObject *to = PyLong_FromSsize_t(end);
    PyObject *buffer = new_size != NULL ? PyObject_CallOneArg((PyObject *)&PyByteArray_Type, new_size) : NULL;
    PyObject *outcome = NULL;
    if (buffer != NULL && from != NULL && to != NULL) {
        PyObject *args[3] = {buffer, from, to};
        outcome = call_method(self, str_replace_buffer, args, 3);
    }
    Py_XDECREF(new_size);
    Py_XDECREF(from);
    Py_XDECREF(to);
    Py_XDECREF(buffer);
    if (outcome == NULL) {
        return -1;
    }
    Py_DECREF(outcome);
    return 0;
}

/* self._grow_buffer(size): in place when it can be (protocol.py says how). */
static int grow_buffer(Framing *self, Py_ssize_t size) {
    PyObject *new_size = PyLong_FromSsize_t(size);
    if (new_size == NULL) {
        return -1;
    }
    PyObject *args[1] = {new_size};
    PyObject *outcome = call_method(self, str_grow_buffer, args, 1);
    Py_DECREF(new_size);
    if (outcome == NULL) {
        return -1;
    }
    Py_DECREF(outcome);
    return 0;
}

/* The receive buffer, checked: the bytes from ``start`` to ``end`` must lie inside it. */
static char *buffer_bytes(Framing *self) {
    if (self->buffer == NULL || !PyByteArray_CheckExact(self->buffer) || self->view == NULL) {
        PyErr_SetString(PyExc_TypeError, "the protocol's _buffer must be a bytearray with its _view");
        return NULL;
    }
    if (self->start < 0 || self->start > self->end || self->end > PyByteArray_GET_SIZE(self->buffer)) {
        PyErr_Format(PyExc_ValueError, "the protocol's buffer bounds %zd..%zd are outside its %zd bytes",
                     self->start, self->end, PyByteArray_GET_SIZE(self->buffer));
        return NULL;
    }
    return PyByteArray_AS_STRING(self->buffer);
}

static PyObject *framing_get_buffer(Framing *self, PyObject *sizehint) {
    Py_ssize_t start = self->start, end = self->end;
    if (start == end) {
        self->start = self->end = 0;
        if (self->capacity > keep_buffer_up_to && replace_buffer(self, initial_buffer_size, 0, 0) < 0) {
            return NULL;
        }
        if (self->view == NULL) {
            PyErr_SetString(PyExc_TypeError, "the protocol has no receive buffer");
            return NULL;
        }
        return Py_NewRef(self->view);
    }
    Py_ssize_t needed = self->needed, capacity = self->capacity;
    if (start + needed > capacity) {
        /* The message being received does not fit where it starts, and it must end up in one piece to be
           parsed in place: move what arrived of it to the front; once that fills the buffer, double the
           buffer, up to the message's length. The buffer so grows with the bytes that arrived, never ahead
           of them to what the header claims (protocol.py's get_buffer says why). */
        if (start > 0) {
            char *data = buffer_bytes(self);
            if (data == NULL) {
                return NULL;
            }
            memmove(data, data + start, (size_t)(end - start));
            self->start = 0;
            self->end = end - start;
        } else if (end == capacity) {
            if (grow_buffer(self, needed < 2 * capacity ? needed : 2 * capacity) < 0) {
                return NULL;
            }
        }
    } else if (end == capacity) {
        /* Only with a held message: a TLS layer may still hand over what it had decrypted before reading
           paused, and the buffer must have room for it. */
        if (replace_buffer(self, 2 * capacity, start, end) < 0) {
            return NULL;
        }
    }
    return PySequence_GetSlice(self->view, self->end, PY_SSIZE_T_MAX);
}

/* Whether ``waiter`` is done: read directly from a compiled waiter, else by its done() method. */
static int waiter_is_done(PyObject *waiter) {
    if (Py_IS_TYPE(waiter, &WaiterType)) {
        return ((Waiter *)waiter)->state != PENDING;
    }
    PyObject *done = PyObject_CallMethodNoArgs(waiter, str_done);
    if (done == NULL) {
        return -1;
    }
    int answer = PyObject_IsTrue(done);
    Py_DECREF(done);
    return answer;
}

/* Hand the parsed message (or the parser's Exception) to ``waiter``. */
static int deliver_to(PyObject *waiter, PyObject *result, PyObject *exception) {
    if (Py_IS_TYPE(waiter, &WaiterType)) {
        return waiter_deliver((Waiter *)waiter, result, exception);
    }
    PyObject *stack[3] = {waiter, result != NULL ? result : Py_None, exception};
    PyObject *outcome = PyObject_VectorcallMethod(str_deliver, stack, exception != NULL ? 3 : 2, NULL);
    if (outcome == NULL) {
        return -1;
    }
    Py_DECREF(outcome);
    return 0;
}

/* Parse the complete message at ``start`` of ``length`` bytes for the waiter (already taken out of self). */
static int parse_and_deliver(Framing *self, PyObject *waiter, PyObject *parser, Py_ssize_t start, Py_ssize_t length) {
    PyObject *message = PySequence_GetSlice(self->view, start, start + length);
    if (message == NULL) {
        return -1;
    }
    PyObject *result = PyObject_CallOneArg(parser, message);
    Py_DECREF(message);
    if (result != NULL) {
        int status = deliver_to(waiter, result, NULL);
        Py_DECREF(result);
        return status;
    }
    if (!PyErr_ExceptionMatches(PyExc_Exception)) {
        return -1; /* KeyboardInterrupt and its kin go to the loop, as the Python protocol lets them */
    }
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    if (traceback != NULL) {
        PyException_SetTraceback(value, traceback);
    }
    int status = deliver_to(waiter, NULL, value);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
    return status;
}

static PyObject *framing_buffer_updated(Framing *self, PyObject *nbytes_object) {
    Py_ssize_t nbytes = PyLong_AsSsize_t(nbytes_object);
    if (nbytes == -1 && PyErr_Occurred()) {
        return NULL;
    }
    self->end += nbytes;
    /* While a message is held (a TLS layer may still hand over data), the loop finds it again at the
       buffer's start, still without a waiter, and holds it anew. */
    while (IS_NONE(self->lost_reason)) {
        Py_ssize_t start = self->start;
        Py_ssize_t available = self->end - start;
        if (available < HEADER_SIZE) {
            self->needed = HEADER_SIZE;
            Py_RETURN_NONE;
        }
        const unsigned char *header = (const unsigned char *)buffer_bytes(self);
        if (header == NULL) {
            return NULL;
        }
        header += start;
        int32_t length = (int32_t)((uint32_t)header[0] | (uint32_t)header[1] << 8 | (uint32_t)header[2] << 16 |
                                   (uint32_t)header[3] << 24);
        if (length < HEADER_SIZE || length > self->max_message_size) {
            PyObject *size = PyLong_FromLong(length);
            if (size == NULL) {
                return NULL;
            }
            PyObject *outcome = call_method(self, str_bad_length, &size, 1);
            Py_DECREF(size);
            if (outcome == NULL) {
                return NULL;
            }
            Py_DECREF(outcome);
            Py_RETURN_NONE;
        }
        if (available < length) {
            self->needed = length;
            Py_RETURN_NONE;
        }
        PyObject *waiter = self->waiter;
        int done = IS_NONE(waiter) ? 1 : waiter_is_done(waiter);
        if (done < 0) {
            return NULL;
        }
        if (done) {
            PyObject *size = PyLong_FromLong(length);
            if (size == NULL) {
                return NULL;
            }
            PyObject *outcome = call_method(self, str_hold, &size, 1);
            Py_DECREF(size);
            if (outcome == NULL) {
                return NULL;
            }
            Py_DECREF(outcome);
            Py_RETURN_NONE;
        }
        self->start = start + length;
        if (self->start == self->end) {
            self->start = self->end = 0; /* the bytes stay valid until the next get_buffer */
        }
        /* Delivering is the last step: the waiting task may resume inside it and use this protocol again
           (send, wait for the next message, abort), so the state is settled first and the loop reads it
           afresh. */
        waiter = self->waiter;
        PyObject *parser = self->parser;
        self->waiter = Py_NewRef(Py_None);
        self->parser = Py_NewRef(Py_None);
        PyObject *timer = self->timer;
        self->timer = NULL;
        if (!IS_NONE(timer)) {
            PyObject *outcome = PyObject_CallMethodNoArgs(timer, str_cancel);
            if (outcome == NULL) {
                Py_DECREF(timer);
                Py_DECREF(waiter);
                Py_XDECREF(parser);
                return NULL;
            }
            Py_DECREF(outcome);
        }
        Py_XDECREF(timer);
        int status;
        if (IS_NONE(parser)) {
            PyErr_SetString(PyExc_TypeError, "a waiter is set without its parser");
            status = -1;
        } else {
            status = parse_and_deliver(self, waiter, parser, start, length);
        }
        Py_DECREF(waiter);
        Py_XDECREF(parser);
        if (status < 0) {
            return NULL;
        }
    }
    Py_RETURN_NONE;
}

static PyObject *framing_wait_message(Framing *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    Py_ssize_t nkw = kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *parser = NULL, *deadline = Py_None;
    if (nargs >= 1) {
        parser = args[0];
    }
    if (nargs >= 2) {
        deadline = args[1];
    }
    if (nargs > 2) {
        PyErr_Format(PyExc_TypeError, "wait_message() takes at most 2 arguments (%zd given)", nargs);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        if (PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, "parser") == 0 && parser == NULL) {
            parser = args[nargs + i];
        } else if (PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, "deadline") == 0 && nargs < 2) {
            deadline = args[nargs + i];
        } else {
            PyErr_Format(PyExc_TypeError, "wait_message() got an unexpected keyword argument %R", name);
            return NULL;
        }
    }
    if (parser == NULL) {
        PyErr_SetString(PyExc_TypeError, "wait_message() missing its parser");
        return NULL;
    }
    if (!IS_NONE(self->waiter)) {
        int done = waiter_is_done(self->waiter);
        if (done < 0) {
            return NULL;
        }
        if (!done) {
            PyObject *error = call_method(self, str_already_waiting, NULL, 0);
            if (error != NULL) {
                PyErr_SetObject((PyObject *)Py_TYPE(error), error);
                Py_DECREF(error);
            }
            return NULL;
        }
    }
    if (self->loop == NULL) {
        PyErr_SetString(PyExc_TypeError, "the protocol has no loop");
        return NULL;
    }
    Waiter *future = waiter_for(self->loop);
    if (future == NULL) {
        return NULL;
    }
    if (self->held) {
        PyObject *call_args[2] = {(PyObject *)future, parser};
        PyObject *outcome = call_method(self, str_take_held, call_args, 2);
        if (outcome == NULL) {
            Py_DECREF(future);
            return NULL;
        }
        Py_DECREF(outcome);
        return (PyObject *)future;
    }
    if (!IS_NONE(self->lost_reason)) {
        PyObject *error = call_method(self, str_lost_exception, NULL, 0);
        if (error == NULL || waiter_finish(future, NULL, error) < 0) {
            Py_XDECREF(error);
            Py_DECREF(future);
            return NULL;
        }
        Py_DECREF(error);
        return (PyObject *)future;
    }
    Py_XSETREF(self->waiter, Py_NewRef((PyObject *)future));
    Py_XSETREF(self->parser, Py_NewRef(parser));
    if (deadline != Py_None) {
        /* self._timer = self.loop.call_at(deadline, self._time_out, future, deadline - self.loop.time()) */
        PyObject *now = PyObject_CallMethodNoArgs(self->loop, str_time);
        PyObject *timeout = now != NULL ? PyNumber_Subtract(deadline, now) : NULL;
        PyObject *time_out = timeout != NULL ? PyObject_GetAttr((PyObject *)self, str_time_out) : NULL;
        PyObject *timer = NULL;
        if (time_out != NULL) {
            PyObject *stack[5] = {self->loop, deadline, time_out, (PyObject *)future, timeout};
            timer = PyObject_VectorcallMethod(str_call_at, stack, 5, NULL);
        }
        Py_XDECREF(now);
        Py_XDECREF(timeout);
        Py_XDECREF(time_out);
        if (timer == NULL) {
            Py_DECREF(future);
            return NULL;
        }
        Py_XSETREF(self->timer, timer);
    }
    return (PyObject *)future;
}

static PyMethodDef framing_methods[] = {
    {"get_buffer", (PyCFunction)framing_get_buffer, METH_O, NULL},
    {"buffer_updated", (PyCFunction)framing_buffer_updated, METH_O, NULL},
    {"wait_message", (PyCFunction)(void (*)(void))framing_wait_message, METH_FASTCALL | METH_KEYWORDS,
     "An awaitable for the next complete message, parsed by ``parser`` while the bytes are still in the\n"
     "buffer; ``deadline`` (in ``loop.time()`` terms) fails it with NetworkTimeout when it passes."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef framing_members[] = {
    {"loop", T_OBJECT, offsetof(Framing, loop), 0, NULL},
    {"_buffer", T_OBJECT, offsetof(Framing, buffer), 0, NULL},
    {"_view", T_OBJECT, offsetof(Framing, view), 0, NULL},
    {"_waiter", T_OBJECT, offsetof(Framing, waiter), 0, NULL},
    {"_parser", T_OBJECT, offsetof(Framing, parser), 0, NULL},
    {"_timer", T_OBJECT, offsetof(Framing, timer), 0, NULL},
    {"_lost_reason", T_OBJECT, offsetof(Framing, lost_reason), 0, NULL},
    {"_capacity", T_PYSSIZET, offsetof(Framing, capacity), 0, NULL},
    {"_start", T_PYSSIZET, offsetof(Framing, start), 0, NULL},
    {"_end", T_PYSSIZET, offsetof(Framing, end), 0, NULL},
    {"_needed", T_PYSSIZET, offsetof(Framing, needed), 0, NULL},
    {"_held", T_PYSSIZET, offsetof(Framing, held), 0, NULL},
    {"max_message_size", T_PYSSIZET, offsetof(Framing, max_message_size), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject FramingType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mongio.connection._speedups.Framing",
    .tp_doc = "The compiled framing core of MessageProtocol (see mongio.connection.protocol).",
    .tp_basicsize = sizeof(Framing),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = framing_new,
    .tp_dealloc = (destructor)framing_dealloc,
    .tp_traverse = (traverseproc)framing_traverse,
    .tp_clear = (inquiry)framing_clear,
    .tp_methods = framing_methods,
    .tp_members = framing_members,
};

/* -- usual_reply: the usual reply's parse ------------------------------------------------------------------ */

#define OP_MSG 2013
#define BODY_OFFSET 21 /* the header, flagBits, the section's kind byte */
#define REQUIRED_BITS_MASK 0xFFFFu

static int32_t read_int32(const unsigned char *p) {
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

/* The decoding context of ``codec_options`` when the compiled loops may decode into a plain dict with it
   (borrowed), else NULL without an error. */
static PyObject *dict_decoding_context(PyObject *codec_options) {
    PyObject *current = PyObject_GetAttr(decoder_module, str_read_document);
    if (current == NULL) {
        return NULL;
    }
    int compiled = current == compiled_read_document;
    Py_DECREF(current);
    if (!compiled) {
        return NULL; /* the Python loops are in use (use_speedups(False)) */
    }
    PyObject *cache = PyObject_GetAttr(codec_options, str_cache);
    if (cache == NULL) {
        return NULL;
    }
    PyObject *ctx = PyDict_Check(cache) ? PyDict_GetItemWithError(cache, str_decode) : NULL;
    Py_DECREF(cache);
    /* (..., document_class, document_class is dict, is_raw, ...): see _decoder._context */
    if (ctx == NULL || !PyTuple_Check(ctx) || PyTuple_GET_SIZE(ctx) < 4 || PyTuple_GET_ITEM(ctx, 2) != Py_True ||
        PyTuple_GET_ITEM(ctx, 3) != Py_False) {
        return NULL;
    }
    return ctx;
}

static PyObject *usual_reply(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "usual_reply() takes 4 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *message = args[0];
    long expected = PyLong_AsLong(args[1]);
    long request = PyLong_AsLong(args[2]);
    if ((expected == -1 || request == -1) && PyErr_Occurred()) {
        return NULL;
    }
    if (compiled_read_document == NULL) {
        Py_RETURN_NONE;
    }
    PyObject *ctx = dict_decoding_context(args[3]);
    if (ctx == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    Py_INCREF(ctx);
    Py_buffer view;
    if (PyObject_GetBuffer(message, &view, PyBUF_SIMPLE) < 0) {
        Py_DECREF(ctx);
        return NULL;
    }
    const unsigned char *p = view.buf;
    Py_ssize_t size = view.len;
    int usual = size >= BODY_OFFSET + 5 && read_int32(p + 12) == OP_MSG &&
                ((uint32_t)read_int32(p + 16) & REQUIRED_BITS_MASK) == 0 && p[20] == 0 &&
                read_int32(p + BODY_OFFSET) == size - BODY_OFFSET && p[size - 1] == 0;
    if (usual) {
        long response_to = read_int32(p + 8);
        usual = response_to == expected || response_to == request;
    }
    PyBuffer_Release(&view);
    if (!usual) {
        Py_DECREF(ctx);
        Py_RETURN_NONE;
    }
    PyObject *body = PySequence_GetSlice(message, BODY_OFFSET, size);
    PyObject *start = PyLong_FromLong(4);
    PyObject *end = PyLong_FromSsize_t(size - BODY_OFFSET - 1);
    PyObject *reply = NULL;
    if (body != NULL && start != NULL && end != NULL) {
        PyObject *call_args[4] = {body, start, end, ctx};
        reply = PyObject_Vectorcall(compiled_read_document, call_args, 4, NULL);
    }
    Py_XDECREF(body);
    Py_XDECREF(start);
    Py_XDECREF(end);
    Py_DECREF(ctx);
    return reply;
}

/* -- encode_request: the usual request's encoding ----------------------------------------------------------- */

static void write_int32(char *p, uint32_t value) {
    p[0] = (char)(value & 0xFF);
    p[1] = (char)((value >> 8) & 0xFF);
    p[2] = (char)((value >> 16) & 0xFF);
    p[3] = (char)((value >> 24) & 0xFF);
}

/* The encoding context of ``codec_options`` when the compiled loop is the one in use (borrowed), else NULL
   without an error. */
static PyObject *encoding_context(PyObject *codec_options) {
    PyObject *current = PyObject_GetAttr(encoder_module, str_write_document);
    if (current == NULL) {
        return NULL;
    }
    int compiled = current == compiled_write_document;
    Py_DECREF(current);
    if (!compiled) {
        return NULL;
    }
    PyObject *cache = PyObject_GetAttr(codec_options, str_cache);
    if (cache == NULL) {
        return NULL;
    }
    PyObject *ctx = PyDict_Check(cache) ? PyDict_GetItemWithError(cache, str_encode) : NULL;
    Py_DECREF(cache);
    return ctx;
}

/* Append the one document sequence of ``sequences`` (a dict) to ``out``: 1 when done, 0 when it is not the
   usual shape or breaks a limit (nothing appended that matters: the caller drops ``out``), -1 on error. */
static int append_sequence(PyObject *out, PyObject *sequences, Py_ssize_t max_bson_size) {
    Py_ssize_t position = 0;
    PyObject *identifier, *documents;
    if (!PyDict_CheckExact(sequences) || PyDict_GET_SIZE(sequences) != 1 ||
        !PyDict_Next(sequences, &position, &identifier, &documents) || !PyUnicode_Check(identifier) ||
        !PyList_Check(documents)) {
        return 0;
    }
    Py_ssize_t name_size;
    const char *name = PyUnicode_AsUTF8AndSize(identifier, &name_size);
    if (name == NULL) {
        PyErr_Clear(); /* not encodable: the reference says so */
        return 0;
    }
    if ((Py_ssize_t)strlen(name) != name_size) {
        return 0; /* a NUL in the identifier */
    }
    Py_ssize_t section_start = PyByteArray_GET_SIZE(out);
    Py_ssize_t size = section_start + 1 + 4 + name_size + 1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(documents); i++) {
        PyObject *document = PyList_GET_ITEM(documents, i);
        PyObject *data = document;
        if (Py_IS_TYPE(document, (PyTypeObject *)packed_documents_type) && PyTuple_GET_SIZE(document) == 1) {
            data = PyTuple_GET_ITEM(document, 0);
            if (!PyBytes_CheckExact(data) && !PyByteArray_CheckExact(data)) {
                return 0;
            }
            if (Py_SIZE(data) >= large_packed_size) {
                return 0; /* a part of its own: the reference does that */
            }
        } else if (!PyBytes_CheckExact(data) && !PyByteArray_CheckExact(data)) {
            return 0; /* a mapping to encode */
        } else if (Py_SIZE(data) > max_bson_size) {
            return 0;
        }
        size += Py_SIZE(data);
    }
    if (PyByteArray_Resize(out, size) < 0) {
        return -1;
    }
    char *p = PyByteArray_AS_STRING(out) + section_start;
    *p++ = 1;
    write_int32(p, (uint32_t)(size - section_start - 1));
    p += 4;
    memcpy(p, name, (size_t)name_size + 1);
    p += name_size + 1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(documents); i++) {
        PyObject *data = PyList_GET_ITEM(documents, i);
        if (!PyBytes_CheckExact(data) && !PyByteArray_CheckExact(data)) {
            data = PyTuple_GET_ITEM(data, 0);
        }
        Py_ssize_t length = Py_SIZE(data);
        memcpy(p, PyBytes_CheckExact(data) ? PyBytes_AS_STRING(data) : PyByteArray_AS_STRING(data), (size_t)length);
        p += length;
    }
    return 1;
}

static PyObject *encode_request(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7) {
        PyErr_Format(PyExc_TypeError, "encode_request() takes 7 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *command = args[1], *sequences = args[2], *codec_options = args[4];
    long request_id = PyLong_AsLong(args[0]);
    long flags = PyLong_AsLong(args[3]);
    Py_ssize_t max_bson_size = PyLong_AsSsize_t(args[5]);
    Py_ssize_t max_message_size = PyLong_AsSsize_t(args[6]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (compiled_write_document == NULL || !PyDict_CheckExact(command)) {
        Py_RETURN_NONE;
    }
    int has_db = PyDict_Contains(command, str_db);
    if (has_db <= 0) {
        if (has_db < 0) {
            return NULL;
        }
        Py_RETURN_NONE; /* the reference splices $db in */
    }
    PyObject *ctx = encoding_context(codec_options);
    if (ctx == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    Py_INCREF(ctx);
    PyObject *out = PyByteArray_FromStringAndSize(NULL, BODY_OFFSET);
    if (out == NULL) {
        Py_DECREF(ctx);
        return NULL;
    }
    char *head = PyByteArray_AS_STRING(out);
    memset(head, 0, BODY_OFFSET);
    write_int32(head + 16, (uint32_t)flags);
    PyObject *call_args[4] = {out, command, ctx, Py_False};
    PyObject *written = PyObject_Vectorcall(compiled_write_document, call_args, 4, NULL);
    Py_DECREF(ctx);
    if (written == NULL) {
        Py_DECREF(out);
        return NULL; /* the refusal, which the caller reports as the reference does */
    }
    Py_DECREF(written);
    int usual = PyByteArray_GET_SIZE(out) - BODY_OFFSET <= max_bson_size + command_overhead;
    if (usual && sequences != Py_None && !(PyDict_Check(sequences) && PyDict_GET_SIZE(sequences) == 0)) {
        usual = append_sequence(out, sequences, max_bson_size);
        if (usual < 0) {
            Py_DECREF(out);
            return NULL;
        }
    }
    Py_ssize_t length = PyByteArray_GET_SIZE(out);
    if (!usual || length > max_message_size || length > INT32_MAX) {
        Py_DECREF(out);
        Py_RETURN_NONE;
    }
    head = PyByteArray_AS_STRING(out);
    write_int32(head, (uint32_t)length);
    write_int32(head + 4, (uint32_t)request_id);
    write_int32(head + 8, 0);
    write_int32(head + 12, OP_MSG);
    PyObject *parts = PyList_New(1);
    if (parts == NULL) {
        Py_DECREF(out);
        return NULL;
    }
    PyList_SET_ITEM(parts, 0, out);
    return parts;
}

/* -- the module ------------------------------------------------------------------------------------------- */

static PyObject *configure(PyObject *module, PyObject *args) {
    PyObject *task_function, *state_error, *cancelled, *operation_error;
    Py_ssize_t initial, keep;
    if (!PyArg_ParseTuple(args, "OOOOnn:configure", &task_function, &state_error, &cancelled, &operation_error,
                          &initial, &keep)) {
        return NULL;
    }
    Py_XSETREF(current_task, Py_NewRef(task_function));
    Py_XSETREF(invalid_state_error, Py_NewRef(state_error));
    Py_XSETREF(cancelled_error, Py_NewRef(cancelled));
    Py_XSETREF(invalid_operation, Py_NewRef(operation_error));
    initial_buffer_size = initial;
    keep_buffer_up_to = keep;
    Py_RETURN_NONE;
}

static PyObject *configure_reply(PyObject *module, PyObject *args) {
    PyObject *read_document, *decoder;
    if (!PyArg_ParseTuple(args, "OO:configure_reply", &read_document, &decoder)) {
        return NULL;
    }
    Py_XSETREF(compiled_read_document, Py_NewRef(read_document));
    Py_XSETREF(decoder_module, Py_NewRef(decoder));
    Py_RETURN_NONE;
}

static PyObject *configure_request(PyObject *module, PyObject *args) {
    PyObject *write_document, *encoder, *packed;
    Py_ssize_t overhead, large;
    if (!PyArg_ParseTuple(args, "OOOnn:configure_request", &write_document, &encoder, &packed, &overhead, &large)) {
        return NULL;
    }
    if (!PyType_Check(packed)) {
        PyErr_SetString(PyExc_TypeError, "configure_request() needs the PackedDocuments class");
        return NULL;
    }
    Py_XSETREF(compiled_write_document, Py_NewRef(write_document));
    Py_XSETREF(encoder_module, Py_NewRef(encoder));
    Py_XSETREF(packed_documents_type, Py_NewRef(packed));
    command_overhead = overhead;
    large_packed_size = large;
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(current_task, InvalidStateError, CancelledError, InvalidOperation, initial_buffer_size, "
     "keep_buffer_up_to): what the module needs from Python, once, before its classes are used."},
    {"configure_reply", configure_reply, METH_VARARGS,
     "configure_reply(read_document, decoder_module): the compiled BSON loop usual_reply decodes with, and\n"
     "the module whose _read_document says whether the compiled loops are in use."},
    {"configure_request", configure_request, METH_VARARGS,
     "configure_request(write_document, encoder_module, PackedDocuments, command_overhead, large_packed_size):\n"
     "what encode_request encodes with and the limits it keeps."},
    {"encode_request", (PyCFunction)(void (*)(void))encode_request, METH_FASTCALL,
     "encode_request(request_id, command, document_sequences, flags, codec_options, max_bson_size,\n"
     "max_message_size): the usual OP_MSG as a one-part list, or None for anything else (the reference\n"
     "encode_command_parts encodes it). A refusal of the BSON loop propagates as the loop raises it."},
    {"usual_reply", (PyCFunction)(void (*)(void))usual_reply, METH_FASTCALL,
     "usual_reply(message, expected_response_to, request_id, codec_options): the usual reply decoded (an\n"
     "uncompressed OP_MSG of one body section answering the request, into a dict by the compiled loops), or\n"
     "None for anything else. A decoding error propagates as the loops raise it."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_definition = {
    PyModuleDef_HEAD_INIT, "mongio.connection._speedups",
    "The compiled round trip of a connection (see _speedups.c).", -1, module_methods,
};

static int intern_names(void) {
#define INTERN(var, text)                                  \
    if ((var = PyUnicode_InternFromString(text)) == NULL) { \
        return -1;                                         \
    }
    INTERN(str_call_soon, "call_soon");
    INTERN(str_call_at, "call_at");
    INTERN(str_time, "time");
    INTERN(str_cancel, "cancel");
    INTERN(str_done, "done");
    INTERN(str_deliver, "deliver");
    INTERN(str_hold, "_hold");
    INTERN(str_bad_length, "_bad_length");
    INTERN(str_replace_buffer, "_replace_buffer");
    INTERN(str_grow_buffer, "_grow_buffer");
    INTERN(str_take_held, "_take_held");
    INTERN(str_lost_exception, "lost_exception");
    INTERN(str_time_out, "_time_out");
    INTERN(str_already_waiting, "_already_waiting");
    INTERN(str_read_document, "_read_document");
    INTERN(str_cache, "_cache");
    INTERN(str_decode, "decode");
    INTERN(str_write_document, "_write_document");
    INTERN(str_encode, "encode");
    INTERN(str_db, "$db");
#undef INTERN
    PyObject *context = PyUnicode_InternFromString("context");
    if (context == NULL) {
        return -1;
    }
    kwnames_context = PyTuple_Pack(1, context);
    Py_DECREF(context);
    return kwnames_context == NULL ? -1 : 0;
}

PyMODINIT_FUNC PyInit__speedups(void) {
    if (intern_names() < 0 || PyType_Ready(&WaiterType) < 0 || PyType_Ready(&FramingType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&module_definition);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(module, "ReplyWaiter", (PyObject *)&WaiterType) < 0 ||
        PyModule_AddObjectRef(module, "Framing", (PyObject *)&FramingType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
