/*
 * The compiled element loops of the BSON decoder and encoder.
 *
 * read_document(data, pos, end, ctx) and read_array(data, pos, end, ctx) take the place of the two
 * pure-Python loops in _decoder.py and keep their contract exactly: the same arguments (``data`` is a
 * bytes object, ``pos`` the first element, ``end`` the index of the enclosing document's trailing NUL,
 * ``ctx`` the decoding context tuple), the same results, and InvalidBSON (or the low-level error the
 * Python loop would let through, such as UnicodeDecodeError or RecursionError) for the same inputs.
 *
 * Every element type is decoded here, under every codec option the decoding context carries (datetime
 * conversion and time zone, UUID representation, document class, raw documents, the Unicode error
 * handler, the type registry's decoders, the PyMongo-typed mode's factories); only an unknown type goes to
 * _decoder._READERS, for its refusal. Every length is checked against ``end`` before a byte is read, so
 * malformed input can never read outside the document being decoded.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <datetime.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* Set once by configure(): the Python objects the loops hand work to. */
static PyObject *invalid_bson;     /* mongio.bson.errors.InvalidBSON */
static PyObject *readers;          /* dict: element type -> Python reader */
static PyObject *objectid_factory; /* ObjectId._from_bytes */
static PyObject *timestamp_factory;/* Timestamp._from_decoded(time, inc) */
static PyObject *int64_type;       /* Int64 */
static PyObject *to_dbref;         /* _decoder._to_dbref */
static PyObject *strict_utf8;      /* bytes.decode: the context's UTF-8 function when errors are strict */
static PyObject *ref_key;          /* "$ref" */
static PyObject *dbref_type;       /* DBRef: DBRef-shaped dicts become one here (else to_dbref is called) */
static PyObject *raw_document_type; /* RawBSONDocument */
static PyObject *s_raw_bytes, *s_raw_options, *s_raw_index, *s_raw_values;
/* The Python writers _encoder._marked_writer chooses for other libraries' values, by the BSON type they are. */
enum { M_BINARY, M_DATETIME, M_REGEX, M_CODE, M_TIMESTAMP, M_DECIMAL, M_RAW, M_MIN, M_MAX, M_UNDEFINED, M_COUNT };
static PyObject *marked_writers[M_COUNT];
static PyObject *write_value_no_custom; /* _encoder._write_value_no_custom: a custom encoder's result */

typedef struct {
    PyObject *ctx;
    PyObject *options;
    PyObject *document_class;
    PyObject *utf8;
    PyObject *decoder_map; /* NULL when the context has none */
    /* What the hot types are made with: the module's (mongio's classes) unless the context names others. */
    PyObject *objectid_factory;
    PyObject *timestamp_factory;
    PyObject *int64_type;
    int is_dict;
    int is_raw;
    int strict;
    /* The bytes being read: those of ``data`` (bytes, or a buffer held for the call). */
    const unsigned char *buf;
    Py_ssize_t size;
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
 * the element is ("for key 'k'" or "in an array") and at most one int conversion (%d, %x) after it. */
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
    } else if (!PyDict_CheckExact(c->decoder_map)) {
        PyErr_SetString(PyExc_TypeError, "the decoding context's decoder map must be a dict");
        return -1;
    }
    c->objectid_factory = objectid_factory;
    c->timestamp_factory = timestamp_factory;
    c->int64_type = int64_type;
    PyObject *factories = PyTuple_GET_SIZE(ctx) > 11 ? PyTuple_GET_ITEM(ctx, 11) : Py_None;
    if (factories != Py_None) {
        if (!PyTuple_Check(factories) || PyTuple_GET_SIZE(factories) != 3) {
            PyErr_SetString(PyExc_TypeError, "the decoding context's factories must be (objectid, timestamp, int64)");
            return -1;
        }
        c->objectid_factory = PyTuple_GET_ITEM(factories, 0);
        c->timestamp_factory = PyTuple_GET_ITEM(factories, 1);
        c->int64_type = PyTuple_GET_ITEM(factories, 2);
    }
    return 0;
}

/* Eight bytes in machine order, for scanning and hashing a word at a time (memcpy: no alignment needed). */
static inline uint64_t
load_word(const unsigned char *p)
{
    uint64_t word;
    memcpy(&word, p, sizeof word);
    return word;
}

#define HIGH_BITS 0x8080808080808080u

/* Whether the ``size`` bytes at ``start`` are all ASCII, a word at a time. */
static inline int
is_ascii(const unsigned char *start, Py_ssize_t size)
{
    Py_ssize_t i = 0;
    for (; i + 8 <= size; i += 8) {
        if (load_word(start + i) & HIGH_BITS) {
            return 0;
        }
    }
    unsigned char high = 0;
    for (; i < size; i++) {
        high |= start[i];
    }
    return (high & 0x80) == 0;
}

/* A str of ``size`` (> 1) bytes known to be ASCII: made with one copy, skipping the general decoder's
 * layers. */
static PyObject *
ascii_text(const unsigned char *start, Py_ssize_t size)
{
    PyObject *text = PyUnicode_New(size, 127);
    if (text != NULL) {
        memcpy(PyUnicode_1BYTE_DATA(text), start, (size_t)size);
    }
    return text;
}

static PyObject *
decode_text(const Context *c, const unsigned char *start, Py_ssize_t size)
{
    if (c->strict) {
        /* Most strings are ASCII. Empty and one-character strings go to the general decoder for the
         * interpreter's shared instances. */
        return size > 1 && is_ascii(start, size) ? ascii_text(start, size)
                                                 : PyUnicode_DecodeUTF8((const char *)start, size, NULL);
    }
    PyObject *raw = PyBytes_FromStringAndSize((const char *)start, size);
    if (raw == NULL) {
        return NULL;
    }
    PyObject *text = PyObject_CallOneArg(c->utf8, raw);
    Py_DECREF(raw);
    return text;
}

/* Element names repeat from document to document: the ASCII ones up to KEY_CACHE_LONGEST bytes are kept in a
 * small table, so a repeated name costs a hash and a comparison instead of a new str (whose hash the
 * document's dict would compute again). Entries are replaced, never grown: the table holds at most
 * 1 << KEY_CACHE_BITS names (large enough that the names of a wide document rarely evict each other). The
 * slot comes from a multiplicative hash of the name's words, whose high bits are the best mixed. */
#define KEY_CACHE_BITS 12
#define KEY_CACHE_LONGEST 40
#define KEY_HASH_FACTOR 0x9E3779B97F4A7C15u
static PyObject *key_cache[1 << KEY_CACHE_BITS];

static PyObject *
decode_key(const Context *c, const unsigned char *start, Py_ssize_t size)
{
    if (!c->strict || size > KEY_CACHE_LONGEST) {
        return decode_text(c, start, size);
    }
    uint64_t hash = (uint64_t)size;
    uint64_t high = 0;
    Py_ssize_t i = 0;
    for (; i + 8 <= size; i += 8) {
        uint64_t word = load_word(start + i);
        high |= word;
        hash = (hash ^ word) * KEY_HASH_FACTOR;
    }
    /* The last 0-7 bytes: one word masked to them where the buffer goes on that far (it nearly always does:
     * a value follows the name), else read one by one. */
    uint64_t tail = 0;
    int rest = (int)(size - i);
    if (rest > 0 && (start + i - c->buf) + 8 <= c->size) {
#if PY_BIG_ENDIAN
        tail = load_word(start + i) & (~(uint64_t)0 << (64 - 8 * rest));
#else
        tail = load_word(start + i) & (~(uint64_t)0 >> (64 - 8 * rest));
#endif
    } else {
        for (int shift = 0; i < size; i++, shift += 8) {
            tail |= (uint64_t)start[i] << shift;
        }
    }
    high |= tail;
    if (high & HIGH_BITS) {
        return decode_text(c, start, size);
    }
    hash = (hash ^ tail) * KEY_HASH_FACTOR;
    PyObject **slot = &key_cache[hash >> (64 - KEY_CACHE_BITS)];
    PyObject *cached = *slot;
    if (cached != NULL && PyUnicode_GET_LENGTH(cached) == size &&
        memcmp(PyUnicode_1BYTE_DATA(cached), start, (size_t)size) == 0) {
        return Py_NewRef(cached);
    }
    /* Known to be ASCII by now. */
    PyObject *text = size > 1 ? ascii_text(start, size) : PyUnicode_DecodeUTF8((const char *)start, size, NULL);
    if (text == NULL) {
        return NULL;
    }
    if (PyObject_Hash(text) == -1) {
        Py_DECREF(text);
        return NULL;
    }
    Py_XSETREF(*slot, Py_NewRef(text));
    return text;
}

/* Nesting deeper than max_nesting is refused whatever the recursion limit, so a hostile document cannot exhaust
 * the C stack. Both come from mongio.bson._limits when the module is loaded (MAX_NESTING and NESTED_TOO_DEEPLY),
 * the one definition the Python loops use too: the two decoders refuse the same documents with the same error. */
static int max_nesting;
static PyObject *nested_too_deeply; /* the InvalidBSON message for a document nested deeper */

static PyObject *read_elements(PyObject *data, Py_ssize_t pos, Py_ssize_t end, const Context *c, int array,
                               int depth);

static PyObject *shape_dbref(PyObject *doc);
static PyObject *make_raw(const Context *c, const unsigned char *start, Py_ssize_t size);

/* The embedded document or array whose length field is at ``pos``; ``*next`` gets the position after it. */
static PyObject *
read_nested(PyObject *data, Py_ssize_t pos, Py_ssize_t end, const Context *c, int array, Py_ssize_t *next,
            int depth)
{
    const unsigned char *buf = c->buf;
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
        return read_elements(data, pos + 4, value_end, c, 1, depth + 1);
    }
    if (c->is_raw) {
        return make_raw(c, buf + pos, value_end + 1 - pos);
    }
    PyObject *value = read_elements(data, pos + 4, value_end, c, 0, depth + 1);
    if (value == NULL) {
        return NULL;
    }
    int has_ref = c->is_dict ? PyDict_Contains(value, ref_key) : PySequence_Contains(value, ref_key);
    if (has_ref < 0) {
        Py_DECREF(value);
        return NULL;
    }
    if (has_ref) {
        PyObject *ref = c->is_dict && dbref_type != NULL ? shape_dbref(value) : PyObject_CallOneArg(to_dbref, value);
        Py_DECREF(value);
        return ref;
    }
    return value;
}

/* A type the loop does not inline: the Python reader decodes it and says where the next element starts. */
static PyObject *
read_with_python(PyObject *data, unsigned char kind, Py_ssize_t pos, Py_ssize_t end, const Context *c,
                 PyObject *name, Py_ssize_t *next)
{
    PyObject *key = PyLong_FromLong(kind);
    if (key == NULL) {
        return NULL;
    }
    PyObject *reader = PyDict_GetItemWithError(readers, key); /* borrowed */
    Py_DECREF(key);
    if (reader == NULL) {
        if (!PyErr_Occurred()) {
            element_error(name, "unknown BSON type %U: 0x%02x", (int)kind);
        }
        return NULL;
    }
    /* The Python readers take bytes: a buffer read in place is copied for them (only for the rare types
     * they alone read). */
    PyObject *source = PyBytes_CheckExact(data) ? Py_NewRef(data)
                                                : PyBytes_FromStringAndSize((const char *)c->buf, c->size);
    if (source == NULL) {
        return NULL;
    }
    PyObject *result = PyObject_CallFunction(reader, "OnnO", source, pos, end, c->ctx);
    Py_DECREF(source);
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

/* ---------------------------------------------------------------------------------------------------------
 * The less common element types, decoded here as the Python readers of _decoder._READERS decode them: the
 * same values, of the same classes, built the way those classes build themselves (object.__new__ and their
 * slots, str.__new__ or bytes.__new__ for the str and bytes subclasses), and the same inputs refused.
 * ------------------------------------------------------------------------------------------------------- */

/* Set once by configure_types(). */
static PyObject *empty_tuple;
static PyObject *binary_type;          /* Binary */
static PyObject *uuid_type;            /* uuid.UUID */
static PyObject *uuid_unknown_safety;  /* uuid.SafeUUID.unknown */
static PyObject *regex_type;           /* Regex */
static PyObject *code_type;            /* Code */
static PyObject *symbol_type;          /* Symbol */
static PyObject *dbpointer_type;       /* DBPointer */
static PyObject *decimal128_type;      /* Decimal128 */
static PyObject *datetime_ms_type;     /* DatetimeMS */
static PyObject *objectid_type;        /* ObjectId */
static PyObject *timestamp_type;       /* Timestamp */
static PyObject *min_key;              /* the MinKey, MaxKey and Undefined values */
static PyObject *max_key;
static PyObject *undefined_value;
static PyObject *millis_to_datetime;   /* datetime_ms.millis_to_datetime: the out-of-range cases */
static int decoder_types_ready;        /* every one of the above is set */
/* Slot and attribute names. */
static PyObject *s_binary_subtype, *s_uuid_int, *s_uuid_is_safe, *s_regex_pattern, *s_regex_flags;
static PyObject *s_code_scope, *s_pointer_namespace, *s_pointer_id, *s_decimal_bid, *s_datetime_ms_value;
static PyObject *s_objectid_id, *s_timestamp_time, *s_timestamp_inc, *s_astimezone;
static PyObject *s_dbref_collection, *s_dbref_id, *s_dbref_database, *s_dbref_kwargs, *id_key, *db_key, *s_underscore_id;

#define MIN_DATETIME_MS (-62135596800000LL) /* datetime.min */
#define MAX_DATETIME_MS (253402300799999LL) /* the last millisecond of datetime.max */
#define CONVERSION_DATETIME 1
#define CONVERSION_CLAMP 2
#define CONVERSION_MS 3
#define CONVERSION_AUTO 4

/* object.__new__(type) with each slot set to its value, as the classes' own fast constructors do. */
static PyObject *
new_with_slots(PyObject *type, PyObject **names, PyObject **values, int count)
{
    PyObject *self = PyBaseObject_Type.tp_new((PyTypeObject *)type, empty_tuple, NULL);
    if (self == NULL) {
        return NULL;
    }
    for (int i = 0; i < count; i++) {
        if (PyObject_GenericSetAttr(self, names[i], values[i]) < 0) {
            Py_DECREF(self);
            return NULL;
        }
    }
    return self;
}

/* new_with_slots for the classes whose instances the cyclic collector need not walk: ObjectId, Timestamp and
 * DatetimeMS have no __dict__ and only private slots, which their own code sets to bytes or ints, so no
 * reference cycle can pass through one. Untracked, as CPython untracks tuples and dicts of atomic values, they
 * cost nothing in the collections that follow a large read (the young collection after a batch of 10,000
 * tweets took a fifth less time once their ids and Int64s were untracked). */
static PyObject *
new_atomic_value(PyObject *type, PyObject **names, PyObject **values, int count)
{
    PyObject *self = new_with_slots(type, names, values, count);
    if (self != NULL) {
        PyObject_GC_UnTrack(self);
    }
    return self;
}

/* ``base.__new__(type, value)`` for a str or bytes subclass, then one attribute set (when ``name``). */
static PyObject *
new_subclass_of(PyTypeObject *base, PyObject *type, PyObject *value, PyObject *name, PyObject *attribute)
{
    PyObject *args = PyTuple_Pack(1, value);
    if (args == NULL) {
        return NULL;
    }
    PyObject *self = base->tp_new((PyTypeObject *)type, args, NULL);
    Py_DECREF(args);
    if (self != NULL && name != NULL && PyObject_GenericSetAttr(self, name, attribute) < 0) {
        Py_CLEAR(self);
    }
    return self;
}

static PyObject *
make_objectid(const Context *c, const unsigned char *raw)
{
    PyObject *data = PyBytes_FromStringAndSize((const char *)raw, 12);
    if (data == NULL) {
        return NULL;
    }
    PyObject *value;
    if (c == NULL || c->objectid_factory == objectid_factory) {
        value = new_atomic_value(objectid_type, &s_objectid_id, &data, 1);
    } else {
        value = PyObject_CallOneArg(c->objectid_factory, data);
    }
    Py_DECREF(data);
    return value;
}

static PyObject *
make_timestamp(const Context *c, uint32_t time, uint32_t inc)
{
    PyObject *values[2] = {PyLong_FromUnsignedLong(time), PyLong_FromUnsignedLong(inc)};
    PyObject *value = NULL;
    if (values[0] != NULL && values[1] != NULL) {
        if (c->timestamp_factory == timestamp_factory) {
            PyObject *names[2] = {s_timestamp_time, s_timestamp_inc};
            value = new_atomic_value(timestamp_type, names, values, 2);
        } else {
            value = PyObject_CallFunctionObjArgs(c->timestamp_factory, values[0], values[1], NULL);
        }
    }
    Py_XDECREF(values[0]);
    Py_XDECREF(values[1]);
    return value;
}

/* Int64(number). Int64 has no __dict__ and no slots: its instances are untracked, as new_atomic_value explains.
 * Before Python 3.12 the object is made as int.__new__ makes an int subclass: allocated for its digits, which
 * are written straight from the 64-bit magnitude (PyLong_SHIFT bits each, least significant first). Python
 * 3.12 changed how an int keeps its digits: there the class is called. */
static PyObject *
make_int64(const Context *c, int64_t number)
{
    int own_type = c->int64_type == int64_type;
#if PY_VERSION_HEX < 0x030C0000
    if (own_type) {
        uint64_t magnitude = number < 0 ? (uint64_t)0 - (uint64_t)number : (uint64_t)number;
        Py_ssize_t digits = 0;
        for (uint64_t rest = magnitude; rest != 0; rest >>= PyLong_SHIFT) {
            digits++;
        }
        PyTypeObject *type = (PyTypeObject *)int64_type;
        PyLongObject *value = (PyLongObject *)type->tp_alloc(type, digits);
        if (value == NULL) {
            return NULL;
        }
        for (Py_ssize_t i = 0; i < digits; i++) {
            value->ob_digit[i] = (digit)(magnitude & PyLong_MASK);
            magnitude >>= PyLong_SHIFT;
        }
        Py_SET_SIZE(value, number < 0 ? -digits : digits);
        PyObject_GC_UnTrack(value);
        return (PyObject *)value;
    }
#endif
    PyObject *plain = PyLong_FromLongLong((long long)number);
    PyObject *value = plain == NULL ? NULL : PyObject_CallOneArg(c->int64_type, plain);
    Py_XDECREF(plain);
    if (value != NULL && own_type) {
        PyObject_GC_UnTrack(value);
    }
    return value;
}

static PyObject *
make_datetime_ms(long long millis)
{
    PyObject *number = PyLong_FromLongLong(millis);
    if (number == NULL) {
        return NULL;
    }
    PyObject *value = new_atomic_value(datetime_ms_type, &s_datetime_ms_value, &number, 1);
    Py_DECREF(number);
    return value;
}

static long long
floor_div(long long a, long long b)
{
    long long q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

/* The civil date of a count of days since 1970-01-01 (proleptic Gregorian). */
static void
civil_from_days(long long days, int *year, int *month, int *day)
{
    days += 719468;
    long long era = floor_div(days, 146097);
    long long doe = days - era * 146097;
    long long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    long long doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    long long mp = (5 * doy + 2) / 153;
    *day = (int)(doy - (153 * mp + 2) / 5 + 1);
    *month = (int)(mp < 10 ? mp + 3 : mp - 9);
    *year = (int)(yoe + era * 400 + (*month <= 2));
}

/* Days from 1970-01-01 to a civil date (the encoder's datetimes). */
static long long
days_from_civil(long long year, int month, int day)
{
    year -= month <= 2;
    long long era = floor_div(year, 400);
    long long yoe = year - era * 400;
    long long doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1;
    long long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* A datetime for milliseconds known to be in datetime's range, naive or with ``tzinfo``. */
static PyObject *
datetime_from_millis(long long millis, PyObject *tzinfo)
{
    long long days = floor_div(millis, 86400000LL);
    long long rest = millis - days * 86400000LL;
    int year, month, day;
    civil_from_days(days, &year, &month, &day);
    int hour = (int)(rest / 3600000), minute = (int)(rest / 60000 % 60), second = (int)(rest / 1000 % 60);
    int micro = (int)(rest % 1000) * 1000;
    return PyDateTimeAPI->DateTime_FromDateAndTime(year, month, day, hour, minute, second, micro, tzinfo,
                                                   PyDateTimeAPI->DateTimeType);
}

/* A BSON datetime under the context's options, as _decoder._r_datetime and millis_to_datetime make it. */
static PyObject *
read_datetime_value(const Context *c, long long millis)
{
    PyObject *ctx = c->ctx;
    if (PyTuple_GET_SIZE(ctx) < 10) {
        PyErr_SetString(PyExc_TypeError, "the decoding context has no datetime options");
        return NULL;
    }
    long conversion = PyLong_AsLong(PyTuple_GET_ITEM(ctx, 9));
    int tz_aware = PyObject_IsTrue(PyTuple_GET_ITEM(ctx, 7));
    if ((conversion == -1 || tz_aware < 0) && PyErr_Occurred()) {
        return NULL;
    }
    if (conversion == CONVERSION_MS) {
        return make_datetime_ms(millis);
    }
    if (conversion == CONVERSION_CLAMP) {
        millis = millis < MIN_DATETIME_MS ? MIN_DATETIME_MS : millis > MAX_DATETIME_MS ? MAX_DATETIME_MS : millis;
    } else if (millis < MIN_DATETIME_MS || millis > MAX_DATETIME_MS) {
        if (conversion == CONVERSION_AUTO) {
            return make_datetime_ms(millis);
        }
        goto in_python; /* refused there, with its reason */
    }
    if (!tz_aware) {
        return datetime_from_millis(millis, Py_None);
    }
    PyObject *utc = datetime_from_millis(millis, PyDateTime_TimeZone_UTC);
    PyObject *tzinfo = PyTuple_GET_ITEM(ctx, 8);
    if (utc == NULL || tzinfo == Py_None || tzinfo == PyDateTime_TimeZone_UTC) {
        return utc;
    }
    PyObject *local = PyObject_CallMethodOneArg(utc, s_astimezone, tzinfo);
    Py_DECREF(utc);
    if (local != NULL || !PyErr_ExceptionMatches(PyExc_OverflowError)) {
        return local;
    }
    PyErr_Clear(); /* near datetime.min/max: the Python function knows what each conversion makes of it */
in_python:;
    PyObject *number = PyLong_FromLongLong(millis);
    if (number == NULL) {
        return NULL;
    }
    PyObject *value = PyObject_CallFunctionObjArgs(millis_to_datetime, number, PyTuple_GET_ITEM(ctx, 9),
                                                   PyTuple_GET_ITEM(ctx, 7), PyTuple_GET_ITEM(ctx, 8), NULL);
    Py_DECREF(number);
    return value;
}

/* A UUID from its 16 bytes in RFC 4122 order, as uuid.UUID(bytes=...) makes it. */
static PyObject *
make_uuid(const unsigned char *bytes)
{
    PyObject *values[2] = {_PyLong_FromByteArray(bytes, 16, 0, 0), uuid_unknown_safety};
    if (values[0] == NULL) {
        return NULL;
    }
    PyObject *names[2] = {s_uuid_int, s_uuid_is_safe};
    PyObject *value = new_with_slots(uuid_type, names, values, 2);
    Py_DECREF(values[0]);
    return value;
}

#define UUID_STANDARD 4
#define UUID_PYTHON_LEGACY 3
#define UUID_JAVA_LEGACY 5
#define UUID_CSHARP_LEGACY 6

/* The 16 bytes of a UUID in the byte order a legacy representation stores them (subtype 3), or back: both
 * orders are their own inverse, so the decoder and the encoder share this. Python's legacy order is the
 * standard one. */
static void
legacy_uuid_order(const unsigned char *in, unsigned char out[16], int representation)
{
    memcpy(out, in, 16);
    if (representation == UUID_JAVA_LEGACY) {
        for (int i = 0; i < 8; i++) {
            out[i] = in[7 - i];
            out[8 + i] = in[15 - i];
        }
    } else if (representation == UUID_CSHARP_LEGACY) {
        static const int order[8] = {3, 2, 1, 0, 5, 4, 7, 6};
        for (int i = 0; i < 8; i++) {
            out[i] = in[order[i]];
        }
    }
}

/* Binary data (type 0x05) at ``pos``: bytes for subtype 0, a UUID where the representation says so, else a
 * Binary. */
static PyObject *
read_binary(const Context *c, const unsigned char *buf, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t *next)
{
    if (pos + 5 > end) {
        return malformed("a binary value runs past the end of its document");
    }
    int32_t size = load_int32(buf + pos);
    Py_ssize_t start = pos + 5, stop = start + (Py_ssize_t)size;
    if (size < 0 || stop > end) {
        PyErr_Format(invalid_bson, "bad binary length %d", (int)size);
        return NULL;
    }
    unsigned char subtype = buf[pos + 4];
    if (subtype == 2) {
        /* A subtype 2 payload starts with its own length: fewer than 4 bytes cannot hold it. */
        int32_t inner = size >= 4 ? load_int32(buf + start) : -1;
        if (size < 4 || inner != size - 4) {
            PyErr_Format(invalid_bson, "binary subtype 2 has inner length %d, expected %d", (int)inner,
                         (int)size - 4);
            return NULL;
        }
        start += 4;
    }
    *next = stop;
    const unsigned char *payload = buf + start;
    Py_ssize_t length = stop - start;
    if ((subtype == 3 || subtype == 4) && length == 16) {
        long representation = PyTuple_GET_SIZE(c->ctx) > 10 ? PyLong_AsLong(PyTuple_GET_ITEM(c->ctx, 10)) : 0;
        if (representation == -1 && PyErr_Occurred()) {
            return NULL;
        }
        if (subtype == 4 && representation == UUID_STANDARD) {
            return make_uuid(payload);
        }
        if (subtype == 3 && (representation == UUID_PYTHON_LEGACY || representation == UUID_JAVA_LEGACY ||
                             representation == UUID_CSHARP_LEGACY)) {
            unsigned char ordered[16];
            legacy_uuid_order(payload, ordered, representation);
            return make_uuid(ordered);
        }
    }
    PyObject *data = PyBytes_FromStringAndSize((const char *)payload, length);
    if (data == NULL || subtype == 0) {
        return data;
    }
    PyObject *number = PyLong_FromLong(subtype);
    PyObject *value = number == NULL ? NULL
                                     : new_subclass_of(&PyBytes_Type, binary_type, data, s_binary_subtype, number);
    Py_XDECREF(number);
    Py_DECREF(data);
    return value;
}

/* A string as BSON stores it (int32 length with the NUL, the bytes, NUL) at ``pos``. */
static PyObject *
read_string_at(const Context *c, const unsigned char *buf, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t *next)
{
    if (pos + 4 > end) {
        return malformed("a string runs past the end of its document");
    }
    int32_t size = load_int32(buf + pos);
    Py_ssize_t value_end = pos + 4 + (Py_ssize_t)size - 1;
    if (size < 1 || value_end >= end || buf[value_end] != 0) {
        PyErr_Format(invalid_bson, "bad string length %d", (int)size);
        return NULL;
    }
    *next = value_end + 1;
    return decode_text(c, buf + pos + 4, size - 1);
}

static PyObject *
read_cstring_at(const Context *c, const unsigned char *buf, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t *next)
{
    const unsigned char *stop = memchr(buf + pos, 0, (size_t)(end - pos));
    if (stop == NULL) {
        return malformed("a C string is missing its NUL terminator");
    }
    *next = (stop - buf) + 1;
    return decode_text(c, buf + pos, stop - (buf + pos));
}

static PyObject *
read_regex(const Context *c, const unsigned char *buf, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t *next)
{
    PyObject *values[2] = {NULL, NULL};
    values[0] = read_cstring_at(c, buf, pos, end, &pos);
    if (values[0] == NULL) {
        return NULL;
    }
    values[1] = read_cstring_at(c, buf, pos, end, next);
    if (values[1] == NULL) {
        Py_DECREF(values[0]);
        return NULL;
    }
    PyObject *names[2] = {s_regex_pattern, s_regex_flags};
    PyObject *value = new_with_slots(regex_type, names, values, 2);
    Py_DECREF(values[0]);
    Py_DECREF(values[1]);
    return value;
}

static PyObject *
read_dbpointer(const Context *c, const unsigned char *buf, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t *next)
{
    PyObject *values[2] = {NULL, NULL};
    values[0] = read_string_at(c, buf, pos, end, &pos);
    if (values[0] == NULL) {
        return NULL;
    }
    if (pos + 12 > end) {
        Py_DECREF(values[0]);
        return malformed("a DBPointer's ObjectId runs past the end of its document");
    }
    values[1] = make_objectid(NULL, buf + pos);
    PyObject *value = NULL;
    if (values[1] != NULL) {
        PyObject *names[2] = {s_pointer_namespace, s_pointer_id};
        value = new_with_slots(dbpointer_type, names, values, 2);
    }
    *next = pos + 12;
    Py_DECREF(values[0]);
    Py_XDECREF(values[1]);
    return value;
}

/* JavaScript code (0x0D), or a symbol (0x0E) when ``symbol``. */
static PyObject *
read_code(const Context *c, const unsigned char *buf, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t *next,
          int symbol)
{
    PyObject *text = read_string_at(c, buf, pos, end, next);
    if (text == NULL) {
        return NULL;
    }
    PyObject *value = symbol ? new_subclass_of(&PyUnicode_Type, symbol_type, text, NULL, NULL)
                             : new_subclass_of(&PyUnicode_Type, code_type, text, s_code_scope, Py_None);
    Py_DECREF(text);
    return value;
}

static PyObject *
read_code_with_scope(PyObject *data, const Context *c, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t *next,
                     int depth)
{
    const unsigned char *buf = c->buf;
    if (pos + 4 > end) {
        return malformed("a code with scope runs past the end of its document");
    }
    int32_t total = load_int32(buf + pos);
    Py_ssize_t stop = pos + (Py_ssize_t)total;
    if (total < 14 || stop > end) {
        PyErr_Format(invalid_bson, "bad code with scope length %d", (int)total);
        return NULL;
    }
    Py_ssize_t scope_start;
    PyObject *code = read_string_at(c, buf, pos + 4, stop, &scope_start);
    if (code == NULL) {
        return NULL;
    }
    int32_t scope_size = scope_start + 5 <= stop ? load_int32(buf + scope_start) : 0;
    Py_ssize_t scope_end = scope_start + (Py_ssize_t)scope_size - 1;
    if (scope_size < 5 || scope_end + 1 != stop || buf[scope_end] != 0) {
        Py_DECREF(code);
        PyErr_Format(invalid_bson, "code with scope: the scope's length %d does not fill the declared length",
                     (int)scope_size);
        return NULL;
    }
    PyObject *scope;
    if (c->is_raw) {
        scope = make_raw(c, buf + scope_start, stop - scope_start);
    } else {
        scope = read_elements(data, scope_start + 4, scope_end, c, 0, depth + 1);
    }
    PyObject *value = NULL;
    if (scope != NULL) {
        value = new_subclass_of(&PyUnicode_Type, code_type, code, s_code_scope, scope);
        Py_DECREF(scope);
    }
    Py_DECREF(code);
    *next = stop;
    return value;
}

static PyObject *
read_decimal128(const unsigned char *buf, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t *next)
{
    if (pos + 16 > end) {
        return malformed("a decimal128 runs past the end of its document");
    }
    PyObject *bid = PyBytes_FromStringAndSize((const char *)buf + pos, 16);
    if (bid == NULL) {
        return NULL;
    }
    PyObject *value = new_with_slots(decimal128_type, &s_decimal_bid, &bid, 1);
    Py_DECREF(bid);
    *next = pos + 16;
    return value;
}


/* _decoder._to_dbref for a dict: a DBRef when the document has the DBRef shape (a str $ref, an $id, a str $db
 * if any; the other fields kept in order), else the document itself. */
static PyObject *
shape_dbref(PyObject *doc)
{
    PyObject *ref = PyDict_GetItemWithError(doc, ref_key);
    PyObject *id = ref == NULL ? NULL : PyDict_GetItemWithError(doc, id_key);
    PyObject *database = id == NULL ? NULL : PyDict_GetItemWithError(doc, db_key);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (ref == NULL || !PyUnicode_Check(ref) || id == NULL || (database != NULL && !PyUnicode_Check(database))) {
        return Py_NewRef(doc);
    }
    PyObject *extra = PyDict_New();
    if (extra == NULL) {
        return NULL;
    }
    PyObject *key, *item;
    Py_ssize_t position = 0;
    while (PyDict_Next(doc, &position, &key, &item)) {
        int special = 0;
        PyObject *names[3] = {ref_key, id_key, db_key};
        for (int i = 0; i < 3 && !special; i++) {
            special = PyObject_RichCompareBool(key, names[i], Py_EQ);
            if (special < 0) {
                Py_DECREF(extra);
                return NULL;
            }
        }
        if (!special && PyDict_SetItem(extra, key, item) < 0) {
            Py_DECREF(extra);
            return NULL;
        }
    }
    PyObject *names[4] = {s_dbref_collection, s_dbref_id, s_dbref_database, s_dbref_kwargs};
    PyObject *values[4] = {ref, id, database != NULL ? database : Py_None, extra};
    PyObject *value = new_with_slots(dbref_type, names, values, 4);
    Py_DECREF(extra);
    return value;
}


/* A raw embedded document (its bytes already checked to be one whole document): mongio's RawBSONDocument is
 * made as its constructor makes it, any other raw class by calling it with the bytes and the options. */
static PyObject *
make_raw(const Context *c, const unsigned char *start, Py_ssize_t size)
{
    PyObject *slice = PyBytes_FromStringAndSize((const char *)start, size);
    if (slice == NULL) {
        return NULL;
    }
    PyObject *raw;
    if (c->document_class == raw_document_type && raw_document_type != NULL) {
        PyObject *values = PyDict_New();
        PyObject *slots[4] = {slice, c->options, Py_None, values};
        PyObject *names[4] = {s_raw_bytes, s_raw_options, s_raw_index, s_raw_values};
        raw = values == NULL ? NULL : new_with_slots(raw_document_type, names, slots, 4);
        Py_XDECREF(values);
    } else {
        raw = PyObject_CallFunctionObjArgs(c->document_class, slice, c->options, NULL);
    }
    Py_DECREF(slice);
    return raw;
}

/* The value of every type the element loop's switch does not inline. */
static PyObject *
read_other(PyObject *data, unsigned char kind, Py_ssize_t pos, Py_ssize_t end, const Context *c,
           PyObject *name, Py_ssize_t *next, int depth)
{
    const unsigned char *buf = c->buf;
    if (!decoder_types_ready) {
        return read_with_python(data, kind, pos, end, c, name, next);
    }
    *next = pos;
    switch (kind) {
    case 0x05:
        return read_binary(c, buf, pos, end, next);
    case 0x06:
        return Py_NewRef(undefined_value);
    case 0x09:
        if (pos + 8 > end) {
            return element_error(name, "datetime %U runs past the end of its container", 0);
        }
        *next = pos + 8;
        return read_datetime_value(c, (long long)(int64_t)load_uint64(buf + pos));
    case 0x0B:
        return read_regex(c, buf, pos, end, next);
    case 0x0C:
        return read_dbpointer(c, buf, pos, end, next);
    case 0x0D:
    case 0x0E:
        return read_code(c, buf, pos, end, next, kind == 0x0E);
    case 0x0F:
        return read_code_with_scope(data, c, pos, end, next, depth);
    case 0x13:
        return read_decimal128(buf, pos, end, next);
    case 0xFF:
        return Py_NewRef(min_key);
    case 0x7F:
        return Py_NewRef(max_key);
    default:
        return read_with_python(data, kind, pos, end, c, name, next);
    }
}

static PyObject *
read_elements(PyObject *data, Py_ssize_t pos, Py_ssize_t end, const Context *c, int array, int depth)
{
    const unsigned char *buf = c->buf;
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
    if (depth > max_nesting) {
        Py_DECREF(container);
        PyErr_SetObject(invalid_bson, nested_too_deeply);
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
            key = decode_key(c, key_start, key_stop - key_start);
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
            value = read_nested(data, pos, end, c, kind == 0x04, &pos, depth);
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
            value = make_int64(c, (int64_t)load_uint64(buf + pos));
            pos += 8;
            break;
        }
        case 0x07: { /* ObjectId */
            if (pos + 12 > end) {
                element_error(key, "ObjectId %U runs past the end of its container", 0);
                break;
            }
            value = make_objectid(c, buf + pos);
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
            value = make_timestamp(c, load_uint32(buf + pos + 4), load_uint32(buf + pos));
            pos += 8;
            break;
        }
        default:
            value = read_other(data, kind, pos, end, c, key, &pos, depth);
            break;
        }
        if (value == NULL) {
            Py_XDECREF(key);
            goto fail;
        }
        if (c->decoder_map != NULL) {
            /* A borrowed lookup that raises nothing on a miss: most values have no transform, and a KeyError
             * made and cleared for each of them would cost more than the decoding. */
            PyObject *transform = PyDict_GetItemWithError(c->decoder_map, (PyObject *)Py_TYPE(value));
            if (transform == NULL) {
                if (PyErr_Occurred()) {
                    Py_DECREF(value);
                    Py_XDECREF(key);
                    goto fail;
                }
            } else {
                /* Held while it runs: the application's transform could change the map it came from. */
                Py_INCREF(transform);
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

/* The optional depth argument of the loops' entry points (a nesting level from 0 to one past the limit, as
   the Python loops count it), into ``*depth``; -1 with an exception when it is not one. */
static int
optional_depth(PyObject *value, long *depth)
{
    long given = PyLong_AsLong(value);
    if (given == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (given < 0 || given > max_nesting + 1) {
        PyErr_SetString(PyExc_ValueError, "depth out of range");
        return -1;
    }
    *depth = given;
    return 0;
}

static PyObject *
entry(PyObject *const *args, Py_ssize_t nargs, int array)
{
    if (nargs != 4 && nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "expected (data, pos, end, ctx[, depth])");
        return NULL;
    }
    /* The nesting level of what is read (0: an outermost document), as the Python loops count it. */
    long depth = 0;
    if (nargs == 5 && optional_depth(args[4], &depth) < 0) {
        return NULL;
    }
    PyObject *data = args[0];
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t end = PyLong_AsSsize_t(args[2]);
    if (end == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Context c;
    if (unpack_context(args[3], &c) < 0) {
        return NULL;
    }
    /* bytes are read in place; any other contiguous buffer (a view of a connection's receive buffer) too,
     * held for the call, so a large reply is not copied before it is decoded. */
    Py_buffer view;
    int held = 0;
    if (PyBytes_CheckExact(data)) {
        c.buf = (const unsigned char *)PyBytes_AS_STRING(data);
        c.size = PyBytes_GET_SIZE(data);
    } else {
        if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) {
            return NULL;
        }
        held = 1;
        c.buf = (const unsigned char *)view.buf;
        c.size = view.len;
    }
    PyObject *result;
    /* ``end`` indexes the trailing NUL, so it must lie inside the buffer; ``pos`` may equal it (no elements). */
    if (pos < 0 || end < pos || end >= c.size) {
        result = malformed("element bounds outside the BSON data");
    } else {
        /* Every container made here stays reachable from the result, so the cyclic collector has nothing to
         * find while a reply is read; left on, it would walk a large batch's dicts and lists again and again
         * as they are made (a third of the CPU of reading many small documents). Automatic collection waits
         * for the end of the call instead: the allocations still count, so the next one collects. Only when
         * nothing but the decoder's own code runs meanwhile (dicts, no type decoders, strict UTF-8). */
        int paused = c.is_dict && c.decoder_map == NULL && c.strict && PyGC_Disable();
        result = read_elements(data, pos, end, &c, array, (int)depth);
        if (paused) {
            PyGC_Enable();
        }
    }
    if (held) {
        PyBuffer_Release(&view);
    }
    return result;
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

/* document_array_offsets(data): for the BSON array ``data`` (its length, elements and trailing NUL), where
 * each element (its type byte) is and where its document (its length field) starts, as two lists; None when
 * the framing is not that of an array of documents (an element of another type, a name or a length that does
 * not fit). Only the framing is read, not the documents. The Python reference is
 * ``mongio.bson.lazy_batch._python_document_array_offsets``; the two must agree on every input. */
static PyObject *
document_array_offsets(PyObject *module, PyObject *data)
{
    (void)module;
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    const unsigned char *buf = (const unsigned char *)view.buf;
    Py_ssize_t end = view.len - 1; /* the trailing NUL */
    PyObject *result = NULL;
    /* The first pass checks the framing and counts the documents; the second fills lists of that length
     * (no scratch array, no list growth), with the framing known to be sound. */
    int framed = end >= 4 && (Py_ssize_t)load_int32(buf) == end + 1 && buf[end] == 0;
    Py_ssize_t count = 0;
    Py_ssize_t position = 4;
    while (framed && position < end) {
        const unsigned char *name_end = buf[position] == 0x03
                                            ? memchr(buf + position + 1, 0, (size_t)(end - position - 1))
                                            : NULL;
        Py_ssize_t start = name_end == NULL ? end : (name_end - buf) + 1;
        Py_ssize_t size = start + 5 <= end ? (Py_ssize_t)load_int32(buf + start) : 0;
        if (size < 5 || size > end - start || buf[start + size - 1] != 0) {
            framed = 0;
            break;
        }
        count++;
        position = start + size;
    }
    if (!framed) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *elements = PyList_New(count);
    PyObject *starts = elements == NULL ? NULL : PyList_New(count);
    if (starts == NULL) {
        Py_XDECREF(elements);
        goto done;
    }
    position = 4;
    for (Py_ssize_t i = 0; i < count; i++) {
        const unsigned char *name_end = memchr(buf + position + 1, 0, (size_t)(end - position - 1));
        Py_ssize_t start = (name_end - buf) + 1;
        PyObject *element = PyLong_FromSsize_t(position);
        PyObject *document = element == NULL ? NULL : PyLong_FromSsize_t(start);
        if (document == NULL) {
            Py_XDECREF(element);
            Py_DECREF(elements);
            Py_DECREF(starts);
            goto done;
        }
        PyList_SET_ITEM(elements, i, element);
        PyList_SET_ITEM(starts, i, document);
        position = start + (Py_ssize_t)load_int32(buf + start);
    }
    result = PyTuple_Pack(2, elements, starts);
    Py_DECREF(elements);
    Py_DECREF(starts);
done:
    PyBuffer_Release(&view);
    return result;
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


/* configure_types(types): the classes and values the less common types are made of and written from, by
 * name (see _decoder.py and _encoder.py; each module gives the names it has). */
static PyObject *pattern_type;      /* re.Pattern */

static PyObject *
configure_types(PyObject *module, PyObject *types)
{
    (void)module;
    if (!PyDict_Check(types)) {
        PyErr_SetString(PyExc_TypeError, "configure_types takes a dict");
        return NULL;
    }
    struct {
        const char *name;
        PyObject **slot;
    } known[] = {
        {"Binary", &binary_type},       {"UUID", &uuid_type},
        {"SafeUUID.unknown", &uuid_unknown_safety}, {"Regex", &regex_type},
        {"Code", &code_type},           {"Symbol", &symbol_type},
        {"DBPointer", &dbpointer_type}, {"Decimal128", &decimal128_type},
        {"DatetimeMS", &datetime_ms_type}, {"ObjectId", &objectid_type},
        {"Timestamp", &timestamp_type}, {"MinKey()", &min_key},
        {"MaxKey()", &max_key},         {"Undefined()", &undefined_value},
        {"millis_to_datetime", &millis_to_datetime}, {"DBRef", &dbref_type},
        {"RawBSONDocument", &raw_document_type}, {"write_value_no_custom", &write_value_no_custom},
        {"re.Pattern", &pattern_type},
        {"write_marked_binary", &marked_writers[M_BINARY]}, {"write_marked_datetime", &marked_writers[M_DATETIME]},
        {"write_marked_regex", &marked_writers[M_REGEX]}, {"write_marked_code", &marked_writers[M_CODE]},
        {"write_marked_timestamp", &marked_writers[M_TIMESTAMP]},
        {"write_marked_decimal128", &marked_writers[M_DECIMAL]}, {"write_marked_raw", &marked_writers[M_RAW]},
        {"write_minkey", &marked_writers[M_MIN]}, {"write_maxkey", &marked_writers[M_MAX]},
        {"write_undefined", &marked_writers[M_UNDEFINED]},
    };
    PyObject *key, *value;
    Py_ssize_t position = 0;
    while (PyDict_Next(types, &position, &key, &value)) {
        size_t i = 0;
        for (; i < sizeof known / sizeof known[0]; i++) {
            if (PyUnicode_Check(key) && PyUnicode_CompareWithASCIIString(key, known[i].name) == 0) {
                Py_XSETREF(*known[i].slot, Py_NewRef(value));
                break;
            }
        }
        if (i == sizeof known / sizeof known[0]) {
            PyErr_Format(PyExc_KeyError, "configure_types does not know %R", key);
            return NULL;
        }
    }
    decoder_types_ready = binary_type && uuid_type && uuid_unknown_safety && regex_type && code_type &&
                          symbol_type && dbpointer_type && decimal128_type && datetime_ms_type &&
                          objectid_type && timestamp_type && min_key && max_key && undefined_value &&
                          millis_to_datetime;
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------------------------------------------------
 * The encoder's element loops: write_document(buf, doc, ctx, check_keys) and write_array(buf, values, ctx,
 * check_keys) take the place of _encoder._write_document and _encoder._write_array, appending to the
 * bytearray ``buf``. Exact dicts and lists/tuples of every BSON type mongio has (and other libraries' values
 * found by their _type_marker, and what the type registry's encoders return) are written here; a value that
 * does not hold what its class promises, a subclass, a mapping or sequence of another class, and the
 * fallback encoder go to the Python code that does it there, which writes them or refuses them. Refusals
 * carry their key path the same way (the _Refused exception's ``path``).
 * ------------------------------------------------------------------------------------------------------- */

static PyObject *refused_type;          /* _encoder._Refused */
static PyObject *python_write_document; /* the Python loops, for containers that are not dict/list/tuple */
static PyObject *python_write_array;
static PyObject *value_writers;         /* _encoder._ENCODERS: exact type -> writer */
static PyObject *write_other;           /* _encoder._write_other */
static PyObject *name_of;               /* _encoder._name(key, check_keys): bytes with NUL, or _Refused */
static PyObject *check_key;             /* _encoder._check_key(key) */
static PyObject *pack_int64;            /* _encoder._pack_int64(value): raises _Refused beyond 64 bits */
static PyObject *encoder_int64;         /* Int64 */
/* Python writers whose work is simple enough to do here once the exact-type lookup found them: ObjectIds
 * (mongio's, and other libraries' found by _type_marker) and other libraries' Int64. Anything these
 * cannot write exactly goes to the Python writer, which refuses it with its reason. */
static PyObject *objectid_writer;        /* _encoder._write_objectid */
static PyObject *marked_objectid_writer; /* _encoder._write_marked_objectid */
static PyObject *marked_int64_writer;    /* _encoder._write_marked_int64 */
static PyObject *binary_name;            /* "binary" */

/* A str's UTF-8 bytes: an ASCII string's own buffer read directly (the common case, spared the call), any
 * other through PyUnicode_AsUTF8AndSize (which caches them, or fails on a lone surrogate). */
static inline const char *
utf8_of(PyObject *text, Py_ssize_t *size)
{
    if (PyUnicode_IS_COMPACT_ASCII(text)) {
        *size = PyUnicode_GET_LENGTH(text);
        return (const char *)PyUnicode_DATA(text);
    }
    return PyUnicode_AsUTF8AndSize(text, size);
}

/* Make buf ``size`` bytes long, its new bytes unset. Growing past its allocation doubles it at least:
 * bytearray's own resize grows by an eighth, so a multi-megabyte document would be reallocated (and maybe
 * copied) a hundred times. The second resize only sets the length (it stays over half the allocation). */
static int
resize_to(PyObject *buf, Py_ssize_t size)
{
    PyByteArrayObject *array = (PyByteArrayObject *)buf;
    Py_ssize_t old = Py_SIZE(array);
    if (size >= old && array->ob_exports == 0 && array->ob_start == array->ob_bytes) {
        if (size + 1 > array->ob_alloc) {
            /* Grown geometrically from a first 256 bytes: bytearray's own rule adds an eighth, which for a
             * document written element by element means a reallocation every few elements. An append larger
             * than the buffer doubled is left to that rule (an exact fit). */
            Py_ssize_t grown = old < 128 ? 256 : (old <= PY_SSIZE_T_MAX / 2 ? old * 2 : PY_SSIZE_T_MAX - 1);
            if (grown <= size) {
                return PyByteArray_Resize(buf, size);
            }
            if (PyByteArray_Resize(buf, grown) < 0) {
                return -1;
            }
        }
        /* Room enough, nothing exported: what PyByteArray_Resize does then, without its call and checks (and
         * without giving back the room just made, as resizing down would). */
        Py_SET_SIZE(array, size);
        array->ob_start[size] = '\0';
        return 0;
    }
    return PyByteArray_Resize(buf, size);
}

static int
append(PyObject *buf, const void *data, Py_ssize_t size)
{
    Py_ssize_t old = PyByteArray_GET_SIZE(buf);
    if (resize_to(buf, old + size) < 0) {
        return -1;
    }
    memcpy(PyByteArray_AS_STRING(buf) + old, data, (size_t)size);
    return 0;
}

static int
append_byte(PyObject *buf, unsigned char byte)
{
    return append(buf, &byte, 1);
}

static void
store_int32(unsigned char *p, int32_t value)
{
    uint32_t v = (uint32_t)value;
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

static int
append_int32(PyObject *buf, int32_t value)
{
    unsigned char bytes[4];
    store_int32(bytes, value);
    return append(buf, bytes, 4);
}

static int
append_int64(PyObject *buf, int64_t value)
{
    unsigned char bytes[8];
    uint64_t v = (uint64_t)value;
    for (int i = 0; i < 8; i++) {
        bytes[i] = (unsigned char)(v >> (8 * i));
    }
    return append(buf, bytes, 8);
}

/* type byte, then the element name (``name`` has ``size`` bytes and a NUL after them) */
static int
append_head(PyObject *buf, unsigned char kind, const char *name, Py_ssize_t size)
{
    Py_ssize_t old = PyByteArray_GET_SIZE(buf);
    if (resize_to(buf, old + size + 2) < 0) {
        return -1;
    }
    char *out = PyByteArray_AS_STRING(buf) + old;
    out[0] = (char)kind;
    memcpy(out + 1, name, (size_t)size + 1);
    return 0;
}

static int write_container(PyObject *buf, PyObject *value, PyObject *ctx, PyObject *check_keys_obj, int array,
                           int depth);

/* An int (or Int64) as int32 when it fits and ``smallest`` allows, else int64; beyond 64 bits, the Python
 * packer raises the refusal. */
static int
write_integer(PyObject *buf, const char *name, Py_ssize_t size, PyObject *value, int smallest)
{
    int overflow = 0;
    long long number;
#if PY_VERSION_HEX >= 0x030C0000
    if (PyLong_CheckExact(value) && PyUnstable_Long_IsCompact((PyLongObject *)value)) {
        number = (long long)PyUnstable_Long_CompactValue((PyLongObject *)value);
    } else
#else
    /* Up to 3.11 an int of at most one digit is its sign (the size) times that digit; zero has no digit. */
    if (PyLong_CheckExact(value) && Py_SIZE(value) >= -1 && Py_SIZE(value) <= 1) {
        number = Py_SIZE(value) == 0 ? 0 : (long long)Py_SIZE(value) * (long long)((PyLongObject *)value)->ob_digit[0];
    } else
#endif
    {
        number = PyLong_AsLongLongAndOverflow(value, &overflow);
    }
    if (number == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (overflow) {
        PyObject *refusal = PyObject_CallOneArg(pack_int64, value);
        Py_XDECREF(refusal);
        if (refusal != NULL) { /* cannot happen: the packer refuses what overflows */
            PyErr_SetString(PyExc_OverflowError, "BSON integers are at most 64 bits");
        }
        return -1;
    }
    if (smallest && number >= INT32_MIN && number <= INT32_MAX) {
        /* One resize for the whole element: type, name, then the int32. */
        Py_ssize_t old = PyByteArray_GET_SIZE(buf);
        if (resize_to(buf, old + size + 2 + 4) < 0) {
            return -1;
        }
        unsigned char *out = (unsigned char *)PyByteArray_AS_STRING(buf) + old;
        out[0] = 0x10;
        memcpy(out + 1, name, (size_t)size + 1);
        store_int32(out + size + 2, (int32_t)number);
        return 0;
    }
    if (append_head(buf, 0x12, name, size) < 0) {
        return -1;
    }
    return append_int64(buf, (int64_t)number);
}

/* ObjectIds and other libraries' Int64 whose Python writer the exact-type lookup found: 0 when written, -1
 * on error, 1 to call the Python writer instead (for a value that does not hold what its type promises). */
static int
write_known(PyObject *buf, const char *name, Py_ssize_t size, PyObject *value, PyObject *writer)
{
    if (writer == marked_int64_writer) {
        return PyLong_Check(value) ? write_integer(buf, name, size, value, 0) : 1;
    }
    if (writer != objectid_writer && writer != marked_objectid_writer) {
        return 1;
    }
    PyObject *data = PyObject_GetAttr(value, binary_name);
    if (data == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
            return -1;
        }
        PyErr_Clear();
        return 1;
    }
    int result = 1;
    if (PyBytes_CheckExact(data) && PyBytes_GET_SIZE(data) == 12) {
        result = append_head(buf, 0x07, name, size) < 0 || append(buf, PyBytes_AS_STRING(data), 12) < 0 ? -1 : 0;
    }
    Py_DECREF(data);
    return result;
}


/* ---- The less common types, written as the Python writers of _encoder._ENCODERS write them. Each returns 0
 * when written, -1 on error, and 1 to leave the value to its Python writer: for anything that does not hold
 * what its class promises, which that writer refuses with its reason (or writes, the rare cases kept there:
 * re.Pattern, UUIDs in the legacy representations). ---- */

static PyObject *s_utcoffset, *s_as_doc, *s_raw, *s_uuid_representation, *s_type_marker, *s_encoder_map;

static int
write_binary_data(PyObject *buf, const char *name, Py_ssize_t size, const char *data, Py_ssize_t length,
                  long subtype)
{
    if (length > INT32_MAX - 4) {
        return 1;
    }
    if (append_head(buf, 0x05, name, size) < 0) {
        return -1;
    }
    if (subtype == 2) { /* the old binary subtype repeats the length inside the payload */
        if (append_int32(buf, (int32_t)(length + 4)) < 0 || append_byte(buf, 2) < 0 ||
            append_int32(buf, (int32_t)length) < 0) {
            return -1;
        }
    } else if (append_int32(buf, (int32_t)length) < 0 || append_byte(buf, (unsigned char)subtype) < 0) {
        return -1;
    }
    return append(buf, data, length);
}

/* A str (or str subclass) as a BSON string-shaped value of ``kind``. */
static int
write_text(PyObject *buf, unsigned char kind, const char *name, Py_ssize_t size, PyObject *text)
{
    Py_ssize_t length;
    const char *data = PyUnicode_AsUTF8AndSize(text, &length);
    if (data == NULL) {
        return -1;
    }
    if (length > INT32_MAX - 1) {
        return 1;
    }
    if (append_head(buf, kind, name, size) < 0 || append_int32(buf, (int32_t)(length + 1)) < 0) {
        return -1;
    }
    return append(buf, data, length + 1);
}

/* An attribute read as object.__getattribute__ reads it (slots, the instance dict), or NULL with no error
 * when it is missing. */
static PyObject *
attribute(PyObject *value, PyObject *name)
{
    PyObject *found = PyObject_GenericGetAttr(value, name);
    if (found == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
    }
    return found;
}

static long long
timedelta_microseconds(PyObject *delta)
{
    return (long long)PyDateTime_DELTA_GET_DAYS(delta) * 86400000000LL +
           (long long)PyDateTime_DELTA_GET_SECONDS(delta) * 1000000LL + PyDateTime_DELTA_GET_MICROSECONDS(delta);
}

/* datetime_ms.datetime_to_millis: milliseconds since the epoch rounding down, a naive datetime taken as UTC. */
static int
write_datetime(PyObject *buf, const char *name, Py_ssize_t size, PyObject *value)
{
    long long days = days_from_civil(PyDateTime_GET_YEAR(value), PyDateTime_GET_MONTH(value),
                                     PyDateTime_GET_DAY(value));
    long long micros = days * 86400000000LL + (long long)PyDateTime_DATE_GET_HOUR(value) * 3600000000LL +
                       (long long)PyDateTime_DATE_GET_MINUTE(value) * 60000000LL +
                       (long long)PyDateTime_DATE_GET_SECOND(value) * 1000000LL +
                       PyDateTime_DATE_GET_MICROSECOND(value);
    if (PyDateTime_DATE_GET_TZINFO(value) != Py_None) {
        PyObject *offset = PyObject_CallMethodNoArgs(value, s_utcoffset);
        if (offset == NULL) {
            return -1;
        }
        if (offset != Py_None) {
            if (!PyDelta_Check(offset)) {
                Py_DECREF(offset);
                return 1;
            }
            micros -= timedelta_microseconds(offset);
        }
        Py_DECREF(offset);
    }
    if (append_head(buf, 0x09, name, size) < 0) {
        return -1;
    }
    return append_int64(buf, (int64_t)floor_div(micros, 1000));
}

/* A regular expression from a str pattern and ASCII option letters (sorted here, as BSON requires); 1 for a
 * NUL in either, which the Python writer refuses with its reason. */
static int
write_regex_parts(PyObject *buf, const char *name, Py_ssize_t size, PyObject *pattern, const char *flags,
                  Py_ssize_t flags_length)
{
    char sorted[64];
    Py_ssize_t pattern_length;
    const char *pattern_data = PyUnicode_AsUTF8AndSize(pattern, &pattern_length);
    if (pattern_data == NULL) {
        return -1;
    }
    if (flags_length > (Py_ssize_t)sizeof sorted || memchr(pattern_data, 0, (size_t)pattern_length) != NULL ||
        memchr(flags, 0, (size_t)flags_length) != NULL) {
        return 1;
    }
    memcpy(sorted, flags, (size_t)flags_length);
    for (Py_ssize_t i = 1; i < flags_length; i++) {
        char letter = sorted[i];
        Py_ssize_t j = i;
        for (; j > 0 && (unsigned char)sorted[j - 1] > (unsigned char)letter; j--) {
            sorted[j] = sorted[j - 1];
        }
        sorted[j] = letter;
    }
    return append_head(buf, 0x0B, name, size) < 0 || append(buf, pattern_data, pattern_length + 1) < 0 ||
                   append(buf, sorted, flags_length) < 0 || append_byte(buf, 0) < 0
               ? -1
               : 0;
}

static int
write_regex(PyObject *buf, const char *name, Py_ssize_t size, PyObject *value)
{
    PyObject *pattern = attribute(value, s_regex_pattern);
    PyObject *flags = pattern == NULL ? NULL : attribute(value, s_regex_flags);
    int result = 1;
    if (PyErr_Occurred()) {
        result = -1;
    } else if (pattern != NULL && flags != NULL && PyUnicode_CheckExact(pattern) && PyUnicode_CheckExact(flags) &&
               PyUnicode_IS_ASCII(flags)) {
        result = write_regex_parts(buf, name, size, pattern, (const char *)PyUnicode_1BYTE_DATA(flags),
                                   PyUnicode_GET_LENGTH(flags));
    }
    Py_XDECREF(pattern);
    Py_XDECREF(flags);
    return result;
}

/* A compiled ``re`` pattern with a str pattern: its flags as option letters, re.UNICODE left out (every str
 * pattern has it). Bytes patterns are left to the Python writer. */
static int
write_pattern(PyObject *buf, const char *name, Py_ssize_t size, PyObject *value)
{
    static const struct {
        long flag;
        char letter;
    } letters[] = {{2, 'i'}, {4, 'l'}, {8, 'm'}, {16, 's'}, {64, 'x'}}; /* re.I, L, M, S, X */
    PyObject *pattern = PyObject_GetAttr(value, s_regex_pattern);
    PyObject *flags = pattern == NULL ? NULL : PyObject_GetAttr(value, s_regex_flags);
    int result = flags == NULL ? -1 : 1;
    if (flags != NULL && PyUnicode_CheckExact(pattern) && PyLong_CheckExact(flags)) {
        long bits = PyLong_AsLong(flags);
        char text[8];
        Py_ssize_t count = 0;
        for (size_t i = 0; i < sizeof letters / sizeof letters[0]; i++) {
            if (bits & letters[i].flag) {
                text[count++] = letters[i].letter;
            }
        }
        result = bits == -1 && PyErr_Occurred() ? -1 : write_regex_parts(buf, name, size, pattern, text, count);
    }
    Py_XDECREF(pattern);
    Py_XDECREF(flags);
    return result;
}

/* JavaScript code (a str) with ``scope`` (None, or a mapping written without check_keys). */
static int
write_code_parts(PyObject *buf, const char *name, Py_ssize_t size, PyObject *value, PyObject *scope, PyObject *ctx,
                 int depth)
{
    if (scope == Py_None) {
        return write_text(buf, 0x0D, name, size, value);
    }
    Py_ssize_t length;
    const char *data = PyUnicode_AsUTF8AndSize(value, &length);
    if (data == NULL) {
        return -1;
    }
    if (length > INT32_MAX - 1) {
        return 1;
    }
    if (append_head(buf, 0x0F, name, size) < 0) {
        return -1;
    }
    Py_ssize_t start = PyByteArray_GET_SIZE(buf);
    if (append(buf, "\0\0\0\0", 4) < 0 || append_int32(buf, (int32_t)(length + 1)) < 0 ||
        append(buf, data, length + 1) < 0 || write_container(buf, scope, ctx, Py_False, 0, depth + 1) < 0) {
        return -1;
    }
    Py_ssize_t total = PyByteArray_GET_SIZE(buf) - start;
    if (total > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "a code with scope cannot exceed 2 GiB");
        return -1;
    }
    store_int32((unsigned char *)PyByteArray_AS_STRING(buf) + start, (int32_t)total);
    return 0;
}

static int
write_code(PyObject *buf, const char *name, Py_ssize_t size, PyObject *value, PyObject *ctx, int depth)
{
    PyObject *scope = attribute(value, s_code_scope);
    if (scope == NULL) {
        return PyErr_Occurred() ? -1 : 1;
    }
    int result = write_code_parts(buf, name, size, value, scope, ctx, depth);
    Py_DECREF(scope);
    return result;
}

static int
write_exact_bytes_attribute(PyObject *buf, unsigned char kind, const char *name, Py_ssize_t size, PyObject *value,
                            PyObject *slot, Py_ssize_t length)
{
    PyObject *data = attribute(value, slot);
    if (data == NULL) {
        return PyErr_Occurred() ? -1 : 1;
    }
    int result = 1;
    if (PyBytes_CheckExact(data) && PyBytes_GET_SIZE(data) == length) {
        result = append_head(buf, kind, name, size) < 0 || append(buf, PyBytes_AS_STRING(data), length) < 0 ? -1 : 0;
    }
    Py_DECREF(data);
    return result;
}

static int
write_timestamp(PyObject *buf, const char *name, Py_ssize_t size, PyObject *value)
{
    PyObject *time = attribute(value, s_timestamp_time);
    PyObject *inc = time == NULL ? NULL : attribute(value, s_timestamp_inc);
    int result = PyErr_Occurred() ? -1 : 1;
    if (time != NULL && inc != NULL && PyLong_CheckExact(time) && PyLong_CheckExact(inc)) {
        unsigned long long t = PyLong_AsUnsignedLongLong(time), i = PyLong_AsUnsignedLongLong(inc);
        if (PyErr_Occurred()) {
            PyErr_Clear(); /* negative or huge: the Python writer refuses it */
        } else if (t <= 0xFFFFFFFFULL && i <= 0xFFFFFFFFULL) {
            result = append_head(buf, 0x11, name, size) < 0 || append_int32(buf, (int32_t)(uint32_t)i) < 0 ||
                             append_int32(buf, (int32_t)(uint32_t)t) < 0
                         ? -1
                         : 0;
        }
    }
    Py_XDECREF(time);
    Py_XDECREF(inc);
    return result;
}

static int
write_uuid(PyObject *buf, const char *name, Py_ssize_t size, PyObject *value, PyObject *ctx)
{
    PyObject *representation = attribute(ctx, s_uuid_representation);
    if (representation == NULL) {
        return PyErr_Occurred() ? -1 : 1;
    }
    long chosen = PyLong_Check(representation) ? PyLong_AsLong(representation) : -1;
    Py_DECREF(representation);
    if (chosen == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (chosen != UUID_STANDARD && chosen != UUID_PYTHON_LEGACY && chosen != UUID_JAVA_LEGACY &&
        chosen != UUID_CSHARP_LEGACY) {
        return 1; /* UNSPECIFIED: the Python writer refuses it with its advice */
    }
    PyObject *number = attribute(value, s_uuid_int);
    if (number == NULL) {
        return PyErr_Occurred() ? -1 : 1;
    }
    unsigned char bytes[16];
    int result = 1;
    if (PyLong_CheckExact(number) && _PyLong_Sign(number) >= 0 && _PyLong_NumBits(number) <= 128) {
#if PY_VERSION_HEX >= 0x030D0000
        result = _PyLong_AsByteArray((PyLongObject *)number, bytes, 16, 0, 0, 1);
#else
        result = _PyLong_AsByteArray((PyLongObject *)number, bytes, 16, 0, 0);
#endif
        if (result == 0) {
            /* The legacy representations are subtype 3 in the byte order each older driver used. */
            unsigned char ordered[16];
            legacy_uuid_order((const unsigned char *)bytes, ordered, chosen);
            result = write_binary_data(buf, name, size, (const char *)ordered, 16, chosen == UUID_STANDARD ? 4 : 3);
        }
    }
    Py_DECREF(number);
    return result;
}

static int
write_dbpointer(PyObject *buf, const char *name, Py_ssize_t size, PyObject *value)
{
    PyObject *namespace = attribute(value, s_pointer_namespace);
    PyObject *oid = namespace == NULL ? NULL : attribute(value, s_pointer_id);
    PyObject *oid_bytes = oid != NULL && Py_TYPE(oid) == (PyTypeObject *)objectid_type ? attribute(oid, s_objectid_id)
                                                                                        : NULL;
    int result = PyErr_Occurred() ? -1 : 1;
    if (result == 1 && namespace != NULL && PyUnicode_CheckExact(namespace) && oid_bytes != NULL && PyBytes_CheckExact(oid_bytes) &&
        PyBytes_GET_SIZE(oid_bytes) == 12) {
        result = write_text(buf, 0x0C, name, size, namespace);
        if (result == 0) {
            result = append(buf, PyBytes_AS_STRING(oid_bytes), 12);
        }
    }
    Py_XDECREF(namespace);
    Py_XDECREF(oid);
    Py_XDECREF(oid_bytes);
    return result;
}

/* A document (DBRef.as_doc() or a RawBSONDocument's bytes) in an element of type 0x03. */
static int
write_dbref(PyObject *buf, const char *name, Py_ssize_t size, PyObject *value, PyObject *ctx, int depth)
{
    PyObject *doc = PyObject_CallMethodNoArgs(value, s_as_doc);
    if (doc == NULL) {
        return -1;
    }
    /* The $-prefixed names are the point of a DBRef, so check_keys does not apply to them. */
    int result = append_head(buf, 0x03, name, size) < 0 ? -1 : write_container(buf, doc, ctx, Py_False, 0, depth + 1);
    Py_DECREF(doc);
    return result;
}

static int
write_less_common(PyObject *buf, const char *name, Py_ssize_t size, PyObject *value, PyObject *ctx, int depth)
{
    PyObject *type = (PyObject *)Py_TYPE(value);
    if (type == (PyObject *)&PyBytes_Type) {
        return write_binary_data(buf, name, size, PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value), 0);
    }
    if (type == binary_type) {
        PyObject *subtype = attribute(value, s_binary_subtype);
        if (subtype == NULL) {
            return PyErr_Occurred() ? -1 : 1;
        }
        long number = PyLong_CheckExact(subtype) ? PyLong_AsLong(subtype) : -1;
        Py_DECREF(subtype);
        if (number < 0 || number > 255) {
            PyErr_Clear();
            return 1;
        }
        return write_binary_data(buf, name, size, PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value), number);
    }
    if (type == (PyObject *)PyDateTimeAPI->DateTimeType) {
        return write_datetime(buf, name, size, value);
    }
    if (type == code_type) {
        return write_code(buf, name, size, value, ctx, depth);
    }
    if (type == regex_type) {
        return write_regex(buf, name, size, value);
    }
    if (type == pattern_type) {
        return write_pattern(buf, name, size, value);
    }
    if (type == timestamp_type) {
        return write_timestamp(buf, name, size, value);
    }
    if (type == decimal128_type) {
        return write_exact_bytes_attribute(buf, 0x13, name, size, value, s_decimal_bid, 16);
    }
    if (min_key != NULL && type == (PyObject *)Py_TYPE(min_key)) {
        return append_head(buf, 0xFF, name, size);
    }
    if (max_key != NULL && type == (PyObject *)Py_TYPE(max_key)) {
        return append_head(buf, 0x7F, name, size);
    }
    if (undefined_value != NULL && type == (PyObject *)Py_TYPE(undefined_value)) {
        return append_head(buf, 0x06, name, size);
    }
    if (type == symbol_type) {
        return write_text(buf, 0x0E, name, size, value);
    }
    if (type == datetime_ms_type) {
        PyObject *millis = attribute(value, s_datetime_ms_value);
        if (millis == NULL) {
            return PyErr_Occurred() ? -1 : 1;
        }
        int overflow = 0;
        long long number = PyLong_CheckExact(millis) ? PyLong_AsLongLongAndOverflow(millis, &overflow) : 0;
        int fits = PyLong_CheckExact(millis) && !overflow && !(number == -1 && PyErr_Occurred());
        Py_DECREF(millis);
        if (!fits) {
            PyErr_Clear();
            return 1;
        }
        return append_head(buf, 0x09, name, size) < 0 ? -1 : append_int64(buf, (int64_t)number);
    }
    if (type == uuid_type) {
        return write_uuid(buf, name, size, value, ctx);
    }
    if (type == dbpointer_type) {
        return write_dbpointer(buf, name, size, value);
    }
    if (type == dbref_type) {
        return write_dbref(buf, name, size, value, ctx, depth);
    }
    if (type == raw_document_type) {
        PyObject *raw = attribute(value, s_raw);
        int result = raw == NULL ? (PyErr_Occurred() ? -1 : 1) : 1;
        if (raw != NULL && PyBytes_CheckExact(raw)) {
            result = append_head(buf, 0x03, name, size) < 0 || append(buf, PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw)) < 0
                         ? -1
                         : 0;
        }
        Py_XDECREF(raw);
        return result;
    }
    return 1;
}


/* ---- Other libraries' values (PyMongo's), found by their ``_type_marker``: the exact-type lookup gives the
 * Python writer _encoder._marked_writer chose for their type, and the common shapes are written here as that
 * writer writes them. 1 for anything else: the Python writer writes it or refuses it with its reason. ---- */

static PyObject *s_subtype, *s_time, *s_inc, *s_bid, *s_scope;

/* The attribute, or NULL with no error set when it is missing (then the Python writer refuses the value). */
static PyObject *
marked_attribute(PyObject *value, PyObject *name)
{
    PyObject *found = PyObject_GetAttr(value, name);
    if (found == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
    }
    return found;
}

static int
write_marked_regex(PyObject *buf, const char *name, Py_ssize_t size, PyObject *value)
{
    static const struct {
        long flag;
        char letter;
    } letters[] = {{2, 'i'}, {4, 'l'}, {8, 'm'}, {16, 's'}, {32, 'u'}, {64, 'x'}};
    PyObject *pattern = marked_attribute(value, s_regex_pattern);
    PyObject *flags = pattern == NULL ? NULL : marked_attribute(value, s_regex_flags);
    int result = PyErr_Occurred() ? -1 : 1;
    if (result == 1 && flags != NULL && PyUnicode_CheckExact(pattern)) {
        if (PyLong_CheckExact(flags)) {
            long bits = PyLong_AsLong(flags);
            char text[8];
            Py_ssize_t count = 0;
            for (size_t i = 0; i < sizeof letters / sizeof letters[0]; i++) {
                if (bits & letters[i].flag) {
                    text[count++] = letters[i].letter;
                }
            }
            if (bits == -1 && PyErr_Occurred()) {
                PyErr_Clear();
            } else {
                result = write_regex_parts(buf, name, size, pattern, text, count);
            }
        } else if (PyUnicode_CheckExact(flags) && PyUnicode_IS_ASCII(flags)) {
            result = write_regex_parts(buf, name, size, pattern, (const char *)PyUnicode_1BYTE_DATA(flags),
                                       PyUnicode_GET_LENGTH(flags));
        }
    }
    Py_XDECREF(pattern);
    Py_XDECREF(flags);
    return result;
}

static int
write_marked(PyObject *buf, const char *name, Py_ssize_t size, PyObject *value, PyObject *writer, PyObject *ctx,
             int depth)
{
    int which = 0;
    while (which < M_COUNT && marked_writers[which] != writer) {
        which++;
    }
    if (which == M_COUNT || writer == NULL) {
        return 1;
    }
    switch (which) {
    case M_MIN:
        return append_head(buf, 0xFF, name, size);
    case M_MAX:
        return append_head(buf, 0x7F, name, size);
    case M_UNDEFINED:
        return append_head(buf, 0x06, name, size);
    case M_REGEX:
        return write_marked_regex(buf, name, size, value);
    case M_DATETIME: {
        /* int() of it gives its milliseconds; what int() refuses, the Python writer refuses with its reason. */
        PyObject *number = PyNumber_Long(value);
        if (number == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_TypeError) && !PyErr_ExceptionMatches(PyExc_ValueError)) {
                return -1;
            }
            PyErr_Clear();
            return 1;
        }
        int overflow = 0;
        long long millis = PyLong_AsLongLongAndOverflow(number, &overflow);
        Py_DECREF(number);
        if (overflow || (millis == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return 1;
        }
        return append_head(buf, 0x09, name, size) < 0 ? -1 : append_int64(buf, (int64_t)millis);
    }
    default:
        break;
    }
    PyObject *names[] = {[M_BINARY] = s_subtype, [M_CODE] = s_scope, [M_TIMESTAMP] = s_time,
                         [M_DECIMAL] = s_bid,    [M_RAW] = s_raw};
    PyObject *part = marked_attribute(value, names[which]);
    if (part == NULL) {
        return PyErr_Occurred() ? -1 : 1;
    }
    int result = 1;
    if (which == M_BINARY) {
        long subtype = PyLong_CheckExact(part) ? PyLong_AsLong(part) : -1;
        if (subtype >= 0 && subtype <= 255 && PyBytes_Check(value)) {
            result = write_binary_data(buf, name, size, PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value), subtype);
        }
        PyErr_Clear();
    } else if (which == M_CODE) {
        if (PyUnicode_Check(value) && (part == Py_None || PyDict_CheckExact(part))) {
            result = write_code_parts(buf, name, size, value, part, ctx, depth);
        }
    } else if (which == M_TIMESTAMP) {
        PyObject *inc = marked_attribute(value, s_inc);
        if (inc == NULL) {
            result = PyErr_Occurred() ? -1 : 1;
        } else {
            if (PyLong_CheckExact(part) && PyLong_CheckExact(inc)) {
                unsigned long long t = PyLong_AsUnsignedLongLong(part), i = PyLong_AsUnsignedLongLong(inc);
                if (PyErr_Occurred()) {
                    PyErr_Clear();
                } else if (t <= 0xFFFFFFFFULL && i <= 0xFFFFFFFFULL) {
                    result = append_head(buf, 0x11, name, size) < 0 || append_int32(buf, (int32_t)(uint32_t)i) < 0 ||
                                     append_int32(buf, (int32_t)(uint32_t)t) < 0
                                 ? -1
                                 : 0;
                }
            }
            Py_DECREF(inc);
        }
    } else if (which == M_DECIMAL) {
        if (PyBytes_Check(part) && PyBytes_GET_SIZE(part) == 16) {
            result = append_head(buf, 0x13, name, size) < 0 || append(buf, PyBytes_AS_STRING(part), 16) < 0 ? -1 : 0;
        }
    } else if (which == M_RAW) {
        Py_ssize_t length = PyBytes_Check(part) ? PyBytes_GET_SIZE(part) : 0;
        const unsigned char *raw = length ? (const unsigned char *)PyBytes_AS_STRING(part) : NULL;
        if (length >= 5 && load_int32(raw) == length && raw[length - 1] == 0) {
            result = append_head(buf, 0x03, name, size) < 0 || append(buf, raw, length) < 0 ? -1 : 0;
        }
    }
    Py_DECREF(part);
    return result;
}

static int write_registered(PyObject *buf, const char *name, Py_ssize_t size, PyObject *value, PyObject *ctx,
                            PyObject *check_keys_obj, int depth);

/* One element. ``custom`` is 0 for what a custom encoder or the fallback returned: that is written as a
 * built-in type or refused, never handed to a custom encoder again (so a transform cannot loop). */
static int
write_value_with(PyObject *buf, const char *name, Py_ssize_t size, PyObject *value, PyObject *ctx,
                 PyObject *check_keys_obj, int depth, int custom)
{
    PyTypeObject *type = Py_TYPE(value);
    if (type == &PyUnicode_Type) {
        Py_ssize_t length;
        const char *data = utf8_of(value, &length);
        if (data == NULL) {
            return -1; /* UnicodeEncodeError: the caller turns it into the refusal */
        }
        if (length > INT32_MAX - 1) {
            PyErr_SetString(PyExc_OverflowError, "string too long for BSON");
            return -1;
        }
        /* One resize for the whole element: type, name, length, then the UTF-8 buffer and its NUL. */
        Py_ssize_t old = PyByteArray_GET_SIZE(buf);
        if (resize_to(buf, old + size + 2 + 4 + length + 1) < 0) {
            return -1;
        }
        unsigned char *out = (unsigned char *)PyByteArray_AS_STRING(buf) + old;
        out[0] = 0x02;
        memcpy(out + 1, name, (size_t)size + 1);
        store_int32(out + size + 2, (int32_t)(length + 1));
        memcpy(out + size + 6, data, (size_t)length + 1);
        return 0;
    }
    if (type == &PyLong_Type) {
        return write_integer(buf, name, size, value, 1);
    }
    if (type == &PyFloat_Type) {
        double number = PyFloat_AS_DOUBLE(value);
        uint64_t bits;
        memcpy(&bits, &number, sizeof bits);
        if (append_head(buf, 0x01, name, size) < 0) {
            return -1;
        }
        return append_int64(buf, (int64_t)bits);
    }
    if (type == &PyDict_Type) {
        if (append_head(buf, 0x03, name, size) < 0) {
            return -1;
        }
        return write_container(buf, value, ctx, check_keys_obj, 0, depth + 1);
    }
    if (type == &PyList_Type) {
        if (append_head(buf, 0x04, name, size) < 0) {
            return -1;
        }
        return write_container(buf, value, ctx, check_keys_obj, 1, depth + 1);
    }
    if (type == &PyBool_Type) {
        if (append_head(buf, 0x08, name, size) < 0) {
            return -1;
        }
        return append_byte(buf, value == Py_True ? 1 : 0);
    }
    if (value == Py_None) {
        return append_head(buf, 0x0A, name, size);
    }
    if ((PyObject *)type == encoder_int64) {
        return write_integer(buf, name, size, value, 0);
    }
    int written_here = write_less_common(buf, name, size, value, ctx, depth);
    if (written_here != 1) {
        return written_here;
    }
    /* Everything else: the Python writer for the exact type, else the general path (type registry,
     * subclasses, the fallback encoder). */
    PyObject *name_bytes = PyBytes_FromStringAndSize(name, size + 1);
    if (name_bytes == NULL) {
        return -1;
    }
    PyObject *writer = PyDict_GetItemWithError(value_writers, (PyObject *)type); /* borrowed */
    if (writer == NULL && PyErr_Occurred()) {
        Py_DECREF(name_bytes);
        return -1;
    }
    if (writer != NULL) {
        int written = write_known(buf, name, size, value, writer);
        if (written == 1) {
            written = write_marked(buf, name, size, value, writer, ctx, depth);
        }
        if (written != 1) {
            Py_DECREF(name_bytes);
            return written;
        }
    } else if (custom) {
        int written = write_registered(buf, name, size, value, ctx, check_keys_obj, depth);
        if (written != 1) {
            Py_DECREF(name_bytes);
            return written;
        }
    }
    PyObject *args[5] = {buf, name_bytes, value, ctx, check_keys_obj};
    PyObject *general = writer != NULL ? writer : custom ? write_other : write_value_no_custom;
    PyObject *result = PyObject_Vectorcall(general, args, 5, NULL);
    Py_DECREF(name_bytes);
    if (result == NULL) {
        return -1;
    }
    Py_DECREF(result);
    return 0;
}

static int
write_value(PyObject *buf, const char *name, Py_ssize_t size, PyObject *value, PyObject *ctx,
            PyObject *check_keys_obj, int depth)
{
    return write_value_with(buf, name, size, value, ctx, check_keys_obj, depth, 1);
}

/* The type registry's custom encoder for a value of a type the encoder does not know, as
 * _encoder._write_other applies it: only to a value with no int ``_type_marker`` (a marked value is written
 * by its marker), and its result written without custom encoders. 1 when no custom encoder applies: the
 * Python function then tries subclasses of the built-in types and the fallback encoder. */
static int
write_registered(PyObject *buf, const char *name, Py_ssize_t size, PyObject *value, PyObject *ctx,
                 PyObject *check_keys_obj, int depth)
{
    if (write_value_no_custom == NULL) {
        return 1;
    }
    PyObject *marker = PyObject_GetAttr(value, s_type_marker);
    if (marker == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
            return -1;
        }
        PyErr_Clear();
    } else {
        int marked = PyLong_CheckExact(marker);
        Py_DECREF(marker);
        if (marked) {
            return 1;
        }
    }
    PyObject *encoders = attribute(ctx, s_encoder_map);
    if (encoders == NULL) {
        return PyErr_Occurred() ? -1 : 1;
    }
    PyObject *transform = PyDict_CheckExact(encoders) ? PyDict_GetItemWithError(encoders, (PyObject *)Py_TYPE(value))
                                                      : NULL;
    Py_XINCREF(transform); /* held while it runs: it could change the map it came from */
    Py_DECREF(encoders);
    if (transform == NULL) {
        return PyErr_Occurred() ? -1 : 1;
    }
    PyObject *result = PyObject_CallOneArg(transform, value);
    Py_DECREF(transform);
    if (result == NULL) {
        return -1;
    }
    int written = write_value_with(buf, name, size, result, ctx, check_keys_obj, depth, 0);
    Py_DECREF(result);
    return written;
}

/* After an element failed: a refusal gets this element's label on its key path; a UnicodeEncodeError (a
 * string with a lone surrogate) becomes the refusal the Python loop makes of it. */
static void
annotate_failure(PyObject *label)
{
    if (PyErr_ExceptionMatches(refused_type)) {
        PyObject *type, *error, *traceback;
        PyErr_Fetch(&type, &error, &traceback);
        PyErr_NormalizeException(&type, &error, &traceback);
        PyObject *path = error != NULL ? PyObject_GetAttrString(error, "path") : NULL;
        if (path != NULL && PyList_Check(path)) {
            PyList_Append(path, label);
        }
        Py_XDECREF(path);
        PyErr_Clear();
        PyErr_Restore(type, error, traceback);
    } else if (PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
        PyErr_Clear();
        PyObject *where = PyObject_Str(label);
        if (where == NULL) {
            return;
        }
        PyObject *refusal = PyObject_CallFunction(refused_type, "sO",
                                                  "strings must be valid Unicode (found a lone surrogate)", where);
        Py_DECREF(where);
        if (refusal != NULL) {
            PyErr_SetObject(refused_type, refusal);
            Py_DECREF(refusal);
        }
    }
}

static int
write_document_element(PyObject *buf, PyObject *key, PyObject *value, PyObject *ctx, PyObject *check_keys_obj,
                       int check_keys, int depth)
{
    const char *name = NULL;
    Py_ssize_t size = 0;
    PyObject *name_bytes = NULL;
    if (PyUnicode_CheckExact(key)) {
        name = utf8_of(key, &size);
        if (name == NULL || memchr(name, 0, (size_t)size) != NULL) {
            PyErr_Clear();
            name = NULL; /* the Python name function refuses it with the right reason */
        } else if (check_keys) {
            PyObject *checked = PyObject_CallOneArg(check_key, key);
            if (checked == NULL) {
                return -1;
            }
            Py_DECREF(checked);
        }
    }
    if (name == NULL) {
        name_bytes = PyObject_CallFunctionObjArgs(name_of, key, check_keys_obj, NULL);
        if (name_bytes == NULL) {
            return -1;
        }
        if (!PyBytes_Check(name_bytes) || PyBytes_GET_SIZE(name_bytes) < 1) {
            Py_DECREF(name_bytes);
            PyErr_SetString(PyExc_TypeError, "an element name must be bytes ending with NUL");
            return -1;
        }
        name = PyBytes_AS_STRING(name_bytes);
        size = PyBytes_GET_SIZE(name_bytes) - 1;
    }
    int result = write_value(buf, name, size, value, ctx, check_keys_obj, depth);
    Py_XDECREF(name_bytes);
    return result;
}

/* A dict or list as a document; ``lead`` (``lead_size`` bytes, NULL for none) are elements written before its
 * own, which only a dict written here (not handed to the Python writer) can take. */
static int
write_container_led(PyObject *buf, PyObject *value, PyObject *ctx, PyObject *check_keys_obj, int array, int depth,
                    const char *lead, Py_ssize_t lead_size)
{
    if (array ? !(PyList_CheckExact(value) || PyTuple_CheckExact(value)) : !PyDict_CheckExact(value)) {
        if (lead != NULL) {
            PyErr_SetString(PyExc_TypeError, "leading elements need a dict");
            return -1;
        }
        /* The Python loops go on counting from this depth (and hand it back for the dicts and lists inside). */
        PyObject *level = PyLong_FromLong(depth);
        if (level == NULL) {
            return -1;
        }
        PyObject *args[5] = {buf, value, ctx, check_keys_obj, level};
        PyObject *done = PyObject_Vectorcall(array ? python_write_array : python_write_document, args, 5, NULL);
        Py_DECREF(level);
        Py_XDECREF(done);
        return done == NULL ? -1 : 0;
    }
    int check_keys = PyObject_IsTrue(check_keys_obj);
    if (check_keys < 0) {
        return -1;
    }
    if (depth > max_nesting) {
        PyErr_SetString(PyExc_RecursionError, "a document nested too deeply to encode");
        return -1;
    }
    if (Py_EnterRecursiveCall(" while encoding nested BSON")) {
        return -1;
    }
    Py_ssize_t start = PyByteArray_GET_SIZE(buf);
    if (append(buf, "\0\0\0\0", 4) < 0 || (lead != NULL && append(buf, lead, lead_size) < 0)) {
        goto fail;
    }
    if (array) {
        /* A list can change under a custom encoder's feet: its length is read on every step. */
        for (Py_ssize_t index = 0;; index++) {
            Py_ssize_t count = PyList_CheckExact(value) ? PyList_GET_SIZE(value) : PyTuple_GET_SIZE(value);
            if (index >= count) {
                break;
            }
            PyObject *item = PyList_CheckExact(value) ? PyList_GET_ITEM(value, index) : PyTuple_GET_ITEM(value, index);
            char name[24];
            int size = snprintf(name, sizeof name, "%zd", index);
            Py_INCREF(item);
            int written = write_value(buf, name, size, item, ctx, check_keys_obj, depth);
            Py_DECREF(item);
            if (written < 0) {
                PyObject *label = PyUnicode_FromFormat("%zd", index);
                if (label != NULL) {
                    annotate_failure(label);
                    Py_DECREF(label);
                }
                goto fail;
            }
        }
    } else {
        Py_ssize_t position = 0;
        Py_ssize_t count = PyDict_GET_SIZE(value);
        PyObject *key, *item;
        while (PyDict_Next(value, &position, &key, &item)) {
            Py_INCREF(key);
            Py_INCREF(item);
            int written = write_document_element(buf, key, item, ctx, check_keys_obj, check_keys, depth);
            Py_DECREF(item);
            if (written < 0) {
                PyObject *label = PyUnicode_Check(key) ? Py_NewRef(key) : PyObject_Repr(key);
                if (label != NULL) {
                    annotate_failure(label);
                    Py_DECREF(label);
                }
                Py_DECREF(key);
                goto fail;
            }
            Py_DECREF(key);
            if (PyDict_GET_SIZE(value) != count) {
                PyErr_SetString(PyExc_RuntimeError, "dictionary changed size during iteration");
                goto fail;
            }
        }
    }
    if (append_byte(buf, 0) < 0) {
        goto fail;
    }
    Py_ssize_t length = PyByteArray_GET_SIZE(buf) - start;
    if (length > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "a BSON document cannot exceed 2 GiB");
        goto fail;
    }
    store_int32((unsigned char *)PyByteArray_AS_STRING(buf) + start, (int32_t)length);
    Py_LeaveRecursiveCall();
    return 0;
fail:
    Py_LeaveRecursiveCall();
    return -1;
}

static int
write_container(PyObject *buf, PyObject *value, PyObject *ctx, PyObject *check_keys_obj, int array, int depth)
{
    return write_container_led(buf, value, ctx, check_keys_obj, array, depth, NULL, 0);
}

static PyObject *
encode_entry(PyObject *const *args, Py_ssize_t nargs, int array)
{
    if (nargs != 4 && nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "expected (buf, value, ctx, check_keys[, depth])");
        return NULL;
    }
    /* How deep the value nests (0: an outermost document), as the Python loops count it. */
    long depth = 0;
    if (nargs == 5 && optional_depth(args[4], &depth) < 0) {
        return NULL;
    }
    if (!PyByteArray_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "the output buffer must be a bytearray");
        return NULL;
    }
    if (refused_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "mongio.bson._speedups encodes before configure_encoder()");
        return NULL;
    }
    if (write_container(args[0], args[1], args[2], args[3], array, (int)depth) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
write_document(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    return encode_entry(args, nargs, 0);
}

static PyObject *
write_array(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    return encode_entry(args, nargs, 1);
}

static PyObject *
configure_encoder(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *refused, *document_writer, *array_writer, *writers, *other, *name, *checker, *packer, *int64;
    PyObject *oid_writer, *marked_oid_writer, *marked_int64;
    if (!PyArg_ParseTuple(args, "OOOO!OOOOOOOO", &refused, &document_writer, &array_writer, &PyDict_Type, &writers,
                          &other, &name, &checker, &packer, &int64, &oid_writer, &marked_oid_writer,
                          &marked_int64)) {
        return NULL;
    }
    Py_XSETREF(objectid_writer, Py_NewRef(oid_writer));
    Py_XSETREF(marked_objectid_writer, Py_NewRef(marked_oid_writer));
    Py_XSETREF(marked_int64_writer, Py_NewRef(marked_int64));
    Py_XSETREF(refused_type, Py_NewRef(refused));
    Py_XSETREF(python_write_document, Py_NewRef(document_writer));
    Py_XSETREF(python_write_array, Py_NewRef(array_writer));
    Py_XSETREF(value_writers, Py_NewRef(writers));
    Py_XSETREF(write_other, Py_NewRef(other));
    Py_XSETREF(name_of, Py_NewRef(name));
    Py_XSETREF(check_key, Py_NewRef(checker));
    Py_XSETREF(pack_int64, Py_NewRef(packer));
    Py_XSETREF(encoder_int64, Py_NewRef(int64));
    Py_RETURN_NONE;
}

/* A new ObjectId as ObjectId() makes one: big-endian seconds, the process's 5 random bytes, the next value of
 * the process's counter (an itertools.count shared with the Python class, so ids never repeat). */
static PyObject *
new_objectid(PyObject *random5, PyObject *counter)
{
    PyObject *next = PyIter_Next(counter);
    if (next == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_RuntimeError, "the ObjectId counter is exhausted");
        }
        return NULL;
    }
    unsigned long long count = PyLong_AsUnsignedLongLongMask(next);
    Py_DECREF(next);
    if (count == (unsigned long long)-1 && PyErr_Occurred()) {
        return NULL;
    }
    uint32_t seconds = (uint32_t)time(NULL);
    unsigned char raw[12] = {(unsigned char)(seconds >> 24), (unsigned char)(seconds >> 16),
                             (unsigned char)(seconds >> 8), (unsigned char)seconds};
    memcpy(raw + 4, PyBytes_AS_STRING(random5), 5);
    raw[9] = (unsigned char)(count >> 16);
    raw[10] = (unsigned char)(count >> 8);
    raw[11] = (unsigned char)count;
    PyObject *data = PyBytes_FromStringAndSize((const char *)raw, 12);
    if (data == NULL) {
        return NULL;
    }
    PyObject *oid = new_atomic_value(objectid_type, &s_objectid_id, &data, 1);
    Py_DECREF(data);
    return oid;
}

/* One dict without "_id": a generated id's element first, then the document's own elements. */
static int
write_insert_with_new_id(PyObject *buf, PyObject *document, PyObject *ctx, PyObject *oid)
{
    PyObject *oid_bytes = attribute(oid, s_objectid_id);
    if (oid_bytes == NULL || !PyBytes_CheckExact(oid_bytes) || PyBytes_GET_SIZE(oid_bytes) != 12) {
        Py_XDECREF(oid_bytes);
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "a generated _id must be an ObjectId");
        }
        return -1;
    }
    char lead[17] = "\x07_id";
    memcpy(lead + 5, PyBytes_AS_STRING(oid_bytes), 12);
    Py_DECREF(oid_bytes);
    return write_container_led(buf, document, ctx, Py_False, 0, 0, lead, sizeof lead);
}

/* One document of an insert: appended to buf; returns its _id (new reference) or NULL. */
static PyObject *
write_one_insert(PyObject *buf, PyObject *document, PyObject *ctx, PyObject *id_source, PyObject *fallback)
{
    if (!PyDict_CheckExact(document)) {
        PyObject *pair = PyObject_CallOneArg(fallback, document);
        if (pair == NULL) {
            return NULL;
        }
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2 || !PyBytes_CheckExact(PyTuple_GET_ITEM(pair, 0))) {
            Py_DECREF(pair);
            PyErr_SetString(PyExc_TypeError, "the insert fallback must return (bytes, _id)");
            return NULL;
        }
        PyObject *encoded = PyTuple_GET_ITEM(pair, 0);
        PyObject *id = Py_NewRef(PyTuple_GET_ITEM(pair, 1));
        int failed = append(buf, PyBytes_AS_STRING(encoded), PyBytes_GET_SIZE(encoded));
        Py_DECREF(pair);
        if (failed < 0) {
            Py_DECREF(id);
            return NULL;
        }
        return id;
    }
    PyObject *id = PyDict_GetItemWithError(document, s_underscore_id);
    if (id != NULL) {
        Py_INCREF(id);
        if (write_container(buf, document, ctx, Py_False, 0, 0) < 0) {
            Py_DECREF(id);
            return NULL;
        }
        return id;
    }
    if (PyErr_Occurred()) {
        return NULL;
    }
    PyObject *oid = new_objectid(PyTuple_GET_ITEM(id_source, 0), PyTuple_GET_ITEM(id_source, 1));
    if (oid == NULL) {
        return NULL;
    }
    int written = write_insert_with_new_id(buf, document, ctx, oid);
    /* As PyMongo does, the caller's document gets the _id it was inserted with. */
    if (written < 0 || PyDict_SetItem(document, s_underscore_id, oid) < 0) {
        Py_DECREF(oid);
        return NULL;
    }
    return oid;
}

/* write_inserts(buf, documents, ctx, id_source, fallback) -> (ends, ids): every document of the list appended
 * to buf, one after another, as an insert command's statements; ends[i] is where document i ends in buf. */
static PyObject *
write_inserts(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 5 || !PyByteArray_CheckExact(args[0]) || !PyList_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "expected (bytearray, list, ctx, id_source, fallback)");
        return NULL;
    }
    if (refused_type == NULL || objectid_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "mongio.bson._speedups encodes before it is configured");
        return NULL;
    }
    PyObject *buf = args[0], *documents = args[1], *ctx = args[2], *id_source = args[3], *fallback = args[4];
    if (!PyTuple_CheckExact(id_source) || PyTuple_GET_SIZE(id_source) != 2 || !PyBytes_CheckExact(PyTuple_GET_ITEM(id_source, 0)) ||
        PyBytes_GET_SIZE(PyTuple_GET_ITEM(id_source, 0)) != 5) {
        PyErr_SetString(PyExc_TypeError, "id_source must be (the process's 5 random bytes, its counter)");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(documents);
    PyObject *ends = PyList_New(count);
    PyObject *ids = ends == NULL ? NULL : PyList_New(count);
    if (ids == NULL) {
        Py_XDECREF(ends);
        return NULL;
    }
    for (Py_ssize_t index = 0; index < count; index++) {
        if (index >= PyList_GET_SIZE(documents)) {
            PyErr_SetString(PyExc_RuntimeError, "the list of documents changed size while it was encoded");
            goto fail;
        }
        PyObject *document = Py_NewRef(PyList_GET_ITEM(documents, index));
        PyObject *id = write_one_insert(buf, document, ctx, id_source, fallback);
        Py_DECREF(document);
        PyObject *end = id == NULL ? NULL : PyLong_FromSsize_t(PyByteArray_GET_SIZE(buf));
        if (end == NULL) {
            Py_XDECREF(id);
            goto fail;
        }
        PyList_SET_ITEM(ids, index, id);
        PyList_SET_ITEM(ends, index, end);
    }
    PyObject *result = PyTuple_Pack(2, ends, ids);
    Py_DECREF(ends);
    Py_DECREF(ids);
    return result;
fail:
    Py_DECREF(ends);
    Py_DECREF(ids);
    return NULL;
}

/* write_insert(ctx, id_source, fallback, buf, document) -> _id: one document of an insert appended to buf, as
 * write_inserts appends each of a list (for callers that interleave other bytes between documents). */
static PyObject *
write_insert(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 5 || !PyByteArray_CheckExact(args[3])) {
        PyErr_SetString(PyExc_TypeError, "expected (ctx, id_source, fallback, bytearray, document)");
        return NULL;
    }
    if (refused_type == NULL || objectid_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "mongio.bson._speedups encodes before it is configured");
        return NULL;
    }
    PyObject *id_source = args[1];
    if (!PyTuple_CheckExact(id_source) || PyTuple_GET_SIZE(id_source) != 2 || !PyBytes_CheckExact(PyTuple_GET_ITEM(id_source, 0)) ||
        PyBytes_GET_SIZE(PyTuple_GET_ITEM(id_source, 0)) != 5) {
        PyErr_SetString(PyExc_TypeError, "id_source must be (the process's 5 random bytes, its counter)");
        return NULL;
    }
    PyObject *document = Py_NewRef(args[4]);
    PyObject *id = write_one_insert(args[3], document, args[0], id_source, args[2]);
    Py_DECREF(document);
    return id;
}

static PyMethodDef methods[] = {
    {"read_document", (PyCFunction)(void (*)(void))read_document, METH_FASTCALL,
     "read_document(data, pos, end, ctx): the elements from pos up to end as a document."},
    {"read_array", (PyCFunction)(void (*)(void))read_array, METH_FASTCALL,
     "read_array(data, pos, end, ctx): the elements from pos up to end as a list."},
    {"write_document", (PyCFunction)(void (*)(void))write_document, METH_FASTCALL,
     "write_document(buf, doc, ctx, check_keys): append doc to the bytearray buf as a BSON document."},
    {"write_array", (PyCFunction)(void (*)(void))write_array, METH_FASTCALL,
     "write_array(buf, values, ctx, check_keys): append a list or tuple to buf as a BSON array."},
    {"write_inserts", (PyCFunction)(void (*)(void))write_inserts, METH_FASTCALL,
     "write_inserts(buf, documents, ctx, id_source, fallback): an insert's documents appended to buf in one "
     "pass, generated _ids first; returns (ends, ids)."},
    {"write_insert", (PyCFunction)(void (*)(void))write_insert, METH_FASTCALL,
     "write_insert(ctx, id_source, fallback, buf, document): one document of an insert appended to buf, a "
     "generated _id first; returns its _id."},
    {"document_array_offsets", document_array_offsets, METH_O,
     "document_array_offsets(data): (elements, starts), the offsets of each element of the BSON array data "
     "and of its document, or None when it is not an array of documents."},
    {"configure_encoder", configure_encoder, METH_VARARGS,
     "configure_encoder(_Refused, write_document, write_array, writers, write_other, name, check_key, "
     "pack_int64, Int64, write_objectid, write_marked_objectid, write_marked_int64)."},
    {"configure_types", configure_types, METH_O,
     "configure_types(types): the classes the less common BSON types decode to, by name."},
    {"configure", configure, METH_VARARGS,
     "configure(InvalidBSON, readers, objectid_from_bytes, timestamp, Int64, to_dbref, strict_utf8)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "mongio.bson._speedups", "The compiled element loops of the BSON decoder and encoder.", -1,
    methods,
};

/* max_nesting and its message, from mongio.bson._limits (the definition the Python loops share). */
static int
load_limits(void)
{
    PyObject *limits = PyImport_ImportModule("mongio.bson._limits");
    if (limits == NULL) {
        return -1;
    }
    PyObject *limit = PyObject_GetAttrString(limits, "MAX_NESTING");
    nested_too_deeply = limit == NULL ? NULL : PyObject_GetAttrString(limits, "NESTED_TOO_DEEPLY");
    Py_DECREF(limits);
    if (nested_too_deeply == NULL || !PyUnicode_Check(nested_too_deeply)) {
        Py_XDECREF(limit);
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "mongio.bson._limits.NESTED_TOO_DEEPLY must be a str");
        }
        return -1;
    }
    long value = PyLong_AsLong(limit);
    Py_DECREF(limit);
    if (value == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (value < 1 || value > 100000) {
        PyErr_SetString(PyExc_ValueError, "mongio.bson._limits.MAX_NESTING must be between 1 and 100000");
        return -1;
    }
    max_nesting = (int)value;
    return 0;
}

PyMODINIT_FUNC
PyInit__speedups(void)
{
    ref_key = PyUnicode_InternFromString("$ref");
    if (ref_key == NULL) {
        return NULL;
    }
    binary_name = PyUnicode_InternFromString("binary");
    if (binary_name == NULL) {
        return NULL;
    }
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == NULL) {
        return NULL;
    }
    empty_tuple = PyTuple_New(0);
    if (empty_tuple == NULL) {
        return NULL;
    }
    struct {
        PyObject **slot;
        const char *name;
    } names[] = {
        {&s_binary_subtype, "_Binary__subtype"},  {&s_uuid_int, "int"},
        {&s_uuid_is_safe, "is_safe"},             {&s_regex_pattern, "pattern"},
        {&s_regex_flags, "flags"},                {&s_code_scope, "_Code__scope"},
        {&s_pointer_namespace, "_DBPointer__namespace"}, {&s_pointer_id, "_DBPointer__id"},
        {&s_decimal_bid, "_bid"},                 {&s_datetime_ms_value, "_value"},
        {&s_objectid_id, "_ObjectId__id"},        {&s_timestamp_time, "_Timestamp__time"},
        {&s_timestamp_inc, "_Timestamp__inc"},    {&s_astimezone, "astimezone"},
        {&s_utcoffset, "utcoffset"},              {&s_as_doc, "as_doc"},
        {&s_raw, "raw"},                          {&s_uuid_representation, "uuid_representation"},
        {&s_dbref_collection, "_DBRef__collection"}, {&s_dbref_id, "_DBRef__id"},
        {&s_dbref_database, "_DBRef__database"},  {&s_dbref_kwargs, "_DBRef__kwargs"},
        {&id_key, "$id"},                         {&s_underscore_id, "_id"},                         {&db_key, "$db"},
        {&s_type_marker, "_type_marker"},         {&s_encoder_map, "encoder_map"},
        {&s_raw_bytes, "_RawBSONDocument__raw"},  {&s_raw_options, "_RawBSONDocument__codec_options"},
        {&s_raw_index, "_RawBSONDocument__index"}, {&s_raw_values, "_RawBSONDocument__values"},
        {&s_subtype, "subtype"},                  {&s_time, "time"},
        {&s_inc, "inc"},                          {&s_bid, "bid"},
        {&s_scope, "scope"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        *names[i].slot = PyUnicode_InternFromString(names[i].name);
        if (*names[i].slot == NULL) {
            return NULL;
        }
    }
    if (load_limits() < 0) {
        return NULL;
    }
    return PyModule_Create(&module_def);
}
