"""Errors raised by the BSON and Extended JSON codecs. The bson layer imports nothing else from mongio."""


class BSONError(Exception):
    """Base of every error the BSON codec raises."""


class InvalidBSON(BSONError):
    """Bytes that are not well-formed BSON (bad lengths, bad UTF-8, missing terminators, trailing bytes)."""


class InvalidDocument(BSONError):
    """A Python value that cannot be encoded as BSON; the message names the key and the reason.

    ``document`` is the document that could not be encoded when the raiser passes it (None otherwise), as
    in PyMongo.
    """

    def __init__(self, message: str, document: object = None) -> None:
        super().__init__(message)
        self._document = document

    @property
    def document(self) -> object:
        """The document that could not be encoded, when known."""
        return self._document


class InvalidStringData(InvalidDocument):
    """A string that cannot be encoded (e.g. a NUL byte in a key or a regex)."""


class InvalidId(BSONError, ValueError):
    """Not a valid ObjectId (wrong length, not hex)."""


class InvalidDecimal128(BSONError, ValueError):
    """A string or value that is not a valid Decimal128."""


class InvalidExtendedJSON(BSONError, ValueError):
    """Valid JSON whose Extended JSON meaning is malformed (e.g. ``{"$numberInt": "x"}``)."""


class InvalidVector(BSONError, ValueError):
    """A BSON Binary Vector (subtype 9) that breaks the vector specification's rules."""
