"""PyMongo's ``pymongo.asynchronous`` module paths, each naming mongio's classes under PyMongo's
``Async...`` names, so imports such as ``from pymongo.asynchronous.collection import AsyncCollection``
port by changing the package name."""
