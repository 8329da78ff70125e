"""Build configuration beyond pyproject.toml: the optional compiled BSON decoder loops.

The extension is optional: where no C compiler is available the build goes on without it and the
pure-Python decoder is used, which behaves the same.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "mongio.bson._speedups",
            sources=["src/mongio/bson/_speedups.c"],
            optional=True,
            extra_compile_args=["-O2"],
        )
    ]
)
