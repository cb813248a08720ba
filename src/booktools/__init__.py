"""Book tooling: build the book, generate its pages, keep notebooks and library in sync, write
student versions and grade them. Run from the repository root, e.g.::

    python -m booktools.build --profile cpu     # execute every chapter, render the book
    python -m booktools.sync notebooks/*.ipynb  # notebook cells equal to the library?
    python -m booktools.exercises --toc --out _build/student --zip
    python -m booktools.grade student/01_language_models.ipynb

A package of its own beside ``lecturelib``: nothing in ``lecturelib`` imports it, and it
imports only ``lecturelib``'s plumbing (``plot``, ``records``, ``validate``), so that the
reader's package carries no build machinery (the contracts of ``pyproject.toml``).
"""
