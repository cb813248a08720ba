# The two commands of the README:
#   make test   unit tests of lecturelib + every notebook executed with nbval in the smoke profile
#   make book   execute every chapter once (profile auto: gpu on CUDA, else cpu) and render the book
#   make book PART=k   execute only part k's chapters; a later make book assembles the parts
# and for instructors:
#   make student            student versions of every chapter (+ one zip each) in _build/student/
#   make grade NB=path.ipynb  run a (student's) notebook and report each exercise's checks
PYTHON  ?= python3
VENV    ?= .venv
PY      := $(VENV)/bin/python
PROFILE ?= auto
PART    ?=

.PHONY: env test unit notebooks gpu-capped colab compat book browsercheck student grade record clean

$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), "Python >= 3.10 is needed"'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test,book,triton]"
	touch $@

env: $(VENV)/.installed

test: unit notebooks

unit: env
	$(PY) -m pytest -q tests

notebooks: env
	LECTURELIB_PROFILE=smoke LECTURELIB_PROGRESS=summary MPLBACKEND=agg \
	  $(PY) -m pytest -q -p no:cacheprovider --nbval-lax --nbval-current-env notebooks

# The gpu profile's configuration on the CPU, training steps capped at 2, through the CUDA
# stand-in (tests/book/test_gpu_profile.py, marked gpu_capped). NB=07 runs one chapter.
# The chapters read their data from $LECTURELIB_DATA (skipped when unset; .ci/run sets it).
gpu-capped: env
	$(PY) -m pytest -q -p no:cacheprovider -m gpu_capped tests/book/test_gpu_profile.py \
	  $(if $(NB),-k "$(NB)")

# A chapter's Colab cell, for real: lecturelib installed from a git clone at the pinned commit
# into a fresh virtualenv, then the chapter run (tests/book/test_colab_install.py).
colab: env
	$(PY) -m pytest -q -m colab tests/book/test_colab_install.py

# The torch versions the book claims: make test in a fresh virtualenv with pip's default build
# of the oldest torch of pyproject.toml and of the newest release, each; the counts go to
# benchmarks/results/compat.json and the tested range to "Running the notebooks" (slow: about
# half an hour per version). TORCH="2.9.1 latest" picks the versions.
TORCH ?=
compat: env
	$(PY) benchmarks/compat.py $(foreach v,$(TORCH),--torch $(v))

# JOBS=2 executes two parts at once, each on its share of the cores (CI does).
JOBS    ?= 1
book: env
	$(PY) -m booktools.build --profile $(PROFILE) $(if $(PART),--part $(PART)) \
	  --jobs $(JOBS)

# Every page of the built site in headless Chromium: untypeset math, clipped equations, code
# wider than the column, broken images and links, raw roles, MathJax errors.
browsercheck: env
	$(PY) -m booktools.browsercheck _build/site/_build/html --a11y-widths

student: env
	$(PY) -m booktools.exercises --toc --out _build/student --zip --nbgrader

# Exits with the number of failed exercises.
grade: env
	@test -n "$(NB)" || (echo "usage: make grade NB=path/to/notebook.ipynb" && exit 2)
	$(PY) -m booktools.grade "$(NB)"

# Keep this build's run times as a committed record shown in "Running the notebooks".
record:
	@test -f _build/record.json || (echo "run make book first" && exit 1)
	$(PY) -c 'import json,shutil; r=json.load(open("_build/record.json")); \
	  p={n["profile"] for n in r["notebooks"]}; assert len(p)==1, p; \
	  shutil.copy("_build/record.json", f"benchmarks/results/book-{p.pop()}.json")'

clean:
	rm -rf _build
