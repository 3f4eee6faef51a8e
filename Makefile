# Two commands do all the set-up: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST := $(PY) -m pytest

.PHONY: demo test test-slow bench bench-quick corpus corpus-fx rules verify clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,bench,distributed]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m taso_relay demo

test: $(STAMP)
	$(PYTEST) -q -ra

test-slow: $(STAMP)
	$(PYTEST) -q -ra -m slow

bench: $(STAMP)
	$(PY) -m bench.run

bench-quick: $(STAMP)
	$(PY) -m bench.run --quick

# Models nobody here wrote (opt-in: about 1.5 GB of torch, torchvision, transformers and timm in their own environment)
CORPUS_VENV := .venv-corpus
corpus: $(STAMP)
	test -x $(CORPUS_VENV)/bin/python || $(PYTHON) -m venv $(CORPUS_VENV)
	$(CORPUS_VENV)/bin/python -m pip install -q torch torchvision transformers timm onnx onnxscript onnxruntime numpy
	$(CORPUS_VENV)/bin/python -m bench.corpus.export_models vision hf dynamo more wider reparam half timm hf2 \
		timm2 hf3 edge symbolic onedee decoders superres styled \
		groupnorm --out build/corpus
	$(PY) -m bench.corpus.check_models build/corpus/*.onnx --json build/corpus/results.jsonl
	$(PY) -m bench.corpus.check_models --symbolic build/corpus/symbolic/*.onnx --json build/corpus/symbolic.jsonl

# TVM's PyTorch frontend (from_exported_program, a dynamic batch) against torch: torch from the corpus
# environment, TVM from the project's, in one interpreter (the two environments' Pythons must be the same version)
corpus-fx: $(STAMP)
	test -x $(CORPUS_VENV)/bin/python || $(PYTHON) -m venv $(CORPUS_VENV)
	$(CORPUS_VENV)/bin/python -m pip install -q torch torchvision transformers timm onnx onnxscript onnxruntime numpy
	PYTHONPATH=.:$$(echo $(VENV)/lib/python3*/site-packages) $(CORPUS_VENV)/bin/python -m bench.corpus.check_fx

rules: $(STAMP)
	$(PY) -m taso_relay rules generate --max-ops 3 --out rules/taso_k3.json
	$(PY) -m taso_relay rules verify rules/taso_k3.json
	$(PY) -m taso_relay rules lift rules/taso_k3.json --batch-dims 1 2 --out rules/taso_k3_batched.json
	$(PY) -m taso_relay rules verify rules/taso_k3_batched.json

verify: $(STAMP)
	$(PY) -m taso_relay rules verify rules/taso_k3.json
	$(PY) -m taso_relay rules verify rules/taso_k3_batched.json

clean:
	rm -rf $(VENV) $(CORPUS_VENV) build *.egg-info .pytest_cache
