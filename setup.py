"""Build configuration beyond pyproject.toml: the optional compiled element loops of the BSON codec and the
compiled per-reply path of a connection.

The extensions are optional: where no C compiler is available the build goes on without them and the
pure-Python code is used, which behaves the same.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "mongio.bson._speedups",
            sources=["src/mongio/bson/_speedups.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
        Extension(
            "mongio.connection._speedups",
            sources=["src/mongio/connection/_speedups.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
    ]
)
