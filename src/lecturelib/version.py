"""The package's version, on the ground floor: `lecturelib.__version__` and the modules that
record it (`runtime`, `train.once`) read it from here, so no module imports the package's
`__init__` back."""

__version__ = "0.1.0"
