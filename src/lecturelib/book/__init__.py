"""Book tooling: build the book, generate its pages, keep notebooks and library in sync, write
student versions and grade them. Run from the repository root, e.g.::

    python -m lecturelib.book.build --profile cpu     # execute every chapter, render the book
    python -m lecturelib.book.sync notebooks/*.ipynb  # notebook cells equal to the library?
    python -m lecturelib.book.exercises --toc --out _build/student --zip
    python -m lecturelib.book.grade student/01_language_models.ipynb

No chapter imports this subpackage, and it imports only the package's plumbing (``plot``), so
that the reader's modules stay free of build machinery.
"""
