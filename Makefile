# The two set-up commands: `make demo` and `make test`. Both create (or reuse) .venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.tfrecorder-installed

.PHONY: demo test quick lint bench docs clean

$(STAMP): pyproject.toml setup.cfg
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	# TF Model Garden's decoders, for tests/test_detection.py and test_segmentation.py: without its
	# dependencies (it pins an older TensorFlow), with the tf-keras of the TensorFlow installed
	$(BIN)/python -m pip install --quiet --no-deps tf-models-official==2.20.0 gin-config==0.5.0 \
		"tf-keras~=$$($(BIN)/python -c 'import tensorflow as tf; print(tf.__version__.rsplit(".", 1)[0])' 2>/dev/null).0"
	touch $(STAMP)

demo: $(STAMP)  ## convert the sample images, load them back, print what happened
	$(BIN)/python examples/demo.py

# --dist loadfile: each worker takes whole modules, in the order conftest.py sorts them (long ones first;
# --no-loadscope-reorder keeps it), so a module-scoped fixture (a converted dataset, a 70 MiB CSV) is made once.
XDIST := -n 2 --dist loadfile --no-loadscope-reorder

test: $(STAMP)  ## the whole suite: unit, writers, reader, CLI, notebooks, demo; on two workers (a 2-core machine's both)
	$(BIN)/python -m pytest $(XDIST)

quick: $(STAMP)  ## the inner loop: everything but what conftest.py marks slow (notebooks, servers, Beam, subprocesses)
	$(BIN)/python -m pytest $(XDIST) -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check tfrecorder tests examples benchmarks
	$(BIN)/python -m mypy tfrecorder

docs: $(STAMP)  ## the documentation site, from docs/ and the docstrings, into site/ (fails on any warning)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

bench: $(STAMP)
	$(BIN)/python -m benchmarks

clean:
	rm -rf build dist site demo_output .pytest_cache
