"""Build configuration beyond pyproject.toml: the optional compiled element loops of the BSON codec.

The extension is optional: where no C compiler is available the build goes on without it and the
pure-Python loops are used, which behave the same.
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
